"""Server CPU per interaction: what one click costs the Streamlit process, not how long it took.

    python -m bench.server_work [--baseline REV [--baseline-env NAME=VALUE]] [--repeats 12] [--reruns 0]
                                [--checkpoints DIR]

Starts `streamlit run app.py` from this working tree (and, with --baseline, a second server from a
`git worktree` of REV, removed afterwards) on loopback ports, then drives them one interaction at a time
with Streamlit's websocket protocol (serve/streamlit_ws.py, as bench.load) and reads each server's CPU seconds
(user + system, /proc/PID/stat) before and after the interaction: a count of work done, which a busy
shared box slows down but hardly changes (wall time would). The two servers take turns, interaction by
interaction, so any drift on the box falls on both. File watching is off on both (its polling would be
counted as work; Streamlit still polls its config.toml files every 0.2 s whatever the setting, ~1.5 ms of CPU a
second in every server, the floor's included: bench/README.md, issue 45 (fixed)).

A third server runs bench.browser_latency's two-page hello-world app (HELLO_APP: a title, a text box, a line;
from this tree's folder, so with this tree's .streamlit/config.toml) and takes its turn after every
interaction of the others, with the same client: a page switch there, to one page and back, is the cost of a
rerun in Streamlit itself, whatever an app draws. Its row, "hello world (Streamlit's floor)", is printed first
(one server, so one number; not in the geometric mean) and each row's "over the floor" column is what the app
adds to that, per server.

Rows (mean CPU ms per interaction over --repeats, and the baseline / this ratio):
- new sentence: one session types a sentence no one typed before (a forward pass, figures drawn);
- same sentence, other session: a second session types the sentence the first one just typed (what a
  class typing the instructor's sentence costs per student);
- rerun, same input: the typing session asks for the attention page again, nothing changed;
- switch to <page>: from the attention page to that page;
- switch back to attention: from that page back (the page keeps its sentence in the session);
- rerun <page> (with --reruns N): each page asked again N times with nothing changed, after the rows above: a
  page's own fixed cost with steadier means than one switch per repeat (not in the geometric mean);
- bench.load mix (estimated): the rows weighted as bench.load's 30-session mix meets them (`load_mix`: 35% new
  sentences, 23% switches back to Attention, 42% switches to the other pages); issue 45's target is <= 12 ms.

The last line, `RESULT server_work measured=<geometric mean of the ratios, new-sentence row left out> ...`, is in
the form bench.run_all reads (it is not in its list: it starts two servers).

Issue 29's item 2, on the shared 2-core box (`--baseline 000eac5 --repeats 15`, bundled checkpoints), ms of
server CPU before -> after: new sentence 36.0 -> 27.3, same sentence from another session 37.3 -> 18.7, rerun
35.3 -> 17.3, switch to home 24.0 -> 14.7, positional 39.3 -> 27.3, curves 52.7 -> 39.3, probe 52.0 -> 26.0,
playground 119.3 -> 44.7, anatomy 67.3 -> 20.0, open_model 20.0 -> 10.7 (geometric mean of the ratios 1.96).
"""

from __future__ import annotations

import argparse
import asyncio
import random
import subprocess
import sys
import tempfile
from pathlib import Path

from bench.browser_latency import HELLO_APP
from bench.load_servers import cpu_seconds
from serve.streamlit_process import StreamlitServer, start_healthy
from ui import APP_PAGES

ROOT = Path(__file__).resolve().parent.parent
NAMES = ["Ada Lovelace", "Alan Turing", "Grace Hopper", "Marie Curie", "Emmy Noether", "Niels Bohr"]
PLACES = ["London", "Paris", "Leeds", "Berlin", "Vienna", "Madrid", "Rome", "Dublin"]


def start(root: Path, checkpoints: Path, log: Path, env: dict[str, str] | None = None) -> StreamlitServer:
    """`streamlit run app.py` of the tree at `root` (this one or the baseline's worktree), healthy."""
    return start_healthy(log, root=root, extra_env={"ATTENTION_LAB_CHECKPOINTS": str(checkpoints), **(env or {})})


FLOOR = "hello world (Streamlit's floor)"


class FloorClient:
    """One session on the hello-world server, switching between its two pages: one measured switch per call."""

    def __init__(self, server) -> None:
        from serve.streamlit_ws import StreamlitSession

        self.pid = server.process.pid
        self.session = StreamlitSession(server.url, 120)
        self.turns = 0

    async def open(self) -> None:
        await self.session.connect()
        await self.session.rerun()
        for page in ("other", "", "other", ""):  # warm: both pages run once and back
            await self.session.rerun(page_hash=self.session.pages[page])

    async def switch(self) -> float:
        page = ("other", "")[self.turns % 2]
        self.turns += 1
        await asyncio.sleep(0.05)  # as Client.measured
        before = cpu_seconds(self.pid)
        await self.session.rerun(page_hash=self.session.pages[page])
        await asyncio.sleep(0.05)
        return cpu_seconds(self.pid) - before

    async def close(self) -> None:
        await self.session.close()


