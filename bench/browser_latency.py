"""What a person in front of the app waits for, measured in headless Chromium, against a hello-world page.

    python -m bench.browser_latency [--repeats 5] [--port 0] [--only attention positional long]

Starts `streamlit run app.py` (bundled checkpoints) and a two-page hello-world Streamlit app, each on its
own loopback port, drives both from one Chromium (Playwright, Debian's /usr/bin/chromium) and prints one
table: every page's first complete render after in-app navigation (a sidebar link click), every main
interaction (new sentence, layer, head, view, checkpoint, probe name, opening the probe's "Where from" and a
new name with it open), and for the long run (extrapolation) the time until progress shows. The "512 tokens"
rows (`--only long`) open a third server on the models of `bench.long_inputs` (a 512-context model of ours, a
Hugging Face BERT folder) and time the attention page's head, model and query-key views and their token window
at 512 tokens. Each row is the median of --repeats warm tries (one unmeasured try first); the hello-world
page's navigation and text commit are timed in the same run and every row shows its ratio to them.

"Complete" = the server sent `script_finished` for a run that started after the click (Streamlit's own
websocket message, parsed with its protobuf) AND the browser shows no stale element, no "Running"
widget, and every plotly chart has drawn, then one painted frame. Targets (issue 15): navigation
<= 1.5 s, interaction <= 0.5 s, progress visible <= 0.2 s. Exit status 1 when a target is missed.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from bench.browser_driver import IDLE_JS, launch
from serve.streamlit_process import StreamlitServer, free_port, start_healthy
from ui import APP_PAGES

ROOT = Path(__file__).resolve().parent.parent
NAV_TARGET_S, INTERACTION_TARGET_S, PROGRESS_TARGET_S = 1.5, 0.5, 0.2
LARGE_MODEL_TARGET_S = 1.0  # issue 42: a new 64-token sentence on a 135M LLaMA-shaped folder
VIEWPORT = {"width": 1400, "height": 1000}
HELLO_APP = '''import streamlit as st

def hello():
    st.title("Hello")
    text = st.text_input("Sentence", "hello")
    st.write(f"{len(text)} characters")

def other():
    st.title("Other")
    st.write("world")

st.navigation([st.Page(hello, title="Hello", default=True), st.Page(other, title="Other")]).run()
'''
PAGE_TITLES = {page.url_path: page.title for page in APP_PAGES}  # "" is Home
STEPS_MODEL = "lm-learned"  # the bundled checkpoint with training-step snapshots (the slider rows)
PROGRESS_SELECTOR = '[data-testid="stProgress"], [data-testid="stSpinner"]'
INPUT_CLOCK_JS = """window.__lastInput = 0;
for (const kind of ['pointerdown', 'mousedown', 'keydown']) {  // a table's canvas takes pointerdown only
    document.addEventListener(kind, () => { window.__lastInput = performance.now(); }, true);
}"""
# When the progress element first appears, on the browser's clock (as the click's time): Playwright's own
# click call (its actionability checks, ~0.1-0.2 s here) is not the app's delay.
PROGRESS_CLOCK_JS = """(selector) => {
    window.__progressAt = null;
    const seen = new MutationObserver(() => {
        if (document.querySelector(selector)) { window.__progressAt = performance.now(); seen.disconnect(); }
    });
    seen.observe(document.body, {childList: true, subtree: true});
}"""
FRAME_JS = "() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(() => r(true))))"


# --------------------------------------------------------------------------- servers

STREAMLIT_OPTIONS = {"browser.gatherUsageStats": "false", "server.fileWatcherType": "none",
                     "client.toolbarMode": "minimal"}


def start(script: Path, port: int, log: Path, env: dict[str, str] | None = None) -> StreamlitServer:
    """`streamlit run SCRIPT` on 127.0.0.1:port, healthy (serve/streamlit_process.py); `.stop()` ends it."""
    return start_healthy(log, script, extra_env=env, options=STREAMLIT_OPTIONS, port=port)


# --------------------------------------------------------------------------- one browser tab


class Tab:
    """A Playwright page that also records when the server finished each script run."""

    def __init__(self, context) -> None:
        self.page = context.new_page()
        self.page.set_default_timeout(60_000)
        self.page.add_init_script(INPUT_CLOCK_JS)
        self.finished: list[float] = []
        self.page.on("websocket", lambda ws: ws.on("framereceived", self._frame))

    def _frame(self, payload) -> None:
        from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

        if isinstance(payload, str):
            return
        message = ForwardMsg()
        try:
            message.ParseFromString(payload)
        except Exception:  # noqa: BLE001 - not a ForwardMsg: not ours to time
            return
        if message.WhichOneof("type") == "script_finished" and \
                message.script_finished != message.FINISHED_EARLY_FOR_RERUN:
            self.finished.append(time.perf_counter())

    def settle(self, since: float, timeout_s: float = 60.0) -> float:
        """Seconds from `since` until a run started after it has finished and the page has drawn."""
        deadline = time.monotonic() + timeout_s
        while not any(t > since for t in self.finished):
            if time.monotonic() > deadline:
                raise TimeoutError("the server never finished a run")
            self.page.wait_for_timeout(5)
        self.page.wait_for_function(IDLE_JS, polling=10, timeout=int(timeout_s * 1000))
        self.page.evaluate(FRAME_JS)
        return time.perf_counter() - since

    def timed(self, action: Callable[[], None]) -> float:
        """From the person's last click or key press (the browser's own event time, so Playwright's
        driving, e.g. opening a dropdown, is not counted) until the page is complete."""
        self.page.wait_for_function(IDLE_JS, polling=50)
        start = time.perf_counter()
        action()
        self.settle(start)
        return self.page.evaluate("() => (performance.now() - window.__lastInput) / 1000")

    def goto(self, url: str) -> None:
        start = time.perf_counter()
        self.page.goto(url, wait_until="domcontentloaded")
        self.settle(start, timeout_s=180)  # a cold page (first model load) may take long
        time.sleep(0.3)

    # actions
    def nav(self, title: str) -> Callable[[], None]:
        link = self.page.locator('[data-testid="stSidebarNav"] a').filter(has_text=title).first
        return link.click

    def commit(self, label: str, text: str, area: bool) -> Callable[[], None]:
        box = self.page.get_by_label(label, exact=True).first

        def act() -> None:
            box.fill(text)
            box.press("Control+Enter" if area else "Enter")
        return act

    def choose(self, label: str, option: str) -> Callable[[], None]:
        def act() -> None:
            self.page.get_by_role("combobox", name=label, exact=True).first.click()
            self.page.get_by_role("option", name=option, exact=True).first.click()
        return act

    def tab(self, label: str) -> Callable[[], None]:
        return self.page.get_by_role("tab", name=label, exact=True).first.click

    def radio(self, label: str) -> Callable[[], None]:
        return self.page.get_by_text(label, exact=True).first.click

    def typed_choice(self, label: str, typed: str) -> Callable[[], None]:
        """Pick an option of a long select box by typing its start (the list draws only what is in view)."""
        def act() -> None:
            self.page.get_by_role("combobox", name=label, exact=True).first.click()
            self.page.keyboard.type(typed)
            self.page.keyboard.press("Enter")
        return act

    def click(self, name: str) -> Callable[[], None]:
        return self.page.get_by_role("button", name=name, exact=True).first.click

    def slider_key(self, label: str, thumb: int, key: str) -> Callable[[], None]:
        """Press a key on a slider's thumb (a range slider has two: 0 and 1)."""
        return lambda: self.page.get_by_role("slider", name=label).nth(thumb).press(key)


