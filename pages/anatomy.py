"""Model anatomy: parameters per module with closed-form formulas, course presets, and masks.

Storyboard: a model (the selected checkpoint, or a course preset built on the meta device) ->
`core.lens.anatomy.table.parameter_table` -> a table, totals and a bar chart; then a typed input ->
`core.lens.anatomy.masks.mask_input` -> the causal and padding masks as matrices.
"""

import streamlit as st

from core.figures import teaching as figs
from core.lens.anatomy import formulas, masks, references, table
from ui.browser_tables import arrow_table
from ui.display import MAIN_WIDTH, fitted_columns, show_figure, within_limit
from ui.model_picker import PageModels, checkpoint_picker, require_model, selected_info
from ui.page_caches import checkpoint_anatomy, parts_frame, preset_anatomy  # cached once per server
from ui.shared_caches import figure, model_version

checkpoint_picker(PageModels("anatomy", ("lm-learned",), "lm"))

st.title("Model anatomy")
st.write("Where a model's parameters are, with the formula you would write by hand next to each "
         "count, for the selected checkpoint or the models the course material uses.")

SELECTED = "selected checkpoint"
INPUT_CHARS = 500  # what the masks section reads of the typed input (it pads to at most 48 tokens)


info = selected_info()
loaded = require_model() if info is not None else None
sources = ([SELECTED] if loaded is not None else []) + list(references.COURSE_PRESETS)
source = st.selectbox(
    "Model", sources, key="anatomy_source",
    format_func=lambda s: f"Selected checkpoint: {info.name}" if s == SELECTED
    else references.COURSE_PRESETS[s].label)

version = model_version(loaded) if source == SELECTED else None
if source == SELECTED:
    rows, totals = checkpoint_anatomy(version, loaded.model)
    st.caption(f"Counted on the loaded model {info.name}.")
    stated = None
else:
    preset = references.COURSE_PRESETS[source]
    rows, totals = preset_anatomy(source)
    st.caption(preset.source + " Built as a real torch module on the meta device and counted.")
    stated = preset.stated_parameters

columns = st.columns(2)  # four headline numbers in a row cut a 7-digit count to "3,323,…" at 1024 px
columns[0].metric("Parameters", f"{totals.total:,}")
columns[1].metric("Trainable", f"{totals.trainable:,}")
st.caption(f"Non-trainable parameters: {totals.non_trainable:,} · buffer values (stored, not trained): "
           f"{totals.buffer_values:,}")
if source == SELECTED and '"format": "nanoGPT ckpt.pt"' in str(info.metadata.get("source", "")):
    positions = sum(r.parameters for r in rows if r.role == "positional")  # nanoGPT's get_num_params leaves it out
    st.caption(f"nanoGPT's own count (get_num_params, as its train.py prints it) leaves out the position table's "
               f"{positions:,}: {totals.total - positions:,}.")
if stated is not None:
    verdict = "matches" if stated == totals.total else "does NOT match"
    st.caption(f"The course material states {stated:,} parameters; the count {verdict}.")

frame = parts_frame(source, version, rows)
every_column = st.toggle("Every column (part, formula value, where, buffers, notes)", key="anatomy_columns",
                         help="On: a second table under the first, with the other columns of the same rows.")
columns = {"module": st.column_config.TextColumn(pinned=True),
           "formula = count": st.column_config.TextColumn(
               "=", width="small", help="✓: the formula's value equals the counted parameters"),
           "formula": st.column_config.TextColumn(width=230),
           "where": st.column_config.TextColumn(width="medium"),
           "formula value": st.column_config.NumberColumn(format="localized"),
           "parameters": st.column_config.NumberColumn(format="localized")}
shown = arrow_table(frame)  # converted once, read by both tables
first = ("module", "parameters", "formula = count", "formula")  # fitted too: a LLaMA folder's module names
st.dataframe(shown, hide_index=True, width="stretch", height="content",  # ran its formulas off-screen at 1024 px
             column_order=first, column_config=fitted_columns(frame[list(first)], MAIN_WIDTH, columns))
if every_column:  # the other columns in a table of their own, fitted to the page: in one table at 1024 px they
    details = ("module", "part", "formula value", "where", "buffers", "note")  # ran off-screen, its scrollbar hidden
    st.dataframe(shown, hide_index=True, width="stretch", height="content", column_order=details,
                 column_config=fitted_columns(frame[list(details)], MAIN_WIDTH, columns))
for row in rows:
    if row.tied_to:  # weight tying, said where the weights are counted
        own = f"; its own {row.parameters:,} are in its row" if row.parameters else ""
        st.caption(f"{row.module} shares the weights of {row.tied_to} (tied): they are counted once, in "
                   f"{row.tied_to}{own}.")
counted = sum(r.parameters for r in rows)
if counted == totals.total:
    st.caption(f"The rows add up to the model's total, {counted:,}.")
else:
    st.warning(f"The rows add up to {counted:,}, not the model's {totals.total:,}: some parameters "
               "sit in a module this page does not know.")
st.caption("Symbols: " + "; ".join(f"{k} = {v}" for k, v in formulas.SYMBOLS.items()) + ".")
parts = table.role_totals(rows)
show_figure(figure(("parameter parts", tuple(parts.items())), lambda: figs.parameter_share_bars(
    parts, title="Parameters by part"), len(parts)), "parameter-parts", key="anatomy_parts_fig")

st.header("Masks")
tokenizer = loaded.tokenizer if loaded is not None else None
st.write("Tokens of the typed input, " + ("split by the selected checkpoint's tokenizer"
         if tokenizer is not None else "split into characters (no checkpoint selected)")
         + ", padded to the chosen length. Rows are queries, columns the keys they may attend to.")
text = within_limit(st.text_input("Input", "Where was Ada born?", key="anatomy_text"), INPUT_CHARS, "The input")
length = st.slider("Pad to length", 1, 48, 24, key="anatomy_length")
masked = masks.mask_input(text, tokenizer, length)
if not text:
    st.warning("The input is empty: every position is padding.")
if masked.unknown:
    st.warning(f"{len(masked.unknown)} distinct piece(s) are not in the vocabulary.")
    st.text("Not in the vocabulary: " + " ".join(masked.unknown[:20]))
if masked.read_as_padding:
    st.caption(f"{masked.read_as_padding} input position(s) get the PAD id, so the padding mask hides "
               "them exactly as the model does.")
if masked.truncated:
    st.caption(f"{masked.truncated} token(s) past length {length} are left out.")

left, right = st.columns(2)
with left:
    shown = (tuple(masked.tokens), length)  # the figures are shared by every session that types the same
    show_figure(figure(("causal mask", *shown), lambda: figs.mask_heatmap(
        masks.causal_mask(length), masked.tokens, title="Causal mask"), length ** 2),
        "causal-mask", key="anatomy_causal_fig")
    st.write("A language model predicts each next token from the ones before it, so position i may "
             "only attend to positions ≤ i; otherwise it would read the very token it must predict.")
with right:
    show_figure(figure(("padding mask", *shown, tuple(masked.is_real)), lambda: figs.mask_heatmap(
        masks.padding_mask(masked.is_real), masked.tokens, title="Padding mask"), length ** 2),
        "padding-mask", key="anatomy_padding_fig")
    st.write("A classifier reads the whole input at once, but a batch pads short inputs to one length, "
             "so no position may attend to the padding, or the label would depend on how much there is.")