class Client:
    """Two sessions on one server: `a` types new sentences, `b` repeats them."""

    def __init__(self, server) -> None:
        from serve.streamlit_ws import StreamlitSession

        self.pid = server.process.pid
        self.a, self.b = StreamlitSession(server.url, 120), StreamlitSession(server.url, 120)

    async def open(self) -> None:
        for session in (self.a, self.b):
            await session.connect()
            await session.rerun(page_name="attention")

    async def measured(self, action, chart: bool) -> float:
        await asyncio.sleep(0.05)  # let the previous run's sending finish before counting
        before = cpu_seconds(self.pid)
        drawn = await action
        await asyncio.sleep(0.05)
        if chart and not drawn.get("plotly_chart"):
            raise RuntimeError("no heatmap after typing")
        return cpu_seconds(self.pid) - before

    async def close(self) -> None:
        await self.a.close()
        await self.b.close()


async def drive(clients: list[Client], repeats: int, pages: list[str], floor: FloorClient | None = None,
                reruns: int = 0) -> dict[str, list[list[float]]]:
    """{row: [per client: CPU seconds of each repeat]}; the clients take turns on every interaction, the floor's
    client after them (its row holds the one server's measures in every client's column)."""
    rows: dict[str, list[list[float]]] = {FLOOR: [[] for _ in clients]} if floor else {}

    async def each(row: str, who: str, page: str, text: str | None = None, switch: bool = False) -> None:
        cells = rows.setdefault(row, [[] for _ in clients])
        for index, client in enumerate(clients):
            session = getattr(client, who)
            # a switch is a sidebar link: the browser leaves the URL's query behind (as bench/load.py's sessions)
            action = session.rerun(page_hash=session.pages[page], text=text and {"Sentence": text},
                                   query_string="" if switch else None)
            cells[index].append(await client.measured(action, chart=text is not None))
        if floor:
            spent = await floor.switch()
            for cells in rows[FLOOR]:
                cells.append(spent)

    if floor:
        await floor.open()
    for client in clients:
        await client.open()
        await client.a.rerun(page_hash=client.a.pages["attention"], text={"Sentence": "warm up the model"})
        for page in pages:  # every page once: first visits import modules and fill caches
            await client.a.rerun(page_hash=client.a.pages[page], query_string="")
            await client.a.rerun(page_hash=client.a.pages["attention"], query_string="")
    rng = random.Random(0)
    for number in range(repeats):
        typed = f"{rng.choice(NAMES)} was born in {rng.choice(PLACES)} ({number})."
        await each("new sentence", "a", "attention", typed)
        await each("same sentence, other session", "b", "attention", typed)
        await each("rerun, same input", "a", "attention", typed)
        for page in pages:
            await each(f"switch to {page or 'home'}", "a", page, switch=True)
            # back: the page keeps its sentence in session state
            await each("switch back to attention", "a", "attention", switch=True)
    for page in pages + ["attention"] if reruns else []:  # each page's rerun with nothing changed, `reruns` times
        for client in clients:
            await client.a.rerun(page_hash=client.a.pages[page], query_string="")  # the switch there, not measured
        for _ in range(reruns):
            await each(f"rerun {page or 'home'}", "a", page)
    for client in clients:
        await client.close()
    if floor:
        await floor.close()
    return rows


TYPES, BACK = 0.6, 0.5  # bench/load.py: on Attention a session types 60% of the time; elsewhere it goes back 50%


def load_mix(rows: dict[str, list[list[float]]]) -> list[float]:
    """Per server: CPU ms per interaction in bench.load's mix, from the rows. A session on the Attention page
    types (TYPES) or switches to one of the n other pages; on another page it goes back to Attention (BACK), else
    to any page but its own (Attention among them). Weighted by how often the long run meets each: on Attention
    a = back / (1 - TYPES + back) of the time, with back = BACK + (1 - BACK) / n; 0.35 of the interactions are
    new sentences, 0.23 switches back to Attention and 0.42 switches to the other pages (each as often)."""
    def mean(row: str, index: int) -> float:
        cells = rows[row][index]
        return 1000 * sum(cells) / len(cells)
    others = [row for row in rows if row.startswith("switch to ")]
    back = BACK + (1 - BACK) / len(others)
    on_attention = back / (1 - TYPES + back)
    typing, returning = on_attention * TYPES, (1 - on_attention) * back
    switching = 1 - typing - returning
    return [typing * mean("new sentence", i) + returning * mean("switch back to attention", i)
            + switching * sum(mean(row, i) for row in others) / len(others) for i in range(len(rows["new sentence"]))]


