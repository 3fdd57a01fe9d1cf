"""Training curves: overlay runs' histories (finished checkpoints and live training logs).

Storyboard: pick runs (a ready-made comparison, bundled checkpoints, a folder, uploads) -> one tidy table
(`core.lens.history`) -> metric / x / smoothing / log-y -> figure (`core.figures`) + summary + CSV. Settings live
in the URL; a live log refreshes the chart part only, keeping the zoom. Kept training steps (snapshots) are
marked on loss curves; a click on one opens the Attention page at that step (ui/training_steps.py)."""

from __future__ import annotations

import re
from pathlib import Path

import streamlit as st

from core.figures.curves import family_run_colors, training_curves_figure
from core.io import folders
from core.io.checkpoint import checkpoint_dir
from core.io.snapshots import snapshots_path
from core.lens.history.curves import (
    MAX_SMOOTHING,
    X_AXES,
    build_curves,
    by_epoch,
    default_smoothing,
    ordered_metrics,
    summarize_runs,
)
from core.lens.history.logs import LIVE_WINDOW_S, LogFollower, RunSource, catalog, file_signature, is_running, log_stem
from core.lens.history.presets import COMPARISONS, comparison_verdicts, first_epoch_gaps, preset_runs
from core.lens.history.records import (
    LoadedHistory,
    combine,
    label_runs,
    read_uploaded_history,
    seed_history_runs,
    to_csv,
)
from core.lens.perplexities import curves_sentence, trainer_dev
from core.text import markdown_escape as plain
from ui import page_state, phase_change_panel, run_sources, training_job
from ui.browser_tables import arrow_table
from ui.display import fitted_columns, show_figure, shown_table
from ui.model_picker import MODEL_PICKED, PageModels, checkpoint_picker
from ui.page_caches import checkpoint_history, seed_history  # cached once per server
from ui.page_caches import curves_shared as shared
from ui.page_state import CurvesState
from ui.shared_caches import FIGURE_CELLS, all_checkpoints, available_checkpoints
from ui.training_steps import has_marks, open_clicked_step, step_marks

MAX_UPLOAD_MB = 200
REFRESH_SECONDS = 5
CHOOSE_YOURSELF = "(choose runs yourself)"
SEED_KIND = "seed"  # RunSource.kind of a bundled recipe's seed run: its history only (records.seed_history_runs)
STATIC_KINDS = ("checkpoint", SEED_KIND)  # files that change only when rebuilt: tables shared between sessions
MAX_NOTES_SHOWN = 12
OPENING_NAME = "pretrained vs from scratch"
# What the page opens on: the same classifier finetuned with and without pretraining, accuracy by epoch; the
# preset itself, so picking it again shows the same runs
OPENING = COMPARISONS[OPENING_NAME]

checkpoint_picker(PageModels("curves", ("names-pretrained", "names-scratch"), "classify",
                             "pretrained vs scratch: the same classifier with and without pretraining"))
st.title("Training curves")
st.write("Solid: training · dashed: validation · star: each run's best validation value.")


def show_notes(notes: list[str]) -> None:
    if notes:
        more = [f"- …and {len(notes) - MAX_NOTES_SHOWN} more."] if len(notes) > MAX_NOTES_SHOWN else []
        st.warning("\n".join([f"- {plain(n)}" for n in notes[:MAX_NOTES_SHOWN]] + more))


def uploaded_histories(files) -> dict[str, LoadedHistory]:
    """Parse each upload once per session (keyed by Streamlit's file id), named '<stem> (uploaded)'."""
    parsed = st.session_state.setdefault("curves_parsed_uploads", {})
    out: dict[str, LoadedHistory] = {}
    refused: list[str] = []
    for file in files or []:
        if file.file_id not in parsed:
            if run_sources.is_own(file.name):
                source = f"{log_stem(file.name)} (uploaded)"
                parsed[file.file_id] = [(source, read_uploaded_history(file, source, MAX_UPLOAD_MB * 1_000_000))]
            else:  # another tool's files (ui/run_sources.py): one entry per run they hold
                parsed[file.file_id] = run_sources.read_upload(file, MAX_UPLOAD_MB * 1_000_000)
        for source, loaded in parsed[file.file_id]:
            if loaded.frame.empty and loaded.notes:  # a refused file: its sentence under the box, not a run of nothing
                refused.extend(loaded.notes)
                continue
            name, n = source, 1
            while name in out:
                n += 1
                name = f"{source} {n}"
            out[name] = LoadedHistory(label_runs(loaded.frame, name), loaded.notes)
    for sentence in refused:
        st.sidebar.error(plain(sentence))
    return out