# --------------------------------------------------------------------------- what is measured


@dataclass
class Row:
    what: str
    kind: str  # navigation | interaction | progress | large model (a text commit: ratio to hello's)
    times: list[float]

    @property
    def median(self) -> float:
        return statistics.median(self.times) if self.times else float("nan")

    @property
    def target(self) -> float:
        return {"navigation": NAV_TARGET_S, "interaction": INTERACTION_TARGET_S,
                "progress": PROGRESS_TARGET_S, "large model": LARGE_MODEL_TARGET_S}[self.kind]


def repeat(repeats: int, measure: Callable[[int], float]) -> list[float]:
    measure(-1)  # warm: caches, imports, first plotly draw
    return [measure(i) for i in range(repeats)]


def navigation_rows(tab: Tab, url: str, repeats: int, pages: list[str]) -> list[Row]:
    rows = []
    tab.goto(url + "/")
    for path in pages:
        title = PAGE_TITLES[path]
        away = "Attention" if path == "" else "Home"

        def measure(_: int, title: str = title, away: str = away) -> float:
            tab.timed(tab.nav(away))
            return tab.timed(tab.nav(title))
        rows.append(Row(f"open {title}", "navigation", repeat(repeats, measure)))
        print(f"  {rows[-1].what}: {rows[-1].median:.2f} s", flush=True)
    return rows


