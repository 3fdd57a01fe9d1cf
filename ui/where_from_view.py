"""The "Where from" views: where a model's answer comes from (core.lens.where_from), drawn for the probe page's
Ask tab (one question), its Dev set tab (the causal traces averaged over the dev people, kept beside the
checkpoint) and the Attention page (the logit lens and direct attribution of the next piece of any sentence, and
its causal trace: ui.where_from_prompt).

Not a page (app.py lists pages explicitly): the pages call `question_view`, `dev_view` and `next_piece_view`.
The options live in the URL (ui.page_state.WhereFromState); every table downloads as CSV and every chart as PNG
(its toolbar camera). User text is shown only with st.text / st.caption(plain(...)) / dataframes / escaped plotly.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import pandas as pd
import streamlit as st

from core.figures import where_from as viz
from core.lens import where_from as wf
from core.lens.attention import birthplace_prompt
from core.lens.probe.answers import FIRST_PIECE
from core.lens.probe.questions import name_from_question
from core.lens.trace import TraceError, trace
from core.lens.where_from import dev_set
from core.text import markdown_escape as plain
from core.text import quoted_token
from ui import page_state, where_from_prompt
from ui.display import csv_download, show_figure
from ui.page_state import PROBE_TABS, WHERE_FROM_CORRUPTIONS, WhereFromState
from ui.shared_caches import by_name, figure, model_version

DEV_KEY = "wf_dev"  # the dev-set average's widget prefix (dev_view's key)
DEV_TAB = PROBE_TABS["dev"]  # the probe tab it is drawn on
NEXT_PIECE = "probability of the next piece"  # the Attention page's lens: the sentence's own next piece
KIND_HELP = ("residual: the whole stream after the layer; attention / MLP: what that sublayer added. Grey: the "
             "last layer at an earlier position, which cannot reach the answer (exactly 0).")


def names_of(pairs) -> tuple[str, ...]:
    """The names of (question, place) pairs: the people a name swap may draw from."""
    return tuple(dict.fromkeys(name_from_question(q) for q, _ in pairs))


def _state(key: str) -> WhereFromState:
    """The view's options: the URL on a first visit, then the widgets (kept across page switches)."""
    return page_state.restore(WhereFromState, prefix=key, links=False)[0]


def _save(key: str) -> None:
    page_state.bind(WhereFromState, page_state.last_state(WhereFromState, key), prefix=key)


def _csv(rows: Callable[[], list[dict]], label: str, filename: str, key: str) -> None:
    """The rows as a CSV download, made when clicked: four tables built and sent on every new name were work no
    one asked for (issue 45)."""
    csv_download(label, lambda: pd.DataFrame(rows()), filename, key)


# --------------------------------------------------------------------------- read ahead
# A new name with the view open: the probe's answers (three models) come first on the page and the view's reading
# and causal trace after them, all on the script's thread, while the browser, with nothing to draw yet, leaves the
# second core idle. `read_ahead`, called before the answers, starts the view's reading and trace on a worker thread
# (torch lets go of the GIL in its kernels), and the cached functions below take its result instead of computing
# it (issue 45, item 3: parallel where it is free). Keyed as the caches are; a key already computed in this process
# is not read ahead again (a rerun, or a name seen before, is a cache hit); one worker per process, and a reading
# that has not started when the page reaches it is taken back and computed on the page's own thread.

_AHEAD = ThreadPoolExecutor(max_workers=1, thread_name_prefix="where-from-ahead")
_PENDING: OrderedDict[Hashable, Future] = OrderedDict()  # read ahead, not yet taken by the page
_COMPUTED: OrderedDict[Hashable, None] = OrderedDict()  # keys this process computed (its caches may hold them)
_LOCK = threading.Lock()
PENDING_LIMIT, COMPUTED_LIMIT = 16, 1024


def _remember(key: Hashable) -> None:
    with _LOCK:
        _COMPUTED[key] = None
        _COMPUTED.move_to_end(key)
        while len(_COMPUTED) > COMPUTED_LIMIT:
            _COMPUTED.popitem(last=False)


def _start(key: Hashable, compute: Callable) -> None:
    with _LOCK:
        if key in _PENDING or key in _COMPUTED:
            return
        _PENDING[key] = _AHEAD.submit(compute)
        while len(_PENDING) > PENDING_LIMIT:  # runs the page never reached (a newer name came first)
            _PENDING.popitem(last=False)[1].cancel()


