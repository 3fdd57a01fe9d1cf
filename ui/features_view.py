"""The "Features" part of the Representations page: sparse-autoencoder features of the open model (issue 62, part 3).

`features_section(loaded, info)`: where no SAE exists beside the model, a "Train an SAE" control that runs
`python -m core.lens.sae train` in its own process (progress, Stop; only where the operator allowed training, as
the Training curves page's Train button); then the SAE's reconstruction and spliced-in loss in one computed
sentence, the density histogram, a feature picker (by number, or by density), the feature's top contexts as chips,
the pieces it raises and lowers, and steering (a scale, a prompt: the generation with and without). Every corpus
and prompt text reaches the screen escaped (plotly labels escaped in core.figures.features; st.markdown through
core.text.markdown_escape; generations in st.code). Not a page.
"""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from core.figures import features as figs
from core.lens import sae as sae_lens
from core.text import markdown_escape as plain
from core.train import sae_job
from ui.display import show_figure

REFRESH_SECONDS = 1.0
DEFAULT_PROMPT = "Ada Lovelace was born in"


@st.cache_resource
def sae_slot() -> sae_job.SAEJobSlot:
    """The server's one SAE job slot (shared by every session)."""
    return sae_job.SAEJobSlot()


@st.cache_resource(max_entries=8, show_spinner=False)
def _opened(path: str, modified: float, checkpoint: str, checkpoint_modified: float) -> sae_lens.LoadedSAE:
    """An SAE file checked against its model's sha256, once per (file, model file) version."""
    return sae_lens.load_sae(path, checkpoint)


def features_section(loaded, info) -> None:
    checkpoint = Path(loaded.path)
    if not checkpoint.is_file():
        st.info("SAEs are trained for the lab's own checkpoint files (.safetensors); this model is a folder.")
        return
    found = sae_lens.saes_beside(checkpoint)
    if not found:
        st.info("No sparse autoencoder has been trained for this model yet.")
        _train_control(loaded)
        return
    chosen = found[0]
    if len(found) > 1:
        chosen = st.selectbox("SAE", found, format_func=lambda p: p.name, key="features_sae")
    try:
        sae_file = _opened(str(chosen), chosen.stat().st_mtime, str(checkpoint), checkpoint.stat().st_mtime)
    except sae_lens.SAEError as exc:
        st.error(plain(str(exc)))
        _train_control(loaded)
        return
    meta = sae_file.meta
    if loaded.step is not None or loaded.edits:
        st.info("These are not the checkpoint's own weights (a training-step snapshot or kept edits); the SAE was "
                "trained on the checkpoint's, so its numbers are theirs.")
    st.markdown(plain(sae_lens.summary_sentence(meta)))
    with st.expander("Train another SAE"):
        _train_control(loaded)
    show_figure(figs.density_histogram(sae_file.tables["density"].tolist()), "feature-densities",
                key="features_density")
    number = _picker(sae_file)
    try:
        shown = sae_lens.feature(loaded, sae_file, number)
    except sae_lens.SAEError as exc:
        st.error(plain(str(exc)))
        return
    st.markdown(plain(f"Feature {number} fires on {shown.density:.3%} of the pieces of the training text read "
                      f"({meta.get('stats_pieces', 0):,} pieces)."))
    if shown.contexts:
        show_figure(figs.context_chips([(c.pieces, c.activations, c.focus) for c in shown.contexts],
                                       f"Feature {number}: its top contexts (the top piece in bold)"),
                    f"feature-{number}-contexts", key="features_contexts")
    else:
        st.info("This feature never fired on the text read: it has no top contexts.")
    if shown.note:
        st.info(plain(shown.note))
    else:
        show_figure(figs.logit_effect_bars(shown.raised, shown.lowered,
                                           f"Feature {number}: the pieces it raises and lowers"),
                    f"feature-{number}-logits", key="features_logits")
        _steering(loaded, sae_file, number, shown)


def _picker(sae_file: sae_lens.LoadedSAE) -> int:
    width = sae_file.sae.width
    left, right = st.columns([1, 2])
    order = left.radio("Pick", ["by density", "by number"], key="features_order", horizontal=True)
    if order == "by number":
        return int(right.number_input("Feature", 0, width - 1, 0, key="features_number"))
    ranked = sae_lens.features_by_density(sae_file)
    density = sae_file.tables["density"]
    return int(right.selectbox("Feature (densest first)", ranked, key="features_ranked",
                               format_func=lambda f: f"{f} ({float(density[f]):.2%} of pieces)"))


