"""First visits (issue 52, item 5): each page opened for the first time in a fresh server process, in Chromium.

    python -m bench.first_visits [--pages attention errors ...] [--repeats 1] [--dwell 0]

bench.browser_latency's `open ...` rows are warm (one unmeasured try first); a person opening the lab meets the
cold one. Per page: a fresh `streamlit run app.py` (the bundled checkpoints, plus a nanoGPT twin of lm-char made by
bench.nanogpt_latency, so "attention (nanoGPT)" opens the model a student brings), the Home page opened first
(untimed beyond its own row: the first page of the process), `--dwell` seconds on it (a person reading it), then a
sidebar click on the page, timed as browser_latency times navigation: from the click until the run that began
after it has finished and every chart is drawn. The hello-world app's first open, fresh server, is the baseline of
the same run. Target: <= 1.5 s (browser_latency's navigation target) on a quiet box. `--baseline DIR`: the app of
another checkout (e.g. `git archive REV | tar -x -C DIR`) opened the same way, taking turns with this one page by
page, its rows printed beside ours with the ratio baseline / ours.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

from bench.browser_driver import IDLE_JS
from bench.browser_latency import (
    HELLO_APP,
    NAV_TARGET_S,
    PAGE_TITLES,
    ROOT,
    STREAMLIT_OPTIONS,
    VIEWPORT,
    Tab,
    launch,
    start,
)
from serve.streamlit_process import free_port, start_healthy

NANOGPT_ROW = "attention (nanoGPT)"


def checkpoints_with_twin(folder: Path) -> str:
    """folder: every bundled checkpoint (linked) and the nanoGPT twin of lm-char; -> the twin's name."""
    from bench.nanogpt_latency import build_twin
    from core.io.checkpoint import checkpoint_dir

    name = build_twin("lm-char", folder)  # links lm-char itself
    for path in checkpoint_dir().iterdir():
        if path.is_file() and not (folder / path.name).exists():
            (folder / path.name).symlink_to(path.resolve())
    return name


def first_visit(browser, url: str, title: str, dwell_s: float, model: str | None) -> tuple[float, float, float]:
    """(Home's first open, the page's first visit, the visit's run until the server finished it) in seconds, one
    fresh tab: the visit less its run is the browser's part (drawing, plotly.js loaded at a first chart)."""
    tab = Tab(browser.new_context(viewport=VIEWPORT))
    start_s = time.perf_counter()
    tab.page.goto(url + "/" + (f"?model={model}" if model else ""), wait_until="domcontentloaded")
    home = tab.settle(start_s, timeout_s=180)
    time.sleep(0.3 + dwell_s)
    tab.page.wait_for_function(IDLE_JS, polling=50)
    clicked = time.perf_counter()
    visit = tab.timed(tab.nav(title))
    ran = min((t for t in tab.finished if t > clicked), default=float("nan")) - clicked
    tab.page.context.close()
    return home, visit, ran


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", nargs="*", default=None, metavar="PAGE",
                        help=f"page paths ({', '.join(p for p in PAGE_TITLES if p)}; 'nanogpt' for the attention "
                             "page on the nanoGPT twin); default all")
    parser.add_argument("--repeats", type=int, default=1, help="fresh servers per page")
    parser.add_argument("--dwell", type=float, default=0.0, help="seconds on Home before the click")
    parser.add_argument("--baseline", type=Path, default=None, help="another checkout's root, taking turns")
    args = parser.parse_args(argv)
    from playwright.sync_api import sync_playwright

    pages = args.pages or [p for p in PAGE_TITLES if p] + ["nanogpt"]
    rows: dict[str, list[float]] = {}
    homes: list[float] = []
    base_rows: dict[str, list[float]] = {}
    base_homes: list[float] = []
    runs: dict[tuple, list[float]] = {}  # (root, row) -> the server's runs
    hello: list[float] = []
    with tempfile.TemporaryDirectory(prefix="first-visits-") as tmp:
        folder = Path(tmp) / "checkpoints"
        twin = checkpoints_with_twin(folder)
        script = Path(tmp) / "hello.py"
        script.write_text(HELLO_APP)
        with sync_playwright() as p:
            browser = launch(p)
            for _ in range(args.repeats):
                for page in pages:
                    server = start(script, free_port(), Path(tmp) / "hello.log")  # the baseline, taking turns
                    try:
                        tab = Tab(browser.new_context(viewport=VIEWPORT))
                        start_s = time.perf_counter()
                        tab.page.goto(server.url + "/", wait_until="domcontentloaded")
                        hello.append(tab.settle(start_s))
                        tab.page.context.close()
                    finally:
                        server.stop()
                    path, model = ("attention", twin) if page == "nanogpt" else (page, None)
                    what = NANOGPT_ROW if page == "nanogpt" else path
                    for root, kept in ((args.baseline, base_rows), (ROOT, rows)):
                        if root is None:
                            continue
                        server = start_healthy(Path(tmp) / "app.log", root / "app.py", root=root,
                                               extra_env={"ATTENTION_LAB_CHECKPOINTS": str(folder)},
                                               options=STREAMLIT_OPTIONS, port=free_port())
                        try:
                            home, visit, ran = first_visit(browser, server.url, PAGE_TITLES[path], args.dwell,
                                                           model)
                        finally:
                            server.stop()
                        (base_homes if kept is base_rows else homes).append(home)
                        kept.setdefault(what, []).append(visit)
                        runs.setdefault((root, what), []).append(ran)
                        print(f"  {what}{' (baseline)' if kept is base_rows else ''}: first visit {visit:.2f} s, "
                              f"server run {ran:.2f} s (Home first open {home:.2f} s, hello world "
                              f"{hello[-1]:.2f} s)", flush=True)
            browser.close()
    base = statistics.median(hello)
    print(f"\n{'first visit':<28}{'median':>8}{'target':>8}{'x hello':>9}  result")
    print(f"{'hello world: first open':<28}{base:>7.2f}s{'-':>8}{1.0:>8.1f}x  -")
    print(f"{'Home (first page)':<28}{statistics.median(homes):>7.2f}s{'-':>8}"
          f"{statistics.median(homes) / base:>8.1f}x  -" + (f"   baseline {statistics.median(base_homes):.2f} s"
                                                            if base_homes else ""))
    worst = None
    for what, times in rows.items():
        median = statistics.median(times)
        ok = median <= NAV_TARGET_S
        ran = statistics.median(runs[(ROOT, what)])
        against = (f"   server run {ran:.2f} s" + (
            f"; baseline {statistics.median(base_rows[what]):.2f} s (server run "
            f"{statistics.median(runs[(args.baseline, what)]):.2f} s), baseline / ours "
            f"{statistics.median(base_rows[what]) / median:.2f}x" if what in base_rows else ""))
        print(f"{what:<28}{median:>7.2f}s{NAV_TARGET_S:>7.1f}s{median / base:>8.1f}x  {'pass' if ok else 'MISS'}"
              + against)
        worst = max(worst or (0.0, what), (median, what))
    if worst is None:
        return 1
    print(f"RESULT first_visits measured={worst[0]:.2f}s({worst[1].replace(' ', '_')}) target<={NAV_TARGET_S}s "
          f"pass={'true' if worst[0] <= NAV_TARGET_S else 'false'}")
    return 0 if worst[0] <= NAV_TARGET_S else 1


if __name__ == "__main__":
    sys.exit(main())
