"""Where the server's time goes on the probe's slowest interactions (issue 45): the probe page through Streamlit's
AppTest, each measured rerun under cProfile (in the script's own thread), its time split into shares.

    python -m bench.where_from_profile [--names 4] [--top 0]

Rows: "open 'Where from'" (closed, then opened: measured is the opening, as bench.browser_latency times it) and
"name, with 'Where from' open (new traces)" (a name not asked yet, so every cache misses). The bundled
checkpoints and the knowledge world, as the app serves them. Shares are of the rerun's profiled time (the box is
shared: compare shares and ratios in one run, not seconds across runs). `--top N` also prints the N functions of
the project with the most cumulative time. Categories overlap where one calls another (the model work inside
"where-from reading" is not in "figures"); "the rest" is the rerun less the named categories that do not nest.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import statistics
import sys
import time
from pathlib import Path

from streamlit.runtime.scriptrunner import script_runner
from streamlit.testing.v1 import AppTest

ROOT = Path(__file__).resolve().parent.parent
NAMES = ["Lise Meitner", "Paul Dirac", "Max Born", "Otto Hahn", "Rosalind Franklin", "Dorothy Hodgkin",
         "Niels Bohr", "Enrico Fermi", "Hedy Lamarr", "Alan Kay", "Edith Clarke", "Hans Bethe"]

# (label, (file suffix, function name) pairs whose cumulative time it is); the top-level ones do not nest
CATEGORIES = [
    ("answers of the 3 models, candidates, attention at the answer (probe_views)",
     [("pages/probe_views.py", "show_example")]),
    ("answers by training step", [("pages/training_steps.py", "show_answers_by_step")]),
    ("where-from view (all of it)", [("pages/where_from_view.py", "question_view")]),
    ("  reading: record, lens, attribution, input attribution",
     [("core/lens/where_from/analyses.py", "read_question"), ("core/lens/where_from/analyses.py", "record"),
      ("core/lens/where_from/analyses.py", "logit_lens"), ("core/lens/where_from/analyses.py", "direct_attribution"),
      ("core/lens/where_from/analyses.py", "input_attribution")]),
    ("  causal trace (3 panels)", [("core/lens/where_from/analyses.py", "causal_trace")]),
    ("  figure building (core.figures.where_from)", [("core/figures/where_from.py", "logit_lens_heatmap"),
                                                     ("core/figures/where_from.py", "attribution_bars"),
                                                     ("core/figures/where_from.py", "causal_trace_panels"),
                                                     ("core/figures/where_from.py", "salience_chips")]),
    ("figures made ready for the browser (for_browser, every chart)", [("core/figures/browser.py", "for_browser")]),
    ("serialisation: st.plotly_chart (plotly to JSON, every chart)",
     [("streamlit/elements/plotly_chart.py", "plotly_chart")]),
    ("st.cache_data hits: unpickling the kept copy", [("streamlit/runtime/caching/cache_data_api.py", "read_result")]),
]
TOP_LEVEL = ("answers of", "answers by", "where-from view (all")


class ThreadProfile:
    """cProfile switched on inside the script runner's thread for each run (AppTest runs the script there)."""

    def __init__(self) -> None:
        self.profile: cProfile.Profile | None = None
        self._original = script_runner.ScriptRunner._run_script

    def install(self) -> None:
        original, holder = self._original, self

        def run_script(runner, rerun_data):
            if holder.profile is None:
                return original(runner, rerun_data)
            holder.profile.enable()
            try:
                return original(runner, rerun_data)
            finally:
                holder.profile.disable()
        script_runner.ScriptRunner._run_script = run_script


def cumulative(stats: pstats.Stats, targets) -> float:
    total = 0.0
    for (file, _, func), (_, _, _, cum, _) in stats.stats.items():
        if any(file.endswith(suffix) and func == name for suffix, name in targets):
            total += cum
    return total


def shares(profile: cProfile.Profile) -> tuple[float, dict[str, float], pstats.Stats]:
    stats = pstats.Stats(profile)
    run = cumulative(stats, [("streamlit/runtime/scriptrunner/exec_code.py", "exec_func_with_error_handling")])
    return run, {label: cumulative(stats, targets) for label, targets in CATEGORIES}, stats


def measured(at: AppTest, probe: ThreadProfile, act) -> tuple[float, float, dict[str, float], pstats.Stats]:
    probe.profile = cProfile.Profile()
    start = time.perf_counter()
    act().run()
    wall = time.perf_counter() - start
    assert not at.exception, [e.message for e in at.exception]
    run, parts, stats = shares(probe.profile)
    probe.profile = None
    return wall, run, parts, stats


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--names", type=int, default=4, help="measured tries per row (new names: at most 12)")
    parser.add_argument("--top", type=int, default=0, help="also print the project's N slowest functions")
    parser.add_argument("--dump", type=Path, default=None,
                        help="write each row's last profile here (pstats files NAME-open.prof, NAME-name.prof)")
    args = parser.parse_args(argv)
    probe = ThreadProfile()
    probe.install()
    at = AppTest.from_file(str(ROOT / "pages" / "probe.py"), default_timeout=600)
    at.query_params["tab"] = "ask"
    at.query_params["name"] = "Alan Turing"
    at.run()  # models loaded, corpus read, first answers: not measured
    toggle = "wf_ask_open"
    at.toggle(key=toggle).set_value(True).run()  # warm: the first where-from
    rows: dict[str, list] = {"open 'Where from'": [], "name, with 'Where from' open (new traces)": []}
    last_stats = {}
    for i in range(min(args.names, len(NAMES))):
        at.toggle(key=toggle).set_value(False).run()
        rows["open 'Where from'"].append(measured(at, probe, lambda: at.toggle(key=toggle).set_value(True)))
        row = "name, with 'Where from' open (new traces)"
        rows[row].append(measured(at, probe, lambda i=i: at.text_input(key="probe_ask").set_value(NAMES[i])))
    for row, tries in rows.items():
        wall = statistics.median(t[0] for t in tries)
        run = statistics.median(t[1] for t in tries)
        print(f"\n## probe: {row}: median of {len(tries)}: {wall:.3f} s wall (AppTest), {run:.3f} s profiled rerun")
        print("| part of the rerun | share |\n|---|---:|")
        top = 0.0
        for label, _ in CATEGORIES:
            share = statistics.median(t[2][label] / t[1] for t in tries)
            top += share if label.startswith(TOP_LEVEL) else 0.0
            print(f"| {label} | {share:.0%} |")
        print(f"| the rest (page script, widgets, corpus, cache keys) | {max(0.0, 1 - top):.0%} |")
        last_stats[row] = tries[-1][3]
        if args.dump:
            tries[-1][3].dump_stats(f"{args.dump}-{'open' if row.startswith('open') else 'name'}.prof")
    if args.top:
        for row, stats in last_stats.items():
            print(f"\n## {row}: the project's {args.top} slowest functions (cumulative, last try)")
            stats.sort_stats("cumulative")
            entries = [(k, v) for k, v in stats.stats.items() if str(ROOT) in k[0] and ".venv" not in k[0]]
            for (file, line, func), (_, calls, _, cum, _) in sorted(entries, key=lambda e: -e[1][3])[:args.top]:
                print(f"{cum:7.3f} s  {calls:5d} calls  {Path(file).relative_to(ROOT)}:{line} {func}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
