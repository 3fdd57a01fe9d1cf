"""The Attention page's views of one run (`pages/attention.py` is the page: widgets, the run, which view).

- the views, one function each with one signature (run, run key, layer, head, model name) in `VIEWS`: a single
  head, the model view (every layer x head), one token, query·key (why one weight is what it is,
  core.lens.query_key), combined heads (mean, max, rollout) and the same text through a second model;
- the window of tokens for long inputs (a range slider and a token search that moves it): past
  `core.lens.attention.WHOLE_UP_TO` tokens the views draw only the window's rows and columns, so 512 tokens
  stay readable at 1024x768 and quick to draw;
- under the figure: what the model made of the text (its answer, label or next tokens) and the sanity checks.

Figures are shared by every session on the same run and choices (ui.shared_caches.figure).
"""

from __future__ import annotations

import pandas as pd
import streamlit as st

from core.figures import attention as figs
from core.figures import query_key as qk_figs
from core.figures.common import figure_title
from core.lens import attention as av
from core.lens import query_key as qk
from core.model.positional import scheme_label
from core.text import visible_token
from ui.browser_tables import arrow_table, columns_table
from ui.display import fitted_columns, show_figure
from ui.model_picker import selected_info
from ui.page_state import COMBINE_METHODS
from ui.shared_caches import all_checkpoints, attention_run, by_name, derived, figure, load_checkpoint

# --- long inputs: the window of tokens ----------------------------------------------------------------

WINDOW_KEY, FIND_KEY = "attn_window", "attn_find"


def _width() -> int:
    first, last = st.session_state.get(WINDOW_KEY) or (0, av.WINDOW_TOKENS - 1)
    return last - first + 1


def fitting(tokens: list[str]) -> int:
    """The window's first width: as many tokens as get every key labelled at 1024x768 (core.figures.attention),
    at most av.WINDOW_TOKENS."""
    return min(av.WINDOW_TOKENS, figs.columns_that_fit([visible_token(t) for t in tokens[:4096]]))


def move_to(position: int, n_tokens: int) -> None:
    """Centre the window on a position, keeping its width (callbacks: the key picker, the search)."""
    window = st.session_state.get(WINDOW_KEY)
    if window is None or not window[0] <= position <= window[1]:
        st.session_state[WINDOW_KEY] = av.window_around(position, n_tokens, _width())


def _found(tokens: list[str]) -> None:
    matches = av.find_tokens(tokens, st.session_state.get(FIND_KEY, ""))
    if matches:
        st.session_state[WINDOW_KEY] = av.window_around(matches[0], len(tokens), _width())


def _next(tokens: list[str]) -> None:
    matches = av.find_tokens(tokens, st.session_state.get(FIND_KEY, ""))
    window = av.clamp_window(st.session_state.get(WINDOW_KEY), len(tokens))
    target = av.next_match(matches, window)
    if target is not None:
        st.session_state[WINDOW_KEY] = av.window_around(target, len(tokens), window[1] - window[0] + 1)


def window_controls(tokens: list[str], around: int | None = None) -> list[int] | None:
    """Draw the window controls for a long input and return the positions to draw; None: draw every token.
    With no window chosen yet, it starts at the first token, or centred on `around`."""
    n = len(tokens)
    if not av.needs_window(n):
        return None
    window = st.session_state.get(WINDOW_KEY)
    if window is None and around is not None:
        window = av.window_around(around, n, fitting(tokens))
    st.session_state[WINDOW_KEY] = av.clamp_window(window, n, fitting(tokens))
    find, step, move = st.columns([2, 1, 5], vertical_alignment="bottom")
    find.text_input("Find a token", key=FIND_KEY, on_change=_found, args=(tokens,), placeholder="e.g. born",
                    help="Moves the window to the first token containing this text (case ignored).")
    matches = av.find_tokens(tokens, st.session_state.get(FIND_KEY, ""))
    step.button("Next", on_click=_next, args=(tokens,), disabled=len(matches) < 2,
                help="Move the window to the next token that matches the search.")
    window = move.slider("Tokens shown (first, last position)", 0, n - 1, key=WINDOW_KEY,
                         help="Positions from 0. Weights to keys outside the window are not drawn, so a row's "
                              "cells need not add up to 1 here.")
    found = ""
    if st.session_state.get(FIND_KEY, "").strip():
        listed = ", ".join(str(m) for m in matches[:8]) + (", …" if len(matches) > 8 else "")
        found = f" {len(matches)} token{'s' if len(matches) != 1 else ''} match the search" + (
            f": positions {listed}" if matches else "") + ("" if listed.endswith("…") else ".")
    st.caption(av.window_caption(window, n) + found)
    return av.window_positions(window)