def _ahead_or_now(key: Hashable, compute: Callable):
    """What `compute()` returns: read ahead if it was (its exception raised here alike), else computed now."""
    with _LOCK:
        ahead = _PENDING.pop(key, None)
    result = ahead.result() if ahead is not None and not ahead.cancel() else compute()
    _remember(key)
    return result


def read_ahead(loaded, question: str, truth: str | None, swap_names: tuple[str, ...], key: str = "wf_ask") -> None:
    """Start `question_view`'s reading and causal trace on the worker, with the options the view will read (this
    session's last ones), if the view was open; the page then goes on with what comes before the view."""
    last = page_state.last_state(WhereFromState, key)
    if last is None or not last.open:
        return
    version = model_version(loaded)
    model, tokenizer = loaded.model, loaded.tokenizer
    _start(("reading", *version, question, truth), lambda: _reading(model, tokenizer, question, truth))
    _start(("trace", *version, question, truth, last.corruption, int(last.samples), int(last.seed)),
           lambda: _trace(model, tokenizer, question, truth, last.corruption, int(last.samples), int(last.seed),
                          swap_names))


# --------------------------------------------------------------------------- cached core calls


def _reading(model, tokenizer, question: str, truth: str | None):
    q = wf.read_question(model, tokenizer, question, truth)
    rec = wf.record(model, q)
    lens = wf.logit_lens(model, tokenizer, rec, q.answer_id)
    attribution = wf.direct_attribution(model, rec, q.answer_id, answer_piece=q.answer_piece)
    salience = None
    if wf.patchable(model):  # input attribution patches the model's embeddings
        salience = wf.input_attribution(model, q)
    return q, lens, attribution, salience


def _trace(model, tokenizer, question: str, truth: str | None, corruption: str, samples: int, seed: int,
           swap_names: tuple[str, ...]) -> wf.CausalTrace:
    q = wf.read_question(model, tokenizer, question, truth)
    return wf.causal_trace(model, tokenizer, q, corruption=corruption, samples=samples, seed=seed,
                           swap_names=swap_names)


@by_name
@st.cache_data(show_spinner="Reading the answer layer by layer…", max_entries=128)
def cached_reading(path: str, modified: float, question: str, truth: str | None, _loaded):
    return _ahead_or_now(("reading", path, modified, question, truth),
                         lambda: _reading(_loaded.model, _loaded.tokenizer, question, truth))


@by_name
@st.cache_data(show_spinner="Corrupting the name and restoring one state at a time…", max_entries=128)
def cached_trace(path: str, modified: float, question: str, truth: str | None, corruption: str, samples: int,
                 seed: int, _swap_names: tuple[str, ...], _loaded) -> wf.CausalTrace:
    return _ahead_or_now(("trace", path, modified, question, truth, corruption, samples, seed),
                         lambda: _trace(_loaded.model, _loaded.tokenizer, question, truth, corruption, samples, seed,
                                        _swap_names))


@by_name
@st.cache_data(show_spinner="Reading the next piece layer by layer…", max_entries=128)
def cached_next_piece(path: str, modified: float, text: str, _loaded):
    model, tokenizer = _loaded.model, _loaded.tokenizer
    ids = tokenizer.encode(text)
    if not ids:
        raise wf.WhereFromError("The sentence has no pieces this model can read.")
    limit = model.max_length or model.config.block_size
    ids = ids[-limit:]
    try:
        rec = trace(model, ids, [tokenizer.decode([i]) for i in ids], activations=True)
    except TraceError as exc:
        raise wf.WhereFromError(str(exc)) from None
    answer = int(rec.logits[0, -1].argmax())
    piece = tokenizer.decode([answer])
    lens = wf.logit_lens(model, tokenizer, rec, answer)
    return lens, wf.direct_attribution(model, rec, answer, answer_piece=piece)


# --------------------------------------------------------------------------- the parts


def _shown(figure_key: tuple | None, view: str, build, cells: int):
    """The figure as sent, built once per (what it shows, view) and shared (ui.shared_caches.figure); built
    afresh where no key says what it shows."""
    return build() if figure_key is None else figure((*figure_key, view), build, cells)


def _lens_part(lens: wf.LogitLens, name: str, key: str, measured: str = FIRST_PIECE,
               figure_key: tuple | None = None) -> None:
    st.markdown(f"**Logit lens**: the stream after each layer read through the final {lens.norm} and the output head")
    st.write(plain(lens.sentence()))  # the finding: body text, not a grey caption
    fig = _shown(figure_key, f"lens {measured}", lambda: viz.logit_lens_heatmap(
        lens.answer_prob, lens.top_pieces, lens.tokens, lens.layers, lens.answer_piece,
        title=f"{name}: {measured} by layer", measured=measured), lens.answer_prob.size)
    show_figure(fig, f"{name}-logit-lens", key=f"{key}_lens_chart")
    _csv(lens.rows, "Logit lens (CSV)", f"{name}-logit-lens.csv", f"{key}_lens_csv")


