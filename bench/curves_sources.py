"""A long TensorBoard run on the Training curves page: opening it and redrawing it (issues 53 and 61).

    python -m bench.curves_sources [--points 100000] [--repeats 5]

One event file of `--points` scalars (`train/loss`, with spikes) written by torch's SummaryWriter, then, taking
turns so each sees the same machine load:
- open: `core.lens.history.sources.read_paths` on the folder as the page and `python -m core.lens.history` call it
  (every point, the tidy table), through TensorBoard's data server, a new server each time (a folder not opened
  before, in a warm process: the binary, the imports and the page's caches warm);
- the data server alone: the same server started, loaded and asked for the run's points (ReadScalars into arrays),
  no table: what the open costs at least; the open's ratio to it is the overhead of ours (target <= 1.5x);
- today's reader: `read_paths(..., fast=False)`, TensorBoard's Python record reader, every point;
- TensorBoard's own `EventAccumulator` over the same folder keeping every point (`size_guidance={"scalars": 0}`; its
  default keeps a reservoir of 1,000), then its `Scalars` list;
- reopen: the same folder again, its server kept (the registry's): the table only;
- redraw: what a smoothing or axis change does, `build_curves` (smoothing 0.9, min/max to 2,000 slices) and the
  figure as JSON, on the step axis and on relative time (its target, issue 53's, at 100,000 points).
Medians are printed with ratios; targets (issue 61): open <= 0.5 s up to 100,000 points, <= 3 s up to 1,000,000
(beyond, 3 s a million), open / server alone <= 1.5x from 100,000 points on; redraw <= 0.3 s at 100,000
(issue 53). Needs requirements-tensorboard.txt.
The machine is shared: the load average is printed with the numbers.
"""

from __future__ import annotations

import argparse
import math
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

REDRAW_TARGET_S, SERVER_RATIO_TARGET = 0.3, 1.5


def open_target_s(points: int) -> float:
    return 0.5 if points <= 100_000 else 3.0 * max(1.0, points / 1_000_000)


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
    """A folder this process has no server for (call `forget` first): its data server started, loaded, read."""
    from core.lens.history.sources import read_paths

    return read_paths([folder], labels=["run"])


def forget() -> None:
    """Stop every data server, outside the timed call: the next open starts its folder's server afresh."""
    from core.lens.history import data_server

    data_server.shutdown_all()


def open_python(folder: Path):
    from core.lens.history.sources import read_paths

    return read_paths([folder], labels=["run"], fast=False)


def server_alone(folder: Path) -> int:
    """The data server by itself: started on the folder, loaded, every point of the run read into arrays."""
    from core.lens.history.data_server import DataServer

    server = DataServer(folder)
    try:
        (run,) = server.read().values()
        return sum(len(steps) for steps, _, _ in run.tags.values())
    finally:
        _closing.append(server)  # stopped after the timed call, as the open's server is


_closing: list = []


def close_servers() -> None:
    while _closing:
        _closing.pop().close()


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