# --- the views ----------------------------------------------------------------------------------------

VIEW_TITLES = {"single": "Single head", "model": "Model view", "token": "One token", "qk": "Query·key",
               "combine": "Combine", "compare": "Compare"}
def index_select(label: str, key: str, count: int, default: int = 0, fmt=str) -> int:
    st.session_state[key] = av.clip_index(st.session_state.get(key), count, default)
    return st.selectbox(label, range(count), key=key, format_func=fmt)


def drawn(positions: list[int] | None) -> tuple[int, ...] | None:
    return None if positions is None else tuple(positions)


WORDS_KEY = "attn_words"
JOINED_VIEWS = ("single", "model")  # the views the Words toggle changes


def words_toggle(run: av.AttentionRun, view: str, where) -> None:
    """The Words toggle, in `where` (beside Layer and Head), for the views it changes when some word is several
    pieces."""
    if view in JOINED_VIEWS and av.joinable(run):
        where.toggle("Words", key=WORDS_KEY,
                     help="Each word's pieces joined, as BertViz users do by hand: a word's weight to another is "
                          "summed over that word's pieces (keys) and averaged over its own pieces (queries). Hover "
                          "a label for its pieces.")


def read_as(run: av.AttentionRun) -> str:
    return "words" if st.session_state.get(WORDS_KEY) and av.joinable(run) else "pieces"


def joined(run: av.AttentionRun, key: tuple, level: str) -> av.JoinedRun | None:
    """The run over words, or over whole characters when a character is several byte pieces; None: as read."""
    if level == "pieces" and all(b - a == 1 for a, b in run.characters):
        return None
    return _joined_run(key, "words" if level == "words" else "characters", run)


@by_name
@st.cache_resource(show_spinner=False, max_entries=16)  # read-only arrays, shared like the run they come from
def _joined_run(key: tuple, level: str, _run: av.AttentionRun) -> av.JoinedRun:
    return av.joined_run(_run, level)


def show_single(run: av.AttentionRun, key: tuple, layer: int, head: int, name: str) -> None:
    together = joined(run, key, read_as(run))
    if together is not None:  # a character's byte pieces shown once, or words: one row and column each
        p = window_controls(together.labels)

        def build_joined():
            weights, allowed = av.cut_to_window(together.attention[layer, head], together.allowed, p)
            return figs.attention_heatmap(weights, together.labels, allowed, p, hovers=together.hovers,
                                          title=figure_title(f"Layer {layer}, head {head}", name, av.read_text(run)))
        fig = figure((key, "single", layer, head, drawn(p), len(together.spans), name), build_joined,
                     len(p or together.labels) ** 2)
        show_figure(fig, f"{name}-attention-L{layer}-H{head}", key="attn_single_chart")
        return
    p = window_controls(run.tokens)  # long inputs: only the window's rows and columns

    def build():
        weights, allowed = av.cut_to_window(run.attention[layer, head], run.allowed, p)
        return figs.attention_heatmap(weights, run.tokens, allowed, p,
                                      title=figure_title(f"Layer {layer}, head {head}", name, av.read_text(run)))
    fig = figure((key, "single", layer, head, drawn(p), name), build, len(p or run.tokens) ** 2)
    show_figure(fig, f"{name}-attention-L{layer}-H{head}", key="attn_single_chart")


def focus_single() -> None:
    st.session_state["attn_view"] = "single"


def show_model(run: av.AttentionRun, key: tuple, layer: int, head: int, name: str) -> None:
    st.caption("Every layer (rows) x head (columns) on one colour scale (the bar). Pick Layer and Head "
               "above to move the frame; the button opens the framed head on its own.")
    if st.button(f"Open layer {layer}, head {head} as a single head", key="attn_focus_single", on_click=focus_single):
        st.rerun(scope="app")  # the View choice is drawn outside the view's fragment (pages/attention.py)
    together = joined(run, key, read_as(run))
    source = (run.attention, run.allowed, run.tokens) if together is None else \
        (together.attention, together.allowed, together.labels)
    p = window_controls(source[2])
    roles = st.session_state.get("attn_head_roles")  # each head's role, when Head roles is on (pages/head_roles_view)

    def build():
        attention, allowed = av.cut_to_window(source[0], source[1], p)
        return figs.attention_model_view(attention, allowed, (layer, head), tokens=av.tokens_at(source[2], p),
                                         head_notes=roles, title=figure_title(
                                             f"Every layer × head (layer {layer}, head {head} framed)", name,
                                             av.read_text(run)))
    cells = run.n_layer * run.n_head * len(p or source[2]) ** 2
    roles_key = tuple(sorted(roles.items())) if roles else None
    show_figure(figure((key, "model", layer, head, drawn(p), len(source[2]), roles_key, name), build, cells),
                f"{name}-model-view",
                key="attn_model_chart")


