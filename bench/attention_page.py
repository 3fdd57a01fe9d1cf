"""How long one rerun of the Attention page takes after a NEW sentence, against a trivial page.

    python -m bench.attention_page [--repeats 7] [--tokens 128]

For every checkpoint in ATTENTION_LAB_CHECKPOINTS (or checkpoints/) it types a fresh 128-token
sentence into the page (Streamlit AppTest, default view) and times the rerun; a trivial page (a text
box and one line of output, written to a temp file) is rerun in the same loop, interleaved, so both
see the same machine load. The median of the repeats is reported, with the ratio. A third page that
only draws the shared sidebar picker is timed too, to show what every page pays before its own work.
Server-side only, for context: what a person waits for (targets included) is bench/browser_latency.py,
which replaced this file's old "2x a bare rerun" target (issue 15).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "pages" / "attention.py"
TRIVIAL_PAGE = """import streamlit as st
text = st.text_area("Sentence", "hello", key="attn_text")
st.write(len(text))
"""
PICKER_PAGE = """import streamlit as st
from ui.model_picker import checkpoint_picker
checkpoint_picker()
text = st.text_area("Sentence", "hello", key="attn_text")
st.write(len(text))
"""


def sentence_of(loaded, n_tokens: int, variant: int) -> str:
    """A new text of n_tokens tokens (before any cut) made of the checkpoint's default sentence."""
    from core.lens.attention import default_sentence
    from core.model.tokenizer import MASK_CHAR

    base = default_sentence(loaded.task, loaded.tokenizer).replace(MASK_CHAR, "")
    pieces = base.split() if loaded.tokenizer.kind == "word" else list(base + " ")
    pieces = pieces[variant % len(pieces):] + pieces * (n_tokens // max(len(pieces), 1) + 2)
    ending = [MASK_CHAR] if loaded.task == "birthplace" else []  # so the page generates an answer
    joiner = " " if loaded.tokenizer.kind == "word" else ""
    for cut in range(n_tokens, 0, -1):
        text = joiner.join(pieces[:cut - len(ending)] + ending)
        if len(loaded.tokenizer.tokenize(text).ids) <= n_tokens:
            return text
    return base


def time_reruns(app, texts: list[str]) -> list[float]:
    times = []
    for text in texts:
        app.text_area(key="attn_text").input(text)
        start = time.perf_counter()
        app.run()
        times.append(time.perf_counter() - start)
        if app.exception:
            raise RuntimeError(f"the page raised: {app.exception[0].message}")
    return times


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--tokens", type=int, default=128)
    parser.add_argument("--threads", type=int, default=0,
                        help="torch intra-op threads; 0 (default) leaves torch's default, as the app does")
    args = parser.parse_args(argv)
    import torch

    if args.threads > 0:
        torch.set_num_threads(args.threads)
    print(f"torch threads: {torch.get_num_threads()}")
    sys.path.insert(0, str(ROOT))
    with tempfile.TemporaryDirectory(prefix="attention-bench-") as tmp:
        return measure(Path(tmp), args.repeats, args.tokens)


def measure(workdir: Path, repeats: int, n_tokens: int) -> int:
    import logging

    from streamlit.testing.v1 import AppTest

    # AppTest's main thread has no script context; Streamlit warns about it on every rerun.
    # (A filter, not a level: Streamlit resets its loggers' levels when its config loads.)
    logging.getLogger("streamlit.runtime.scriptrunner_utils.script_run_context").addFilter(
        lambda record: "missing ScriptRunContext" not in record.getMessage())

    from bench.tiny_checkpoints import tiny_checkpoint_folder
    from core.io.checkpoint import checkpoint_dir, list_checkpoints, load

    folder = checkpoint_dir()
    infos = [i for i in list_checkpoints(folder) if not i.error]
    if not infos:
        folder = workdir / "checkpoints"
        tiny_checkpoint_folder(folder)
        infos = list_checkpoints(folder)
        print(f"No checkpoints in {checkpoint_dir()}: built tiny random ones in {folder}.")
    os.environ["ATTENTION_LAB_CHECKPOINTS"] = str(folder)
    (workdir / "trivial.py").write_text(TRIVIAL_PAGE)
    (workdir / "picker_only.py").write_text(PICKER_PAGE)

    for info in infos:
        loaded = load(info.path)
        texts = [sentence_of(loaded, n_tokens, v) for v in range(repeats + 1)]
        apps = {}
        for label, path in (("page", PAGE), ("trivial", workdir / "trivial.py"),
                            ("picker", workdir / "picker_only.py")):
            apps[label] = AppTest.from_file(str(path), default_timeout=120)
            apps[label].query_params["model"] = info.name
            apps[label].run()  # first run: imports, model load, caches
            time_reruns(apps[label], texts[:1])  # and one warm rerun
        times: dict[str, list[float]] = {label: [] for label in apps}
        for text in texts[1:]:  # interleaved, so all three see the same load
            for label, app in apps.items():
                times[label] += time_reruns(app, [text])
        page, trivial, picker = (statistics.median(times[k]) * 1000 for k in ("page", "trivial", "picker"))
        n_read = len(loaded.tokenizer.tokenize(texts[-1]).ids)
        ratio = page / trivial
        limit = loaded.model.max_length
        print(f"{info.name}: page {page:.1f} ms, trivial page {trivial:.1f} ms, ratio {ratio:.2f}; "
              f"picker-only page {picker:.1f} ms, page/picker-only "
              f"{page / picker:.2f}; input {n_read} tokens, read {min(n_read, limit or n_read)}; "
              f"median of {repeats}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