def _attribution_part(attribution: wf.Attribution, name: str, key: str, figure_key: tuple | None = None) -> None:
    st.markdown("**Direct attribution**: the answer's logit split over the embeddings, each head and each MLP")
    st.write(plain(attribution.sentence()))
    st.caption(plain(f"The final {attribution.norm}'s scale is frozen at its value in this pass, as TransformerLens "
                     f"freezes it, so that the pieces add up to the logit: {attribution.total:.4f} against "
                     f"{attribution.logit:.4f}."))
    fig = _shown(figure_key, "attribution", lambda: viz.attribution_bars(
        attribution.names, attribution.values, attribution.logit, attribution.answer_piece,
        title=f"{name}: what writes {attribution.answer_piece}"), len(attribution.values))
    show_figure(fig, f"{name}-attribution", key=f"{key}_attr_chart")
    _csv(attribution.rows, "Attribution (CSV)", f"{name}-attribution.csv", f"{key}_attr_csv")


def _trace_part(loaded, name: str, q: wf.Question, swap_names: tuple[str, ...], key: str) -> None:
    st.markdown("**Causal tracing** (ROME): corrupt the name, restore one clean state at a time")
    corruption_box, samples_box, seed_box = st.columns(3)
    corruption = corruption_box.selectbox("Corruption", WHERE_FROM_CORRUPTIONS, key=f"{key}_corruption",
                                          format_func={"noise": "noise on the name (3 std)",
                                                       "swap": "another name swapped in"}.get)
    samples = samples_box.number_input("Samples", 1, 20, key=f"{key}_samples",
                                       help="Noise draws, or names swapped in; the grids are their mean.")
    seed = seed_box.number_input("Seed", 0, 9999, key=f"{key}_seed")
    try:
        ct = cached_trace(*model_version(loaded), q.question, q.truth, corruption, int(samples), int(seed), swap_names,
                          loaded)
    except wf.WhereFromError as exc:
        st.info(plain(str(exc)))
        return
    lesson = ct.lesson()
    if lesson is None:
        st.write(plain(ct.sentence()))
    else:  # what this question's grid cannot show, and the views that do show it, one click away
        st.markdown("**This question's grid teaches little.** " + plain(lesson))
        offer_teaching_views(key, ct.corruption, swappable=_swappable(loaded, q, swap_names))
    measure = "share recovered"
    shown = (*model_version(loaded), q.question, q.truth, name, corruption, int(samples), int(seed), hash(swap_names))
    fig = figure((*shown, "causal trace"), lambda: viz.causal_trace_panels(
        {k: ct.recovered(k) for k in wf.KINDS}, ct.impossible, q.tokens, q.name_positions, measure=measure,
        title=f"{name}: restoring one state ({ct.metric})"), len(wf.KINDS) * ct.impossible.size)
    show_figure(fig, f"{name}-causal-trace", key=f"{key}_trace_chart")
    swapped = f" Names swapped in: {', '.join(ct.swapped_names)}." if ct.swapped_names else ""
    st.caption(plain(f"{KIND_HELP} The name's pieces are bold. {ct.samples} sample(s), seed {ct.seed}"
                     + (f", noise {ct.noise:g} x {ct.noise_std:.3f}" if ct.corruption == "noise" else "")
                     + f"; measured against the corrupted run's answer {quoted_token(ct.corrupted_answer)}." + swapped))
    def rows() -> list[dict]:
        return [{"panel": kind, "layer": layer, "position": t, "token": q.tokens[t],
                 "metric with this state restored": float(ct.scores[kind][layer, t]),
                 "share recovered": float(ct.recovered(kind)[layer, t]), "cannot matter": bool(ct.impossible[layer, t])}
                for kind in wf.KINDS for layer in range(ct.impossible.shape[0]) for t in range(len(q.tokens))]
    _csv(rows, "Causal trace (CSV)", f"{name}-causal-trace.csv", f"{key}_trace_csv")


def _swappable(loaded, q: wf.Question, swap_names: tuple[str, ...]) -> bool:
    """Whether another name of the same length in pieces can be swapped in (else only noise traces it)."""
    return bool(swap_names) and bool(wf.tracing.swap_candidates(loaded.tokenizer, q, swap_names))