def show_token(run: av.AttentionRun, key: tuple, layer: int, head: int, name: str) -> None:
    query = index_select("Query token", "attn_token", run.n_tokens, -1, lambda i: f"{i}: {run.tokens[i]}")
    fig = figure((key, "token", layer, query, name), lambda: figs.token_attention_figure(
        run.attention[layer, :, query], run.tokens, query, run.allowed[query],
        title=figure_title(f"Layer {layer}: where query token {query} looks, per head", name, av.read_text(run))),
        run.n_head * run.n_tokens)
    show_figure(fig, f"{name}-token{query}-L{layer}", key="attn_token_chart")


def show_combine(run: av.AttentionRun, key: tuple, layer: int, head: int, name: str) -> None:
    method = st.radio("Combine", COMBINE_METHODS, key="attn_combine", horizontal=True,
                      format_func=av.COMBINE_TITLES.get)
    hide_first = st.checkbox("Hide the first token", key="attn_hide_first")
    hide_special = st.checkbox("Hide special tokens (PAD/MASK, [CLS]/[SEP])", key="attn_hide_special")
    keep = av.keep_mask(run, hide_first, hide_special)
    if not keep.any():
        st.info("Every token is hidden; untick an option to see the map.")
        return
    p = window_controls(run.tokens)  # long inputs: combined over every token, drawn for the window's

    def build():
        weights, allowed = av.combined_attention(run, method, layer)
        weights, allowed, positions = av.cut_kept_to_window(*av.hide_positions(weights, allowed, keep), p)
        scope = "all layers" if method == "rollout" else f"layer {layer}"
        return figs.attention_heatmap(weights, run.tokens, allowed, positions, title=figure_title(
            f"{av.COMBINE_TITLES[method]} ({scope}); rows renormalised", name, av.read_text(run)))
    fig = figure((key, "combine", method, layer, hide_first, hide_special, drawn(p), name), build,
                 len(p or run.tokens) ** 2)
    show_figure(fig, f"{name}-{method}", key="attn_combine_chart")


POSITION_NOTES = {  # how the model's positional scheme enters q and k (or the scores), by scheme name
    "rope": "q and k are shown after RoPE rotated each pair of dimensions by the token's position, as the "
            "product uses them.",
    "alibi": "ALiBi adds its bias after the product (minus the head's slope times the distance), the '+' line.",
    "none": "This model has no positional encoding; only the causal mask, if any, knows about order.",
}
ADDED_TO_EMBEDDINGS = "This model's positions were added to the token embeddings, so q and k already carry them."


def _select(label: str, key: str, count: int, default: int, tokens: list[str], **kwargs) -> int:
    st.session_state[key] = av.clip_index(st.session_state.get(key), count, default)
    return st.selectbox(label, range(count), key=key, format_func=lambda i: f"{i}: {tokens[i]}", **kwargs)


def _steps_text(run: av.AttentionRun, row: qk.QueryKeyRow, key: int, bias_name: str) -> str:
    steps = qk.weight_steps(row, key, bias_name)
    lines = [f"{step.what:<52} {step.value:>12.6f}" for step in steps]
    shown = run.attention[row.layer, row.head, row.query, key]
    lines.append(f"{'weight in the head view (the trace)':<52} {shown:>12.6f}")
    return "\n".join(lines)


