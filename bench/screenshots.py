"""Screenshots of every page at projector size (1024x768) and desktop size (1400x1000), for a person.

    python -m bench.screenshots --url http://127.0.0.1:8631 --out test-artifacts/screens/after

For each page and size: `<page>-<w>x<h>-fold.png` (what the first screen shows, the fold) and
`<page>-<w>x<h>-full.png` (the whole page: Streamlit scrolls inside its main section, so the viewport
is grown to fit it). Headless Debian Chromium through Playwright; the server is yours to start.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from bench.browser_driver import full_height, launch
from bench.browser_latency import Tab
from ui import APP_PAGES

SIZES = ((1024, 768), (1400, 1000))
VIEWS = {  # more than a page's first screen: views a lecture shows (name -> path and query)
    "attention-model": "attention?view=model", "attention-compare": "attention?view=compare",
    "attention-qk": "attention?view=qk",
    **{f"positional-{s}": f"positional?pos_section={s}" for s in
       ("similarity", "alibi", "rope", "sentence", "training", "extrapolation")},
    "curves-positional": "curves?runs=lm-learned,lm-sinusoidal,lm-alibi,lm-rope&metric=perplexity",
    "probe-fabricate": "probe?tab=fabricate", "probe-dev": "probe?tab=dev",
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--pages", nargs="*", default=None, help="page paths ('' is home); default all")
    parser.add_argument("--query", default="", help="query string added to every URL, e.g. 'model=lm-rope'")
    parser.add_argument("--views", nargs="*", default=None, metavar="VIEW",
                        help="also these views of VIEWS (tabs, model view, ...); no names: all of them")
    parser.add_argument("--sizes", nargs="*", default=None, metavar="WxH", help="default: 1024x768 1400x1000")
    args = parser.parse_args(argv)
    from playwright.sync_api import sync_playwright

    args.out.mkdir(parents=True, exist_ok=True)
    paths = [p.url_path for p in APP_PAGES] if args.pages is None else args.pages
    pages = {path or "home": path for path in paths}
    if args.views is not None:
        pages.update({name: VIEWS[name] for name in (args.views or VIEWS)})
    sizes = SIZES if not args.sizes else [tuple(int(n) for n in size.split("x")) for size in args.sizes]
    with sync_playwright() as p:
        browser = launch(p)
        for width, height in sizes:
            context = browser.new_context(viewport={"width": width, "height": height})
            tab = Tab(context)  # waits for Streamlit's script_finished, not only for a quiet page
            page = tab.page
            for name, path in pages.items():
                joiner = "&" if "?" in path else "?"
                url = f"{args.url}/{path}" + (f"{joiner}{args.query}" if args.query else "")
                tab.goto(url)
                time.sleep(1.0)
                page.screenshot(path=str(args.out / f"{name}-{width}x{height}-fold.png"))
                page.set_viewport_size({"width": width, "height": min(max(full_height(page) + 40, height), 9000)})
                time.sleep(1.0)  # plotly re-lays its charts out to the new size
                page.screenshot(path=str(args.out / f"{name}-{width}x{height}-full.png"), full_page=True)
                page.set_viewport_size({"width": width, "height": height})
                print(f"{name} {width}x{height}", flush=True)
            context.close()
        browser.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
