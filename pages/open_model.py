"""Open your model: a CS224N minGPT params file (+ its wiki.txt), a nanoGPT ckpt.pt (+ its vocabulary), an
Attention Lab checkpoint, or a Hugging Face model folder on the server (inside the operator's allowed folders);
and attention records from the user's own code (core.lens.records), which the Attention page draws
(ui.attention_records).

Storyboard: where to keep it -> upload -> one core call (core.io.uploads) -> the model joins the
sidebar picker (st.session_state["uploaded_checkpoints"], which ui.shared_caches reads) and is selected.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import streamlit as st

from core.io import folders, hf, uploads
from core.io.checkpoint import CheckpointError
from core.lens import records
from core.text import markdown_escape as plain
from ui import attention_records
from ui.hf_cache_view import hub_name_view
from ui.model_picker import PageModels, checkpoint_picker, select_checkpoint
from ui.shared_caches import all_checkpoints

checkpoint_picker(PageModels("open_model"))
allowed = folders.allowed_dirs()  # server folders a browser may name: none unless the operator says


def session_folder() -> Path:
    """This browser session's private upload folder, created on first use, removed with the session."""
    folder = st.session_state.get("upload_dir")
    if not isinstance(folder, uploads.SessionFolder) or not folder.exists:
        uploads.sweep_stale()  # folders of sessions a killed server never ended
        folder = st.session_state["upload_dir"] = uploads.SessionFolder()
    return folder.path


def add_to_picker(make: Callable[[Path, list[str]], uploads.Added]) -> None:
    """Run one core call; on success remember the model, select it in the picker and rerun."""
    try:
        folder = uploads.destination_folder(st.session_state.get("open_model_folder"), session_folder, allowed)
        added = make(folder, [info.name for info in all_checkpoints()])
    except (uploads.UploadError, folders.FolderError, CheckpointError) as exc:
        st.error(plain(str(exc)))
        return
    st.session_state.setdefault("uploaded_checkpoints", []).append(added.info)
    st.session_state["open_model_added"] = (added.info.name, str(added.info.path), added.warnings)
    select_checkpoint(added.info.name)
    st.rerun()


st.title("Open your model")
st.write("Bring a model you trained elsewhere. It joins the model picker in the sidebar, so every "
         "page can look inside it.")

if added := st.session_state.pop("open_model_added", None):
    name, path, warnings = added
    st.success(f"Added {plain(name)} to the model picker (selected now).")
    for warning in warnings:
        st.warning(plain(warning))

if allowed:
    st.text_input("Save to a folder (optional)", key="open_model_folder", placeholder=str(allowed[0]),
                  help="An existing folder inside " + ", ".join(str(a) for a in allowed) + " (the folders "
                       "this app's operator allows); no file there is ever overwritten. Leave empty to keep "
                       "the model for this browser session only.")
else:
    st.caption("Models you add stay for this browser session only: other visitors do not see them, and a "
               f"reload forgets them. (Saving into a server folder is off unless the operator allows folders "
               f"with {folders.ALLOWED_DIRS_ENV}.)")

# A key keeps the open tab across the rerun that follows an upload (the success message above would
# otherwise remount the tabs on their first one).
mingpt_tab, nanogpt_tab, ours_tab, hf_tab, records_tab = st.tabs(
    ["CS224N minGPT", "nanoGPT", "Attention Lab checkpoint", "Hugging Face",
     "Attention records"], key="open_model_tab", on_change="rerun")

with mingpt_tab:
    st.write("The assignment ends with files such as `vanilla.finetune.params` or "
             "`synthesizer.finetune.params` (`torch.save` of the minGPT state dict). The character "
             "vocabulary is rebuilt from the pretraining corpus, so upload the same `wiki.txt` too. "
             "Layers, width, block size and attention variant are read from the file; files are opened "
             "as tensors only, never run as code.")
    params = st.file_uploader("Params file", key="upload_params",
                              max_upload_size=uploads.PARAMS_LIMIT_MB,
                              help=f"Up to {uploads.PARAMS_LIMIT_MB} MB. Prefixes from torch.compile "
                                   "(_orig_mod.) or DataParallel (module.) are fine.")
    corpus = st.file_uploader("Pretraining corpus (wiki.txt)", key="upload_corpus",
                              max_upload_size=uploads.CORPUS_LIMIT_MB,
                              help=f"UTF-8 text, up to {uploads.CORPUS_LIMIT_MB} MB.")
    n_head = st.number_input("Attention heads", min_value=1, max_value=256, value=8, step=1,
                             key="upload_n_head",
                             help="Not stored in the file: 8 in the assignment. For the synthesizer the "
                                  "file shows which value fits, and the error says so.")
    if st.button("Convert and add to the picker", key="convert_params", type="primary",
                 disabled=params is None or corpus is None):
        add_to_picker(lambda folder, taken: uploads.add_cs224n(params, corpus, folder, int(n_head), taken))

