"""Every benchmark, one summary table: what `make bench` runs.

    python -m bench.run_all [--only NAME ...] [--quick] [--load] [--timeout 1800]

Each benchmark runs as its own subprocess (its output streams through, prefixed by its name), then
one table: name, measured, target, pass/fail. Exit status 1 if any benchmark missed its target,
failed, timed out or is missing. Benchmarks state their own targets (see bench/README.md); a
benchmark without a stated target passes when it runs to the end.

--quick uses smaller workloads (a smoke test of the suite, not numbers to report); --load adds the
30-session load test through `make serve`'s HAProxy (needs haproxy; minutes).
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULT_LINE = re.compile(r"^RESULT (\S+) measured=(\S+) target=?(\S+) pass=(true|false)\s*$", re.MULTILINE)


@dataclass
class Outcome:
    measured: str
    target: str
    passed: bool


def from_result_line(output: str, returncode: int) -> Outcome | None:
    """Benchmarks written for this runner end with `RESULT name measured=x target=t pass=true|false`."""
    matches = RESULT_LINE.findall(output)
    if not matches:
        return None
    _, measured, target, passed = matches[-1]
    return Outcome(measured, target, passed == "true" and returncode == 0)


def attention_page(output: str, returncode: int) -> Outcome | None:
    """'<checkpoint>: page .. ms, trivial page .. ms, ratio R' per checkpoint: the worst, for context only
    (its old "2x a bare rerun" target is retired in favour of browser_latency's targets)."""
    found = re.findall(r"^(\S+): page .*?ratio ([\d.]+)", output, re.MULTILINE)
    if not found:
        return None
    name, ratio = max(found, key=lambda f: float(f[1]))
    return Outcome(f"{float(ratio):.2f}x page/trivial (worst: {name}, {len(found)} checkpoints)", "none stated",
                   returncode == 0)


def birthplace_eval(output: str, returncode: int) -> Outcome | None:
    found = re.search(r"speedup on all (\d+) questions \((\w+)\):\s+([\d.]+)x\s+\(target >= ([\d.]+)x\)", output)
    if not found:
        return None
    questions, how, speedup, target = found.groups()
    identical = re.search(r"predictions identical on \d+ questions: yes", output) is not None
    note = "" if identical else ", predictions differ"
    return Outcome(f"{float(speedup):.1f}x ({how.lower()}, {questions} questions{note})", f">= {target}x",
                   returncode == 0)


def curves(output: str, returncode: int) -> Outcome | None:
    found = re.search(r"ratio \(every point / bucketed\): ([\d.]+)x time, ([\d.]+)x bytes", output)
    if not found:
        return None
    return Outcome(f"bucketing {found.group(1)}x faster, {found.group(2)}x fewer bytes", "none stated",
                   returncode == 0)


@dataclass
class Benchmark:
    name: str
    module: str
    args: list[str]
    quick_args: list[str]
    parse: Callable[[str, int], Outcome | None]


BENCHMARKS = [
    Benchmark("attention_page", "bench.attention_page", ["--repeats", "7"], ["--repeats", "3"], attention_page),
    Benchmark("browser_latency", "bench.browser_latency", ["--repeats", "5"], ["--repeats", "1", "--only", "attention"],
              from_result_line),
    Benchmark("nanogpt_latency", "bench.nanogpt_latency", ["--repeats", "5"], ["--repeats", "1"], from_result_line),
    Benchmark("birthplace_eval", "bench.birthplace_eval", ["--limit", "100"], ["--limit", "20", "--repeats", "1"],
              birthplace_eval),
    Benchmark("curves", "bench.curves", [], ["--points", "50000", "--repeats", "2"], curves),
    Benchmark("curves_sources", "bench.curves_sources", [], ["--points", "20000", "--repeats", "1"], from_result_line),
    Benchmark("margins", "bench.margins", [], ["--only", "attention", "probe"], from_result_line),
    Benchmark("train_throughput", "bench.train_throughput", [], ["--steps", "4", "--width", "128", "--heads", "4"],
              from_result_line),
    Benchmark("knowledge_throughput", "bench.knowledge_throughput", [], ["--steps", "3"], from_result_line),
    Benchmark("where_from", "bench.where_from", [], ["--repeats", "1", "--limit", "10"], from_result_line),
    Benchmark("errors", "bench.errors", [], ["--repeats", "1"], from_result_line),
    Benchmark("edit", "bench.edit", [], ["--edits", "3", "--sweep-edits", "2"], from_result_line),
    Benchmark("head_roles", "bench.head_roles", [], ["--skip-135m", "--repeats", "1"], from_result_line),
    Benchmark("checkpoint_load", "bench.checkpoint_load", [], ["--repeats", "3"], from_result_line),
    Benchmark("handout", "bench.handout", [], [], from_result_line),
    Benchmark("present", "bench.present", ["--repeats", "3"], ["--repeats", "1"], from_result_line),
    Benchmark("sae", "bench.sae", [], ["--steps", "200", "--pages", "10"], from_result_line),
    Benchmark("probes", "bench.probes", ["--repeats", "3"], ["--repeats", "1"], from_result_line),
]
# Through `make serve`'s proxy, one replica per core, as a class would be served (issue 29).
LOAD = Benchmark("load", "bench.load",
                 ["--sessions", "30", "--duration", "60", "--replicas", str(os.cpu_count() or 1)],
                 ["--sessions", "5", "--duration", "20", "--replicas", "2"], from_result_line)


def run(benchmark: Benchmark, quick: bool, timeout_s: float) -> tuple[Outcome, float]:
    if not (ROOT / (benchmark.module.replace(".", "/") + ".py")).is_file():
        return Outcome("missing", "-", False), 0.0
    command = [sys.executable, "-u", "-m", benchmark.module, *(benchmark.quick_args if quick else benchmark.args)]
    print(f"\n=== {benchmark.name}: {' '.join(command[2:])}", flush=True)
    started = time.perf_counter()
    lines: list[str] = []
    process = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               bufsize=1)
    watchdog = threading.Timer(timeout_s, process.kill)  # also fires when a benchmark hangs silently
    watchdog.start()
    try:
        assert process.stdout is not None
        for line in process.stdout:
            lines.append(line)
            print(f"[{benchmark.name}] {line}", end="", flush=True)
        process.wait()
    finally:
        watchdog.cancel()
    elapsed = time.perf_counter() - started
    if elapsed >= timeout_s and process.returncode != 0:
        return Outcome(f"timed out after {timeout_s:.0f} s", "-", False), elapsed
    outcome = benchmark.parse("".join(lines), process.returncode)
    if outcome is None:
        outcome = Outcome(f"no result (exit {process.returncode})", "-", False)
    return outcome, elapsed