def checkpoint_runs_key(names, sources: dict[str, RunSource], uploads: dict[str, LoadedHistory]) -> tuple | None:
    """What the selected runs' table (and their snapshot marks) are a function of when every run is a checkpoint:
    each file's version and its snapshot file's. None when a log (it grows) or an upload (this session's) is among
    them: those are read per run."""
    key = []
    for name in names:
        source = sources.get(name)
        if name in uploads or source is None or source.kind not in STATIC_KINDS:
            return None
        key.append((name, str(source.path), file_signature(source.path),
                    file_signature(snapshots_path(source.path))))
    return tuple(key)


def load_runs(names: list[str], sources: dict[str, RunSource],
              uploads: dict[str, LoadedHistory]) -> LoadedHistory:
    """The selected runs as one table: checkpoint headers (cached per file version), logs followed."""
    key = checkpoint_runs_key(names, sources, uploads)
    if key is not None:
        return shared(key, ("table",), lambda: _load_runs(names, sources, uploads))
    return _load_runs(names, sources, uploads)


def _load_runs(names: list[str], sources: dict[str, RunSource],
               uploads: dict[str, LoadedHistory]) -> LoadedHistory:
    followers = st.session_state.setdefault("curves_followers", {})
    parts = []
    for name in names:
        if name in uploads:
            parts.append(uploads[name])
            continue
        source = sources[name]
        if source.kind == run_sources.KIND:
            parts.append(run_sources.load(source))
        elif source.kind == "checkpoint":
            parts.append(checkpoint_history(str(source.path), file_signature(source.path), name))
        elif source.kind == SEED_KIND:
            parts.append(seed_history(str(source.path), file_signature(source.path), name))
        else:
            key = (str(source.path), name)
            if key not in followers:
                followers[key] = LogFollower(source.path, name)
            parts.append(followers[key].poll())
    return combine(parts)


# --- where runs come from -------------------------------------------------------------------
allowed = folders.allowed_dirs()
# run locally (make app, this machine's browser) any folder typed; hosted (make serve) only the operator's
anywhere = folders.any_folder_allowed(client_ip=st.context.ip_address)
# in the sidebar: above the runs it pushed the chart towards the fold at 1024x768
with st.sidebar.expander("More runs: a folder of checkpoints and training logs, or uploaded files"):
    folder_text = ""
    if allowed or anywhere:
        folder_text = st.text_input("Folder on this machine", key="curves_folder",
                                    help="Checkpoints (*.safetensors), running jobs' *.log.jsonl files and runs other "
                                         "tools wrote (TensorBoard, Trainer, CSV, nanoGPT, mlruns), "
                                         + ("any folder of this machine (the app runs locally)." if anywhere else
                                            "in one of: " + ", ".join(str(a) for a in allowed)))
    else:
        st.caption(f"Folders on the server are off; the operator can allow some with {folders.ALLOWED_DIRS_ENV}.")
    files = st.file_uploader("Upload checkpoints or histories", type=None,
                             accept_multiple_files=True, max_upload_size=MAX_UPLOAD_MB, key="curves_files",
                             help="Checkpoints (.safetensors: only the metadata is read), .log.jsonl histories, "
                                  "TensorBoard event files, trainer_state.json, metrics CSV/TSV, nanoGPT printouts, "
                                  f"or a .zip of run folders (mlruns, lightning_logs, runs/). Up to {MAX_UPLOAD_MB} "
                                  "MB.")
    run_sources.tag_filter_box()
extra_folder: Path | None = None
if folder_text.strip():
    try:
        extra_folder = folders.resolve_any(folder_text, allowed[0] if allowed else None) if anywhere else \
            folders.resolve_allowed(folder_text, allowed)
    except folders.FolderError as exc:
        st.warning(plain(exc))

