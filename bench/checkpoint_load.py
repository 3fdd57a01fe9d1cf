"""A checkpoint's load with and without drawing the model's initial weights first (core.model.meta_device).

    python -m bench.checkpoint_load [--repeats 15]

`core.io.checkpoint.load` builds the model inside `to_be_loaded()`, so no initial weight is drawn only to be
overwritten by the file's. Measured in this process on three bundled checkpoints (a birthplace model, a language
model, a classifier), one torch thread as app.py runs, the two ways taking turns round by round: today's load, and
the same load with the model built as before (every weight drawn). Prints the median ms per load of each and the
ratio. Behaviour (the same weights, torch's random state untouched) is tests/test_meta_device.py's.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
MODELS = ("birth-vanilla-pretrained", "lm-learned", "names-pretrained")


def main(argv: list[str] | None = None) -> int:
    from core.io import checkpoint
    from core.model import meta_device

    parser = argparse.ArgumentParser(prog="python -m bench.checkpoint_load", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=15)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    paths = [ROOT / "checkpoints" / f"{name}.safetensors" for name in MODELS]
    ways = {"weights drawn first (before)": contextlib.nullcontext,
            "built to be loaded (now)": meta_device.to_be_loaded}
    for path in paths:
        checkpoint.load(path)  # warm: file cache, first-use costs
    times: dict[str, list[float]] = {label: [] for label in ways}
    try:
        for _ in range(args.repeats):
            for label, context in ways.items():
                checkpoint.to_be_loaded = context
                started = time.perf_counter()
                for path in paths:
                    checkpoint.load(path)
                times[label].append((time.perf_counter() - started) / len(paths))
    finally:
        checkpoint.to_be_loaded = meta_device.to_be_loaded
    medians = {label: statistics.median(values) for label, values in times.items()}
    for label, value in medians.items():
        print(f"{label}: {1000 * value:.1f} ms per load (median of {args.repeats} rounds of {len(paths)})")
    before, now = medians.values()
    print(f"RESULT checkpoint_load measured={before / now:.2f}x target>=1 "
          f"pass={'true' if now <= before else 'false'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