with nanogpt_tab:
    st.write("The `ckpt.pt` that nanoGPT's `train.py` writes into its `out_dir`, with or without "
             "`torch.compile`, bias on or off. It stores no vocabulary, so add one: the dataset's `meta.pkl` "
             "(character models), the training text (its sorted characters), or, for a model on GPT-2 pieces, "
             "GPT-2's tokenizer files (`tokenizer.json`, or `vocab.json` and `merges.txt`). Files are read as "
             "tensors and plain values only, never run as code.")
    ckpt = st.file_uploader("Checkpoint (ckpt.pt)", key="upload_nanogpt",
                            max_upload_size=uploads.PARAMS_LIMIT_MB,
                            help=f"Up to {uploads.PARAMS_LIMIT_MB} MB.")
    vocabulary = st.file_uploader("Vocabulary (meta.pkl, input.txt, or tokenizer files)",
                                  key="upload_nanogpt_vocab", accept_multiple_files=True,
                                  max_upload_size=uploads.CORPUS_LIMIT_MB,
                                  help=f"Up to {uploads.CORPUS_LIMIT_MB} MB each.")
    if st.button("Convert and add to the picker", key="convert_nanogpt", type="primary",
                 disabled=ckpt is None or not vocabulary):
        add_to_picker(lambda folder, taken: uploads.add_nanogpt(ckpt, vocabulary, folder, taken))

with ours_tab:
    st.write("A `.safetensors` checkpoint written by Attention Lab (`core.train.trainer`, `core.io.convert`, or "
             "saved from this app). Every tensor is checked against its config before it is added.")
    upload = st.file_uploader("Checkpoint", type=["safetensors"], key="upload_checkpoint",
                              max_upload_size=uploads.CHECKPOINT_LIMIT_MB,
                              help=f"Up to {uploads.CHECKPOINT_LIMIT_MB} MB.")
    if st.button("Add to the picker", key="add_checkpoint", type="primary", disabled=upload is None):
        add_to_picker(lambda folder, taken: uploads.add_checkpoint(upload, folder, taken))

with hf_tab:
    st.write(f"A folder saved by `transformers` (`config.json`, `*.safetensors`, tokenizer files): "
             f"{hf.FAMILY_NAMES}. It is opened offline and needs the optional extra "
             f"(`pip install -r requirements-hf.txt`).")
    hub_name_view(add_to_picker)
    if allowed:
        typed = st.text_input("Model folder on the server", key="hf_folder", placeholder=str(allowed[0]),
                              help="A folder inside " + ", ".join(str(a) for a in allowed) + ".")
        if st.button("Open and add to the picker", key="add_hf", type="primary", disabled=not typed.strip()):
            add_to_picker(lambda _folder, taken: uploads.Added(
                replace(info := hf.folder_info(folders.resolve_allowed(typed, allowed)),
                        name=uploads.picker_name(info.name, taken)), []))
    else:
        st.info("Opening server folders is off: the operator can allow some with "
                f"{folders.ALLOWED_DIRS_ENV}, or list Hugging Face folders in ATTENTION_LAB_CHECKPOINTS.")

session_uploads = st.session_state.get("uploaded_checkpoints", [])
if session_uploads:
    st.subheader("Opened in this session")
    st.dataframe([{"name": info.name, "task": info.task or "",
                   "attention": info.config.get("attention", ""),
                   "layers": info.config.get("n_layer"), "file": str(info.path)}
                  for info in session_uploads], hide_index=True, width="stretch")

with records_tab:
    st.write("Attention maps your own code computed (any model: a CSE 256 PA2 transformer, an "
             "`nn.MultiheadAttention`, a `transformers` model), written with `core.lens.records.save_attention` "
             "as `.npz` or `.safetensors`, or the lab's own export (`python -m core.lens.export`). The Attention "
             "page draws every view that needs only the weights. Pickles are never opened.")
    records_upload = st.file_uploader("Attention records", type=["npz", "safetensors"], key="upload_records",
                                      max_upload_size=uploads.RECORDS_LIMIT_MB,
                                      help=f"Up to {uploads.RECORDS_LIMIT_MB} MB.")
    if st.button("Open on the Attention page", key="open_records", type="primary", disabled=records_upload is None):
        try:
            data = uploads.read_upload(records_upload, uploads.RECORDS_LIMIT_MB, "records file")
            opened_name = attention_records.add(records.read_records(data, Path(records_upload.name).name))
        except (uploads.UploadError, records.RecordsError) as exc:
            st.error(plain(str(exc)))
        else:
            st.success(plain(f"Opened {opened_name}: choose it under Attention records in the sidebar of the "
                             "Attention page (chosen now)."))
            st.page_link("pages/attention.py", label="Go to the Attention page", icon=":material/grid_on:")
