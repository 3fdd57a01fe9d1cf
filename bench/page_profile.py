"""Where the server's time goes on a rerun of any page, and what every page's rerun pays (issue 45): the whole app
(app.py, st.navigation, the page) through Streamlit's AppTest, each measured rerun under cProfile in the script's
thread (bench.where_from_profile's `ThreadProfile`), each change sent as a browser sends it (`BrowserReruns`:
only the fragment the changed widget is in, else the whole page), its time split into shares.

    python -m bench.page_profile [--page attention] [--repeats 8] [--top 0] [--dump PREFIX]

Rows, for the Attention page (the load test's mix: bench/load.py types new sentences there and switches pages):
- "new sentence": a sentence no session typed before (a forward pass, figures built);
- "same sentence, other session": a second session types the sentence the first just typed (caches shared);
- "rerun, same input": the first session reruns the page, nothing changed;
- "step slider" (a checkpoint with kept training steps), "query token" (the query·key view), "open 'Where the
  next piece comes from'": a view's own widget, rerun as the browser asks;
- "switch to <page>" for `--page` other than attention: from the Attention page to that page (then back, not
  measured).

Shares are of the rerun's profiled time; rows nest where indented (the sidebar inside "the page"), and "the rest"
is the rerun less the top-level parts. The box is shared: compare shares and ratios of one run, not seconds across
runs. The bundled checkpoints, as the app serves them (`--checkpoints DIR` for others).
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import random
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

from streamlit.testing.v1 import AppTest

from bench.where_from_profile import BrowserReruns, ThreadProfile, cumulative
from ui import APP_PAGES

ROOT = Path(__file__).resolve().parent.parent
NAMES = ["Ada Lovelace", "Alan Turing", "Grace Hopper", "Marie Curie", "Emmy Noether", "Niels Bohr"]
PLACES = ["London", "Paris", "Leeds", "Berlin", "Vienna", "Madrid", "Rome", "Dublin"]
STEP_MODEL = "lm-learned"  # a bundled checkpoint that kept training steps (the step slider's; the page's default)

# (label, (file suffix, function name) pairs whose cumulative time it is). Top-level rows do not nest in one
# another; an indented row is part of the row above it.
CATEGORIES = [
    ("app.py: page list, st.navigation (less the page)", [("app.py", "<module>")]),
    ("the page (its script, all of it; or the fragment rerun alone)", [("streamlit/navigation/page.py", "run")]),
    ("  sidebar: model picker, checkpoint listing, model card", [("ui/model_picker.py", "checkpoint_picker")]),
    ("    checkpoint listing (all_checkpoints)", [("ui/shared_caches.py", "all_checkpoints")]),
    ("  the URL codec: page_state restore and bind", [("ui/page_state.py", "restore"),
                                                     ("ui/page_state.py", "bind")]),
    ("  the model (require_model, load_checkpoint)", [("ui/model_picker.py", "require_model")]),
    ("  training-step slider (snapshots, the step's model)", [("ui/training_steps.py", "step_slider")]),
    ("  the run: trace key (file digest) and trace", [("ui/shared_caches.py", "attention_run")]),
    ("    of which the forward pass (computed)", [("core/lens/attention.py", "run_attention")]),
    ("  the view (figure, window controls)", [("ui/attention_views.py", f"show_{v}") for v in
                                              ("single", "model", "token", "query_key", "combine", "compare")]),
    ("  the words behind untrained pieces", [("ui/shared_caches.py", "training_words"),
                                             ("core/lens/training_pieces.py", "corpus_cuts")]),
    ("  token chips, reading sentence", [("core/lens/attention.py", "token_chips"),
                                         ("core/lens/attention.py", "reading_sentence")]),
    ("  the model's output (show_output)", [("ui/attention_views.py", "show_output")]),
    ("  next piece's where-from (toggle, lens, attribution)", [("ui/where_from_view.py", "next_piece_view")]),
    ("  sanity checks (computed and drawn)", [("ui/attention_views.py", "show_sanity")]),
    ("figure building (core.figures, plotly)", [("core/figures/attention.py", "attention_heatmap"),
                                               ("core/figures/attention.py", "attention_model_view"),
                                               ("core/figures/attention.py", "token_attention_figure"),
                                               ("core/figures/where_from.py", "logit_lens_heatmap"),
                                               ("core/figures/where_from.py", "attribution_bars")]),
    ("figures made ready for the browser (for_browser)", [("core/figures/browser.py", "for_browser")]),
    ("serialisation: st.plotly_chart (plotly to JSON)", [("streamlit/elements/plotly_chart.py", "plotly_chart")]),
    ("st.cache_data/cache_resource: hashing the arguments", [("streamlit/runtime/caching/hashing.py",
                                                             "update_hash")]),
    ("st.cache_data hits: unpickling the kept copy", [("streamlit/runtime/caching/cache_data_api.py",
                                                      "read_result")]),
    ("widgets: registering and reading their state", [("streamlit/runtime/state/widgets.py", "register_widget")]),
    ("sending: messages enqueued (protobuf)", [("streamlit/runtime/scriptrunner/script_runner.py",
                                                "_enqueue_forward_msg")]),
]


def as_served() -> None:
    """Every run as the server runs it once any session ran st.navigation: app.py, then the page. AppTest resets
    Streamlit's legacy multipage flag before each run, and with a pages/ folder beside app.py would run the page
    alone (ui/__init__.py, leave_legacy_multipage_mode), leaving app.py's share out."""
    from streamlit.runtime.pages_manager import PagesManager
    from streamlit.runtime.scriptrunner import script_runner

    original = script_runner.ScriptRunner._run_script

    def run_script(runner, rerun_data):
        PagesManager.uses_pages_directory = False
        return original(runner, rerun_data)
    script_runner.ScriptRunner._run_script = run_script