def app_open(run_file: Path, work: Path, repeats: int) -> dict[str, float]:
    """The Training curves page in a warm app (AppTest: app.py, the curves page drawn once, a first folder opened):
    a folder typed that this process has not read (a new folder each time, holding a hard link to the run's event
    file), until its run is listed; then the run picked, until its chart is drawn. Through the data server, and
    with it made missing (today's reader), taking turns. Medians in seconds."""
    import os

    from streamlit.testing.v1 import AppTest

    from bench.tiny_checkpoints import tiny_checkpoint_folder
    from core.lens.history import data_server

    root = Path(__file__).resolve().parent.parent
    checkpoints = tiny_checkpoint_folder(work / "ckpts")
    allowed = work / "allowed"
    os.environ["ATTENTION_LAB_CHECKPOINTS"], os.environ["ATTENTION_LAB_ALLOWED_DIRS"] = str(checkpoints), str(allowed)
    at = AppTest.from_file(str(root / "app.py"), default_timeout=300)
    at.run()
    at.switch_page("pages/curves.py")
    at.run()
    real_binary = data_server.binary

    def missing() -> str:
        raise data_server.Unavailable("made missing by bench.curves_sources")

    times: dict[str, list[float]] = {"app open (server)": [], "app draw (server)": [], "app open (python)": [],
                                     "app draw (python)": []}
    count = 0
    for i in range(repeats + 1):  # the first round warms the page's code paths; not counted
        for how in ("server", "python"):
            count += 1
            folder = allowed / f"copy{count}" / "run"
            folder.mkdir(parents=True)
            os.link(run_file, folder / run_file.name)
            data_server.binary = real_binary if how == "server" else missing
            data_server.shutdown_all()
            try:
                start = time.perf_counter()
                at.text_input(key="curves_folder").input(str(folder.parent)).run()
                opened = time.perf_counter() - start
                name = f"copy{count}/run"
                assert name in at.multiselect(key="curves_runs").options, at.multiselect(key="curves_runs").options
                assert not at.exception, [e.message for e in at.exception]
                start = time.perf_counter()
                at.multiselect(key="curves_runs").set_value([name]).run()
                drawn = time.perf_counter() - start
                assert not at.exception and at.get("plotly_chart"), [e.message for e in at.exception]
            finally:
                data_server.binary = real_binary
            if i:
                times[f"app open ({how})"].append(opened)
                times[f"app draw ({how})"].append(drawn)
    data_server.shutdown_all()
    return {k: statistics.median(v) for k, v in times.items()}


def children_cpu() -> float:
    """CPU seconds of this process's ended children (a data server counts once it has been stopped and waited)."""
    import resource

    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def timed(call, cpu: list[float] | None = None) -> tuple[float, object]:
    """Wall seconds of one call, and the call's result; `cpu` gets this process's CPU seconds for it, which other
    jobs on a shared machine inflate less than the wall clock."""
    start, start_cpu = time.perf_counter(), time.process_time()
    result = call()
    if cpu is not None:
        cpu.append(time.process_time() - start_cpu)
    return time.perf_counter() - start, result