checkpoints = [(i.name, i.path) for i in all_checkpoints() if not i.error]
if extra_folder is not None:
    checkpoints += [(i.name, i.path) for i in available_checkpoints(str(extra_folder)) if not i.error]
sources = catalog(checkpoints, [checkpoint_dir()] + ([extra_folder] if extra_folder else []))
sources.update(training_job.run_sources(sources))  # runs the Train button wrote (issue 54)
# A link inside the typed folder must not lead out of the allowed ones (run locally, every folder is allowed).
sources = {n: s for n, s in sources.items() if anywhere or extra_folder is None
           or extra_folder not in Path(s.path).parents or folders.inside_allowed(s.path, allowed)}
sources.update(run_sources.catalog_runs([checkpoint_dir()] + ([extra_folder] if extra_folder else []), sources))
# the bundled recipes' seeds (induction-seed0..2: histories, no weights), drawn as one band (seed names)
for run, path in seed_history_runs(checkpoint_dir()):
    sources.setdefault(run, RunSource(run, SEED_KIND, path))
uploads = uploaded_histories(files)
names = list(sources) + [n for n in uploads if n not in sources]
if not names:
    st.info("No runs to show yet: train a model, point the folder box at checkpoints, or upload files.")
    st.stop()

# --- settings: from the URL on first load, then from the widgets ---------------------------------
# A first visit, or a link whose settings the page did not write itself (a lesson's next slide on this same page)
if "curves_runs" not in st.session_state or page_state.linked(CurvesState):
    params = st.query_params.to_dict()
    last = page_state.last_state(CurvesState)
    if last is not None and not page_state.url_keys(CurvesState) & set(params):  # back from another page
        params = page_state.to_url(last)
    url, url_notes = page_state.from_url(CurvesState, params)
    missing = len(set(url.runs) - set(names))
    if missing:
        url_notes.insert(0, f"{missing} run(s) named in the link are not available here.")
    url = url.replace(runs=[r for r in url.runs if r in names])
    picked = st.session_state.get("checkpoint")  # the sidebar's model: the run you are looking at
    opening = preset_runs(OPENING, [n for n in names if n in OPENING.patterns])  # pretrained vs scratch
    if url.runs:
        # the comparison these runs are, if one (its verdict sentence is then drawn), else none
        matching = next((n for n, p in COMPARISONS.items() if preset_runs(p, names) == list(url.runs)), CHOOSE_YOURSELF)
        st.session_state.update(curves_runs=url.runs, curves_metric=url.metric, curves_x=url.x,
                                curves_preset=matching)
    elif len(opening) == len(OPENING.patterns) and not st.session_state.get(MODEL_PICKED):
        st.session_state.update(curves_runs=opening, curves_metric=OPENING.metric, curves_x="epoch",
                                curves_preset=OPENING_NAME)
    else:
        default = [picked.name] if picked is not None and picked.name in sources else names[:1]
        st.session_state.update(curves_runs=default, curves_metric=url.metric, curves_x=url.x)
    # No smoothing in the URL: chosen once the runs are read (none for short runs: it would hide their end)
    st.session_state.update(curves_smoothing=url.smoothing if "smoothing" in params else None, curves_logy=url.logy)
    show_notes(url_notes)
st.session_state["curves_runs"] = [n for n in st.session_state["curves_runs"] if n in names]


def apply_comparison(available: list[str]) -> None:
    preset = COMPARISONS.get(st.session_state["curves_preset"])
    matched = preset_runs(preset, available) if preset else []
    if matched:
        st.session_state.update(curves_runs=matched, curves_metric=preset.metric)


preset_name = st.selectbox("Ready-made comparison", [CHOOSE_YOURSELF, *COMPARISONS],
                           key="curves_preset", on_change=apply_comparison, args=(names,),
                           help="; ".join(f"{name}: {p.story}" for name, p in COMPARISONS.items()))
if preset_name in COMPARISONS:
    preset = COMPARISONS[preset_name]
    if not preset_runs(preset, names):
        st.info(f"None of the checkpoints for this comparison are here (it looks for "
                f"{', '.join(preset.patterns)}). Run `make checkpoints` to train them.")
