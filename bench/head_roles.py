"""Head roles (issue 54): the five role scores of every head on the default probe (up to 100 segments of 20 tokens).

    python -m bench.head_roles [--repeats 3] [--folder DIR] [--skip-135m]

Measured, in this process (what a page pays the first time it asks, the model already open, one thread as app.py
runs): `core.lens.heads.head_roles` as the page calls it (attention-only batched traces, rows in doubling steps
from 5 until every score's standard error is below 0.01 at its 95% upper confidence bound, at most 100) on the
bundled `induction` and `lm-learned`, and on a 135M-parameter LLaMA-shaped folder (bench.hf_135m builds it:
SmolLM2-135M's shape, random weights, ~540 MB, unless --folder has it). Beside it, once: the same call on all 100 rows
(`stderr=0`), and how far its scores are from the page's. Baseline, same run: the same scores from one `trace` per
probe row over the rows the page used (the plain loop a notebook would write, logits included), so the ratio says
what batching and skipping the output head buy; its scores must equal the page's.
Targets (issue 54): <= 0.5 s for a bundled model, <= 3 s for the 135M folder.
`RESULT head_roles measured=<worst ratio of median to target> target<=1 pass=...`.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parent.parent
TARGETS = {"induction": 0.5, "lm-learned": 0.5, "135m": 3.0}


def one_row_at_a_time(model, tokenizer, length: int, samples: int, seed: int, rows: int) -> dict[str, np.ndarray]:
    """The scores over the probe's first `rows` rows (of `samples` drawn), one `trace` per row."""
    from core.lens import heads
    from core.lens.trace import trace

    probe = heads.probe_for(model, tokenizer, length, samples, seed)
    sums: dict[str, np.ndarray] = {}
    for row in probe.rows[:rows]:
        attention = trace(model, row.tolist()).attention[:, None]  # (L, 1, H, T, T)
        for role, value in heads.scores_from_attention(attention, row[None], probe.queries).items():
            sums[role] = sums.get(role, 0) + value
    return {role: value / (rows * probe.length) for role, value in sums.items()}


def timed(fn, repeats: int) -> tuple[float, object]:
    times, out = [], None
    for _ in range(repeats):
        started = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - started)
    return statistics.median(times), out


def main(argv: list[str] | None = None) -> int:
    from core.io.checkpoint import load
    from core.lens.heads import DEFAULT_SAMPLES, DEFAULT_STDERR, head_roles

    parser = argparse.ArgumentParser(prog="python -m bench.head_roles", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--folder", type=Path, default=None, help="a 135M folder built before (bench.hf_135m)")
    parser.add_argument("--skip-135m", action="store_true", help="only the bundled models")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    models = {name: ROOT / "checkpoints" / f"{name}.safetensors" for name in ("induction", "lm-learned")}
    if not args.skip_135m:
        from bench.hf_135m import NAME, build

        folder = args.folder or Path(tempfile.gettempdir()) / "attention-lab-bench" / NAME
        folder.parent.mkdir(parents=True, exist_ok=True)
        models["135m"] = build(folder)
    page = dict(samples=DEFAULT_SAMPLES, seed=0, stderr=DEFAULT_STDERR)  # what pages/head_roles_view asks
    worst = 0.0
    for name, path in models.items():
        loaded = load(path)
        model, tokenizer = loaded.model, loaded.tokenizer
        head_roles(model, tokenizer, **page)  # warm: the first pass allocates
        ours, roles = timed(lambda m=model, t=tokenizer: head_roles(m, t, **page), args.repeats)
        every_time, every = timed(lambda m=model, t=tokenizer: head_roles(m, t, samples=DEFAULT_SAMPLES, seed=0), 1)
        loop, reference = timed(lambda m=model, t=tokenizer, n=roles.samples:
                                one_row_at_a_time(m, t, 20, DEFAULT_SAMPLES, 0, n), max(1, args.repeats // 2))
        gap = max(float(np.abs(roles.scores[r] - reference[r]).max()) for r in roles.scores)
        off = max(float(np.abs(roles.scores[r] - every.scores[r]).max()) for r in roles.scores)
        L, H = roles.shape
        print(f"{name}: {L}x{H} heads, probe of {roles.length} tokens x 2: as the page asks {ours:.3f} s on "
              f"{roles.samples} of {roles.drawn} rows (largest standard error {roles.stderr:.4f}); all "
              f"{every.samples} rows {every_time:.3f} s (largest standard error {every.stderr:.4f}; largest "
              f"difference from the page's scores {off:.4f}); one row at a time over the page's rows {loop:.3f} s, "
              f"ratio {loop / ours:.1f}x, largest score difference {gap:.1e}; target <= {TARGETS[name]} s",
              flush=True)
        worst = max(worst, ours / TARGETS[name])
    print(f"RESULT head_roles measured={worst:.2f} target<=1 pass={'true' if worst <= 1 else 'false'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