def show_query_key(run: av.AttentionRun, run_key: tuple, layer: int, head: int, name: str) -> None:
    try:
        record = qk.queries_keys_of(run.queries_keys, layer)
    except qk.QueryKeyError as exc:
        st.info(str(exc))
        return
    loaded = load_checkpoint(selected_info())
    positional = str(getattr(loaded.config, "positional", "")) if loaded is not None else ""
    tokens, n = run.tokens, run.n_tokens
    pick = st.columns(2)
    with pick[0]:
        query = _select("Query token", "attn_token", n, n - 1, tokens,  # a new query: its best key, in view
                        on_change=lambda: st.session_state.update(attn_key=None, attn_window=None))
    row = qk.decompose(record, run.allowed[query], layer, head, query)
    with pick[1]:
        key = _select("Key token", "attn_key", n, row.best_key(), tokens,
                      on_change=lambda: move_to(st.session_state["attn_key"], n))
    if st.session_state.get("attn_qk_framed") != (query, key):  # a pair seen first (the view opened on a window
        move_to(key, n)  # another view chose): the window frames its key; later the window is the user's to move
        st.session_state["attn_qk_framed"] = (query, key)
    st.code(f"layer {layer}, head {head}: query {query} '{tokens[query]}' → key {key} '{tokens[key]}'\n"
            + _steps_text(run, row, key, f"{scheme_label(positional)} bias"), language=None)
    positions = window_controls(tokens, around=key) or list(range(n))
    labels = [tokens[p] for p in positions]
    chosen = positions.index(key) if key in positions else None
    shared = (run_key, layer, head, query, name)  # figures shared by every session on the same run and choices
    cells = len(positions) * (row.head_size + 1)
    show_figure(figure((*shared, "products", key, tuple(positions)), lambda: qk_figs.products_figure(
        row.products[positions], row.weights[positions], row.q, row.keys[positions], labels, chosen,
        row.allowed[positions], title=figure_title(f"Layer {layer}, head {head}: each key's weight, and q_{query}·k_j "
                                                   "per dimension", name, av.read_text(run))), cells),
        f"{name}-qk-L{layer}-H{head}-q{query}", key="attn_qk_products")
    note = getattr(loaded.config, "position_note", "") if loaded is not None else ""  # a Hugging Face family's
    st.caption((note or POSITION_NOTES.get(positional, ADDED_TO_EMBEDDINGS)) + " " + qk.contribution_caption(row, key))
    dims, values = qk.top_dimensions(row, key)
    show_figure(figure((*shared, "top", key), lambda: qk_figs.top_dimensions_figure(
        dims, values, title=figure_title(f"Layer {layer}, head {head}, query {query}, key {key}: the {len(dims)} "
                                         "largest parts of q·k", name, av.read_text(run))), len(dims)),
        f"{name}-qk-top-L{layer}-H{head}-q{query}-k{key}", key="attn_qk_top")
    show_figure(figure((*shared, "vectors", tuple(positions)), lambda: qk_figs.vectors_figure(
        row.q, row.keys[positions], tokens[query], labels,
        title=figure_title(f"q_{query} and every key k_j (layer {layer}, head {head})", name, av.read_text(run))),
        cells),
        f"{name}-qk-vectors-L{layer}-H{head}-q{query}", key="attn_qk_vectors")


def _kind(info) -> tuple:
    tokenizer = info.metadata.get("tokenizer")
    return info.task, tokenizer.get("kind") if isinstance(tokenizer, dict) else None


def compare_default(name: str, infos) -> str:
    """The model a comparison opens with: another of the same kind as `name` (same task, then same tokenizer,
    so the two read the same tokens and their difference map exists), else any other, else itself."""
    first = next((i for i in infos if i.name == name), None)
    others = [i for i in infos if i.name != name]
    if not others:
        return name
    if first is None:
        return others[0].name
    kind = _kind(first)
    # a stable sort: the same task and tokenizer first, then the same task, then the listing's order
    return sorted(others, key=lambda i: (_kind(i)[0] != kind[0], _kind(i) != kind))[0].name


def show_compare(run: av.AttentionRun, key: tuple, layer: int, head: int, name: str) -> None:
    infos = [i for i in all_checkpoints() if not i.error]
    names = [i.name for i in infos]
    if st.session_state.get("attn_compare") not in names:
        st.session_state["attn_compare"] = compare_default(name, infos)
    other_name = st.selectbox("Compare with", names, key="attn_compare")
    other_loaded = load_checkpoint(infos[names.index(other_name)])
    if other_loaded is None:
        return
    try:
        other_key, other = attention_run(other_loaded, st.session_state["attn_text"], st.session_state["attn_past"])
    except av.AttentionInputError as exc:
        st.info(str(exc))
        return
    show_pair((name, run, key), (other_name, other, other_key), layer, head, "attn",
              "The two models read this text as different tokens, so there is no cell-by-cell difference.")


