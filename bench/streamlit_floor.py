"""What Streamlit itself charges for the elements a page sends: each page's floor, whatever the app computes.

    python -m bench.streamlit_floor [--repeats 40] [--per-page 20] [--app-repeats 8] [--checkpoints DIR]

Issue 45 asks for <= 12 ms of server CPU per interaction in bench.load's mix. This measures how much of that
Streamlit spends before the app does anything, in two steps, on one machine in one run:

1. **What each kind of element costs.** A generated app (`FLOOR_APP`) has an empty page (a title) and, per
   element kind, a page of `--per-page` elements of that kind with nothing computed: markdown, headings, code,
   selectboxes, sliders, tables (an Arrow table built once), plotly charts (one small figure built once, drawn
   through the app's own `ui.display.show_figure`), containers, ... One websocket session switches between the
   empty page and each kind's page `--repeats` times, and the server's CPU seconds (user + system, /proc) are read
   around every switch. A kind's cost is (its page - the empty page) / per-page; a container's is its page less
   the markdown each holds. The empty page's own cost is Streamlit's per-run floor (a script run, the new-session
   message, the navigation, sending).
2. **What each of the app's interactions sends**, and what it costs. One session on the real app (bundled
   checkpoints) types a new sentence and switches from Attention to every page and back, `--app-repeats` times,
   counting the elements of every run by kind and the containers (add_block), with the server's CPU around each
   as bench.server_work reads it. The run's **floor** is the empty page's cost plus each element's kind cost;
   kinds the first step did not measure are charged as markdown (and listed).

Charts and tables in step 1 are small, and the floor charges no model work, no figure building and no cache
lookups: it is a lower bound of what the same elements cost the real page. Both steps weigh the interactions as
bench.load's mix does (`bench.server_work.load_mix`). The last line, `RESULT streamlit_floor measured=<the mix's
floor, ms> target<=12 ...`, says whether issue 45's 12 ms leaves the app any room; it is not in bench.run_all.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from bench.load_servers import cpu_seconds
from bench.server_work import load_mix, start
from serve.streamlit_process import start_healthy

ROOT = Path(__file__).resolve().parent.parent
BLOCK = "container"  # a delta that adds a block (st.container, st.columns, st.expander, tabs, forms)
SETTLE_S = 0.05  # as bench.server_work: let the previous run's sending finish before reading the clock

# element kind (the protobuf's name for it) -> how the floor app draws one, `i` its index on the page
KINDS: dict[str, str] = {
    "markdown": 'st.markdown(f"**line {i}**: some *text* :violet-badge[x]")',
    "heading": 'st.subheader(f"Heading {i}")',
    "code": 'st.code(f"token chips {i} | a | b", language=None, wrap_lines=True)',
    "text": 'st.text(f"plain text {i}")',
    "alert": 'st.info(f"a note {i}")',
    "selectbox": 'st.selectbox(f"select {i}", ["one", "two", "three"], key=f"s{i}")',
    "radio": 'st.radio(f"radio {i}", ["one", "two", "three"], horizontal=True, key=f"r{i}")',
    "checkbox": 'st.toggle(f"toggle {i}", key=f"c{i}")',
    "slider": 'st.slider(f"slider {i}", 0, 10, 3, key=f"l{i}")',
    "multiselect": 'st.multiselect(f"multi {i}", ["one", "two", "three"], ["one"], key=f"m{i}")',
    "text_input": 'st.text_input(f"input {i}", "Ada Lovelace", key=f"t{i}")',
    "text_area": 'st.text_area(f"area {i}", "Ada Lovelace was born in London.", key=f"a{i}")',
    "number_input": 'st.number_input(f"number {i}", 0, 100, 7, key=f"n{i}")',
    "button": 'st.button(f"button {i}", key=f"b{i}")',
    "download_button": 'st.download_button(f"CSV {i}", data=lambda: "a,b", file_name="x.csv", on_click="ignore", '
                       'key=f"d{i}")',
    "dataframe": 'st.dataframe(table(), hide_index=True, key=f"f{i}")',
    "plotly_chart": 'show_figure(chart(), f"chart-{i}", key=f"p{i}")',
    "table": 'st.table(table())',
    "metric": 'st.metric(f"metric {i}", "86%", "+2%")',
    "file_uploader": 'st.file_uploader(f"file {i}", key=f"u{i}")',
    "page_link": 'st.page_link("https://example.org", label=f"link {i}")',
    BLOCK: 'st.container().markdown(f"**line {i}**: some *text* :violet-badge[x]")',
}

FLOOR_APP = '''import sys
sys.path.insert(0, {root!r})
import pyarrow as pa
import streamlit as st

from core.figures.probe import candidate_bars
from ui.display import show_figure


@st.cache_resource
def chart():
    return candidate_bars(["London", "Paris", "Rome"], [0.5, 0.3, 0.2], "London", "Paris", title="a chart")


@st.cache_resource
def table():
    return pa.table({{"model": ["a", "b", "c"], "answer": ["London", "Paris", "Rome"], "p": [0.5, 0.3, 0.2]}})


def empty():
    st.title("Empty")


def page(draw):
    def run():
        st.title("Page")
        for i in range({per_page}):
            draw(i)
    return run


def replica(sent):
    def run():
        st.title("Page")
        for kind, count in sent.items():
            for i in range(count):
                st.container() if kind == {block!r} else DRAW[kind](i)
    return run

{kinds}
REPLICAS = {replicas!r}
st.navigation([st.Page(empty, title="empty", url_path="empty", default=True)] + [
    st.Page(page(draw), title=name, url_path=name) for name, draw in DRAW.items()] + [
    st.Page(replica(sent), title=f"replica {{i}}", url_path=f"replica-{{i}}") for i, sent in enumerate(REPLICAS)]).run()
'''


def floor_app(per_page: int, replicas: list[dict[str, int]] = ()) -> str:
    """The floor app's source: an empty default page, a page of `per_page` elements per kind, and a replica page
    per entry of `replicas` ({kind: count}, BLOCK for empty containers): the same elements with nothing computed."""
    kinds = "DRAW = {\n" + "".join(f"    {name!r}: lambda i: {draw},\n" for name, draw in KINDS.items()) + "}\n"
    return FLOOR_APP.format(root=str(ROOT), per_page=per_page, kinds=kinds, block=BLOCK,
                            replicas=[dict(sent) for sent in replicas])


@dataclass
class Sent:
    """What one run sent: elements by kind, and blocks."""

    kinds: Counter = field(default_factory=Counter)


def kind_costs(empty_ms: float, page_ms: dict[str, float], per_page: int) -> dict[str, float]:
    """ms per element of each kind, from the empty page's and each kind's page's mean CPU ms per switch; a
    container's page holds one markdown element per container, which is not the container's."""
    costs = {kind: (ms - empty_ms) / per_page for kind, ms in page_ms.items()}
    if BLOCK in costs and "markdown" in costs:
        costs[BLOCK] -= costs["markdown"]
    return costs


def floor_ms(sent: Counter, empty_ms: float, costs: dict[str, float]) -> tuple[float, set[str]]:
    """A run's floor: the empty page's cost plus each element's kind cost (markdown's for a kind not measured);
    also the kinds charged as markdown."""
    unmeasured = {kind for kind in sent if kind not in costs}
    return empty_ms + sum(n * costs.get(kind, costs["markdown"]) for kind, n in sent.items()), unmeasured


class CountingSession:
    """A serve.streamlit_ws session whose runs also count what they sent (elements by kind, blocks)."""

    def __init__(self, url: str) -> None:
        from serve.streamlit_ws import StreamlitSession

        self.session = StreamlitSession(url, 120)
        self.sent = Counter()

    async def connect(self) -> None:
        from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

        await self.session.connect()
        receive = self.session.ws.recv

        async def counted():
            raw = await receive()
            message = ForwardMsg()
            message.ParseFromString(raw)
            if message.WhichOneof("type") == "delta":
                delta = message.delta.WhichOneof("type")
                if delta == "new_element":
                    self.sent[message.delta.new_element.WhichOneof("type")] += 1
                elif delta == "add_block":
                    self.sent[BLOCK] += 1
            return raw

        self.session.ws.recv = counted

    async def measured(self, pid: int, **rerun) -> tuple[float, Counter]:
        """(CPU ms of the server over one run, what the run sent)."""
        await asyncio.sleep(SETTLE_S)
        self.sent = Counter()
        before = cpu_seconds(pid)
        await self.session.rerun(**rerun)
        await asyncio.sleep(SETTLE_S)
        return 1000 * (cpu_seconds(pid) - before), self.sent

    async def close(self) -> None:
        await self.session.close()


async def measure_floor(url: str, pid: int, repeats: int, replicas: int) -> dict[str, float]:
    """Mean CPU ms per switch to each page of the floor app ("" the empty one, each kind's, "replica-N"), over
    `repeats` round trips from the empty page."""
    client = CountingSession(url)
    await client.connect()
    await client.session.rerun()
    pages = client.session.pages
    names = list(KINDS) + [f"replica-{i}" for i in range(replicas)]
    for name in names:  # every page once first: its first run compiles and caches
        await client.session.rerun(page_hash=pages[name])
        await client.session.rerun(page_hash=pages[""])
    spent: dict[str, list[float]] = {name: [] for name in ["", *names]}
    for _ in range(repeats):
        for name in names:
            spent[name].append((await client.measured(pid, page_hash=pages[name]))[0])
            spent[""].append((await client.measured(pid, page_hash=pages[""]))[0])
    await client.close()
    return {name: sum(ms) / len(ms) for name, ms in spent.items()}


async def measure_app(url: str, pid: int, repeats: int) -> dict[str, tuple[float, Counter]]:
    """Each interaction of bench.load's mix on the real app: (mean CPU ms, what its last run sent)."""
    from bench.server_work import NAMES, PLACES

    client = CountingSession(url)
    await client.connect()
    session = client.session
    await session.rerun(page_name="attention")
    others = [path for path in session.pages if path != "attention"]
    await session.rerun(page_hash=session.pages["attention"], text={"Sentence": "warm up the model"})
    for page in others:  # first visits import modules and fill caches
        await session.rerun(page_hash=session.pages[page], query_string="")
        await session.rerun(page_hash=session.pages["attention"], query_string="")
    rows: dict[str, list[float]] = {}
    sent: dict[str, Counter] = {}

    async def one(row: str, **rerun) -> None:
        ms, what = await client.measured(pid, **rerun)
        rows.setdefault(row, []).append(ms)
        sent[row] = what

    for number in range(repeats):
        typed = f"{NAMES[number % len(NAMES)]} was born in {PLACES[number % len(PLACES)]} ({number}, floor)."
        await one("new sentence", page_hash=session.pages["attention"], text={"Sentence": typed})
        for page in others:
            await one(f"switch to {page or 'home'}", page_hash=session.pages[page], query_string="")
            await one("switch back to attention", page_hash=session.pages["attention"], query_string="")
    await client.close()
    return {row: (sum(ms) / len(ms), sent[row]) for row, ms in rows.items()}


def report(empty_ms: float, costs: dict[str, float], app: dict[str, tuple[float, Counter]],
           replicas: dict[str, float]) -> float:
    """Print both tables; return the mix's floor in ms (the replicas')."""
    print(f"\nStreamlit's cost per element (one run of the empty page: {empty_ms:.2f} ms)")
    for kind, ms in sorted(costs.items(), key=lambda item: -item[1]):
        print(f"  {kind:18} {ms:6.3f} ms")
    print(f"\n{'interaction':28} {'elements':>8} {'blocks':>6} {'measured':>9} {'replica':>8} {'sum':>8} "
          f"{'replica / measured':>18}")
    modelled = {}
    for row, (ms, sent) in app.items():
        modelled[row], _ = floor_ms(sent, empty_ms, costs)
        elements = sum(n for kind, n in sent.items() if kind != BLOCK)
        print(f"{row:28} {elements:8d} {sent[BLOCK]:6d} {ms:6.1f} ms {replicas[row]:5.1f} ms {modelled[row]:5.1f} ms "
              f"{replicas[row] / ms:17.0%}")
    mixes = load_mix({row: [[ms / 1000], [replicas[row] / 1000], [modelled[row] / 1000]]
                      for row, (ms, _) in app.items()})
    print(f"{'bench.load mix (estimated)':28} {'':8} {'':6} {mixes[0]:6.1f} ms {mixes[1]:5.1f} ms {mixes[2]:5.1f} ms "
          f"{mixes[1] / mixes[0]:17.0%}")
    return mixes[1]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.streamlit_floor", description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=40, help="round trips per element kind")
    parser.add_argument("--per-page", type=int, default=20, help="elements on each kind's page")
    parser.add_argument("--app-repeats", type=int, default=8, help="rounds of the app's interactions")
    parser.add_argument("--checkpoints", type=Path, default=ROOT / "checkpoints")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    with tempfile.TemporaryDirectory(prefix="attention-floor-") as tmp:
        print(f"the app ({args.checkpoints}): {args.app_repeats} rounds; then {len(KINDS)} element kinds, "
              f"{args.per_page} a page, and a replica of each interaction's elements, {args.repeats} round trips "
              f"each; server CPU (user+system) per run", flush=True)
        app = start(ROOT, args.checkpoints, Path(tmp) / "app.log")
        try:
            measured = asyncio.run(measure_app(app.url, app.process.pid, args.app_repeats))
        finally:
            app.stop()
        rows = list(measured)
        script = Path(tmp) / "floor.py"
        script.write_text(floor_app(args.per_page, [measured[row][1] for row in rows]))
        floor = start_healthy(Path(tmp) / "floor.log", script=script, root=ROOT)
        try:
            pages = asyncio.run(measure_floor(floor.url, floor.process.pid, args.repeats, len(rows)))
        finally:
            floor.stop()
    empty_ms = pages[""]
    costs = kind_costs(empty_ms, {kind: pages[kind] for kind in KINDS}, args.per_page)
    mix_floor = report(empty_ms, costs, measured, {row: pages[f"replica-{i}"] for i, row in enumerate(rows)})
    print(f"RESULT streamlit_floor measured={mix_floor:.1f} target<=12 pass={str(mix_floor <= 12).lower()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
