"""The probe's slowest click in the browser, two trees taking turns name by name: latency and Chromium's work.

    python -m bench.probe_browser [--baseline REV] [--names 12] [--seen] [--checkpoints DIR]

Starts `streamlit run app.py` from this tree (and, with --baseline, from a temporary `git worktree` of REV) and one
headless Chromium (bench.browser_driver) with one tab per server at bench.browser_latency's viewport, each on the
probe's Ask tab with "Where from" open; then types a name no one asked before into each tab in turn, so that drift
on a shared box falls on both trees alike. Per name and tree:
- latency: from the key press to the page complete, timed as bench.browser_latency times its rows
  ("probe: name, with 'Where from' open (new traces)");
- Chromium CPU: the CPU seconds of every Chromium process (renderers, GPU, browser: the DevTools protocol's
  SystemInfo.getProcessInfo) over the same click; the other tab is idle meanwhile. A count of work done, which a
  busy shared box slows down but hardly changes (the latency and the timings below move with the load);
- the tab's main-thread time as the DevTools protocol's Performance metrics see it (TaskDuration, and of it
  ScriptDuration, LayoutDuration and RecalcStyleDuration): wall time of the thread's tasks, so on a busy box it
  grows with the waiting too.
With `--seen`, every name is typed once, unmeasured, before the measured pass: the server then reads each name's
answers, readings and trace from its caches, and the browser still draws every chart anew (each name's differ from the
last one's). That is what the page's drawing costs on this box, whatever the model work: the click's floor.
Medians over the names, and baseline / this. On a quiet box the browser's main thread is busy for about as long as
the click takes (bench/README.md, issue 45, session 15): its work is the latency.

The last line is `RESULT probe_browser measured=<Chromium CPU ratio baseline / this> ...` (not in bench.run_all's
list: it starts two servers and a browser).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from bench.browser_driver import launch
from bench.browser_latency import VIEWPORT, Tab, start
from bench.load_servers import print_medians, trees_to_compare
from bench.probe_server import LABEL, NAMES
from serve.streamlit_process import free_port

ROOT = Path(__file__).resolve().parent.parent
METRICS = ("TaskDuration", "ScriptDuration", "LayoutDuration", "RecalcStyleDuration")
CPU = "Chromium CPU"


def metrics(cdp) -> dict[str, float]:
    return {m["name"]: m["value"] for m in cdp.send("Performance.getMetrics")["metrics"]}


def chromium_cpu(session) -> float:
    """CPU seconds every Chromium process has used so far."""
    return sum(p["cpuTime"] for p in session.send("SystemInfo.getProcessInfo")["processInfo"])


def drive(urls: list[str], names: list[str], seen: bool = False) -> list[dict[str, list[float]]]:
    from playwright.sync_api import sync_playwright

    out: list[dict[str, list[float]]] = [{k: [] for k in ("latency", CPU, *METRICS)} for _ in urls]
    with sync_playwright() as p:
        browser = launch(p)
        system = browser.new_browser_cdp_session()
        tabs = []
        for url in urls:
            tab = Tab(browser.new_context(viewport=VIEWPORT))
            tab.goto(f"{url}/probe?tab=ask&name=Alan+Turing&wf=1")
            cdp = tab.page.context.new_cdp_session(tab.page)
            cdp.send("Performance.enable")
            tab.timed(tab.commit(LABEL, "Ada Lovelace", area=False))  # unmeasured: every part drawn once
            for name in names if seen else ():  # unmeasured: the server keeps each name's work
                tab.timed(tab.commit(LABEL, name, area=False))
            tabs.append((tab, cdp))
        for name in names:
            for (tab, cdp), times in zip(tabs, out, strict=True):
                tab.page.bring_to_front()
                time.sleep(0.3)  # the previous click's last frames
                before, cpu = metrics(cdp), chromium_cpu(system)
                times["latency"].append(tab.timed(tab.commit(LABEL, name, area=False)))
                times[CPU].append(chromium_cpu(system) - cpu)
                after = metrics(cdp)
                for key in METRICS:
                    times[key].append(after[key] - before[key])
                if f"name={name.replace(' ', '+')}" not in tab.page.url:
                    raise RuntimeError(f"{name}: the page did not take the name (its link is {tab.page.url})")
        browser.close()
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.probe_browser", description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", help="a git revision measured in the same run (a temporary worktree)")
    parser.add_argument("--names", type=int, default=12, help=f"new names typed in each tab (at most {len(NAMES)})")
    parser.add_argument("--seen", action="store_true",
                        help="type every name once before measuring: the server's work is kept, the drawing is not")
    parser.add_argument("--checkpoints", type=Path, default=ROOT / "checkpoints")
    args = parser.parse_args(argv)
    names = NAMES[:max(1, min(args.names, len(NAMES)))]
    with tempfile.TemporaryDirectory(prefix="attention-probe-browser-") as tmp, \
            trees_to_compare(args.baseline, Path(tmp)) as (roots, labels):
        servers = []
        try:
            for index, root in enumerate(roots):
                servers.append(start(root / "app.py", free_port(), Path(tmp) / f"server{index}.log",
                                     env={"ATTENTION_LAB_CHECKPOINTS": str(args.checkpoints)}))
            results = drive([s.url for s in servers], names, args.seen)
        finally:
            for server in servers:
                server.stop()
    print(f"probe: a {'name seen before' if args.seen else 'new name'} with 'Where from' open, in Chromium, medians of "
          f"{len(names)} names (trees taking turns)")
    ratios = print_medians(results, labels, [(key, "s") for key in ("latency", CPU, *METRICS)], 22)
    if ratios:
        print(f"RESULT probe_browser measured={ratios[CPU]:.2f} target>=1 pass={str(ratios[CPU] >= 1).lower()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
