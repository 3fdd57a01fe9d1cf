"""A long TensorBoard run on the Training curves page: opening it and redrawing it (issue 53).

    python -m bench.curves_sources [--points 100000] [--repeats 5]

One event file of `--points` scalars (`train/loss`, with spikes) written by torch's SummaryWriter, then, taking
turns so each sees the same machine load:
- open: `core.lens.history.sources.read_paths` on the folder (TensorBoard's record reader, every point, the tidy
  table); baseline: TensorBoard's own `EventAccumulator` over the same folder keeping every point
  (`size_guidance={"scalars": 0}`; its default keeps a reservoir of 1,000), then its `Scalars` list;
- redraw: what a smoothing or axis change does, `build_curves` (smoothing 0.9, min/max to 2,000 slices) and the
  figure as JSON, on the step axis and on relative time.
Medians are printed with the ratio to the baseline; targets (issue 53): open <= 1.0 s, redraw <= 0.3 s.
Needs requirements-tensorboard.txt.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

OPEN_TARGET_S, REDRAW_TARGET_S = 1.0, 0.3


def write_run(folder: Path, points: int) -> None:
    from torch.utils.tensorboard import SummaryWriter

    rng = np.random.default_rng(0)
    loss = 3.0 * np.exp(-np.arange(points) / (points / 5)) + 0.5 + rng.normal(scale=0.05, size=points)
    loss[rng.integers(0, points, 20)] += 2.0
    writer = SummaryWriter(str(folder), max_queue=10_000, flush_secs=3600)
    for step, value in enumerate(loss):
        writer.add_scalar("train/loss", float(value), step)
    writer.close()


def open_ours(folder: Path):
    from core.lens.history.sources import read_paths

    return read_paths([folder], labels=["run"])


def open_baseline(folder: Path) -> int:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    accumulator = EventAccumulator(str(folder), size_guidance={"scalars": 0})
    accumulator.Reload()
    return len(accumulator.Scalars("train/loss"))


def redraw(frame, x: str) -> int:
    from core.figures.curves import training_curves_figure
    from core.lens.history.curves import build_curves

    plot = build_curves(frame, ["run"], "loss", x, smoothing=0.9)
    return len(training_curves_figure(plot).to_json())


def timed(call, cpu: list[float] | None = None) -> tuple[float, object]:
    """Wall seconds of one call, and the call's result; `cpu` gets this process's CPU seconds for it, which other
    jobs on a shared machine inflate less than the wall clock."""
    start, start_cpu = time.perf_counter(), time.process_time()
    result = call()
    if cpu is not None:
        cpu.append(time.process_time() - start_cpu)
    return time.perf_counter() - start, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--points", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "run"
        write_run(folder, args.points)
        found = open_ours(folder)  # warm-up: imports
        assert len(found.frame) == args.points, len(found.frame)
        assert open_baseline(folder) == args.points
        redraw(found.frame, "step")
        times: dict[str, list[float]] = {"open": [], "baseline": [], "redraw step": [], "redraw relative": []}
        cpu: dict[str, list[float]] = {"open": [], "baseline": []}
        for _ in range(args.repeats):
            seconds, found = timed(lambda: open_ours(folder), cpu["open"])
            times["open"].append(seconds)
            times["baseline"].append(timed(lambda: open_baseline(folder), cpu["baseline"])[0])
            times["redraw step"].append(timed(lambda f=found.frame: redraw(f, "step"))[0])
            times["redraw relative"].append(timed(lambda f=found.frame: redraw(f, "relative"))[0])
    median = {k: statistics.median(v) for k, v in times.items()}
    median_cpu = {k: statistics.median(v) for k, v in cpu.items()}
    print(f"One TensorBoard run of {args.points:,} scalar points, median of {args.repeats} "
          "(wall; CPU of this process):")
    print(f"  open (read_paths, tidy table)          {median['open']:7.3f} s   cpu {median_cpu['open']:.3f} s")
    print(f"  TensorBoard's EventAccumulator (all)   {median['baseline']:7.3f} s   cpu {median_cpu['baseline']:.3f} s"
          f"   ratio ours / TensorBoard {median['open'] / median['baseline']:.2f}x")
    print(f"  redraw, step axis (smoothing 0.9)      {median['redraw step']:7.3f} s")
    print(f"  redraw, relative time                  {median['redraw relative']:7.3f} s")
    worst_redraw = max(median["redraw step"], median["redraw relative"])
    passed = median["open"] <= OPEN_TARGET_S and worst_redraw <= REDRAW_TARGET_S
    print(f"RESULT curves_sources measured=open:{median['open']:.2f}s,redraw:{worst_redraw:.2f}s,"
          f"vs_tensorboard:{median['open'] / median['baseline']:.2f}x "
          f"target=open<={OPEN_TARGET_S}s,redraw<={REDRAW_TARGET_S}s pass={'true' if passed else 'false'}")


if __name__ == "__main__":
    main()
