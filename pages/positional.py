"""Positional encodings: sinusoidal, learned, ALiBi and RoPE side by side.

Storyboard: the checkpoints whose configs differ only in `positional` (found by comparing configs), then
four tabs, of which only the open one runs: (1) the encodings from `core.model.positional` via
`core.lens.positional`; (2) one sentence through each model; (3) their training histories (metadata
only); (4) train short, test long: `core.lens.extrapolation.run_extrapolation` over every (model,
protocol, length) behind a Run button. Results are cached on (checkpoint path, modification time, inputs)
and figures once per input, so a visit redraws rather than recomputes. The URL (`ui.page_state.PositionalState`)
reopens the view.
"""

from __future__ import annotations

import streamlit as st

from core.lens import positional as pv
from core.text import markdown_escape
from ui import page_state
from ui import positional_views as sections
from ui.model_picker import PageModels, checkpoint_picker, selected_info
from ui.page_state import (
    POSITIONAL_ENCODING_SECTIONS,
    POSITIONAL_SECTION_TITLES,
    POSITIONAL_SECTIONS,
    PositionalState,
)
from ui.shared_caches import all_checkpoints, load_checkpoint


def clip(key: str, count: int) -> None:
    if not 0 <= int(st.session_state.get(key, 0)) < count:
        st.session_state[key] = 0


checkpoint_picker(PageModels(
    "positional", ("lm-learned", "lm-sinusoidal", "lm-alibi", "lm-rope"), None,
    "language models that differ only in their positional encoding"))
st.title("Positional encodings")
st.caption("Attention alone does not know word order. Sinusoidal (Vaswani et al. 2017) and learned vectors are "
           "added to the tokens; ALiBi (Press et al. 2022) adds a distance penalty to the scores; RoPE (Su et "
           "al. 2021) rotates queries and keys by their position.")
saved, _ = page_state.restore(PositionalState)  # the widgets' values: the URL on a first visit, else the last
infos = [i for i in all_checkpoints() if not i.error]
info = selected_info()
# by config, not by name; a selected model with no such siblings (nanoGPT, a Hugging Face folder) is shown alone
families, index = pv.with_selected(pv.positional_families([i for i in infos if pv.is_causal_lm(i)]), info)
members = []
if families:
    if st.session_state.get("pos_family") is not None and st.session_state["pos_family"] >= len(families):
        st.session_state["pos_family"] = index
    family = families[st.selectbox("Models compared", range(len(families)), index=index, key="pos_family",
                                   format_func=lambda i: families[i].describe()) if len(families) > 1
                      else 0]
    members = family.members
    st.caption(markdown_escape(family.describe() + "."))
    if len(members) == 1:
        st.info("No checkpoints differ only in their positional encoding from this one; tabs 2-4 show the selected "
                "model alone. `make checkpoints` trains such a set (lm-learned, lm-sinusoidal, lm-alibi, lm-rope).")
tabs = st.tabs(list(POSITIONAL_SECTION_TITLES.values()), key="pos_tab", on_change="rerun")
loaded = [(m, lc) for m, lc in ((m, load_checkpoint(m)) for m in members) if lc is not None]

for tab, name in zip(tabs, POSITIONAL_SECTIONS):
    if not tab.open:  # only the open tab runs: a visit costs one section, not four
        continue
    with tab:
        if name in POSITIONAL_ENCODING_SECTIONS:
            sections.encodings(name, infos, members)
        elif not loaded:
            st.info("This tab needs causal language models; none is loaded. `make checkpoints` trains a set "
                    "that differs only in positional encoding.")
        elif name == "sentence":
            config = loaded[0][1].config
            clip("pos_layer", config.n_layer)
            clip("pos_head", config.n_head)
            sections.sentence(loaded)
        elif name == "training":
            sections.training(loaded)
        else:
            # not a fragment: a click inside a running fragment waits for it to end (Streamlit preempts only whole-page
            # runs), so the Stop button could not stop anything
            sections.extrapolation(loaded)
page_state.bind(PositionalState, saved)