def _steering(loaded, sae_file: sae_lens.LoadedSAE, number: int, shown) -> None:
    st.subheader("Steer")
    top = max([c.value for c in shown.contexts], default=1.0) or 1.0
    left, right = st.columns([1, 2])
    times = left.slider("Scale (x its top activation)", -10.0, 10.0, 2.0, 0.5, key="features_scale",
                        help=f"Adds scale x {top:.2f} x the feature's decoder direction to the residual stream "
                             f"leaving layer {sae_file.layer}, at every position, during generation.")
    prompt = right.text_input("Prompt", DEFAULT_PROMPT, max_chars=500, key="features_prompt")
    if not st.button("Generate", key="features_steer"):
        return
    try:
        result = sae_lens.steer(loaded, sae_file, number, times * top, prompt)
    except sae_lens.SAEError as exc:
        st.warning(plain(str(exc)))
        return
    a, b = st.columns(2)
    a.caption("Without")
    a.code(prompt + result.plain_text, language=None, wrap_lines=True)
    b.caption(plain(f"Steered ({times:+g} x {top:.2f})"))
    b.code(prompt + result.steered_text, language=None, wrap_lines=True)
    show_figure(figs.steering_bars(result.pieces, result.plain_probs, result.steered_probs,
                                   "The next piece after the prompt, without and with steering"),
                f"feature-{number}-steering", key="features_steering")


def _train_control(loaded) -> None:
    if not sae_job.training_allowed():
        st.caption(plain("Training is turned off on this server; an SAE is trained with `python -m core.lens.sae "
                         "train CHECKPOINT --layer N`."))
        return
    slot = sae_slot()
    running = slot.current() is not None and slot.current().running()
    n_layer = loaded.model.config.n_layer
    a, b, c, d = st.columns([1, 1, 1, 1])
    layer = a.selectbox("Layer", list(range(n_layer)), index=n_layer - 1, key="features_train_layer",
                        disabled=running)
    site = b.selectbox("Site", list(sae_lens.SITES), key="features_train_site", disabled=running,
                       format_func=lambda s: {"resid": "residual stream", "mlp": "MLP output"}[s])
    steps = c.number_input("Steps", 50, 20_000, sae_lens.SAESettings.steps, 50, key="features_train_steps",
                           disabled=running)
    d.button("Train an SAE", key="features_train", disabled=running, type="primary", on_click=_start,
             args=(Path(loaded.path), int(layer), str(site), int(steps)))
    if st.session_state.get("features_train_note"):
        st.warning(plain(st.session_state["features_train_note"]))
    job = slot.current()
    if job is not None and job.checkpoint == Path(loaded.path):
        st.fragment(_progress, run_every=REFRESH_SECONDS if running else None)()


def _start(checkpoint: Path, layer: int, site: str, steps: int) -> None:
    try:
        sae_slot().start(checkpoint, layer, site, steps)
    except sae_job.JobError as exc:
        st.session_state["features_train_note"] = str(exc)
        return
    st.session_state.pop("features_train_note", None)
    st.session_state["features_was_running"] = True


def _progress() -> None:
    job = sae_slot().current()
    if job is None:
        return
    stage, done, total = sae_job.progress(job)
    if job.running():
        said = {"train": f"step {done:,} of {total:,}", "evaluate": "measuring it on held-out text",
                "features": "finding each feature's top contexts", "read": "reading the model's activations"}
        st.progress(min(done / max(total, 1), 1.0) if stage == "train" else (0.0 if stage != "features" else 1.0),
                    text=plain(f"{job.out.name}: {said.get(stage, 'starting')}"))
        st.button("Stop", key="features_stop", on_click=lambda: sae_slot().stop())
        return
    code = job.process.returncode
    if code == 0 and job.out.exists():
        try:
            steps = int(sae_lens.read_sae_meta(job.out)["steps"])
        except (sae_lens.SAEError, KeyError, ValueError):
            steps = done
        st.caption(plain(f"{job.out.name}: trained ({steps:,} steps) and saved beside the model."))
    else:
        st.error(plain(sae_job.error(job) or f"The SAE job ended without saving (exit {code})."))
    if st.session_state.get("features_was_running", True):
        st.session_state["features_was_running"] = False
        st.rerun(scope="app")  # the job ended: the section shows the new SAE and stops refreshing