selected = st.multiselect("Runs", names, key="curves_runs",
                          help="Checkpoints, training logs (log) and uploads; one colour each.")
if not selected:
    st.info("Pick one or more runs to compare.")
    st.stop()

loaded = load_runs(selected, sources, uploads)
comparison = COMPARISONS.get(preset_name)
verdicts = first_epoch_gaps(comparison, loaded.frame) + comparison_verdicts(comparison, loaded.frame)
if verdicts:
    st.caption(plain(" ".join(verdicts)))  # computed from the values in the chart and the table below
metrics = ordered_metrics(loaded.frame["metric"].unique()) or ["loss"]
if st.session_state.get("curves_metric") not in metrics:
    st.session_state["curves_metric"] = "loss" if "loss" in metrics else metrics[0]


def metric_for_added_runs(frame, runs: list[str], before: list[str] | None, metric: str) -> tuple[str, str]:
    """(the metric to show, why it changed or ''): a run just added that has no records of the chosen metric (the
    induction run beside the classifiers' accuracy, issue 63) moves the chart to a metric every selected run has,
    loss first."""
    added = [r for r in runs if before is not None and r not in before]
    has = {run: set(frame.loc[frame["run"] == run, "metric"]) for run in runs}
    lacking = [r for r in added if has[r] and metric not in has[r]]
    common = [m for m in ordered_metrics(set.union(*has.values()) if has else set())
              if all(m in has[r] for r in runs if has[r])]
    if not lacking or not common or metric in common:
        return metric, ""
    shown = "loss" if "loss" in common else common[0]
    return shown, (f"Showing {shown}: {', '.join(lacking)} {'has' if len(lacking) == 1 else 'have'} no '{metric}' "
                   f"records, and {shown} is recorded by every selected run.")


st.session_state["curves_metric"], metric_note = metric_for_added_runs(
    loaded.frame, selected, st.session_state.get("curves_shown_runs"), st.session_state["curves_metric"])
st.session_state["curves_shown_runs"] = list(selected)
if metric_note:
    st.caption(plain(metric_note))
left, middle, right, far = st.columns([2, 2, 3, 2])
metric = left.selectbox("Metric", metrics, key="curves_metric")
if st.session_state.get("curves_smoothing") is None:  # by the longest curve of this metric: short ones unsmoothed
    shown = loaded.frame[loaded.frame["metric"] == metric]
    st.session_state["curves_smoothing"] = default_smoothing(
        int(shown.groupby(["run", "split"]).size().max()) if len(shown) else 0)
x_axis = middle.selectbox("X axis", list(X_AXES), format_func=X_AXES.get, key="curves_x")
smoothing = right.slider("Smoothing", 0.0, MAX_SMOOTHING, step=0.001, format="%.3f",
                         key="curves_smoothing",
                         help="TensorBoard's debiased moving average, over points in x order. "
                              "The raw curve stays faint underneath.")
logy = far.checkbox("Log scale (y)", key="curves_logy")
running = [n for n in selected
           if n in sources and (sources[n].kind == "log" and is_running(sources[n].path)
                                or sources[n].kind == run_sources.KIND and run_sources.is_live(sources[n]))]
groups, band = run_sources.band_controls(selected)
live = bool(running) and st.toggle(  # its own line: in the fourth column it read "Follo…" at 1024 px
    "Follow running jobs", value=True, key="curves_live",
    help=f"Re-read logs written in the last {LIVE_WINDOW_S // 60} minutes every {REFRESH_SECONDS} s; "
         "your zoom is kept.")
settings = CurvesState(runs=tuple(selected), metric=metric, x=x_axis, smoothing=smoothing, logy=logy)
page_state.write(settings)


