"""Error analysis scoring speed: the Errors page's and `python -m core.lens.errors`' core calls, each against the
trainer's own evaluation of the same file in the same run (the baseline: `core.train.trainer.evaluate_loss` for a
classifier, `core.lens.lm_eval.score_file` for a language model).

    python -m bench.errors [--repeats 5]

Rows (median of --repeats after one warm-up call; the box is shared, so read the ratio too):
- names_test.tsv (200 names) on checkpoints/names-pretrained: `score_classifier` (target <= 0.5 s);
- PA2 test_CLS.tsv (500 speeches, block 32) on a PA2-shaped classifier (word vocabulary of the PA2 training files,
  n_embd 64, 4 layers, 2 heads, block 32: the course's shape) with untrained weights, since the time of a forward
  pass does not depend on the values of the weights (target <= 2 s);
- per-piece scoring of PA2 test_LM_obama.txt on a PA2-shaped word language model, untrained likewise (target
  <= 5 s).
The PA2 rows are skipped when ../shared/pa2/ is absent. Exit status 1 when a measured row misses its target.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PA2 = ROOT.parent / "shared" / "pa2"
TARGETS = {"names_test.tsv": 0.5, "test_CLS.tsv": 2.0, "test_LM_obama.txt": 5.0}


def timed(call: Callable[[], object], repeats: int) -> float:
    call()  # warm: imports, first forward pass
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def pa2_model(head: str, tokenizer, n_classes: int = 0):
    import torch

    from core.model.config import ModelConfig
    from core.model.transformer import Transformer

    torch.manual_seed(0)
    config = ModelConfig(vocab_size=tokenizer.vocab_size, block_size=32, n_layer=4, n_head=2, n_embd=64,
                         dropout=0.0, causal=head == "lm", head="classifier" if head == "classifier" else "lm",
                         n_classes=n_classes, pooling="mean")
    return Transformer(config).eval()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    import torch

    from core.data.datasets import ClassificationDataset
    from core.io import checkpoint
    from core.lens.errors import classify, inputs, lm
    from core.lens.lm_eval import score_file
    from core.model.tokenizer import VocabularyChoice
    from core.train.trainer import evaluate_loss

    torch.set_num_threads(1)  # the shared box: one core, as the targets assume
    rows = []

    def classifier_row(name: str, model, tokenizer, labels, path: Path) -> None:
        pairs = inputs.classifier_pairs(inputs.read_eval_path(path), labels)
        ours = timed(lambda: classify.score_classifier(model, tokenizer, labels, pairs), args.repeats)
        base = timed(lambda: evaluate_loss(model, ClassificationDataset(pairs, tokenizer, model.config.block_size,
                                                                        labels), accuracy=True), args.repeats)
        rows.append((f"{path.name}: {name} ({len(pairs)} examples)", ours, base, TARGETS[path.name]))

    names = ROOT / "checkpoints" / "names-pretrained.safetensors"
    if names.is_file():
        loaded = checkpoint.load(names)
        classifier_row("names-pretrained", loaded.model, loaded.tokenizer, loaded.labels,
                       ROOT / "data" / "knowledge" / "names_test.tsv")
    else:
        print("names-pretrained is not in checkpoints/: row skipped")
    if (PA2 / "test_CLS.tsv").is_file():
        train = [PA2 / "train_CLS.tsv", PA2 / "train_LM.txt"]
        words = VocabularyChoice("word", files=tuple(map(str, train))).build(
            "\n".join(p.read_text(encoding="utf-8") for p in train))
        labels = ["0", "1", "2"]
        classifier_row("PA2-shaped classifier, untrained", pa2_model("classifier", words, 3), words, labels,
                       PA2 / "test_CLS.tsv")
        text = PA2 / "test_LM_obama.txt"
        model = pa2_model("lm", words)
        source = inputs.read_eval_path(text)
        ours = timed(lambda: lm.score_lm(model, words, [(source.name, source.text)]), args.repeats)
        base = timed(lambda: score_file(model, words, text), args.repeats)
        rows.append((f"{text.name}: PA2-shaped word LM, untrained, per piece", ours, base, TARGETS[text.name]))
    else:
        print(f"the PA2 files are not in {PA2}: their rows are skipped")
    print(f"{'what':<62} {'ours':>8} {'trainer':>8} {'ratio':>6} {'target':>7}")
    missed = []
    for what, ours, base, target in rows:
        ok = ours <= target
        missed += [] if ok else [what]
        verdict = 'pass' if ok else 'MISS'
        print(f"{what:<62} {ours:>7.3f}s {base:>7.3f}s {ours / base:>5.2f}x {target:>6.1f}s  {verdict}")
    worst = max(rows, key=lambda r: r[1] / r[3]) if rows else None
    measured = f"{worst[1]:.3f}s({worst[0].split(':')[0]})" if worst else "none"
    print(f"RESULT errors measured={measured} target=names<=0.5s,test_CLS<=2s,LM_pieces<=5s "
          f"pass={'false' if missed or not rows else 'true'}")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
