"""The Training curves page's phase change: for each selected run that kept snapshots, its training loss and, on
the same step axis, each head role's best score per layer at every kept step (core.lens.heads), with one computed
sentence locating the phase change (core.lens.phase_change) and naming the heads that rose. A click on a kept
step opens the Attention page at that step (pages/training_steps). Not a page.
"""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from core.figures.heads import phase_change_figure
from core.io import snapshots as snap_files
from core.lens import phase_change as pc
from core.lens import training_steps as ts
from core.lens.heads import HeadRolesError
from core.lens.history.logs import is_running
from core.text import markdown_escape as plain
from ui.display import show_figure
from ui.shared_caches import load_cached
from ui.training_steps import checkpoint_of, open_attention_at, snapshots_for


@st.cache_resource(show_spinner="Scoring every head at every kept step…", max_entries=16)
def cached_history(path: str, modified: float, side_modified: float, _loaded, _found):
    return pc.roles_over_steps(_loaded, _found)


LIVE_SECONDS = 5  # how often the panel looks again while a run it shows is still training


def _runs_with_snapshots(runs, sources) -> list[tuple[str, Path]]:
    """(run, checkpoint) for the selected runs with snapshots; a running job's log stands for the checkpoint
    beside it (saved after every epoch), so its roles follow as snapshots arrive (the curve's marks use the same
    checkpoint: ui.training_steps.checkpoint_of)."""
    out = []
    for run in runs:
        path = checkpoint_of(sources.get(run))
        if path is not None and all(p != path for _, p in out):
            out.append((run, path))
    return out


def show_phase_change(runs, sources) -> None:
    """The panel under the curves, for the selected runs with snapshots (a toggle: scoring costs a pass per step)."""
    found_runs = _runs_with_snapshots(runs, sources)
    if not found_runs:
        return
    st.subheader("Head roles across training")
    if not st.toggle("Score every head at each kept step", key="curves_roles_on",
                     value=any(r.startswith("induction") for r, _ in found_runs),
                     help="Previous-token, induction, duplicate-token, first-token and current-token scores on "
                          "repeated random tokens, at each step the run kept."):
        return
    live = any(is_running(path.with_name(path.stem + ".log.jsonl")) for _, path in found_runs)
    st.fragment(_panels, run_every=LIVE_SECONDS if live else None)(found_runs)


def _panels(found_runs: list[tuple[str, Path]]) -> None:
    for run, path in found_runs:
        try:
            loaded = load_cached(str(path), path.stat().st_mtime)
            found = snapshots_for(loaded)
            side = snap_files.snapshots_path(path).stat().st_mtime
            history = cached_history(str(path), path.stat().st_mtime, side, loaded, found) if found else []
        except (OSError, ValueError, HeadRolesError) as exc:
            st.info(plain(f"{run}: {exc}"))
            continue
        rows = [r for r in loaded.history if r.get("metric") == "loss" and r.get("split") == "train"]
        steps, losses = [r["step"] for r in rows], [r["value"] for r in rows]
        change = pc.phase_change(steps, losses)
        risen = pc.risen_heads(history, change) if change else []
        fig = phase_change_figure(steps, losses, [(s, roles.scores) for s, roles in history],
                                  change.step if change else None, run=run, title=run)
        event = show_figure(fig, f"{run}-head-roles", key=f"curves_roles_{run}", on_select=True)
        later = pc.risen_later(history, change) if change else []
        st.write(plain(pc.phase_sentence(change, risen, [s for s, _ in history], later)))
        if history and history[0][1].notes:
            st.caption(plain(history[0][1].notes[0]))
        kept = ts.kept_steps_line([ts.StepMark(run, s, 0.0, 0.0, snapshot=s in found.steps) for s, _ in history])
        st.caption(plain(f"Each point is one of {kept}; click one to open the Attention page at that step."))
        open_clicked_role_step(event, fig)


def open_clicked_role_step(event, fig) -> None:
    """A click on a kept step's point opens the Attention page at that step, for that run, on the layer and head the
    point is the best of (issue 63: it opened layer 0, head 0)."""
    selection = event.get("selection") if isinstance(event, dict) else None
    for point in (selection or {}).get("points") or []:
        number = point.get("curve_number", -1)
        meta = (getattr(fig.data[number], "meta", None) or {}) if 0 <= number < len(fig.data) else {}
        if meta.get("kind") == "roles" and isinstance(point.get("customdata"), list):
            data = point["customdata"]
            open_attention_at(meta["run"], int(data[1]), *(int(v) for v in data[2:4]))