def part(label: str) -> bool:
    return label.startswith(" ")


class Profiled:
    """The app in AppTest with every measured rerun profiled; `row` keeps one row's tries."""

    def __init__(self, checkpoints: Path) -> None:
        os.environ["ATTENTION_LAB_CHECKPOINTS"] = str(checkpoints)
        self.probe = ThreadProfile()
        self.probe.install()
        as_served()
        self.browser = BrowserReruns()
        self.rows: dict[str, list[tuple[float, float, dict[str, float], pstats.Stats]]] = {}

    def open(self, page: str = "pages/attention.py", **params: str) -> AppTest:
        at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=600)
        for key, value in params.items():
            at.query_params[key] = value
        at.run()
        at.switch_page(page).run()
        self.check(at)
        return at

    @staticmethod
    def check(at: AppTest) -> None:
        if at.exception:
            raise RuntimeError([e.message for e in at.exception])

    def measure(self, row: str, at: AppTest, act: Callable[[], AppTest], widget_key: str = "") -> None:
        self.probe.profile = cProfile.Profile()
        self.browser.scoped_to(widget_key or "\0")  # no widget: the whole page
        start = time.perf_counter()
        act().run()
        wall = time.perf_counter() - start
        self.probe.profile.disable()
        self.browser.scoped_to("\0")  # the next run, unless measured: the whole page
        self.check(at)
        stats = pstats.Stats(self.probe.profile)
        self.probe.profile = None
        run = cumulative(stats, [("streamlit/runtime/scriptrunner/exec_code.py", "exec_func_with_error_handling")])
        parts = {label: cumulative(stats, targets) for label, targets in CATEGORIES}
        page = "the page (its script, all of it; or the fragment rerun alone)"
        parts[page] = max(parts[page], cumulative(stats, [("streamlit/runtime/fragment.py", "wrapped_fragment")]))
        app = parts["app.py: page list, st.navigation (less the page)"]
        parts["app.py: page list, st.navigation (less the page)"] = max(0.0, app - parts[page])
        self.rows.setdefault(row, []).append((wall, run, parts, stats))


def typed(at: AppTest, key: str, value) -> AppTest:
    at.session_state[key] = value
    return at


