"""Open your model's hub-name box: a model from the Hugging Face cache by its hub name (core.io.hf_cache),
downloaded only where the person running the app allowed it, with a progress bar; and what else the cache holds.

Not a page (app.py lists pages explicitly): pages/open_model.py calls `hub_name_view` in its Hugging Face tab.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import streamlit as st

from core.io import hf_cache, uploads
from core.text import markdown_escape as plain
from ui.model_picker import select_checkpoint
from ui.shared_caches import all_checkpoints, by_name

SELECTED_NOTE = "open_model_selected"  # st.session_state: a typed hub name the picker already listed, now selected


@by_name
@st.cache_resource(show_spinner=False, ttl=30)
def cached_scan(cache: str) -> tuple[hf_cache.CachedModel, ...]:
    return tuple(hf_cache.scan(Path(cache)))


def hub_name_view(add_to_picker: Callable) -> None:
    """A hub name box; `add_to_picker(make)` is Open your model's one way to add a model (errors: one sentence)."""
    st.markdown("**A model by its hub name**")
    if not hf_cache.listing_enabled():
        st.info(f"Hugging Face hub names are off on this server; its operator can turn them on with "
                f"{hf_cache.CACHE_ENV}=1.")
        return
    cache = hf_cache.cache_dir()
    models = cached_scan(str(cache))
    readable = [m for m in models if m.error is None]
    downloads = ("on: a name that is not cached is downloaded (config, tokenizer and safetensors files only)"
                 if hf_cache.downloads_allowed() else
                 f"off (the person running the app can allow them with {hf_cache.DOWNLOAD_ENV}=1)")
    st.caption(plain(f"Your Hugging Face cache ({cache}) holds {len(models)} model(s); the lab reads {len(readable)} "
                     f"of them, listed in the model picker under their hub names. Downloads are {downloads}."))
    if selected := st.session_state.pop(SELECTED_NOTE, None):  # beside the box it was typed in
        st.success(plain(f"{selected} is already in the model picker (your Hugging Face cache holds it): selected "
                         "now, nothing downloaded or copied."))
    typed = st.text_input("Hub name", key="hf_hub_name", placeholder="HuggingFaceTB/SmolLM2-135M", max_chars=200)
    if st.button("Open and add to the picker", key="add_hub", type="primary", disabled=not typed.strip()):
        name = typed.strip()
        if name in [info.name for info in all_checkpoints()]:
            select_checkpoint(name)  # already listed (the cache's models are): select it, and say so
            st.session_state[SELECTED_NOTE] = name
            st.rerun()
        bar = st.empty()

        def progress(done: int, total: int) -> None:
            bar.progress(done / total if total else 0.0, text=plain(f"Downloading {name}: {done} of {total} files"))

        add_to_picker(lambda _folder, taken: uploads.Added(
            replace(info := hf_cache.resolve(name, progress), name=uploads.picker_name(info.name, taken)), []))
    unread = [m for m in models if m.error is not None]
    if unread:
        with st.expander(f"{len(unread)} cached model(s) the lab cannot open"):
            st.dataframe([{"hub name": m.name, "why": m.error} for m in unread], hide_index=True, width="stretch")
