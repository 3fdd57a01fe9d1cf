"""Load test: many students on one server at once (loopback only; stops by itself).

    python -m bench.load [--sessions 30] [--duration 60] [--ramp 10] [--think 1.0] [--client ws|browser]
                         [--checkpoints DIR]

Starts `streamlit run app.py` on a free 127.0.0.1 port (the bundled checkpoints/ when it has any,
else tiny random ones; or --checkpoints), then opens N sessions. Each session, until the duration is
up, repeatedly either types a new sentence into the Attention page or switches to another page, and
every such interaction is timed until the page has been drawn:

- `--client ws` (default): Streamlit's own websocket protocol (the BackMsg a browser sends when a
  sentence is committed or a sidebar link clicked; timed until the server's script_finished, and a
  typed sentence must bring a new heatmap). This is what 30 students' laptops do to the one server;
  sessions pause `--think` seconds (mean) between interactions, as people do.
- `--client browser`: Playwright browser contexts in one headless Debian Chromium (CHROMIUM, default
  /usr/bin/chromium), timed until the heatmap's data changed / the new page drew. All the drawing then
  happens on this machine too: on a 2-core box 30 Chromium pages saturate it by themselves (measured:
  most sessions could not even open within 60 s), so use it with a few sessions.

Reported: errors (timeouts, exception boxes, crashes: must be 0), median and 95th percentile
interaction times (all, typing, page switches), and the server's memory: RSS of the streamlit process
(VmRSS in /proc/PID/status) with one warm session, its peak under load, and after; the growth per
extra session should stay small because models are shared through st.cache_resource.

Too slow for CI; run by hand
(or `python -m bench.run_all --load`). Exit status 1 if any interaction failed. The last line is
`RESULT load measured=<errors> target==0 pass=<true|false>` for bench.run_all.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import statistics
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NAMES = ["Ada Lovelace", "Alan Turing", "Grace Hopper", "Karl Long", "Marie Curie", "Emmy Noether",
         "Katherine Johnson", "John Nash", "Rosalind Franklin", "Niels Bohr"]
PLACES = ["London", "Paris", "Leeds", "Berlin", "Vienna", "Madrid", "Rome", "Dublin", "Oslo", "Lisbon"]
VERBS = ["was born in", "worked in", "studied in", "lived in", "died in"]


@dataclass
class Stats:
    times: dict[str, list[float]] = field(default_factory=lambda: {"type": [], "switch": [], "open": []})
    by_page: dict[str, list[float]] = field(default_factory=dict)  # switches, by the page switched to
    errors: list[str] = field(default_factory=list)

    def all_interactions(self) -> list[float]:
        return self.times["type"] + self.times["switch"]


def rss_kb(pid: int) -> int:
    """Resident memory (kB) of one process: Streamlit serves every session from one process."""
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


class MemorySampler(threading.Thread):
    def __init__(self, pid: int, interval_s: float = 0.5) -> None:
        super().__init__(daemon=True)
        self.pid, self.interval_s = pid, interval_s
        self.peak = 0
        self.stopped = threading.Event()

    def run(self) -> None:
        while not self.stopped.is_set():
            try:
                self.peak = max(self.peak, rss_kb(self.pid))
            except OSError:
                return
            self.stopped.wait(self.interval_s)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    index = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
    return ordered[index]


def sentence(rng: random.Random) -> str:
    return f"{rng.choice(NAMES)} {rng.choice(VERBS)} {rng.choice(PLACES)} ."


async def wait_drawn(page, timeout_ms: int, previous_h1: str | None = None, charts_before: str | None = None
                     ) -> None:
    from tests.browser.conftest import CHARTS_JS, IDLE_JS

    if charts_before is not None:
        await page.wait_for_function(f"(before) => ({CHARTS_JS})() !== before", arg=charts_before,
                                     timeout=timeout_ms)
    if previous_h1 is not None:
        await page.wait_for_function(
            """(before) => { const h = document.querySelector('[data-testid="stMain"] h1');
                             return h && h.innerText !== before; }""", arg=previous_h1, timeout=timeout_ms)
    await page.wait_for_function(IDLE_JS, timeout=timeout_ms)


async def h1_text(page) -> str:
    return await page.evaluate("""() => { const h = document.querySelector('[data-testid="stMain"] h1');
                                          return h ? h.innerText : ''; }""")


async def session(number: int, browser, url: str, pages: list[tuple[str, str, bool]], deadline: float,
                  stats: Stats, timeout_ms: int, ready: asyncio.Event, first_path: str = "attention") -> None:
    from tests.browser.conftest import CHARTS_JS, VIEWPORT

    rng = random.Random(number)
    context = await browser.new_context(viewport=VIEWPORT)
    context.set_default_timeout(timeout_ms)
    page = await context.new_page()
    current = "attention"
    try:
        started = time.perf_counter()
        await page.goto(f"{url}/{first_path}", wait_until="domcontentloaded", timeout=timeout_ms)
        if first_path != "attention":
            await wait_drawn(page, timeout_ms)
            await page.goto(f"{url}/attention", wait_until="domcontentloaded", timeout=timeout_ms)
        await page.locator(".js-plotly-plot").first.wait_for(timeout=timeout_ms)
        await wait_drawn(page, timeout_ms)
        stats.times["open"].append(time.perf_counter() - started)
        ready.set()
        while time.monotonic() < deadline:
            kind = "type" if current == "attention" and rng.random() < 0.6 else "switch"
            started = time.perf_counter()
            try:
                if kind == "type":
                    before = await page.evaluate(CHARTS_JS)
                    box = page.get_by_label("Sentence", exact=True)
                    await box.fill(sentence(rng) + f" {number}")
                    await box.press("Control+Enter")
                    await wait_drawn(page, timeout_ms, charts_before=before)
                else:
                    choices = [p for p in pages if Path(p[0]).stem != current]
                    target = "attention" if current != "attention" and rng.random() < 0.5 else \
                        Path(rng.choice(choices)[0]).stem
                    default = next(d for f, _, d in pages if Path(f).stem == target)
                    href = f"{url}/" if default else f"{url}/{target}"
                    previous = await h1_text(page)
                    await page.locator(f'[data-testid="stSidebarNav"] a[href="{href}"]').first.click()
                    await wait_drawn(page, timeout_ms, previous_h1=previous)
                    current = target
                if await page.locator('[data-testid="stException"]').count():
                    raise RuntimeError("an exception box is on the page")
                stats.times[kind].append(time.perf_counter() - started)
            except Exception as exc:  # noqa: BLE001 - every failure counts, the session goes on
                stats.errors.append(f"session {number} {kind} on {current}: {type(exc).__name__}: "
                                    f"{str(exc).splitlines()[0][:160]}")
                await page.goto(f"{url}/attention", wait_until="domcontentloaded", timeout=timeout_ms)
                current = "attention"
                await wait_drawn(page, timeout_ms)
    except Exception as exc:  # noqa: BLE001
        stats.errors.append(f"session {number} crashed: {type(exc).__name__}: {str(exc).splitlines()[0][:160]}")
        ready.set()
    finally:
        await context.close()


# --------------------------------------------------------------------------- websocket sessions


async def ws_session(number: int, url: str, page_paths: list[str], deadline: float, stats: Stats,
                     timeout_s: float, think_s: float, first_page: str = "attention") -> None:
    rng = random.Random(number)
    from tests.streamlit_ws import StreamlitSession

    client = StreamlitSession(url, timeout_s)
    current = first_page
    try:
        started = time.perf_counter()
        await client.connect()
        await client.rerun(page_name=first_page)
        if first_page != "attention":
            await client.rerun(page_hash=client.pages["attention"])
            current = "attention"
        stats.times["open"].append(time.perf_counter() - started)
        while time.monotonic() < deadline:
            await asyncio.sleep(think_s * rng.uniform(0.5, 1.5))
            kind = "type" if current == "attention" and rng.random() < 0.6 else "switch"
            started = time.perf_counter()
            try:
                if kind == "type":
                    drawn = await client.rerun(page_hash=client.pages["attention"],
                                               text={"Sentence": sentence(rng) + f" {number}"})
                    if not drawn.get("plotly_chart"):
                        raise RuntimeError("no heatmap after typing")
                else:
                    target = "attention" if current != "attention" and rng.random() < 0.5 else \
                        rng.choice([p for p in page_paths if p != current])
                    await client.rerun(page_hash=client.pages[target])
                    current = target
                    stats.by_page.setdefault(target or "home", []).append(time.perf_counter() - started)
                stats.times[kind].append(time.perf_counter() - started)
            except (TimeoutError, RuntimeError, KeyError) as exc:
                stats.errors.append(f"session {number} {kind} on {current or 'home'}: {type(exc).__name__}: {exc}")
    except Exception as exc:  # noqa: BLE001 - a session that cannot go on is one error, the others continue
        stats.errors.append(f"session {number} crashed: {type(exc).__name__}: {str(exc)[:160]}")
    finally:
        await client.close()


async def drive_ws(url: str, sessions: int, duration_s: float, ramp_s: float, timeout_s: float, think_s: float,
                   sampler: MemorySampler, server_pid: int) -> tuple[Stats, dict[str, int]]:
    from tests.hostile_inputs import app_pages

    page_paths = ["" if default else Path(file).stem for file, _, default in app_pages()]
    memory: dict[str, int] = {}
    # A first session on the main page: models loaded and cached (the baseline for "per extra session").
    await ws_session(0, url, page_paths, time.monotonic() + 5, Stats(), timeout_s, think_s, first_page="")
    memory["one session"] = rss_kb(server_pid)
    sampler.start()
    stats = Stats()
    deadline = time.monotonic() + ramp_s + duration_s
    tasks = []
    for number in range(1, sessions + 1):
        tasks.append(asyncio.create_task(ws_session(number, url, page_paths, deadline, stats, timeout_s, think_s)))
        await asyncio.sleep(ramp_s / max(sessions, 1))
    await asyncio.gather(*tasks)
    memory["peak under load"] = sampler.peak
    await asyncio.sleep(2)
    memory["after"] = rss_kb(server_pid)
    return stats, memory


# --------------------------------------------------------------------------- browser sessions


async def drive(url: str, sessions: int, duration_s: float, ramp_s: float, timeout_ms: int, chromium: str,
                sampler: MemorySampler, server_pid: int) -> tuple[Stats, dict[str, int]]:
    from playwright.async_api import async_playwright

    from tests.browser.conftest import CHROMIUM_ARGS
    from tests.hostile_inputs import app_pages

    pages = app_pages()
    stats = Stats()
    memory: dict[str, int] = {}
    async with async_playwright() as p:
        browser = await p.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
        try:
            # One session for a few seconds first: models loaded and cached (the baseline for "per extra
            # session"), so the measured sessions do not pay for the first model load.
            await session(0, browser, url, pages, time.monotonic() + 5, Stats(), timeout_ms, asyncio.Event(),
                          first_path="")
            memory["one session"] = rss_kb(server_pid)
            sampler.start()
            tasks = []
            deadline = time.monotonic() + ramp_s + duration_s
            for number in range(1, sessions + 1):
                tasks.append(asyncio.create_task(session(number, browser, url, pages, deadline, stats, timeout_ms,
                                                         asyncio.Event())))
                await asyncio.sleep(ramp_s / max(sessions, 1))
            await asyncio.gather(*tasks)
            memory["peak under load"] = sampler.peak
            await asyncio.sleep(2)
            memory["after"] = rss_kb(server_pid)
        finally:
            await browser.close()
    return stats, memory


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.load", description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=30)
    parser.add_argument("--duration", type=float, default=60.0, help="seconds of load after the ramp")
    parser.add_argument("--ramp", type=float, default=10.0, help="seconds over which sessions start")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds one interaction may take")
    parser.add_argument("--think", type=float, default=1.0,
                        help="mean seconds a student pauses between interactions (websocket sessions)")
    parser.add_argument("--client", choices=["ws", "browser"], default="ws",
                        help="ws: Streamlit's websocket protocol, no drawing (default; the server is what 30 "
                             "students share); browser: a Chromium context per session on this machine")
    parser.add_argument("--checkpoints", type=Path, default=None,
                        help="checkpoint folder (default: bundled checkpoints/, else tiny random ones)")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    from tests.browser.conftest import bundled_has_checkpoints, chromium_path, start_server, stop
    from tests.conftest import save_tiny_checkpoint

    chromium = chromium_path()
    if args.client == "browser" and not os.access(chromium, os.X_OK):
        print(f"no Chromium at {chromium}: apt-get install chromium (or set CHROMIUM)")
        print("RESULT load measured=nan target==0 pass=false")
        return 1
    with tempfile.TemporaryDirectory(prefix="attention-load-") as tmp:
        folder = args.checkpoints
        if folder is None and bundled_has_checkpoints():
            from core.io.checkpoint import DEFAULT_DIR

            folder = DEFAULT_DIR
        if folder is None:
            folder = Path(tmp) / "ckpts"
            for name, task in (("tiny-lm", "lm"), ("tiny-birthplace", "birthplace"),
                               ("tiny-classifier", "classify")):
                save_tiny_checkpoint(folder / f"{name}.safetensors", task)
        server = start_server(Path(folder), Path(tmp) / "server.log")
        try:
            started_kb = rss_kb(server.process.pid)
            sampler = MemorySampler(server.process.pid)
            print(f"server {server.url} (pid {server.process.pid}), checkpoints {folder}; {args.sessions} "
                  f"{'websocket' if args.client == 'ws' else 'browser'} sessions ramped over {args.ramp:g} s, then "
                  f"{args.duration:g} s of load" + (f", {args.think:g} s mean pause" if args.client == "ws" else ""),
                  flush=True)
            began = time.perf_counter()
            if args.client == "ws":
                stats, memory = asyncio.run(drive_ws(server.url, args.sessions, args.duration, args.ramp,
                                                     args.timeout, args.think, sampler, server.process.pid))
            else:
                stats, memory = asyncio.run(drive(server.url, args.sessions, args.duration, args.ramp,
                                                  int(args.timeout * 1000), chromium, sampler, server.process.pid))
            elapsed = time.perf_counter() - began
        finally:
            sampler.stopped.set()
            stop(server.process)
            server_log = server.log_tail(2000)
    report(args, stats, {"started": started_kb, **memory}, elapsed)
    if "Traceback" in server_log:
        print("server log shows a traceback:\n" + server_log)
    passed = not stats.errors
    print(f"RESULT load measured={len(stats.errors)} target==0 pass={str(passed).lower()}")
    return 0 if passed else 1


def report(args, stats: Stats, memory: dict[str, int], elapsed: float) -> None:
    done = stats.all_interactions()
    print(f"{len(done)} interactions in {elapsed:.0f} s ({len(stats.times['type'])} typed sentences, "
          f"{len(stats.times['switch'])} page switches), {len(stats.errors)} errors")
    for label, values in (("all interactions", done), ("typing a sentence", stats.times["type"]),
                          ("switching pages", stats.times["switch"]), ("opening the app", stats.times["open"])):
        if values:
            print(f"  {label:<18} median {statistics.median(values):6.2f} s   p95 {percentile(values, 0.95):6.2f} s"
                  f"   max {max(values):6.2f} s   (n={len(values)})")
    if stats.by_page:
        print("  page switches by page (median s): " + ", ".join(
            f"{page} {statistics.median(values):.2f}" for page, values in sorted(stats.by_page.items())))
    for error in stats.errors[:20]:
        print(f"  error: {error}")
    one, peak = memory.get("one session", 0), memory.get("peak under load", 0)
    extra = (peak - one) / max(args.sessions, 1)
    after = memory.get("after", 0)
    print(f"server RSS: started {memory['started'] / 1024:.0f} MB, warm after one session {one / 1024:.0f} MB, "
          f"peak with {args.sessions} more sessions {peak / 1024:.0f} MB, after {after / 1024:.0f} MB; "
          f"per extra session {extra / 1024:.1f} MB")


if __name__ == "__main__":
    sys.exit(main())