SENTENCES = ["Alan Turing was born in Maida Vale .", "Ada Lovelace was born in London .",
             "Karl Long was a British cyclist born in Leeds .", "Grace Hopper was born in New York .",
             "Marie Curie was born in Warsaw .", "Emmy Noether was born in Erlangen .",
             "Ida Wells was born in Holly Springs ."]


def alternate(tab: Tab, first: Callable[[], None], second: Callable[[], None]) -> Callable[[int], float]:
    return lambda i: tab.timed(first if i % 2 else second)


def steps_of(name: str) -> list[int]:
    """The training steps a bundled checkpoint kept (its snapshots file)."""
    from core.io.checkpoint import load
    from core.io.snapshots import snapshots_of

    kept = snapshots_of(load(ROOT / "checkpoints" / f"{name}.safetensors"))
    return kept.steps if kept is not None else []


def interaction_rows(tab: Tab, url: str, repeats: int, pages: list[str], checkpoints: list[str]) -> list[Row]:
    rows: list[Row] = []

    def add(what: str, measure: Callable[[int], float], kind: str = "interaction", repeats: int = repeats) -> None:
        try:
            rows.append(Row(what, kind, repeat(repeats, measure)))
        except Exception as exc:  # noqa: BLE001 - one broken row must not lose the whole table
            print(f"  {what}: FAILED ({type(exc).__name__}: {str(exc)[:120]})", flush=True)
            rows.append(Row(what + " (failed)", kind, []))
            return
        print(f"  {what}: {rows[-1].median:.2f} s", flush=True)

    if "attention" in pages:
        model = next((c for c in checkpoints if c.startswith("birth-vanilla")), checkpoints[0])
        tab.goto(f"{url}/attention?model={model}")
        add("attention: new sentence", lambda i: tab.timed(tab.commit("Sentence", SENTENCES[i + 1], area=True)))
        add("attention: layer", alternate(tab, tab.choose("Layer", "1"), tab.choose("Layer", "0")))
        add("attention: head", alternate(tab, tab.choose("Head", "1"), tab.choose("Head", "0")))
        add("attention: view (single <-> model view)",
            alternate(tab, tab.radio("Model view"), tab.radio("Single head")))
        other = next((c for c in checkpoints if c != model and c.startswith("birth")), checkpoints[-1])
        add("attention: checkpoint", alternate(tab, tab.choose("Checkpoint", other), tab.choose("Checkpoint", model)))
    if "attention" in pages and STEPS_MODEL in checkpoints:  # the bundled model that kept training steps
        tab.goto(f"{url}/attention?model={STEPS_MODEL}")
        thumb = tab.page.get_by_role("slider", name="Training step").first
        kept = len(steps_of(STEPS_MODEL))  # the page opens on the last of them
        # each press a step not seen yet (new weights, new forward pass), as many as the file keeps
        add("attention: training step, new each time", lambda i: tab.timed(lambda: thumb.press("ArrowLeft")),
            repeats=min(repeats, kept - 2))
        tab.timed(lambda: thumb.press("End"))  # back at the last step: the next rows start from a known place
        add("attention: training step, back and forth",
            alternate(tab, lambda: thumb.press("ArrowLeft"), lambda: thumb.press("ArrowRight")))
        add("attention: training step, model view", lambda i: tab.timed(tab.radio("Model view")) if i < 0 else
            tab.timed(lambda: thumb.press("ArrowRight" if i % 2 else "ArrowLeft")))
    if "probe" in pages:
        tab.goto(f"{url}/probe")
        names = ["Alan Turing", "Ada Lovelace", "Grace Hopper", "Marie Curie", "Emmy Noether", "Ida Wells",
                 "Karl Long"]
        add("probe: name", lambda i: tab.timed(tab.commit("A name, or a question 'Where was NAME born?'",
                                                           names[i + 1], area=False)))
        where_from = tab.radio("Where from: logit lens, attribution, causal tracing")  # the toggle's label

        def open_where_from(i: int) -> float:
            if i >= 0:
                tab.timed(where_from)  # close it again (not measured): each try times an opening
            return tab.timed(where_from)
        add("probe: open 'Where from'", open_where_from)
        fresh = ["Lise Meitner", "Paul Dirac", "Max Born", "Otto Hahn", "Rosalind Franklin", "Dorothy Hodgkin",
                 "Niels Bohr", "Enrico Fermi", "Hedy Lamarr", "Alan Kay", "Edith Clarke", "Hans Bethe"]
        add("probe: name, with 'Where from' open (new traces)",
            lambda i: tab.timed(tab.commit("A name, or a question 'Where was NAME born?'", fresh[(i + 1) % 12],
                                           area=False)))
    if "positional" in pages:
        tab.goto(f"{url}/positional?pos_section=sentence")
        add("positional: new sentence", lambda i: tab.timed(tab.commit("Sentence", SENTENCES[i + 1], area=False)))
        add("positional: layer", alternate(tab, tab.choose("Layer", "1"), tab.choose("Layer", "0")))
        add("positional: tab (sentence <-> training)",
            alternate(tab, tab.tab("Training"), tab.tab("One sentence")))
        add("positional: tab (training <-> extrapolation)",  # recorded results, drawn without a click
            alternate(tab, tab.tab("Longer than trained"), tab.tab("Training")))
        tab.goto(f"{url}/positional?pos_section=extrapolation")
        button = tab.page.get_by_role("button", name="Run extrapolation")
        windows = tab.page.get_by_label("Predictions scored, windows", exact=True)

        def progress(i: int) -> float:
            """A cold run each time (a new number of predictions is a new cache key): the progress bar
            must show before the work ends."""
            tab.page.wait_for_function(IDLE_JS, polling=50)
            windows.fill(str(64 + ((i + 2) * 37 + int(time.time())) % 500))
            tab.page.evaluate(PROGRESS_CLOCK_JS, PROGRESS_SELECTOR)
            start = time.perf_counter()
            button.click()
            tab.page.wait_for_selector(PROGRESS_SELECTOR, state="attached", timeout=120_000)
            shown = tab.page.evaluate("() => (window.__progressAt - window.__lastInput) / 1000")
            tab.settle(start, timeout_s=300)
            return shown
        add("positional: extrapolation, progress shown", progress, "progress")
        add("positional: extrapolation again (cached)", lambda i: tab.timed(button.click))
    if "errors" in pages and "names-pretrained" in checkpoints:
        errors_rows(tab, url, add)
    return rows