def table(rows: list[tuple[str, Outcome, float]]) -> str:
    header = ("benchmark", "measured", "target", "result", "time")
    body = [(name, o.measured, o.target, "pass" if o.passed else "FAIL", f"{seconds:.0f} s")
            for name, o, seconds in rows]
    widths = [max(len(str(r[i])) for r in [header, *body]) for i in range(len(header))]
    lines = ["  ".join(str(cell).ljust(w) for cell, w in zip(row, widths)).rstrip() for row in [header, *body]]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.run_all", description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="+", metavar="NAME", help="run only these benchmarks")
    parser.add_argument("--quick", action="store_true", help="small workloads: checks the suite runs")
    parser.add_argument("--load", action="store_true", help="add the load test (make serve; haproxy)")
    parser.add_argument("--timeout", type=float, default=1800.0, help="seconds per benchmark")
    args = parser.parse_args(argv)
    chosen = BENCHMARKS + ([LOAD] if args.load else [])
    if args.only:
        known = {b.name: b for b in BENCHMARKS + [LOAD]}
        unknown = sorted(set(args.only) - set(known))
        if unknown:
            parser.error(f"unknown benchmark(s) {', '.join(unknown)}; choose from {', '.join(known)}")
        chosen = [known[name] for name in args.only]
    rows = []
    for benchmark in chosen:
        outcome, seconds = run(benchmark, args.quick, args.timeout)
        rows.append((benchmark.name, outcome, seconds))
    print("\n" + table(rows) + ("\n(--quick: smoke-test workloads, not numbers to report)" if args.quick else ""))
    failed = [name for name, outcome, _ in rows if not outcome.passed]
    if failed:
        print(f"failed: {', '.join(failed)}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
