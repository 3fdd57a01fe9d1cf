"""Where a birthplace pretraining step's time goes, and how much of it teaches a fact (issue 27).

    python -m bench.knowledge_throughput [--steps 8] [--threads 2] [--corpus data/knowledge/wiki.txt]

Four ways to feed the same corpus to the bundled birthplace shape (2 layers x 128, 4 heads), each a full
training step (forward, loss, backward, AdamW) on batches of 64 built by the project's own datasets and
loader, alternating step by step in one run so that all see the same machine load:

- `char span, block 128`: the assignment's path (characters, span corruption, every row padded to 128);
- `bpe span, block 64`: the same objective on 2,000 subword pieces, rows padded to 64;
- `bpe span, trimmed`: the same batches cut to their longest row (`trim_to_longest`, the loss unchanged);
- `bpe lm, packed`: next-token prediction over documents packed end to end (no PAD at all).

Per way: step time, positions/s (every target position the model computes), useful tokens/s (targets
that are not PAD: what the loss learns from), the share of useful positions, the time to build a batch
(done by a background thread during training: off the critical path unless it is the larger), and
documents/s: useful tokens/s divided by the corpus's mean tokens per document, i.e. exposures of a
whole biography per second, the unit knowledge is bought in. The ratio is each way's documents/s over
the assignment's path, from median step times. Target: the bundled way (`bpe lm, packed`) gives at
least 3x the assignment's documents/s. The last line is `RESULT knowledge_throughput measured=<ratio>
target=>=3 pass=<true|false>` for bench.run_all.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

import torch

from core.data.datasets import CharCorruptionDataset, DocumentStreamDataset, TokenCorruptionDataset, read_text
from core.data.loader import _stack, epoch_order
from core.model.config import ModelConfig
from core.model.tokenizer import CharTokenizer, SubwordTokenizer
from core.model.transformer import Transformer

TARGET = 3.0
BUNDLED = "bpe lm, packed"


class Untrimmed(TokenCorruptionDataset):
    trim_to_longest = False


def ways(corpus: str) -> dict[str, tuple]:
    chars = CharTokenizer.from_corpus(corpus)
    pieces = SubwordTokenizer.from_corpus(corpus, 2000)
    return {
        "char span, block 128": (CharCorruptionDataset(corpus, 128, chars), chars),
        "bpe span, block 64": (Untrimmed(corpus, 64, pieces), pieces),
        "bpe span, trimmed": (TokenCorruptionDataset(corpus, 64, pieces), pieces),
        BUNDLED: (DocumentStreamDataset(corpus, 64, pieces), pieces),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.knowledge_throughput", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", default="data/knowledge/wiki.txt")
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    corpus = read_text(args.corpus)
    documents = [line for line in corpus.split("\n") if line.strip()]
    runs = {}
    for name, (dataset, tokenizer) in ways(corpus).items():
        torch.manual_seed(0)
        config = ModelConfig(vocab_size=tokenizer.vocab_size, block_size=dataset.block_size, n_layer=2, n_head=4,
                             n_embd=128, dropout=0.0)
        model = Transformer(config).train()
        per_doc = statistics.mean(len(tokenizer.encode(d)) for d in documents[:500])
        runs[name] = dict(dataset=dataset, model=model, per_doc=per_doc, order=epoch_order(len(dataset), 0),
                          optimizer=torch.optim.AdamW(model.parameters(), lr=1e-3), times=[], build=[],
                          positions=0, useful=0)
    for step in range(args.steps + 1):  # step 0 warms up
        for run in runs.values():
            chunk = run["order"][step * args.batch: (step + 1) * args.batch]
            started = time.perf_counter()
            x, y = _stack(run["dataset"], chunk, pin=False)
            built = time.perf_counter() - started
            started = time.perf_counter()
            _, loss = run["model"](x, y)
            run["optimizer"].zero_grad(set_to_none=True)
            loss.backward()
            run["optimizer"].step()
            elapsed = time.perf_counter() - started
            if step:
                run["times"].append(elapsed)
                run["build"].append(built)
                run["positions"] += y.numel()
                run["useful"] += int((y != 0).sum())
    print(f"{'way':<22} {'step ms':>8} {'build ms':>8} {'positions/s':>12} {'useful/s':>10} {'useful':>7} "
          f"{'tok/doc':>7} {'docs/s':>7} {'ratio':>6}")
    base = None
    ratios = {}
    for name, run in runs.items():
        step = statistics.median(run["times"])
        steps = len(run["times"])
        positions, useful = run["positions"] / steps / step, run["useful"] / steps / step
        docs = useful / run["per_doc"]
        base = base or docs
        ratios[name] = docs / base
        print(f"{name:<22} {1000 * step:8.0f} {1000 * statistics.median(run['build']):8.1f} {positions:12,.0f} "
              f"{useful:10,.0f} {run['useful'] / run['positions']:7.0%} {run['per_doc']:7.1f} {docs:7.1f} "
              f"{ratios[name]:6.2f}")
    measured = ratios[BUNDLED]
    passed = measured >= TARGET
    print(f"torch threads {torch.get_num_threads()}; medians of {args.steps} steps, the ways alternating step by step")
    print(f"RESULT knowledge_throughput measured={measured:.2f} target=>={TARGET:g} pass={str(passed).lower()}")
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