def main() -> None:
    import os

    from core.lens.history import data_server
    from core.lens.history.sources import read_paths

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--points", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--folder", help="write the run here once and reuse it (a million points take minutes to "
                                         "write); default: a temporary folder")
    parser.add_argument("--app", action="store_true",
                        help="also the Training curves page in a warm app (AppTest): a new folder typed, its run drawn")
    parser.add_argument("--no-accumulator", action="store_true",
                        help="leave out TensorBoard's EventAccumulator (~35 s a million points); today's reader stays")
    args = parser.parse_args()
    try:
        data_server.binary()
    except data_server.Unavailable as exc:
        print(exc)
        print("RESULT curves_sources measured=no-data-server target=open<=0.5s pass=false")
        raise SystemExit(1) from None
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(args.folder or tmp)
        folder, marker = base / f"run-{args.points}", base / f"run-{args.points}.written"
        if not marker.exists():
            write_run(folder, args.points)
            marker.write_text("written by bench.curves_sources\n")
        forget()
        found = open_ours(folder)  # warm-up: imports, the binary's pages
        assert len(found.frame) == args.points and not [n for n in found.notes if "fast loader" in n], found.notes
        python = open_python(folder)
        assert found.frame.equals(python.frame)  # the same table, point for point
        assert server_alone(folder) == args.points
        close_servers()
        if not args.no_accumulator:
            assert open_baseline(folder) == args.points
        redraw(found.frame, "step")
        names = ["open", "server alone", "python reader", "baseline", "reopen", "redraw step", "redraw relative"]
        times: dict[str, list[float]] = {k: [] for k in names}
        cpu: dict[str, list[float]] = {k: [] for k in names}
        server_cpu: dict[str, list[float]] = {"open": [], "server alone": []}
        for _ in range(args.repeats):
            forget()
            before = children_cpu()
            seconds, found = timed(lambda: open_ours(folder), cpu["open"])
            times["open"].append(seconds)
            times["reopen"].append(timed(lambda: read_paths([folder], labels=["run"]), cpu["reopen"])[0])
            forget()
            server_cpu["open"].append(children_cpu() - before)
            before = children_cpu()
            times["server alone"].append(timed(lambda: server_alone(folder), cpu["server alone"])[0])
            close_servers()
            server_cpu["server alone"].append(children_cpu() - before)
            times["python reader"].append(timed(lambda: open_python(folder), cpu["python reader"])[0])
            if not args.no_accumulator:
                times["baseline"].append(timed(lambda: open_baseline(folder), cpu["baseline"])[0])
            times["redraw step"].append(timed(lambda f=found.frame: redraw(f, "step"))[0])
            times["redraw relative"].append(timed(lambda f=found.frame: redraw(f, "relative"))[0])
        app = app_open(next(folder.glob("events.out.tfevents.*")), Path(tmp) / "app", args.repeats) if args.app \
            else {}
    median = {k: statistics.median(v) if v else math.nan for k, v in times.items()}
    median_cpu = {k: statistics.median(v) if v else math.nan for k, v in cpu.items()}
    median_server = {k: statistics.median(v) for k, v in server_cpu.items()}
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"One TensorBoard run of {args.points:,} scalar points, median of {args.repeats} (wall; CPU of this "
          f"process; CPU of the data server); load average {load} on {os.cpu_count()} cores (shared):")
    vs_server = median["open"] / median["server alone"]
    vs_python = median["open"] / median["python reader"]
    rows = [("open (read_paths, data server, tidy table)", "open", ""),
            ("data server alone (start, load, read)", "server alone", f"   open / this {vs_server:.2f}x"),
            ("today's reader (read_paths, Python)", "python reader", f"   open / this {vs_python:.2f}x"),
            ("TensorBoard's EventAccumulator (all)", "baseline",
             f"   open / this {median['open'] / median['baseline']:.2f}x"),
            ("reopen (its server kept, loaded)", "reopen", "")]
    for label, key, extra in rows:
        if not times[key]:
            print(f"  {label:44s} (left out: --no-accumulator)")
            continue
        server = f"   server cpu {median_server[key]:.3f} s" if key in median_server else ""
        print(f"  {label:44s} {median[key]:7.3f} s   cpu {median_cpu[key]:.3f} s{server}{extra}")
    print(f"  redraw, step axis (smoothing 0.9)            {median['redraw step']:7.3f} s")
    print(f"  redraw, relative time                        {median['redraw relative']:7.3f} s")
    for key, value in app.items():
        print(f"  {key + ' (AppTest, warm)':44s} {value:7.3f} s")
    worst_redraw = max(median["redraw step"], median["redraw relative"])
    target = open_target_s(args.points)
    redraw_ok = worst_redraw <= REDRAW_TARGET_S or args.points > 100_000  # issue 53's target: 100,000 points
    app_open_s = app.get("app open (server)", math.nan)
    # the ratio's target is stated for runs of 100,000 points and more: on fewer, fixed costs (the table, one more
    # request) weigh more than the reading both share (a smoke run of 20,000: ~1.5x)
    ratio_ok = vs_server <= SERVER_RATIO_TARGET or args.points < 100_000
    passed = median["open"] <= target and redraw_ok and ratio_ok and not app_open_s > target
    redraw_target = f"redraw<={REDRAW_TARGET_S}s," if args.points <= 100_000 else ""
    ratio_target = f",vs_server<={SERVER_RATIO_TARGET}x" if args.points >= 100_000 else ""
    print(f"RESULT curves_sources measured=open:{median['open']:.2f}s,redraw:{worst_redraw:.2f}s,"
          f"vs_server:{vs_server:.2f}x,vs_python_reader:{vs_python:.2f}x"
          f"{f',app_open:{app_open_s:.2f}s' if app else ''} "
          f"target=open<={target:g}s{',' + redraw_target.rstrip(',') if redraw_target else ''}{ratio_target} "
          f"pass={'true' if passed else 'false'}")


if __name__ == "__main__":
    main()