def chart(current: LoadedHistory, settings: CurvesState, colors: dict[str, str]):
    """(the curves, their figure, the final and best values) of the selected runs: read-only once built (they are
    shared between sessions where every run is a checkpoint)."""
    plot = build_curves(current.frame, run_sources.drawn_runs(settings.runs, groups), settings.metric, settings.x,
                        settings.smoothing, settings.logy, groups=groups, band=band)
    fig = training_curves_figure(plot, title=f"{settings.metric} by {X_AXES[settings.x].lower()}",
                                 fixed_colors=colors, marks=step_marks(settings, sources),
                                 saved=run_sources.saved_marks(settings.runs, settings.metric, settings.x, sources,
                                                               current.frame))
    summary = shown_table(summarize_runs(current.frame, settings.runs, settings.metric))
    if "best at epoch" in summary:  # the epoch says when; the step and the count of points would not fit 1024 px
        summary = summary.drop(columns=["points", "best at step"], errors="ignore")
    return plot, fig, summary


def held_out_lines(settings: CurvesState, frame) -> list[str]:
    """For each selected language-model checkpoint, what its held-out value is and why Errors and the positional
    page give another (core.lens.perplexities; issue 63: 2.678 here, 2.637 and 2.7876 there)."""
    if settings.metric not in ("loss", "perplexity"):
        return []
    infos = {i.name: i for i in all_checkpoints() if not i.error}
    lines = []
    for run in settings.runs:
        info, source = infos.get(run), sources.get(run)
        if info is None or source is None or source.kind != "checkpoint" or Path(source.path) != Path(info.path):
            continue
        dev = trainer_dev(run, info.metadata, frame[frame["run"] == run].to_dict("records"))
        if dev is not None:
            lines.append(curves_sentence(dev))
    return lines


def chart_part(settings: CurvesState, following: list[str]) -> None:
    """Everything that changes when a log grows; a fragment, so a refresh redraws only this."""
    if following and not any(is_running(sources[n].path) for n in following):
        st.rerun(scope="app")  # the jobs stopped writing: a full rerun turns the auto-refresh off
    current = load_runs(settings.runs, sources, uploads)
    colors = family_run_colors(all_checkpoints())
    key = checkpoint_runs_key(settings.runs, sources, uploads)
    if 2 * int((current.frame["metric"] == settings.metric).sum()) > FIGURE_CELLS:  # raw and smoothed points
        key = None  # a chart this large is built per run, not kept (memory), as shared_caches.figure does
    plot, fig, summary = shared(key,
                                ("chart", settings.runs, settings.metric, settings.x, settings.smoothing, settings.logy,
                                 tuple(colors.get(r) for r in settings.runs),
                                 tuple((g, tuple(m)) for g, m in groups.items()), band),
                                lambda: chart(current, settings, colors))
    filename = "training-curves-" + re.sub(r"[^\w-]", "_", settings.metric)
    event = show_figure(fig, filename=filename, key="curves_chart",
                        on_select=has_marks(fig) or run_sources.has_saved(fig))
    open_clicked_step(event, fig)
    run_sources.open_clicked_saved(event, fig, sources)
    for line in plot.info + [run_sources.unmapped_line(current.frame, settings.runs) or ""]:
        if line:
            st.caption(plain(line))
    show_notes(current.notes + plot.notes)
    st.subheader("Final and best values")
    st.dataframe(arrow_table(summary), hide_index=True, width="stretch",  # Arrow once per summary; columns fitted
                 column_config=fitted_columns(summary))  # to the page (fixed widths ran off it at 1024 px)
    for line in held_out_lines(settings, current.frame):
        st.caption(plain(line))
    if settings.x == "epoch" and not (epochs := by_epoch(current.frame, settings.runs, settings.metric)).empty:
        st.subheader(f"{settings.metric} at the end of each epoch")  # the table a course report asks for
        st.dataframe(shown_table(epochs), hide_index=True, width="stretch", column_config=fitted_columns(epochs))
    # A callable: the CSV (megabytes for long runs) is built only when someone clicks, not every refresh.
    st.download_button("Download CSV (selected runs, every metric and point)",
                       lambda frame=current.frame: to_csv(frame), file_name="training-curves.csv",
                       mime="text/csv", key="curves_csv", on_click="ignore")


st.fragment(chart_part, run_every=REFRESH_SECONDS if live else None)(settings, running if live else [])
phase_change_panel.show_phase_change(settings.runs, sources)  # head roles at each kept step (issue 54)
training_job.show_training_job()  # train a small recipe from the page, live (issue 54)