def attention_rows(profiled: Profiled, repeats: int) -> None:
    one, two = profiled.open(), profiled.open()
    typed(one, "attn_text", "warm up the model").run()
    rng = random.Random(0)
    for number in range(repeats):
        text = f"{rng.choice(NAMES)} was born in {rng.choice(PLACES)} ({number})."
        profiled.measure("new sentence", one, lambda t=text: typed(one, "attn_text", t), "attn_text")
        profiled.measure("same sentence, other session", two, lambda t=text: typed(two, "attn_text", t),
                         "attn_text")
        profiled.measure("rerun, same input", one, lambda: one)
    if (Path(os.environ["ATTENTION_LAB_CHECKPOINTS"]) / f"{STEP_MODEL}.snapshots.safetensors").exists():
        steps = profiled.open(model=STEP_MODEL)
        typed(steps, "attn_text", "warm up the model").run()
        key = "attn_step"
        options = steps.select_slider(key=key).options
        for number in range(repeats):
            value = int(str(options[number % (len(options) - 1)]).replace(",", ""))
            profiled.measure("step slider", steps, lambda v=value: steps.select_slider(key=key).set_value(v), key)
    qk = profiled.open(view="qk")
    for number in range(repeats):
        box = qk.selectbox(key="attn_token")
        profiled.measure("query token (query·key view)", qk,
                         lambda b=box, n=number: b.set_value(n % len(b.options)), "attn_token")
    lens = profiled.open()
    for _ in range(repeats):
        toggle = lens.toggle(key="wf_next_open")
        profiled.measure("'Where the next piece comes from' toggled", lens,
                         lambda t=toggle: t.set_value(not t.value), "wf_next_open")


def switch_rows(profiled: Profiled, page: str, repeats: int) -> None:
    at = profiled.open()
    target = next(p.file for p in APP_PAGES if p.url_path == page or (page == "home" and p.default))
    at.switch_page(target).run()  # first visit: imports, caches
    for _ in range(repeats):
        at.switch_page("pages/attention.py").run()
        profiled.measure(f"switch to {page}", at, lambda: at.switch_page(target))


def report(profiled: Profiled, top: int, dump: Path | None) -> None:
    for row, tries in profiled.rows.items():
        wall = statistics.median(t[0] for t in tries)
        run = statistics.median(t[1] for t in tries)
        print(f"\n## {row}: median of {len(tries)}: {1000 * run:.1f} ms profiled rerun ({1000 * wall:.1f} ms wall, "
              f"AppTest)")
        print("| part of the rerun | share | ms |\n|---|---:|---:|")
        named = 0.0
        for label, _ in CATEGORIES:
            share = statistics.median(t[2][label] / t[1] for t in tries)
            named += 0.0 if part(label) or label.startswith(("figure", "serial", "st.cache", "widgets", "sending")) \
                else share
            print(f"| {label.replace('  ', '&nbsp;&nbsp;')} | {share:.0%} | "
                  f"{1000 * statistics.median(t[2][label] for t in tries):.1f} |")
        print(f"| the rest (Streamlit's script runner, outside app.py) | {max(0.0, 1 - named):.0%} | |")
        if dump:
            tries[-1][3].dump_stats(f"{dump}-{list(profiled.rows).index(row)}.prof")
        if top:
            stats = tries[-1][3]
            print(f"\n{row}: the {top} functions with the most cumulative time (last try)")
            entries = sorted(stats.stats.items(), key=lambda e: -e[1][3])
            for (file, line, func), (_, calls, _, cum, _) in entries[:top]:
                print(f"{1000 * cum:8.1f} ms {calls:6d} calls  {file[-60:]}:{line} {func}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.page_profile", description=__doc__.splitlines()[0])
    parser.add_argument("--page", default="attention",
                        help="attention (its rerun kinds), or a page to switch to from it: "
                             + ", ".join(p.url_path or "home" for p in APP_PAGES if p.url_path != "attention"))
    parser.add_argument("--repeats", type=int, default=8)
    parser.add_argument("--top", type=int, default=0, help="also print the N functions with most cumulative time")
    parser.add_argument("--dump", type=Path, default=None, help="write each row's last profile to DUMP-<i>.prof")
    parser.add_argument("--checkpoints", type=Path, default=ROOT / "checkpoints")
    args = parser.parse_args(argv)
    profiled = Profiled(args.checkpoints)
    if args.page == "attention":
        attention_rows(profiled, args.repeats)
    else:
        switch_rows(profiled, args.page, args.repeats)
    report(profiled, args.top, args.dump)
    return 0


if __name__ == "__main__":
    sys.exit(main())
