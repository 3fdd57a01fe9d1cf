"""Probes speed (issue 62): `core.lens.probes.run_probes` for the birthplace world's 1,000 people (the country at the
last piece of "NAME was born in") on checkpoints/birth-vanilla-pretrained, every layer, the forward passes included,
against the baseline measured in the same run: the same 1,000 prompts through the model's own forward (batched
by length the same way, no states kept, no probe). One torch thread, as app.py runs.

    python -m bench.probes [--repeats 3] [--figures]

Target: <= 15 s for the probes (issue 62). `--figures` also prints the issue's figures (k-fold and 80/20 split) for
the pretrained and the finetuned model at both positions.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TARGET_S = 15.0


def timed(call, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def plain_forward(model, tokenizer, source) -> None:
    import torch

    groups: dict[int, list[list[int]]] = {}
    for example in source.examples:
        ids = tokenizer.encode(example.text)
        groups.setdefault(len(ids), []).append(ids)
    with torch.no_grad():
        for rows in groups.values():
            for start in range(0, len(rows), 256):
                model(torch.tensor(rows[start:start + 256]))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--figures", action="store_true")
    args = parser.parse_args(argv)
    import torch

    from core.io.checkpoint import load
    from core.lens import probes

    torch.set_num_threads(1)
    world = ROOT / "data" / "knowledge"
    loaded = load(ROOT / "checkpoints" / "birth-vanilla-pretrained.safetensors")
    source = probes.world_source(world, "country", "prompt")
    plain_forward(loaded.model, loaded.tokenizer, source)  # warm
    baseline = timed(lambda: plain_forward(loaded.model, loaded.tokenizer, source), args.repeats)
    measured = timed(lambda: probes.run_probes(loaded.model, loaded.tokenizer, source), args.repeats)
    print(f"plain forward of {len(source.examples)} prompts (baseline): {baseline:.2f} s")
    print(f"probes, every layer, forward passes included: {measured:.2f} s ({measured / baseline:.1f}x the baseline)")
    if args.figures:
        for name in ("wiki-vanilla-pretrained", "birth-vanilla-pretrained"):
            model = load(ROOT / "checkpoints" / f"{name}.safetensors")
            for at in ("prompt", "name"):
                result, _ = probes.run_probes(model.model, model.tokenizer, probes.world_source(world, "country", at),
                                              name=name)
                cells = "  ".join(f"{r.layer}: {r.accuracy:.3f} (80/20 {r.split_accuracy:.3f}, control "
                                  f"{r.control:.3f}/{r.split_control:.3f})" for r in result.rows)
                print(f"{name} at {at}: majority {result.majority:.3f}  {cells}")
    passed = measured <= TARGET_S
    print(f"RESULT probes measured={measured:.2f}s target=<={TARGET_S:.0f}s pass={'true' if passed else 'false'}")
    return 0 if passed else 1


if __name__ == "__main__":
    raise SystemExit(main())