def errors_rows(tab: Tab, url: str, add: Callable) -> None:
    """The Errors page on names-pretrained: sort, filter, select an example (a row of the table), a confusion cell."""
    tab.goto(f"{url}/errors?model=names-pretrained")
    add("errors: sort by loss <-> line", alternate(tab, tab.typed_choice("Sort by", "loss"),
                                                   tab.typed_choice("Sort by", "line")))
    add("errors: filter wrong <-> all", alternate(tab, tab.radio("wrong"), tab.radio("all")))

    def row(k: int) -> Callable[[], None]:
        def act() -> None:  # the table is a canvas: its row k's selection box, below the header row
            table = tab.page.locator('[data-testid="stDataFrame"]').first
            table.scroll_into_view_if_needed()
            box = table.bounding_box()
            tab.page.mouse.click(box["x"] + 12, box["y"] + 35 * (k + 1) + 17)
        return act
    add("errors: select an example (table row)", alternate(tab, row(0), row(1)))
    chart = tab.page.locator(".js-plotly-plot").first
    mistake, right = tab.page.evaluate(FULLEST_CELLS_JS, chart.element_handle())
    add("errors: confusion cell (filters the table)",
        alternate(tab, confusion_cell(tab, mistake), confusion_cell(tab, right)))


# The confusion chart's two cells a person would click, as tests/browser/test_errors_in_browser.py clicks one: the
# fullest mistake (off the diagonal) and the fullest right cell, from the chart's own points (customdata: gold,
# predicted, count). Cells 0 and 13, clicked before, could be empty cells.
FULLEST_CELLS_JS = """(chart) => {
    const cells = chart.data[1].customdata.map((c, i) => ({i: i, right: c[0] === c[1], n: c[2]}));
    const fullest = (keep) => cells.filter(keep).reduce((a, b) => (b.n > a.n ? b : a)).i;
    return [fullest(c => !c.right && c.n > 0), fullest(c => c.right && c.n > 0)];
}"""
# What is under the pointer at (x, y): a click there reaches the chart only if it is the chart's own layer.
HIT_JS = """([x, y]) => { const e = document.elementFromPoint(x, y);
    return e && e.closest('[data-testid="stPlotlyChart"]') ? '' : (e ? e.outerHTML.slice(0, 120) : 'nothing'); }"""


