"""Causal tracing of the Attention page's sentence (core.lens.where_from.prompts): under "Where the next piece
comes from", the typed sentence is the prompt; the user marks the subject (a span of its pieces) and keeps the
model's own next piece as the target or types another; Trace runs ROME's restorations (noise on the subject at 3
times its embeddings' std, or another subject swapped in) with a progress bar and a Stop button.

Not a page: ui.where_from_view.next_piece_view calls `prompt_trace_view`. Traces are kept per server process
(a plain store, not st.cache_data: the trace draws its progress, and a Stop click interrupts it there). User text
is shown only through st.caption(plain(...)) / st.write(plain(...)) / dataframes / escaped plotly."""

from __future__ import annotations

from collections import OrderedDict

import pandas as pd
import streamlit as st

from core.figures import where_from as viz
from core.lens import where_from as wf
from core.lens.where_from import prompts
from core.text import markdown_escape as plain
from core.text import quoted_token, visible_token
from ui.display import csv_download, show_figure
from ui.shared_caches import model_version

TRACES_KEPT = 64
KEY = "wf_prompt"
CORRUPTIONS = {"noise": "noise on the subject (3 std)", "swap": "another subject swapped in"}


@st.cache_resource(show_spinner=False)
def _traces() -> OrderedDict:
    """Every prompt trace computed in this server process: (model version, settings) -> (Question, CausalTrace)."""
    return OrderedDict()


def prompt_trace(loaded, prompt: str, subject, target: str | None, corruption: str, samples: int, seed: int,
                 swaps: tuple[str, ...] = (), progress=None):
    """The page's trace: prompts.trace_prompt with the page's settings (what the command computes for the same
    line, tests/test_where_from_prompts.py)."""
    return prompts.trace_prompt(loaded, prompt, subject, target or None, corruption, samples=samples, seed=seed,
                                swap_subjects=swaps, progress=progress)


def _subject_default(tokens: list[str]) -> tuple[int, int]:
    """The first piece that is not a special token (LLaMA's <s>, GPT-2's <|endoftext|>)."""
    for i, token in enumerate(tokens):
        if not (token.startswith("<") and token.endswith(">")):
            return i, i
    return 0, 0


def prompt_trace_view(loaded, name: str, text: str) -> None:
    st.markdown("**Causal tracing** (ROME): corrupt the subject, restore one clean state at a time")
    if not wf.patchable(loaded.model):
        st.info("Causal tracing patches a pre-norm decoder's residual stream through its hook points; this model "
                "has none to patch.")
        return
    prompt = prompts.as_read(loaded, text).strip()
    read = loaded.tokenizer.tokenize(prompt) if prompt else None
    if read is None or not read.ids:
        st.info("Type a sentence above: it is the prompt, and you mark its subject here.")
        return
    limit = loaded.model.max_length or loaded.model.config.block_size
    first = max(0, len(read.ids) - limit)
    labels = [f"{i}: {visible_token(t)}" for i, t in enumerate(read.tokens)][first:]
    if len(labels) < 2:
        st.info("The prompt has one piece: a subject and a next piece need at least two.")
        return
    guess = prompts.subject_guess(loaded.tokenizer, prompt)
    lo, hi = (guess[0] - first, guess[1] - 1 - first) if guess and guess[0] >= first else \
        _subject_default(read.tokens[first:])
    span = st.select_slider("Subject: its first and last piece", options=labels, value=(labels[lo], labels[hi]),
                            key=f"{KEY}_subject")
    start, end = labels.index(span[0]) + first, labels.index(span[1]) + first + 1
    target_box, corruption_box, samples_box, seed_box = st.columns([3, 3, 1, 1])
    target = target_box.text_input("Target (empty: the model's own next piece)", key=f"{KEY}_target", max_chars=200)
    corruption = corruption_box.selectbox("Corruption", list(CORRUPTIONS), format_func=CORRUPTIONS.get,
                                          key=f"{KEY}_corruption")
    samples = int(samples_box.number_input("Samples", 1, 20, 10, key=f"{KEY}_samples"))
    seed = int(seed_box.number_input("Seed", 0, 9999, 0, key=f"{KEY}_seed"))
    swaps: tuple[str, ...] = ()
    if corruption == "swap":
        typed = st.text_input("Subjects to swap in, separated by commas (each must read as as many pieces)",
                              key=f"{KEY}_swaps", max_chars=2000)
        swaps = tuple(s.strip() for s in typed.split(",") if s.strip())
    key = (*model_version(loaded), prompt, start, end, target.strip(), corruption, samples, seed, swaps)
    store = _traces()
    if key not in store:
        if not st.button("Trace", key=f"{KEY}_run", type="primary",
                         help="Runs every restoration of the three grids; a large model takes a while."):
            return
        running = st.empty()
        with running.container():
            bar = st.progress(0.0, text="Corrupting the subject and restoring one state at a time…")
            st.button("Stop", key=f"{KEY}_stop", help="Stops the trace at its next pass.")
        try:
            store[key] = prompt_trace(loaded, prompt, (start, end), target, corruption, samples, seed, swaps,
                                      progress=lambda done, total: bar.progress(
                                          done / max(total, 1), text=f"Restored {done:,} of {total:,} rows"))
        except wf.WhereFromError as exc:
            running.empty()
            st.info(plain(str(exc)))
            return
        running.empty()
        while len(store) > TRACES_KEPT:
            store.popitem(last=False)
    q, ct = store[key]
    st.caption(plain(q.note))
    lesson = ct.lesson()
    st.write(plain(ct.sentence() if lesson is None else lesson))
    fig = viz.causal_trace_panels({k: ct.recovered(k) for k in wf.KINDS}, ct.impossible, q.tokens, q.name_positions,
                                  title=f"{name}: restoring one state ({ct.metric})")
    show_figure(fig, f"{name}-prompt-trace", key=f"{KEY}_chart")
    swapped = f" Subjects swapped in: {', '.join(ct.swapped_names)}." if ct.swapped_names else ""
    st.caption(plain(f"The subject's pieces are bold. {ct.samples} sample(s), seed {ct.seed}"
                     + (f", noise {ct.noise:g} x {ct.noise_std:.3f}" if ct.corruption == "noise" else "")
                     + f"; measured against the corrupted run's answer {quoted_token(ct.corrupted_answer)}." + swapped))

    def rows() -> pd.DataFrame:
        return pd.DataFrame([{"panel": kind, "layer": layer, "position": t, "token": q.tokens[t],
                              "metric with this state restored": float(ct.scores[kind][layer, t]),
                              "share recovered": float(ct.recovered(kind)[layer, t]),
                              "cannot matter": bool(ct.impossible[layer, t])}
                             for kind in wf.KINDS for layer in range(ct.impossible.shape[0])
                             for t in range(len(q.tokens))])
    csv_download("Causal trace (CSV)", rows, f"{name}-prompt-trace.csv", f"{KEY}_csv")