def _use_swap(key: str) -> None:
    st.session_state[f"{key}_corruption"] = "swap"


def _open_dev_average() -> None:
    st.session_state["probe_tab"] = DEV_TAB
    st.session_state[f"{DEV_KEY}_open"] = True


def offer_teaching_views(key: str, corruption: str, swappable: bool) -> None:
    """The views that show where answers are held when one question's noise trace cannot: the same question with
    another name swapped in (when one reads as the same number of pieces), and the average over the dev people."""
    offers = []
    if corruption != "swap" and swappable:
        offers.append(("Swap in another name instead", _use_swap, (key,),
                       "another name of as many pieces replaces this one, and each restored state is measured by "
                       "how much of the answer's lead over the swapped-in run's answer it brings back"))
    if key != DEV_KEY and "probe_tab" in st.session_state:
        offers.append(("Open the average over the dev people", _open_dev_average, (),
                       "the same grids averaged over every question of the dev file, by how the model did on "
                       "them"))
    if not offers:
        return
    st.write("What does teach: " + "; or ".join(f"{label.lower()} ({why})" for label, _, _, why in offers) + ".")
    for column, (label, action, args, _) in zip(st.columns(len(offers)), offers, strict=True):
        if column.button(label, key=f"{key}_teach_{action.__name__}", on_click=action, args=args) \
                and action is _open_dev_average:
            st.rerun(scope="app")  # another tab: the whole page, not only the fragment this view may be in


def _salience_part(salience: wf.InputAttribution, name: str, key: str, figure_key: tuple | None = None) -> None:
    st.markdown("**Input attribution**: which pieces of the question the answer's log-probability leans on")
    fig = _shown(figure_key, "salience", lambda: viz.salience_chips(
        salience.tokens, {"gradient x input": salience.gradient_x_input,
                          f"integrated gradients ({salience.steps} steps)": salience.integrated_gradients},
        title=f"{name}: salience for {salience.answer_piece}"), 2 * len(salience.tokens))
    show_figure(fig, f"{name}-salience", key=f"{key}_salience_chart")
    st.caption(plain(f"Baseline: every token embedding zero (positions kept), the target piece "
                     f"{quoted_token(salience.answer_piece)} held fixed; each column scaled to its largest magnitude "
                     f"(the colour bar's 1). The integrated gradients add up to log p(answer) minus "
                     f"its value at the baseline ({salience.log_prob - salience.baseline_log_prob:+.3f}) within "
                     f"{abs(salience.completeness_gap):.3f}."))
    _csv(salience.rows, "Input attribution (CSV)", f"{name}-salience.csv", f"{key}_salience_csv")


# --------------------------------------------------------------------------- the views


def question_view(loaded, name: str, question: str, truth: str | None, swap_names=(), key: str = "wf_ask") -> None:
    """The probe's "Where from" for one question and one model (a toggle; its options in the URL). A fragment:
    opening it or changing its options reruns this view alone, not the probe page's answers (issue 45)."""
    _question_fragment(loaded, name, question, truth, tuple(swap_names), key)


@st.fragment
def _question_fragment(loaded, name: str, question: str, truth: str | None, swap_names: tuple[str, ...],
                       key: str) -> None:
    _state(key)
    if not st.toggle("Where from: logit lens, attribution, causal tracing", key=f"{key}_open", on_change=_save,
                     args=(key,)):
        return
    _save(key)
    try:
        q, lens, attribution, salience = cached_reading(*model_version(loaded), question, truth, loaded)
    except wf.WhereFromError as exc:
        st.warning(plain(str(exc)))
        return
    (st.info if q.own_answer else st.caption)(plain(q.note))
    shown = (*model_version(loaded), question, truth, name)  # what the reading's figures show
    # one under the other: side by side at 1024 px the lens's cells and the bars' labels had ~200 px and overlapped
    _lens_part(lens, name, key, figure_key=shown)
    _attribution_part(attribution, name, key, figure_key=shown)
    _trace_part(loaded, name, q, swap_names, key)
    if salience is not None:
        _salience_part(salience, name, key, figure_key=shown)


def dev_view(loaded, name: str, questions_path: str | Path, key: str = DEV_KEY) -> None:
    """The causal traces averaged over the dev people (stored x answered, wrong answers), kept beside the
    checkpoint: read at once when kept, else computed on request with a progress bar. A fragment: its options
    (corruption, people) rerun this view alone, not the Dev set tab's analyses (issue 45)."""
    _dev_fragment(loaded, name, str(questions_path), key)


