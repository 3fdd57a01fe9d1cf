"""Attention playground: attention by hand (CS224N a5 written part), no checkpoint needed.

Storyboard: a preset and sizes -> the weights heatmap (drawn first, above the fold, from the tables below it)
and the preset's explanation -> editable K, V, Q tables -> `core.lens.playground.attend` -> score, weight and
output tables; then one head versus two heads under noisy keys -> histograms.
"""

import numpy as np
import pandas as pd
import streamlit as st

from core.figures import teaching as figs
from core.lens import playground as pg
from ui.browser_tables import matrix_table
from ui.display import show_figure
from ui.model_picker import PageModels, checkpoint_picker
from ui.page_caches import noisy_experiment  # cached once per server
from ui.shared_caches import figure

checkpoint_picker(PageModels("playground"))

st.title("Attention playground")
st.write("Small attention calculations to do by hand before any training: choose a query so that "
         "attention copies one value or averages two, then see why one head is fragile when a key's "
         "norm varies and two heads are not. No checkpoint is needed.")


def show_table(frame: pd.DataFrame, **kwargs) -> None:
    """Numbers to 4 decimals (float noise such as 5e-17 is not a result worth showing a class), formatted
    by the browser (column_config) rather than a pandas Styler, which the server renders cell by cell."""
    four = {c: st.column_config.NumberColumn(format="%.4f") for c in frame.columns
            if pd.api.types.is_float_dtype(frame[c])}
    st.dataframe(frame, column_config=four, width="stretch", **kwargs)


def show_matrix(values: np.ndarray, rows: list[str], columns: list[str]) -> None:
    """Numbers under labels as `show_table` draws their frame, the same bytes; converted once per content per server
    (ui.browser_tables.matrix_table): this tab's tables were converted on every rerun and page switch."""
    four = {c: st.column_config.NumberColumn(format="%.4f") for c in columns}  # every column holds floats
    st.dataframe(matrix_table(values, rows, columns), column_config=four, width="stretch")


def edit_table(label: str, matrix: np.ndarray, row_name: str, key: str) -> np.ndarray:
    """An editable table; empty or non-numeric cells count as 0 (and we say so)."""
    st.markdown(f"**{label}**")
    # float noise of a least-squares solve (8.9e-16) rounded away: in a narrow cell it read as "000000008"
    frame = pg.to_frame(np.round(matrix, 6) + 0.0, row_name)
    # narrow number columns: two tables side by side keep every column in view at 1024 px up to d = 4
    edited = st.data_editor(frame, key=key, num_rows="fixed", width="stretch",
                            column_config={c: st.column_config.NumberColumn(width=56) for c in frame.columns})
    values, missing = pg.from_frame(edited)
    if missing:
        st.warning(f"{missing} empty or non-numeric cell(s) in {label} count as 0.")
    return values


TABS = ("Attention by hand", "One head vs two heads")
HEADS_KEYS = ("heads_n", "heads_d", "heads_alpha", "heads_beta", "heads_samples", "heads_seed")
# The second tab runs only when open (a switch to the page draws the first tab, which opens; the experiment, its
# figure and table wait for a click). The first always runs: its edited tables keep their edits while the other
# tab is open (a data editor's edits cannot be kept for it otherwise).
by_hand, two_heads = st.tabs(list(TABS), key="pg_tab", on_change="rerun")


