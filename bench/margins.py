"""Charts drawn once: for every plotly chart of every page and view, the margins `fit_margins` asked for
against the margins plotly ended with, at 1024x768 and 1400x1000.

    python -m bench.margins [--only PAGE_OR_VIEW ...]

Plotly grows a margin its labels, colour bar or legend do not fit in, and then draws the whole chart a
second time (core/figures/margins.py). A row is PUSHED when a final margin exceeds the asked one by more
than a pixel. Starts its own app on a free 127.0.0.1 port. Ends with a RESULT line (bench/run_all.py):
measured = charts pushed, target = 0.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from bench.browser_driver import launch
from bench.browser_latency import ROOT, Tab, start
from bench.screenshots import SIZES, VIEWS
from serve.streamlit_process import free_port
from ui import APP_PAGES

MARGINS_JS = """() => Array.from(document.querySelectorAll('.js-plotly-plot')).map(gd => {
    const full = gd._fullLayout;
    if (!full) return null;
    const asked = (gd.layout && gd.layout.margin) || {};
    const title = (gd.layout.title && (gd.layout.title.text || gd.layout.title)) || '';
    return {title: String(title).replace(/<[^>]+>/g, '').slice(0, 36),
            asked: ['l', 'r', 't', 'b'].map(side => asked[side] || 0),
            final: ['l', 'r', 't', 'b'].map(side => Math.round(full._size[side]))};
})"""


def pushed(asked: list[float], final: list[float]) -> bool:
    return any(f - a > 1 for a, f in zip(asked, final))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.margins", description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", default=None, metavar="NAME",
                        help="pages ('home', 'probe', ...) or views of bench/screenshots.py VIEWS")
    args = parser.parse_args(argv)
    from playwright.sync_api import sync_playwright

    paths = {p.url_path or "home": p.url_path for p in APP_PAGES}
    paths.update(VIEWS)
    paths["probe"] = "probe?name=Alan+Turing"  # a name: the answer's charts
    if args.only:
        paths = {name: path for name, path in paths.items() if name in args.only}
    charts = bad = 0
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="margins-") as tmp:
        server = start(ROOT / "app.py", port, Path(tmp) / "app.log")
        try:
            with sync_playwright() as p:
                browser = launch(p)
                for width, height in SIZES:
                    tab = Tab(browser.new_context(viewport={"width": width, "height": height}))
                    for name, path in paths.items():
                        tab.goto(f"http://127.0.0.1:{port}/{path}")
                        time.sleep(0.5)  # plotly's own second draw, if it makes one
                        for chart in filter(None, tab.page.evaluate(MARGINS_JS)):
                            charts += 1
                            flag = "PUSHED" if pushed(chart["asked"], chart["final"]) else "ok"
                            bad += flag == "PUSHED"
                            print(f"{width:5d}  {name:22s} {chart['title']:36s} asked {chart['asked']} "
                                  f"final {chart['final']}  {flag}", flush=True)
                browser.close()
        finally:
            server.stop()
    print(f"\n{charts} charts, {bad} drawn twice (margins grown by plotly)")
    print(f"RESULT margins measured={bad}_pushed_of_{charts} target=0 pass={'true' if bad == 0 else 'false'}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