def confusion_cell(tab: Tab, index: int) -> Callable[[], None]:
    """A pointer click at the centre of the confusion chart's cell `index`, the chart first scrolled to the middle of
    the view (the row clicks before scroll the table up: a cell near the top could sit under Streamlit's header,
    which a forced click hits instead, and no run starts). Fails at once, saying what it hit, when the point is not
    the chart's."""
    def act() -> None:
        chart = tab.page.locator(".js-plotly-plot").first
        chart.evaluate("e => e.scrollIntoView({block: 'center'})")
        box = chart.locator(".scatterlayer .trace .points path").nth(index).bounding_box()
        x, y = box["x"] + box["width"] / 2, box["y"] + box["height"] / 2
        hit = tab.page.evaluate(HIT_JS, [x, y])
        if hit:
            raise RuntimeError(f"confusion cell {index} at ({x:.0f}, {y:.0f}) is under {hit}")
        tab.page.mouse.click(x, y)
    return act


def long_rows(tab: Tab, url: str, repeats: int, models: list[str]) -> list[Row]:
    """The attention page at 512 tokens (bench.long_inputs.LONG_TEXT cut to 512 by the page), per model."""
    from urllib.parse import quote

    from bench.long_inputs import LONG_TEXT

    rows: list[Row] = []
    words = ["valladolid", "warsaw", "manchester", "kielce"]
    for model in models:
        def add(what: str, measure: Callable[[int], float], model: str = model) -> None:
            try:
                rows.append(Row(f"512 tokens, {model}: {what}", "interaction", repeat(repeats, measure)))
            except Exception as exc:  # noqa: BLE001 - one broken row must not lose the whole table
                print(f"  {model} {what}: FAILED ({type(exc).__name__}: {str(exc)[:120]})", flush=True)
                rows.append(Row(f"512 tokens, {model}: {what} (failed)", "interaction", []))
                return
            print(f"  {rows[-1].what}: {rows[-1].median:.2f} s", flush=True)

        tab.goto(f"{url}/attention?model={model}&text={quote(LONG_TEXT)}")
        add("new text", lambda i: tab.timed(tab.commit("Sentence", LONG_TEXT[i % 3 * 7:], area=True)))
        add("layer", alternate(tab, tab.choose("Layer", "1"), tab.choose("Layer", "0")))
        add("head", alternate(tab, tab.choose("Head", "1"), tab.choose("Head", "0")))
        add("find a token (window moves)", lambda i: tab.timed(tab.commit("Find a token", words[i % 4], area=False)))
        add("next match", lambda i: tab.timed(tab.click("Next")))
        window = "Tokens shown (first, last position)"
        add("window slider (one step)", alternate(tab, tab.slider_key(window, 1, "ArrowRight"),
                                                  tab.slider_key(window, 1, "ArrowLeft")))
        add("view (single <-> model view)", alternate(tab, tab.radio("Model view"), tab.radio("Single head")))
        add("view (single <-> query-key)", alternate(tab, tab.radio("Query·key"), tab.radio("Single head")))
        tab.timed(tab.radio("Query·key"))
        add("query-key: query token", alternate(tab, tab.typed_choice("Query token", "300: "),
                                                tab.typed_choice("Query token", "200: ")))
        add("query-key: key token", alternate(tab, tab.typed_choice("Key token", "150: "),
                                              tab.typed_choice("Key token", "190: ")))
        tab.timed(tab.radio("Single head"))
    return rows