def report(rows: dict[str, list[list[float]]], labels: list[str]) -> float:
    """Print the table; return the geometric mean of baseline / this over the rows a cache can serve."""
    import math

    floor = 1000 * sum(rows[FLOOR][0]) / len(rows[FLOOR][0]) if FLOOR in rows else None
    head = f"{'interaction':34}" + "".join(f"{label:>14}" for label in labels)
    print(head + ("   ratio" if len(labels) == 2 else "")
          + ("   over the floor (" + " -> ".join(labels) + ")" if floor is not None else ""))

    def over(means: list[float]) -> str:
        return "   " + " -> ".join(f"{m - floor:+.1f} ms" for m in means) if floor is not None else ""

    if floor is not None:
        print(f"{FLOOR:34}{floor:11.1f} ms  (one server, {len(rows[FLOOR][0])} page switches)")
    ratios = []
    for row, cells in rows.items():
        if row == FLOOR:
            continue
        means = [1000 * sum(c) / len(c) for c in cells]
        line = f"{row:34}" + "".join(f"{m:11.1f} ms" for m in means)
        if len(means) == 2:
            ratio = means[0] / max(means[1], 1e-9)
            line += f"  {ratio:6.2f}x"
            if row != "new sentence" and not row.startswith("rerun "):  # "rerun <page>": --reruns only
                ratios.append(ratio)
        print(line + over(means))
    if any(row.startswith("switch to ") for row in rows):
        mix = load_mix(rows)
        print(f"{'bench.load mix (estimated)':34}" + "".join(f"{m:11.1f} ms" for m in mix)
              + (f"  {mix[0] / max(mix[1], 1e-9):6.2f}x" if len(mix) == 2 else "") + over(mix))
    return math.exp(sum(map(math.log, ratios)) / len(ratios)) if ratios else float("nan")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.server_work", description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", help="a git revision to measure in the same run (a temporary worktree)")
    parser.add_argument("--repeats", type=int, default=12)
    parser.add_argument("--checkpoints", type=Path, default=ROOT / "checkpoints")
    parser.add_argument("--reruns", type=int, default=0,
                        help="also rerun each page this many times with nothing changed (a row per page)")
    parser.add_argument("--baseline-env", action="append", default=[], metavar="NAME=VALUE",
                        help="an environment variable for the baseline's server only (e.g. a PYTHONPATH whose "
                             "uvloop module refuses to import, for a revision that did not require it)")
    args = parser.parse_args(argv)
    if args.baseline_env and not args.baseline:
        parser.error("--baseline-env needs --baseline")
    if any("=" not in item for item in args.baseline_env):
        parser.error("--baseline-env takes NAME=VALUE")
    baseline_env = dict(item.split("=", 1) for item in args.baseline_env)
    sys.path.insert(0, str(ROOT))
    pages = [page.url_path for page in APP_PAGES if page.url_path != "attention"]
    with tempfile.TemporaryDirectory(prefix="attention-server-work-") as tmp:
        roots, labels = [ROOT], ["this tree"]
        if args.baseline:
            worktree = Path(tmp) / "baseline"
            subprocess.run(["git", "worktree", "add", "--detach", str(worktree), args.baseline], cwd=ROOT,
                           check=True, capture_output=True)
            roots, labels = [worktree, ROOT], [args.baseline[:12], "this tree"]
        servers = []
        try:
            for index, root in enumerate(roots):
                env = baseline_env if args.baseline and index == 0 else None
                servers.append(start(root, args.checkpoints, Path(tmp) / f"server{index}.log", env))
            hello = Path(tmp) / "hello.py"
            hello.write_text(HELLO_APP)
            servers.append(start_healthy(Path(tmp) / "hello.log", script=hello, root=ROOT))
            print(f"checkpoints {args.checkpoints}; {args.repeats} repeats; server CPU (user+system) per "
                  f"interaction, one interaction at a time", flush=True)
            rows = asyncio.run(drive([Client(s) for s in servers[:-1]], args.repeats, pages, FloorClient(servers[-1]),
                                     args.reruns))
        finally:
            for server in servers:
                server.stop()
            if args.baseline:
                subprocess.run(["git", "worktree", "remove", "--force", str(Path(tmp) / "baseline")], cwd=ROOT,
                               capture_output=True)
    ratio = report(rows, labels)
    if len(labels) == 2:
        print(f"RESULT server_work measured={ratio:.2f} target>=1 pass={str(ratio >= 1).lower()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
