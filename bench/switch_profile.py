"""Where the server's time goes when a session switches to a page and sees its default view (issue 45, the load
mix's page switches): each page through Streamlit's AppTest, every measured switch under cProfile in the
script's own thread (bench.where_from_profile.ThreadProfile), its time split into shares.

    python -m bench.switch_profile [--repeats 4] [--pages errors,curves] [--model NAME] [--top 0] [--dump PREFIX]

One AppTest session: every page visited once first (modules imported, models loaded, caches filled, as
bench.server_work's warm-up does), then for each repeat and page: the Attention page, then the switch to the page,
measured. So each row is what a switch costs once the server is warm: what is computed again per switch is what
caching could save. Shares are of the switch's profiled time (the box is shared: compare shares and ratios in one
run, not seconds across runs); the categories overlap where one calls another. `--top N` also prints the N
functions of the project (and of Streamlit's element code) with the most cumulative time per page.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import statistics
import sys
from pathlib import Path

from streamlit.testing.v1 import AppTest

from bench.where_from_profile import ThreadProfile
from ui import APP_PAGES

ROOT = Path(__file__).resolve().parent.parent

# (label, (file suffix, function name) pairs whose cumulative time it is); a pair's calls nested in another's
# count once per pair (pstats' cumulative time already counts a recursive function once)
CATEGORIES = [
    ("sidebar: model picker and card", [("ui/model_picker.py", "checkpoint_picker")]),
    ("URL state (ui.page_state)", [("ui/page_state.py", "restore"), ("ui/page_state.py", "bind")]),
    ("model work and analyses (core.lens)", [("core/lens/", "*")]),
    ("figure building (core.figures, less for_browser)", [("core/figures/", "*")]),
    ("figures made ready for the browser (for_browser)", [("core/figures/browser.py", "for_browser")]),
    ("st.plotly_chart (plotly to JSON)", [("streamlit/elements/plotly_chart.py", "plotly_chart")]),
    ("st.dataframe (frame to Arrow)", [("streamlit/elements/arrow.py", "dataframe")]),
    ("CSV written for a download (core.io.tables.table_csv)", [("core/io/tables.py", "table_csv")]),
    ("st.download_button", [("streamlit/elements/widgets/button.py", "download_button")]),
    ("st.cache_data hits: unpickling the kept copy", [("streamlit/runtime/caching/cache_data_api.py",
                                                       "read_result")]),
    ("cache keys (hashing arguments)", [("streamlit/runtime/caching/hashing.py", "update_hash")]),
]


def _top_calls(stats: pstats.Stats, suffix: str, name: str) -> float:
    """The cumulative time of the functions matching (suffix, name), counting only the outermost: a match called
    by another match is inside it already. `name` '*' matches every function of a file under `suffix`."""
    def matches(key) -> bool:
        file, _, func = key
        return (suffix in file) if name == "*" else (file.endswith(suffix) and func == name)

    total = 0.0
    for key, (_, _, _, cum, callers) in stats.stats.items():
        if matches(key) and not any(matches(c) for c in callers):
            total += cum
    return total


def shares(profile: cProfile.Profile) -> tuple[float, dict[str, float], pstats.Stats]:
    stats = pstats.Stats(profile)
    run = _top_calls(stats, "streamlit/runtime/scriptrunner/exec_code.py", "exec_func_with_error_handling")
    parts = {label: sum(_top_calls(stats, s, n) for s, n in targets) for label, targets in CATEGORIES}
    # for_browser is in core/figures/ too: the building row is the rest of core.figures
    parts["figure building (core.figures, less for_browser)"] -= parts[
        "figures made ready for the browser (for_browser)"]
    return run, parts, stats


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=4, help="measured switches per page")
    parser.add_argument("--pages", default="", help="comma-separated url paths (home for the default page); all "
                                                    "but attention by default")
    parser.add_argument("--model", default="", help="the model the URL names as each switch lands (the load test "
                                                    "carries the URL's model from page to page); the app's own "
                                                    "choice by default")
    parser.add_argument("--top", type=int, default=0, help="also print each page's N slowest functions")
    parser.add_argument("--dump", type=Path, default=None, help="write each page's last profile to DUMP-PAGE.prof")
    args = parser.parse_args(argv)
    by_name = {(p.url_path or "home"): p for p in APP_PAGES}
    names = [n for n in (args.pages.split(",") if args.pages else by_name) if n != "attention"]
    probe = ThreadProfile()
    probe.install()
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=600)
    at.run()
    attention = by_name["attention"].file
    at.switch_page(attention).run()
    for name in names:  # first visits: not measured
        if args.model:
            at.query_params["model"] = args.model
        at.switch_page(by_name[name].file).run()
        assert not at.exception, [e.message for e in at.exception]
        at.switch_page(attention).run()
    rows: dict[str, list] = {n: [] for n in names}
    for _ in range(args.repeats):
        for name in names:
            at.switch_page(attention).run()
            if args.model:
                at.query_params["model"] = args.model
            probe.profile = cProfile.Profile()
            at.switch_page(by_name[name].file).run()
            assert not at.exception, [e.message for e in at.exception]
            rows[name].append(shares(probe.profile))
            probe.profile = None
    print(f"profiled switch time per page (median of {args.repeats}; cProfile inflates it), and its shares\n")
    print("| part of the switch | " + " | ".join(names) + " |")
    print("|---|" + "---:|" * len(names))
    print("| profiled switch, ms | " + " | ".join(
        f"{1000 * statistics.median(t[0] for t in rows[n]):.0f}" for n in names) + " |")
    for label, _ in CATEGORIES:
        cells = [statistics.median(t[1][label] / t[0] for t in rows[n]) for n in names]
        print(f"| {label} | " + " | ".join(f"{c:.0%}" if c >= 0.005 else "-" for c in cells) + " |")
    if args.top:
        for name in names:
            stats = rows[name][-1][2]
            print(f"\n## {name}: the {args.top} slowest functions of the project and Streamlit's elements "
                  f"(cumulative, last switch)")
            entries = [(k, v) for k, v in stats.stats.items()
                       if (str(ROOT) in k[0] and ".venv" not in k[0]) or "streamlit/elements" in k[0]]
            for (file, line, func), (_, calls, _, cum, _) in sorted(entries, key=lambda e: -e[1][3])[:args.top]:
                where = Path(file).relative_to(ROOT) if str(ROOT) in file and ".venv" not in file else \
                    file.split("site-packages/")[-1]
                print(f"{1000 * cum:8.1f} ms  {calls:5d} calls  {where}:{line} {func}")
    if args.dump:
        for name in names:
            rows[name][-1][2].dump_stats(f"{args.dump}-{name}.prof")
    return 0


if __name__ == "__main__":
    sys.exit(main())
