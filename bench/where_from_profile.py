"""Where the server's time goes on the probe's slowest interactions (issue 45): the probe page through Streamlit's
AppTest, each measured rerun under cProfile (in the script's own thread), its time split into shares.

    python -m bench.where_from_profile [--names 4] [--top 0]

Rows: "open 'Where from'" (closed, then opened: measured is the opening, as bench.browser_latency times it),
"name, with 'Where from' open (new traces)" (a name not asked yet, so every cache misses) and "'Where from' seed"
(a seed not traced yet: one new causal trace). Each change is rerun as a browser asks (`BrowserReruns`): only the
fragment the changed widget is in, else the whole page. The bundled
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
from streamlit.testing.v1 import AppTest, local_script_runner

ROOT = Path(__file__).resolve().parent.parent
NAMES = ["Lise Meitner", "Paul Dirac", "Max Born", "Otto Hahn", "Rosalind Franklin", "Dorothy Hodgkin",
         "Niels Bohr", "Enrico Fermi", "Hedy Lamarr", "Alan Kay", "Edith Clarke", "Hans Bethe"]

# (label, (file suffix, function name) pairs whose cumulative time it is); the top-level ones do not nest
CATEGORIES = [
    ("answers of the 3 models, candidates, attention at the answer (probe_views)",
     [("ui/probe_views.py", "show_example")]),
    ("answers by training step", [("ui/training_steps.py", "show_answers_by_step")]),
    ("where-from view (all of it)", [("ui/where_from_view.py", "question_view"),
                                     ("ui/where_from_view.py", "_question_fragment")]),
    ("  reading (computed): record, lens, attributions", [("ui/where_from_view.py", "cached_reading")]),
    ("    of which input attribution (integrated gradients)", [("core/lens/where_from/saliency.py",
                                                                "input_attribution")]),
    ("  causal trace (computed: clean, corrupted, restored passes)", [("ui/where_from_view.py", "cached_trace")]),
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


class BrowserReruns:
    """AppTest reruns the whole script on every change; a browser reruns only the fragment the changed widget is
    in. This sends each change as the browser would: the fragment id the widget's element carried (none outside
    a fragment, then the whole page), read from the messages of the run before."""

    def __init__(self) -> None:
        self.sent: list = []
        self._parse = local_script_runner.parse_tree_from_messages
        self._rerun_data = local_script_runner.RerunData
        local_script_runner.parse_tree_from_messages = self._keep

    def _keep(self, messages):
        self.sent = list(messages)
        return self._parse(messages)

    def fragment_of(self, widget_key: str) -> str:
        for msg in self.sent:
            element = msg.delta.new_element if msg.HasField("delta") else None
            kind = element.WhichOneof("type") if element is not None else None
            if kind and widget_key in getattr(getattr(element, kind), "id", ""):
                return msg.delta.fragment_id
        return ""

    def scoped_to(self, widget_key: str) -> None:
        """The next run: only the fragment of this widget, if it is in one."""
        fragment, real = self.fragment_of(widget_key), self._rerun_data
        local_script_runner.RerunData = (lambda **fields: real(**fields, fragment_id_queue=[fragment])) \
            if fragment else real


def cumulative(stats: pstats.Stats, targets) -> float:
    """The targets' cumulative times added up, but for one function calling the next of a category (the view
    and the fragment inside it): there the largest counts."""
    times = {(suffix, name): 0.0 for suffix, name in targets}
    for (file, _, func), (_, _, _, cum, _) in stats.stats.items():
        for suffix, name in targets:
            if file.endswith(suffix) and func == name:
                times[suffix, name] += cum
    view = [times.pop(k) for k in list(times) if k[1] in ("question_view", "_question_fragment")]
    return sum(times.values()) + max(view, default=0.0)


def shares(profile: cProfile.Profile) -> tuple[float, dict[str, float], pstats.Stats]:
    stats = pstats.Stats(profile)
    run = cumulative(stats, [("streamlit/runtime/scriptrunner/exec_code.py", "exec_func_with_error_handling")])
    return run, {label: cumulative(stats, targets) for label, targets in CATEGORIES}, stats


def measured(at: AppTest, probe: ThreadProfile, browser: BrowserReruns, widget_key: str, act
             ) -> tuple[float, float, dict[str, float], pstats.Stats]:
    probe.profile = cProfile.Profile()
    browser.scoped_to(widget_key)
    start = time.perf_counter()
    act().run()
    wall = time.perf_counter() - start
    assert not at.exception, [e.message for e in at.exception]
    run, parts, stats = shares(probe.profile)
    probe.profile = None
    return wall, run, parts, stats


def typed(at: AppTest, key: str, value: str) -> AppTest:
    """A widget's new value through the session state: after a fragment's run the tree holds only that
    fragment's elements, so the page's name box may not be in it."""
    at.session_state[key] = value
    return at


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--names", type=int, default=4, help="measured tries per row (new names: at most 12)")
    parser.add_argument("--top", type=int, default=0, help="also print the project's N slowest functions")
    parser.add_argument("--dump", type=Path, default=None,
                        help="write each row's last profile to DUMP-0.prof, DUMP-1.prof, ... (pstats; rows in order)")
    args = parser.parse_args(argv)
    probe = ThreadProfile()
    probe.install()
    browser = BrowserReruns()
    at = AppTest.from_file(str(ROOT / "pages" / "probe.py"), default_timeout=600)
    at.query_params["tab"] = "ask"
    at.query_params["name"] = "Alan Turing"
    at.run()  # models loaded, corpus read, first answers: not measured
    toggle = "wf_ask_open"
    at.toggle(key=toggle).set_value(True).run()  # warm: the first where-from
    rows: dict[str, list] = {"open 'Where from'": [], "name, with 'Where from' open (new traces)": [],
                             "'Where from' seed (a new trace)": []}
    last_stats = {}
    for i in range(min(args.names, len(NAMES))):
        browser.scoped_to(toggle)
        at.toggle(key=toggle).set_value(False).run()
        rows["open 'Where from'"].append(measured(at, probe, browser, toggle,
                                                  lambda: at.toggle(key=toggle).set_value(True)))
        rows["name, with 'Where from' open (new traces)"].append(measured(
            at, probe, browser, "probe_ask", lambda i=i: typed(at, "probe_ask", NAMES[i])))
        rows["'Where from' seed (a new trace)"].append(measured(
            at, probe, browser, "wf_ask_seed", lambda: at.number_input(key="wf_ask_seed").set_value(
                at.number_input(key="wf_ask_seed").value + 1)))
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
            tries[-1][3].dump_stats(f"{args.dump}-{list(rows).index(row)}.prof")
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