def hf_135m_rows(tab: Tab, url: str, repeats: int, folder: Path | None) -> list[Row]:
    """The attention page on bench.hf_135m's 135M LLaMA-shaped folder: a new sentence of exactly 64 tokens (each
    try another one, so no cache answers it)."""
    if folder is None:
        return []
    import transformers

    from bench.hf_135m import WIKI

    tokenizer = transformers.AutoTokenizer.from_pretrained(folder, local_files_only=True)
    words = WIKI.read_text(encoding="utf-8").split()
    texts = [tokenizer.decode(tokenizer(" ".join(words[80 * i: 80 * i + 80]))["input_ids"][:64])
             for i in range(repeats + 2)]
    assert all(len(tokenizer(t)["input_ids"]) == 64 for t in texts), "a sentence is not 64 tokens"
    tab.goto(f"{url}/attention?model={folder.name}")
    what = "135M LLaMA folder: new 64-token sentence"
    try:
        row = Row(what, "large model", repeat(repeats, lambda i: tab.timed(tab.commit("Sentence", texts[i + 1],
                                                                                        area=True))))
    except Exception as exc:  # noqa: BLE001 - one broken row must not lose the whole table
        print(f"  {what}: FAILED ({type(exc).__name__}: {str(exc)[:120]})", flush=True)
        return [Row(what + " (failed)", "large model", [])]
    print(f"  {what}: {row.median:.2f} s", flush=True)
    return [row]


def build_tensorboard_runs(folder: Path, points: int = 100_000, seed_points: int = 2_000) -> None:
    """A TensorBoard run of `points` scalars and three seeds of a shorter one, written by torch's SummaryWriter
    (needs requirements-tensorboard.txt), dated an hour back so the page does not follow them live."""
    import os

    import numpy as np
    from torch.utils.tensorboard import SummaryWriter

    from bench.tiny_checkpoints import save_tiny_checkpoint

    folder.mkdir(parents=True, exist_ok=True)
    save_tiny_checkpoint(folder / "tiny-lm.safetensors", "lm")  # the sidebar's model picker has one to show
    rng = np.random.default_rng(0)
    runs = {"long": points, **{f"lm-seed{s}": seed_points for s in range(3)}}
    for name, n in runs.items():
        writer = SummaryWriter(str(folder / "tb" / name), max_queue=10_000, flush_secs=3600)
        loss = 3.0 * np.exp(-np.arange(n) / (n / 5)) + 0.5 + rng.normal(scale=0.05, size=n)
        for step, value in enumerate(loss):
            writer.add_scalar("train/loss", float(value), step)
        writer.close()
    old = time.time() - 3600
    for path in folder.rglob("*"):
        os.utime(path, (old, old))