def attention_by_hand() -> None:
    top = st.columns([2, 1], vertical_alignment="bottom")  # a wide box for the preset, room for "Scale by 1/√d"
    controls = [top[0], *st.columns(3), top[1]]
    preset_name = controls[0].selectbox("Preset", list(pg.PRESETS), index=list(pg.PRESETS).index("select"),
                                        format_func=lambda k: pg.PRESETS[k].label, key="pg_preset")
    n_asked = controls[1].slider("keys n", 1, pg.MAX_SIZE, 3, key="pg_n")
    d_asked = controls[2].slider("dimensions d", 1, pg.MAX_SIZE, 3, key="pg_d")
    beta = controls[3].slider("β", 0.0, 50.0, 10.0, 0.5, key="pg_beta",
                              help="How sharp the preset's query is: its target scores are β and 0.")
    scaled = controls[4].toggle("Scale by 1/√d", False, key="pg_scaled",
                                help="Off: plain dot products q·k_i, as in the course's hand calculations.")
    preset = pg.PRESETS[preset_name]
    chart = st.container()  # filled once the tables below are read: the map above the fold at 1024x768
    st.info(preset.explanation)
    n, d = pg.preset_sizes(preset_name, n_asked, d_asked)
    if (n, d) != (n_asked, d_asked):
        st.caption(f"This construction needs n ≥ {preset.min_keys} and d ≥ {preset.min_dims}; "
                   f"showing n = {n}, d = {d}.")
    setup = pg.build_setup(preset_name, n, d, beta, scaled)
    if setup.note:
        st.warning(setup.note)
    st.caption("Scores are " + ("q·k_i / √d (scaled dot products)." if scaled else
                                "plain dot products q·k_i, as in the course (no 1/√d scaling).")
               + " Edit any cell: the map above and everything below update. Changing the preset, sizes "
                 "or β resets the tables.")

    # One key per setting: a new preset or size gives fresh tables, edits persist otherwise.
    version = f"{preset_name}-{n}-{d}-{beta}-{scaled}"
    # Two tables a row up to d = 4, one beyond: three in a row hid a column at d = 3 at 1024 px
    per_row = 2 if d <= 4 else 1
    boxes = [box for _ in range(-(-3 // per_row)) for box in st.columns(per_row)][:3]
    with boxes[0]:
        K = edit_table("Keys K (one row per key)", setup.K, "k", f"pg_K_{version}")
    with boxes[1]:
        V = edit_table("Values V (one row per value)", setup.V, "v", f"pg_V_{version}")
    with boxes[2]:
        Q = edit_table("Queries Q (one row per query)", setup.Q, "q", f"pg_Q_{version}")

    try:
        result = pg.attend(Q, K, V, scaled)
    except pg.PlaygroundError as exc:
        chart.error(str(exc))
        result = None
    if result is not None:
        keys = [f"k_{i}" for i in range(n)]
        queries = [f"q_{j}" for j in range(len(Q))]
        with chart:  # full width: eight cells of two-decimal weights fit it at 1024 px
            inputs = ("playground weights", result.weights.tobytes(), result.weights.shape, result.scores.tobytes())
            show_figure(figure(inputs, lambda: figs.attention_weights_heatmap(
                result.weights, result.scores, keys, queries, title="Attention weights"), 2 * result.weights.size),
                "playground-weights", key="pg_weights_fig")
        left, right = st.columns([1, 1])
        with left:
            st.markdown("**Scores** " + ("q·k_i / √d" if scaled else "q·k_i"))
            show_matrix(result.scores, queries, keys)
            st.markdown("**Weights** softmax over the keys (each row sums to 1)")
            show_matrix(result.weights, queries, keys)
        with right:
            st.markdown("**Least squares for your keys**: q = lstsq(K, t) with t = β at key i, 0 elsewhere")
            index = st.selectbox("select v_i with i =", list(range(n)), key="pg_solve_index")
            solved_q = pg.select_query(K, index, beta) / pg.score_scale(d, scaled)
            solved = pg.attend(solved_q, K, V, scaled)
            show_matrix(solved_q[None, :], *pg.labels(solved_q[None, :], "q"))
            st.caption(f"This q puts weight {solved.weights[0, index]:.4f} on v_{index} for the keys above "
                       "(paste it into Q to try it).")
        # full width: d values and the distance to the target did not fit half a column at 1024 px
        st.markdown(r"**Output** $c = \sum_i \alpha_i v_i$, next to the preset's target "
                    f"{setup.target_label}")
        rows, columns = pg.labels(result.output, "c")
        target = setup.target if setup.target.shape == result.output.shape else None
        if target is None:
            show_matrix(result.output, rows, columns)
        else:
            distance = np.linalg.norm(result.output - target, axis=1)
            show_matrix(np.column_stack([result.output, distance]), rows, [*columns, "‖c − target‖"])
            show_matrix(target, *pg.labels(target, "target"))

def one_head_vs_two() -> None:
    st.write("Keys are noisy: k_i ~ N(μ_i, αI) with orthonormal means μ_i = e_i (also the values, "
             "v_i = μ_i), and key a = 0 has covariance αI + ½ μ_a μ_aᵀ, so its length swings from sample "
             "to sample. One head uses q = β(μ_a + μ_b); two heads use q₁ = βμ_a and q₂ = βμ_b and "
             "average their outputs. Both aim at c = (v_a + v_b)/2 with b = 1.")
    cols = st.columns(6)
    hn = cols[0].slider("keys n", 2, pg.MAX_SIZE, 4, key="heads_n")
    hd = cols[1].slider("dimensions d", 2, pg.MAX_SIZE, 4, key="heads_d")
    alpha = cols[2].slider("α (noise variance)", 0.0, 1.0, 0.01, 0.005, key="heads_alpha")
    hbeta = cols[3].slider("β", 0.0, 50.0, 10.0, 0.5, key="heads_beta")
    samples = cols[4].slider("samples", 10, 5000, 1000, 10, key="heads_samples")
    seed = int(cols[5].number_input("seed", 0, 2**31 - 1, 0, key="heads_seed"))
    if hn > hd:
        st.warning(f"n = {hn} keys cannot have orthonormal means in d = {hd} dimensions; "
                   "choose n ≤ d.")
    else:
        outcome = noisy_experiment(hn, hd, alpha, hbeta, samples, seed)
        histograms = figure(("one vs two heads", hn, hd, alpha, hbeta, samples, seed), lambda: (
            figs.head_comparison_histograms(outcome.panels(), title=f"{samples} samples")), 6 * samples)
        show_figure(histograms, "one-vs-two-heads", key="heads_fig")
        show_table(pd.DataFrame(outcome.summary()), hide_index=True)
        st.markdown(r"One head: $k_a = (1 + z/\sqrt2)\,\mu_a + \text{noise}$, so $q \cdot k_a = \beta(1 + "
                    r"z/\sqrt2)$ is above or below $q \cdot k_b = \beta$ from sample to sample and the output "
                    r"swings between $v_a$ and $v_b$. Two heads: each head only compares its own key with "
                    r"near-zero scores, so head 1 returns $v_a$ whenever $1 + z/\sqrt2 > 0$ and $c$ stays near "
                    r"$(v_a + v_b)/2$.")


with by_hand:
    attention_by_hand()
if two_heads.open:
    with two_heads:
        one_head_vs_two()
else:
    for key in HEADS_KEYS:  # its widgets are not drawn: their values are kept for when it opens again
        if key in st.session_state:
            st.session_state[key] = st.session_state[key]
