"""Birthplace evaluation: batched greedy decoding with the KV cache against the assignment's loop.

    python -m bench.birthplace_eval [--checkpoint PATH] [--limit N] [--questions TSV]

Same checkpoint, same run: `core.lens.probe.evaluation.predict_birthplaces` (prompts grouped by length, batched,
cached) against `predict_birthplaces_one_by_one` (one question at a time, no cache: how the CS224N
assignment evaluates). The uncached loop is slow on a CPU, so `--limit N` times it on the first N
questions only; both decoders are compared on those N (measured), and the loop's time for the whole
file is extrapolated linearly (labelled as such). The target applies to the whole file (measured without
--limit, extrapolated with it). Exit status 1 if any prediction differs or the speedup misses the target.

Default checkpoint: checkpoints/birth-vanilla-pretrained.safetensors when present, else a tiny model
trained here in a temporary folder (the output says so).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_CHECKPOINT = ROOT / "checkpoints" / "birth-vanilla-pretrained.safetensors"
DEFAULT_QUESTIONS = ROOT / "data" / "world" / "birth_dev.tsv"
TARGET_SPEEDUP = 30.0


def train_tiny_checkpoint(folder: Path, steps: int = 150) -> Path:
    """A small birthplace model finetuned (no pretraining) on the demo world, for machines without the
    bundled checkpoints. Its answers are mostly guesses; the decoders must still agree exactly."""
    import torch

    from core.data.datasets import NameDataset, read_text, read_tsv_pairs
    from core.io import checkpoint
    from core.model.config import ModelConfig
    from core.model.tokenizer import CharTokenizer
    from core.model.transformer import Transformer

    world = ROOT / "data" / "world"
    tokenizer = CharTokenizer.from_corpus(read_text(world / "wiki.txt"))
    pairs = read_tsv_pairs(world / "birth_places_train.tsv")
    torch.manual_seed(0)
    model = Transformer(ModelConfig(vocab_size=tokenizer.vocab_size, block_size=128, n_layer=2, n_head=4,
                                    n_embd=64, dropout=0.0))
    dataset = NameDataset(pairs, tokenizer, 128)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    generator = torch.Generator().manual_seed(0)
    model.train()
    for _ in range(steps):
        batch = torch.randint(len(dataset), (64,), generator=generator).tolist()
        x = torch.stack([dataset[i][0] for i in batch])
        y = torch.stack([dataset[i][1] for i in batch])
        _, loss = model(x, y)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
    model.eval()
    return checkpoint.save(folder / "tiny-birthplace-bench.safetensors", model, tokenizer, "birthplace",
                           command=f"bench.birthplace_eval tiny model, {steps} steps", seed=0)


def timed(function, repeats: int = 1):
    """(result of the last call, median seconds over `repeats` calls)."""
    times, result = [], None
    for _ in range(repeats):
        started = time.perf_counter()
        result = function()
        times.append(time.perf_counter() - started)
    return result, statistics.median(times)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.birthplace_eval", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkpoint", type=Path, help=f"default: {DEFAULT_CHECKPOINT.relative_to(ROOT)} "
                                                        "if present, else a tiny model trained here")
    parser.add_argument("--questions", type=Path, default=DEFAULT_QUESTIONS)
    parser.add_argument("--limit", type=int, default=None,
                        help="time the uncached loop on the first N questions only (default: all)")
    parser.add_argument("--repeats", type=int, default=3, help="batched runs; the median is reported")
    parser.add_argument("--threads", type=int, default=1,
                        help="torch CPU threads (default 1: a shared machine)")
    args = parser.parse_args(argv)

    import torch

    from core.data.datasets import read_tsv_pairs
    from core.io import checkpoint
    from core.lens.probe.evaluation import predict_birthplaces, predict_birthplaces_one_by_one

    torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory() as tmp:
        path = args.checkpoint or (DEFAULT_CHECKPOINT if DEFAULT_CHECKPOINT.exists() else None)
        if path is None:
            print(f"{DEFAULT_CHECKPOINT.relative_to(ROOT)} is not here: training a tiny model in a temporary "
                  "folder (2 layers, width 64, 150 steps, no pretraining); the speedup of the bundled model "
                  "will differ.", flush=True)
            started = time.perf_counter()
            path = train_tiny_checkpoint(Path(tmp))
            print(f"  trained in {time.perf_counter() - started:.1f} s", flush=True)
        loaded = checkpoint.load(path)
        questions = [q for q, _ in read_tsv_pairs(args.questions)]
        n = len(questions) if args.limit is None else max(1, min(args.limit, len(questions)))
        subset = questions[:n]
        model, tokenizer, cfg = loaded.model, loaded.tokenizer, loaded.config
        print(f"checkpoint: {Path(path).name} ({cfg.n_layer} layers, {cfg.n_head} heads, width {cfg.n_embd}, "
              f"{cfg.attention} attention, {cfg.positional} positions); questions: {args.questions.name} "
              f"({len(questions)}); torch threads: {torch.get_num_threads()}", flush=True)

        predict_birthplaces(model, tokenizer, subset[:8])  # warm-up: first-call allocations
        batched_all, t_batched_all = timed(lambda: predict_birthplaces(model, tokenizer, questions),
                                           args.repeats)
        if n == len(questions):
            batched, t_batched = batched_all, t_batched_all
        else:
            batched, t_batched = timed(lambda: predict_birthplaces(model, tokenizer, subset), args.repeats)
        print(f"batched + KV cache:          {len(questions)} questions in {t_batched_all:8.2f} s "
              f"(median of {args.repeats})", flush=True)
        one_by_one, t_loop = timed(lambda: predict_birthplaces_one_by_one(model, tokenizer, subset))

    same = batched == one_by_one and batched_all[:n] == batched
    differing = [i for i, (a, b) in enumerate(zip(batched, one_by_one)) if a != b]
    print(f"one by one, no cache:        {n} questions in {t_loop:8.2f} s")
    if n == len(questions):
        speedup, how = t_loop / t_batched_all, "measured"
    else:
        print(f"batched + KV cache:          {n} questions in {t_batched:8.2f} s (the same {n}; small "
              f"length groups, so batching gains less than on the whole file)")
        print(f"measured speedup on the first {n} questions: {t_loop / t_batched:6.1f}x")
        estimate = t_loop * len(questions) / n
        print(f"EXTRAPOLATED loop time for all {len(questions)} questions: ~{estimate:.1f} s "
              "(linear in questions)")
        speedup, how = estimate / t_batched_all, "EXTRAPOLATED"
    print(f"speedup on all {len(questions)} questions ({how}): {speedup:6.1f}x  "
          f"(target >= {TARGET_SPEEDUP:.0f}x)")
    print(f"predictions identical on {n} questions: {'yes' if same else 'NO'}")
    if not same:
        for i in differing[:5]:
            print(f"  question {i}: batched {batched[i]!r} vs one by one {one_by_one[i]!r}")
        return 1
    if speedup < TARGET_SPEEDUP:
        print(f"target missed: {speedup:.1f}x < {TARGET_SPEEDUP:.0f}x")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