def tensorboard_rows(tab: Tab, url: str, repeats: int, ready: bool) -> list[Row]:
    """The Training curves page on bench-built TensorBoard runs (issue 53): the 100,000-point run's x axis
    (step <-> relative time) and smoothing, the seed group's band (min-max <-> one standard deviation)."""
    if not ready:
        return []
    rows: list[Row] = []

    def add(what: str, measure: Callable[[int], float]) -> None:
        try:
            rows.append(Row(what, "interaction", repeat(repeats, measure)))
        except Exception as exc:  # noqa: BLE001 - one broken row must not lose the whole table
            print(f"  {what}: FAILED ({type(exc).__name__}: {str(exc)[:120]})", flush=True)
            rows.append(Row(what + " (failed)", "interaction", []))
            return
        print(f"  {what}: {rows[-1].median:.2f} s", flush=True)

    tab.goto(f"{url}/curves?runs=runs/tb/long&metric=loss&x=step&smoothing=0.6")
    add("curves: TensorBoard 100k points, x axis", alternate(tab, tab.choose("X axis", "Relative time (s)"),
                                                             tab.choose("X axis", "Step")))
    slider = tab.page.get_by_role("slider", name="Smoothing").first
    add("curves: TensorBoard 100k points, smoothing", alternate(tab, lambda: slider.press("ArrowRight"),
                                                                lambda: slider.press("ArrowLeft")))
    tab.goto(f"{url}/curves?runs=runs/tb/lm-seed0,runs/tb/lm-seed1,runs/tb/lm-seed2&metric=loss&x=step")
    add("curves: seed group, band kind", alternate(tab, tab.choose("Band", "mean ± 1 standard deviation"),
                                                   tab.choose("Band", "min to max")))
    return rows


def baseline(tab: Tab, url: str, repeats: int) -> tuple[Row, Row]:
    tab.goto(url + "/")

    def open_hello(_: int) -> float:
        tab.timed(tab.nav("Other"))
        return tab.timed(tab.nav("Hello"))
    nav = Row("hello world: open page", "navigation", repeat(repeats, open_hello))
    text = Row("hello world: commit text", "interaction",
               repeat(repeats, lambda i: tab.timed(tab.commit("Sentence", SENTENCES[i + 1], area=False))))
    return nav, text