def show_pair(first: tuple[str, av.AttentionRun, tuple], second: tuple[str, av.AttentionRun, tuple], layer: int,
              head: int, prefix: str, different: str) -> None:
    """Two runs' (name, run, cache key) maps of one head side by side on one colour scale, over the same window
    of positions, and their difference when they read the same tokens (else the sentence `different`): the
    compare view of two checkpoints, and of two attention records. `prefix` starts the charts' widget keys."""
    (name, run, key), (other_name, other, other_key) = first, second
    p = window_controls(run.tokens)  # long inputs: both maps over the same positions
    pair = [(name, run, p), (other_name, other, av.same_window(p, other.n_tokens))]
    top = max(float(r.attention[av.clip_index(layer, r.n_layer), av.clip_index(head, r.n_head)].max())
              for _, r, _ in pair)
    same = av.same_tokenisation(run, other)  # then one set of query labels serves both maps
    st.caption("Both maps on one colour scale: the bar beside the right one.")
    for side, column, (label, r, q) in zip(("left", "right"), st.columns(2), pair, strict=True):
        l, h = av.clip_index(layer, r.n_layer), av.clip_index(head, r.n_head)

        def build(r=r, l=l, h=h, q=q, side=side, label=label):  # one colour bar (right), one set of query labels
            weights, allowed = av.cut_to_window(r.attention[l, h], r.allowed, q)
            return figs.attention_heatmap(weights, r.tokens, allowed, q, zmax=top, colorbar=side == "right",
                                          query_labels=side == "left" or not same, room=figs.PAGE_PX // 2,
                                          title=figure_title(f"L{l} H{h}", label, av.read_text(r)))
        with column:
            st.text(f"{label}: layer {l}, head {h}" + (" (clipped)" if (l, h) != (layer, head) else ""))
            fig = figure((key, other_key, side, layer, head, q and tuple(q), same, label), build,
                         len(q or r.tokens) ** 2)
            show_figure(fig, f"{label}-L{l}-H{h}", key=f"{prefix}_compare_chart_{side}")
    if not same:
        st.info(different)
        return
    lo, ho = av.clip_index(layer, other.n_layer), av.clip_index(head, other.n_head)

    def difference():
        diff, allowed = av.attention_difference(run.attention[layer, head], run.allowed,
                                                other.attention[lo, ho], other.allowed)
        diff, allowed = av.cut_to_window(diff, allowed, p)
        return figs.attention_heatmap(diff, run.tokens, allowed, p, diverging=True, title=figure_title(
            f"Difference, layer {layer} head {head} (left minus right)", f"{name} − {other_name}",
            av.read_text(run)))
    show_figure(figure((key, other_key, "difference", layer, head, p and tuple(p), name, other_name), difference,
                       len(p or run.tokens) ** 2),
                f"{name}-minus-{other_name}", key=f"{prefix}_diff_chart")


VIEWS = {"single": show_single, "model": show_model, "token": show_token, "qk": show_query_key,
         "combine": show_combine, "compare": show_compare}

# --- under the figure ---------------------------------------------------------------------------------

def show_output(output: av.ModelOutput) -> None:
    st.subheader(output.title)
    if output.note:
        st.info(output.note)
    if output.completion is not None:
        st.text("Answer: " + (output.answer if output.answer else "(empty)"))
        st.code(output.shown_completion, language=None, wrap_lines=True)  # 32 characters ran off the right at 1024 px
    if output.rows:  # widths that add up to the page: a piece-level model's top-5 table scrolled at 1024 px
        table, widths = derived(output, "table", lambda: _output_table(output))
        st.dataframe(table, hide_index=True, column_config=widths)


def _output_table(output: av.ModelOutput) -> tuple:
    """The table as the browser gets it (ui.browser_tables) and its column widths: once per run (derived)."""
    names = list(output.rows[0])
    if any(list(row) != names for row in output.rows):  # rows of other columns: as pandas reads them
        table = pd.DataFrame(output.rows)
        return arrow_table(table), fitted_columns(table)
    columns = {name: [row[name] for row in output.rows] for name in names}
    return columns_table(columns), fitted_columns(columns)


def _sanity(run: av.AttentionRun) -> tuple[list[str], object]:
    checks = av.sanity_checks(run)
    # the checks' names are the index
    table = columns_table({"result": [{True: "pass", False: "FAIL", None: "n/a"}[c.passed] for c in checks],
                           "detail": [c.detail for c in checks]}, index=("check", [c.name for c in checks]))
    return [c.name for c in checks if c.passed is False], table


def show_sanity(run: av.AttentionRun) -> None:
    failed, table = derived(run, "sanity", lambda: _sanity(run))  # once per run, not per rerun
    if failed:
        st.error("Sanity check failed: " + "; ".join(failed) + ".")
    with st.expander("Sanity checks", expanded=bool(failed)):
        # the checks are the index; st.table wraps the details inside the column (a grid scrolled them at 1024 px)
        st.table(table, hide_index=False)
