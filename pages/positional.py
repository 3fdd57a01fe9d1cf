"""Positional encodings: sinusoidal, learned, ALiBi and RoPE side by side.

Storyboard: the checkpoints whose configs differ only in `positional` (found by comparing configs), then
four tabs, of which only the open one runs: (1) the encodings from `core.model.positional` via
`core.lens.positional`; (2) one sentence through each model; (3) their training histories (metadata
only); (4) train short, test long: `core.lens.extrapolation.run_extrapolation` over every (model,
protocol, length) behind a Run button. Results are cached on (checkpoint path, modification time, inputs)
and figures once per input, so a visit redraws rather than recomputes. The URL (`core.urlstate`) reopens the view.
"""

from __future__ import annotations

import streamlit as st

from core import urlstate as url
from core.lens import positional as pv
from core.text import markdown_escape
from pages import positional_views as sections
from pages.model_loading import all_checkpoints, load_checkpoint
from pages.model_picker import PageModels, checkpoint_picker, selected_info
from pages.positional_extrapolation import extrapolation

WIDGETS = {"section": "pos_tab", "text": "pos_text", "layer": "pos_layer", "head": "pos_head",
           "length": "pos_length", "dim": "pos_dim", "heads": "pos_heads", "metric": "pos_metric",
           "train": "pos_train"}
TAB_OF = {url.POSITIONAL_SECTION_TITLES[s]: s for s in url.POSITIONAL_SECTIONS}


def restore_widgets() -> url.PositionalPageState:
    """Widget values: the URL on the first visit, else this session's last state (tabs come and go)."""
    saved = st.session_state.get("pos_saved") or url.decode_positional(st.query_params.to_dict())
    for field, key in WIDGETS.items():
        if key not in st.session_state:
            value = getattr(saved, field)
            st.session_state[key] = url.POSITIONAL_SECTION_TITLES[value] if field == "section" else value
    return saved


def remember(saved: url.PositionalPageState) -> None:
    values = {f: st.session_state.get(k, getattr(saved, f)) for f, k in WIDGETS.items()}
    values["section"] = TAB_OF.get(values["section"], saved.section)
    state = url.PositionalPageState(**values)
    st.session_state["pos_saved"] = state
    params = url.encode_positional(state)
    for stale in set(url.POSITIONAL_KEYS.values()) - set(params):
        st.query_params.pop(stale, None)
    st.query_params.update(params)


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
saved = restore_widgets()
infos = [i for i in all_checkpoints() if not i.error]
info = selected_info()
families = pv.positional_families([i for i in infos if pv.is_causal_lm(i)])  # by config, not by name
members = []
if families:
    index = pv.family_for(families, info.name if info else None)
    family = families[st.selectbox("Models compared", range(len(families)), index=index, key="pos_family",
                                   format_func=lambda i: families[i].describe()) if len(families) > 1
                      else 0]
    members = family.members
    st.caption(markdown_escape(family.describe() + "."))
elif info is not None and pv.is_causal_lm(info):
    members = [info]
    st.info("No checkpoints differ only in their positional encoding; tabs 2-4 show the selected model "
            "alone. `make checkpoints` trains such a set (lm-learned, lm-sinusoidal, lm-alibi, lm-rope).")
tabs = st.tabs(list(TAB_OF), key="pos_tab", on_change="rerun")
loaded = [(m, lc) for m, lc in ((m, load_checkpoint(m)) for m in members) if lc is not None]

for tab, name in zip(tabs, url.POSITIONAL_SECTIONS):
    if not tab.open:  # only the open tab runs: a visit costs one section, not four
        continue
    with tab:
        if name in url.POSITIONAL_ENCODING_SECTIONS:
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
            st.fragment(extrapolation)(loaded)  # Run reruns this tab alone: its progress bar shows sooner
remember(saved)