@st.fragment
def _dev_fragment(loaded, name: str, questions_path: str, key: str) -> None:
    _state(key)
    if not st.toggle("Where from, averaged over the dev people", key=f"{key}_open", on_change=_save, args=(key,)):
        return
    _save(key)
    corruption = st.selectbox("Corruption", WHERE_FROM_CORRUPTIONS, key=f"{key}_corruption",
                              format_func={"noise": "noise on the name (3 std)", "swap": "another name swapped in"}.get)
    options = dev_set.options_key(corruption, None, wf.NOISE, dev_set.DEV_SAMPLES, wf.SEED)
    try:
        rows, text = dev_set.read_questions(questions_path)
        averages = dev_set.read_kept(loaded.path, loaded.model, text, options)
    except wf.WhereFromError as exc:
        st.warning(plain(str(exc)))
        return
    st.caption(plain(f"Over {Path(questions_path).name}, every question traced with its true answer; kept beside "
                     f"the checkpoint ({dev_set.sidecar_path(loaded.path).name})."))
    if averages is None:
        st.caption(plain(f"Not computed yet for {name} ({len(rows)} questions, {dev_set.DEV_SAMPLES} noise draws "
                         "each)."))
        if not st.button("Compute the averaged traces", key=f"{key}_run"):
            return
        bar = st.progress(0.0, text="Tracing every dev question…")
        averages, _ = dev_set.kept_averages(loaded.path, loaded, questions_path, corruption,
                                            progress=lambda done, total: bar.progress(done / total))
        bar.empty()
    groups = [g for g in averages.groups if averages.groups[g].count]
    if not groups:
        reasons = "; ".join(f"{n} question(s): {r}" for r, n in averages.skipped.items())
        st.info(plain(f"No question of {Path(questions_path).name} could be traced ({reasons})."))
        return
    group = st.selectbox("People", groups, key=f"{key}_group",
                         format_func=lambda g: f"{g} ({averages.groups[g].count})")
    st.write(plain(averages.sentence(group)))  # the finding: body text
    impossible = wf.impossible_cells(averages.n_layer, len(averages.classes))
    fig = viz.causal_trace_panels({k: averages.grid(group, k) for k in wf.KINDS}, impossible, averages.classes,
                                  title=f"{name}: {group}, mean over people", pieces=False)
    show_figure(fig, f"{name}-causal-trace-{group}", key=f"{key}_chart")
    medians = averages.groups[group].medians.get("residual", {})
    if medians:
        st.dataframe(pd.DataFrame({"restored (residual stream)": list(medians),
                                   "median share recovered": list(medians.values())}), hide_index=True,
                     column_config={"median share recovered": st.column_config.NumberColumn(format="percent")})
    def rows() -> list[dict]:
        return [{"group": g, "panel": k, "layer": layer, "positions": c,
                 "share recovered": averages.grid(g, k)[layer, i]}
                for g in groups for k in wf.KINDS for layer in range(averages.n_layer)
                for i, c in enumerate(averages.classes)]
    _csv(rows, "Averaged traces (CSV)", f"{name}-averaged-traces.csv", f"{key}_csv")


def next_piece_view(loaded, name: str, text: str, key: str = "wf_next") -> None:
    """The Attention page's "Where from": the logit lens and direct attribution of the model's next piece."""
    config = loaded.model.config
    if not config.causal or config.head != "lm":
        return  # an encoder or a classifier has no next piece to trace
    _state(key)
    if not st.toggle("Where the next piece comes from (logit lens, attribution, causal tracing)", key=f"{key}_open",
                     on_change=_save, args=(key,)):
        return
    _save(key)
    if loaded.task == "birthplace":
        text = birthplace_prompt(text)  # as the page reads it: a typed '?' gets the MASK
    try:
        lens, attribution = cached_next_piece(*model_version(loaded), text, loaded)
    except wf.WhereFromError as exc:
        st.info(plain(str(exc)))
        return
    st.caption(plain(f"The model's own next piece after the sentence is {quoted_token(lens.answer_piece)}; the views "
                     "trace it."))
    # one under the other: side by side at 1024 px the lens's cells and the bars' labels had ~200 px and overlapped
    _lens_part(lens, name, key, NEXT_PIECE)
    _attribution_part(attribution, name, key)
    where_from_prompt.prompt_trace_view(loaded, name, text)