def table(rows: list[Row], nav_base: Row, text_base: Row) -> str:
    lines = [f"{'what':<46} {'median':>8} {'target':>7} {'x hello':>8}  result", "-" * 82]
    for row in [nav_base, text_base, *rows]:
        base = nav_base if row.kind == "navigation" else text_base
        ratio = row.median / base.median if base.median > 0 else float("nan")
        result = "-" if row in (nav_base, text_base) else ("pass" if row.median <= row.target else "MISS")
        lines.append(f"{row.what:<46} {row.median:>7.2f}s {row.target:>6.1f}s {ratio:>7.1f}x  {result}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--port", type=int, default=0, help="app port (the hello app gets port + 1); 0: free ports")
    parser.add_argument("--only", nargs="*", default=None, metavar="PAGE",
                        help="page paths to measure ('home' for /, 'long' for the 512-token rows, 'hf135m' for "
                             "the 135M LLaMA-shaped folder's row, 'tensorboard' for the Training curves page on "
                             "TensorBoard runs); default all")
    parser.add_argument("--hf-folder", type=Path, default=None,
                        help="bench.hf_135m's folder, if built already (else built in a temporary folder)")
    args = parser.parse_args(argv)
    from playwright.sync_api import sync_playwright

    from core.io.checkpoint import checkpoint_dir, list_checkpoints

    pages = [*PAGE_TITLES, "long", "hf135m", "tensorboard"] if args.only is None else \
        ["" if p == "home" else p for p in args.only]
    checkpoints = [i.name for i in list_checkpoints(checkpoint_dir()) if not i.error]
    app_port = args.port or free_port()
    hello_port = args.port + 1 if args.port else free_port()
    long_port = args.port + 2 if args.port else free_port()
    hf_port = args.port + 3 if args.port else free_port()
    tb_port = args.port + 4 if args.port else free_port()
    with tempfile.TemporaryDirectory(prefix="browser-latency-") as tmp:
        hello = Path(tmp) / "hello.py"
        hello.write_text(HELLO_APP)
        servers = [start(ROOT / "app.py", app_port, Path(tmp) / "app.log"),
                   start(hello, hello_port, Path(tmp) / "hello.log")]
        long_models: list[str] = []
        if "long" in pages:
            from bench.long_inputs import build

            long_models = build(Path(tmp) / "long")
            servers.append(start(ROOT / "app.py", long_port, Path(tmp) / "long.log",
                                 env={"ATTENTION_LAB_CHECKPOINTS": str(Path(tmp) / "long")}))
        hf_folder = None
        if "hf135m" in pages:
            from bench.hf_135m import NAME
            from bench.hf_135m import build as build_135m

            hf_folder = build_135m(args.hf_folder or Path(tmp) / "hf135m" / NAME)
            servers.append(start(ROOT / "app.py", hf_port, Path(tmp) / "hf135m.log",
                                 env={"ATTENTION_LAB_CHECKPOINTS": str(hf_folder.parent)}))
        tb_ready = False
        if "tensorboard" in pages:
            try:
                build_tensorboard_runs(Path(tmp) / "runs")
                tb_ready = True
            except ImportError as exc:
                print(f"  TensorBoard rows skipped: {exc} (pip install -r requirements-tensorboard.txt)", flush=True)
        if tb_ready:
            servers.append(start(ROOT / "app.py", tb_port, Path(tmp) / "tensorboard.log",
                                 env={"ATTENTION_LAB_CHECKPOINTS": str(Path(tmp) / "runs")}))
        try:
            with sync_playwright() as p:
                browser = launch(p)
                tab = Tab(browser.new_context(viewport=VIEWPORT))
                print(f"repeats {args.repeats}, checkpoints {len(checkpoints)}; hello world baseline", flush=True)
                nav_base, text_base = baseline(tab, f"http://127.0.0.1:{hello_port}", args.repeats)
                app = f"http://127.0.0.1:{app_port}"
                rows = navigation_rows(tab, app, args.repeats, [p for p in pages if p in PAGE_TITLES])
                rows += interaction_rows(tab, app, args.repeats, pages, checkpoints)
                rows += long_rows(tab, f"http://127.0.0.1:{long_port}", args.repeats, long_models)
                rows += hf_135m_rows(tab, f"http://127.0.0.1:{hf_port}", args.repeats, hf_folder)
                rows += tensorboard_rows(tab, f"http://127.0.0.1:{tb_port}", args.repeats, tb_ready)
                browser.close()
        finally:
            for server in servers:
                server.stop()
    print("\n" + table(rows, nav_base, text_base))
    missed = [r.what for r in rows if not r.median <= r.target]
    worst = max(rows, key=lambda r: r.median / r.target)
    print(f"RESULT browser_latency measured={worst.median:.2f}s({worst.what.replace(' ', '_')}) "
          f"target=nav<=1.5s,interaction<=0.5s,progress<=0.2s,135M<=1s pass={'false' if missed else 'true'}")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
