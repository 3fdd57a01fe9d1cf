"""Errors and causal tracing on Hugging Face-shaped models (issue 55), each against a baseline in the same run.

    python -m bench.hf_errors_trace [--repeats 3] [--folder DIR] [--samples 10] [--threads 1]

Folders are built here with transformers, random weights (no download; what a pass costs does not depend on the
weights): bench.hf_135m's SmolLM2-135M-shaped LLaMA folder, and a BERT-base-shaped ...ForSequenceClassification
(width 768, 12 layers, 12 heads, MLP 3072, a WordPiece vocabulary of data/world/wiki.txt's words, two labels).
Rows (median of --repeats after one warm-up call, `--threads` torch threads: 1 is what app.py runs):
- Errors, language model: `core.lens.errors.lm.score_lm` on a 2,000-piece text of wiki.txt (target <= 5 s);
  baseline: transformers' own model on the same pieces with torch's cross-entropy;
- Errors, classifier: `score_classifier` on 500 lines of wiki.txt, each cut to its first 30 words (a
  sentiment file's line; target <= 10 s); baseline: transformers' own
  tokenizer (padding=True) and model in batches of 32;
- causal trace of one 16-piece prompt on the 135M folder (`core.lens.where_from.prompts.trace_prompt`: residual,
  MLP and attention grids, --samples noise draws; target <= 20 s with 10 draws, the first progress <= 1 s);
  baseline: the same number of rows run through the model unpatched (the floor of the work);
- the same trace on the bundled birth-vanilla-pretrained (target <= 1 s); baseline: one plain pass of the prompt.
Prints `RESULT <row> measured=<s> target<=<s> pass=...` per row.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WIKI = ROOT / "data" / "world" / "wiki.txt"
BUNDLED = ROOT / "checkpoints" / "birth-vanilla-pretrained.safetensors"
LINE_WORDS = 30  # a review or a headline: SST-2's sentences average ~20 words, IMDB's first lines ~30
PROMPT, SUBJECT = "Ada Lovelace was born in the city of London, and she worked with Charles Babbage on", "Ada Lovelace"


def timed(call: Callable[[], object], repeats: int) -> tuple[float, object]:
    out = call()  # warm: imports, first pass
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        out = call()
        times.append(time.perf_counter() - start)
    return statistics.median(times), out


def bert_base_classifier(folder: Path) -> Path:
    import torch
    import transformers

    if (folder / "model.safetensors").is_file():
        return folder
    words = Counter(w.lower().strip(".,;:()\"'") for w in WIKI.read_text(encoding="utf-8").split())
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [w for w, _ in words.most_common(8000) if w]
    tokenizer = transformers.BertTokenizer(vocab={w: i for i, w in enumerate(dict.fromkeys(vocab))})
    config = transformers.BertConfig(vocab_size=len(tokenizer), hidden_size=768, num_hidden_layers=12,
                                     num_attention_heads=12, intermediate_size=3072, max_position_embeddings=512,
                                     id2label={0: "NEGATIVE", 1: "POSITIVE"},
                                     label2id={"NEGATIVE": 0, "POSITIVE": 1})
    torch.manual_seed(0)
    transformers.BertForSequenceClassification(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def row(name: str, lab: float, base: float, target: float, what: str) -> None:
    print(f"{name}: {lab:.3f} s  ({what}: {base:.3f} s, ratio {lab / base:.2f})")
    print(f"RESULT {name} measured={lab:.3f} target<={target:g} pass={str(lab <= target).lower()}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--folder", type=Path, default=None, help="where the 135M folder is (built there if missing)")
    parser.add_argument("--samples", type=int, default=10, help="noise draws of the 135M trace (ROME's 10)")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--only", choices=["lm", "classify", "trace", "bundled"], nargs="*")
    args = parser.parse_args(argv)
    import torch
    import torch.nn.functional as F

    from bench.hf_135m import build
    from core.io.checkpoint import load
    from core.lens.errors import classify, inputs, lm
    from core.lens.where_from import prompts
    from core.lens.where_from.tracing import CHUNK_TOKENS

    torch.set_num_threads(args.threads)
    only = set(args.only or ["lm", "classify", "trace", "bundled"])
    failed = False
    with tempfile.TemporaryDirectory(prefix="hf-errors-") as tmp:
        if only & {"lm", "trace"}:
            folder = build(args.folder or Path(tmp) / "smollm2-135m-shaped")
            loaded = load(folder)
            model, tokenizer = loaded.model, loaded.tokenizer
        if "lm" in only:
            ids = tokenizer.encode(WIKI.read_text(encoding="utf-8")[:40_000])[:2000]
            text = tokenizer.inner.decode(ids)
            pieces = len(tokenizer.encode(text))

            def baseline_lm():
                with torch.no_grad():
                    x = torch.tensor([tokenizer.encode(text)])
                    logits = model.inner(x[:, :-1]).logits[0]
                    return F.cross_entropy(logits, x[0, 1:], reduction="none")

            lab, _ = timed(lambda: lm.score_lm(model, tokenizer, [("wiki.txt", text)], "135m"), args.repeats)
            base, _ = timed(baseline_lm, args.repeats)
            row(f"errors_lm_135m_{pieces}_pieces", lab, base, 5.0, "transformers' model + cross-entropy")
            failed |= lab > 5.0
        if "classify" in only:
            bert = load(bert_base_classifier(Path(tmp) / "bert-base-classifier"))
            lines = [" ".join(line.split()[:LINE_WORDS]) for line in WIKI.read_text(encoding="utf-8").splitlines()
                     if line.strip()][:500]
            source = inputs.EvalText("wiki-500.tsv", "".join(f"{'POSITIVE' if i % 2 else 'NEGATIVE'}\t{line}\n"
                                                             for i, line in enumerate(lines)), "bench")
            pairs = inputs.classifier_pairs(source, bert.labels)

            def baseline_classify():
                with torch.no_grad():
                    out = []
                    for start in range(0, len(pairs), 32):
                        enc = bert.tokenizer.inner([t for _, t in pairs[start: start + 32]], padding=True,
                                                   truncation=True, return_tensors="pt")
                        out.append(torch.softmax(bert.model.inner(**enc).logits, -1))
                    return torch.cat(out)

            lab, _ = timed(lambda: classify.score_classifier(bert.model, bert.tokenizer, bert.labels, pairs), 1)
            base, _ = timed(baseline_classify, 1)
            row("errors_classifier_bert_base_500_lines", lab, base, 10.0, "transformers' tokenizer + model, batch 32")
            failed |= lab > 10.0
        if "trace" in only:
            words = PROMPT
            while len(tokenizer.encode(words)) > 16:
                words = words.rsplit(" ", 1)[0]
            first: list[float] = []  # the bar drawn (the first call), then the first pass done
            rows_run: list[int] = []

            def lab_trace():
                first.clear()
                start = time.perf_counter()

                def progress(done, total):
                    if not first or (len(first) == 1 and done > 0):
                        first.append(time.perf_counter() - start)
                    rows_run[:] = [total]
                return prompts.trace_prompt(loaded, words, SUBJECT, samples=args.samples, progress=progress)

            start = time.perf_counter()
            q, ct = lab_trace()  # one run: it is the slow row
            lab = time.perf_counter() - start
            rows = rows_run[0]

            def baseline_rows():
                with torch.no_grad():
                    idx = torch.tensor([q.ids])
                    step = max(1, CHUNK_TOKENS // len(q.ids))
                    for lo in range(0, rows, step):
                        model.inner.model(idx.expand(min(step, rows - lo), -1))

            base = time.perf_counter()
            baseline_rows()
            base = time.perf_counter() - base
            print(f"135M trace: {len(q.ids)} pieces, {ct.samples} noise draws, {rows:,} rows; the bar after "
                  f"{first[0]:.2f} s, its first step after {first[1]:.2f} s; {ct.sentence()}")
            row(f"where_from_trace_135m_{ct.samples}_draws", lab, base, 20.0, "the same rows unpatched")
            print(f"RESULT where_from_trace_135m_first_progress measured={first[0]:.3f} target<=1 "
                  f"pass={str(first[0] <= 1).lower()}")
            failed |= lab > 20.0 or first[0] > 1
        if "bundled" in only:
            bundled = load(BUNDLED)
            question = "Where was Ada Lovelace born?"
            lab, (q, ct) = timed(lambda: prompts.trace_prompt(bundled, question, "Ada Lovelace"), args.repeats)

            def one_pass():
                with torch.no_grad():
                    bundled.model(torch.tensor([q.ids]))

            base, _ = timed(one_pass, args.repeats)
            row("where_from_trace_bundled", lab, base, 1.0, "one plain pass of the prompt")
            failed |= lab > 1.0
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
