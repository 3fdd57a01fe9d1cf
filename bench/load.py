"""Load test: a class on one server at once (loopback only; stops by itself).

    python -m bench.load [--sessions 30] [--duration 60] [--ramp 10] [--think 1.0] [--sentences new|shared]
                         [--replicas 0|N] [--kill-replica-after S] [--client ws|browser] [--checkpoints DIR]

Starts the app on free 127.0.0.1 ports (the bundled checkpoints/ when it has any, else tiny random ones; or
--checkpoints): with `--replicas 0` (default) one `streamlit run app.py`; with `--replicas N` what
`make serve REPLICAS=N` starts, N Streamlit processes behind HAProxy, and every session goes through the
proxy. Then it opens the sessions. Each, until the duration is up, pauses (`--think` seconds on average,
as people do) and then either types a sentence into the Attention page or switches to another page; every
interaction is timed until the page has been drawn:

- `--client ws` (default): Streamlit's own websocket protocol (serve/streamlit_ws.py: the page load with
  its cookies, then the BackMsg a browser sends when a sentence is committed or a sidebar link clicked;
  timed until the server's script_finished, and a typed sentence must bring a heatmap). This is what a
  class's laptops do to the server.
- `--client browser`: Playwright browser contexts in one headless Debian Chromium (bench/load_browser.py).
  All the drawing then happens on this machine too, so use it with a few sessions.

`--sentences new` (default): no two typed sentences are the same, so no cache can answer them;
`--sentences shared`: the whole class types the instructor's sentence (a new one every 15 s).
`--kill-replica-after S` (with `--replicas 2` or more): S seconds into the load, replica r1 is killed
(SIGKILL). Its sessions reconnect, as Streamlit's frontend does, through the proxy to another replica and
ask for their URL (which holds the view); the report counts what they saw, and the sessions on the other
replicas must see no error.

Reported: errors (timeouts, exception boxes, lost connections: must be 0), median, p95 and max for all
interactions, typing, page switches and each page; the server processes' CPU seconds per interaction
(utime + stime from /proc, summed over the replicas and HAProxy); each replica's memory (VmRSS) with one
warm session, its peak under load and after, and the growth per extra session.

Too slow for CI; run by hand (or `python -m bench.run_all --load`). Exit status 1 if any interaction failed.
The last line is `RESULT load measured=<errors> target==0 pass=<true|false>` for bench.run_all.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import sys
import tempfile
import time
from pathlib import Path

from bench.browser_driver import chromium_path
from bench.load_servers import ROOT, Sampler, ServerGroup
from bench.load_stats import Stats, report, typed_sentence
from bench.tiny_checkpoints import bundled_has_checkpoints, tiny_checkpoint_folder
from ui import APP_PAGES

RECONNECT_FOR_S = 30.0  # a session whose replica died tries to reconnect this long (the frontend keeps trying)


class Run:
    """What the sessions share: the plan, the clock, and the replica kill (once it happened)."""

    def __init__(self, args, page_paths: list[str]) -> None:
        self.args, self.page_paths = args, page_paths
        self.began = time.monotonic()
        self.ended = self.began
        self.killed: dict | None = None  # {"name", "at", "after_s", "sessions"}


async def recover(client, page: str, run: Run, stats: Stats, number: int, on_killed: bool) -> None:
    """Reconnect (through the proxy: the dead replica is skipped) and ask for the URL's view, until it is drawn."""
    query = client.query_string
    give_up = time.monotonic() + RECONNECT_FOR_S
    while True:
        try:
            await client.close()
        except Exception:  # noqa: BLE001,S110 - the old connection is gone either way
            pass
        try:
            await client.connect()
            drawn = await client.rerun(page_hash=client.pages.get(page, ""), query_string=query)
            if page == "attention" and not drawn.get("plotly_chart"):
                raise RuntimeError("no heatmap after reconnecting")
            break
        except Exception:
            if time.monotonic() > give_up:
                raise
            await asyncio.sleep(0.5)
    stats.replica_of[number] = client.replica
    if on_killed:
        stats.recoveries.append(time.monotonic() - run.killed["at"])


async def ws_session(number: int, url: str, run: Run, deadline: float, stats: Stats, first_page: str = "attention"
                     ) -> None:
    from websockets.exceptions import ConnectionClosed

    from serve.streamlit_ws import StreamlitSession

    args = run.args
    rng = random.Random(number)
    client = StreamlitSession(url, args.timeout)
    current, count = first_page, 0
    try:
        started = time.perf_counter()
        await client.connect()
        await client.rerun(page_name=first_page)
        if first_page != "attention":
            await client.rerun(page_hash=client.pages["attention"])
            current = "attention"
        stats.times["open"].append(time.perf_counter() - started)
        stats.replica_of[number] = client.replica
        while time.monotonic() < deadline:
            # The pause; a browser notices at once when its websocket closes (its replica died).
            pause = args.think * rng.uniform(0.5, 1.5)
            await asyncio.wait({client.closed}, timeout=pause)
            if client.closed.done():
                on_killed = run.killed is not None and stats.replica_of.get(number) == run.killed["name"]
                if not on_killed:
                    stats.errors.append(f"session {number} on {current or 'home'}: its connection closed")
                await recover(client, current, run, stats, number, on_killed)
                continue
            kind = "type" if current == "attention" and rng.random() < 0.6 else "switch"
            started = time.perf_counter()
            try:
                if kind == "type":
                    count += 1
                    text = typed_sentence(args.sentences, number, count, rng, time.monotonic() - run.began)
                    drawn = await client.rerun(page_hash=client.pages["attention"], text={"Sentence": text})
                    if not drawn.get("plotly_chart"):
                        raise RuntimeError("no heatmap after typing")
                    page = "attention"
                else:
                    page = "attention" if current != "attention" and rng.random() < 0.5 else \
                        rng.choice([p for p in run.page_paths if p != current])
                    # a sidebar link: the browser leaves the URL's query behind (Streamlit clears query parameters
                    # between pages), so the page opens on its own default model, not the last page's
                    await client.rerun(page_hash=client.pages[page], query_string="")
                    current = page
                elapsed = time.perf_counter() - started
                stats.times[kind].append(elapsed)
                stats.by_page.setdefault(page or "home", []).append(elapsed)
            except (ConnectionClosed, OSError) as exc:
                on_killed = run.killed is not None and stats.replica_of.get(number) == run.killed["name"]
                line = f"session {number} {kind} on {current or 'home'}: {type(exc).__name__}"
                (stats.interrupted if on_killed else stats.errors).append(line)
                await recover(client, current, run, stats, number, on_killed)
            except (TimeoutError, RuntimeError, KeyError) as exc:
                stats.errors.append(f"session {number} {kind} on {current or 'home'}: {type(exc).__name__}: {exc}")
    except Exception as exc:  # noqa: BLE001 - a session that cannot go on is one error, the others continue
        stats.errors.append(f"session {number} crashed: {type(exc).__name__}: {str(exc)[:160]}")
    finally:
        try:
            await client.close()
        except Exception:  # noqa: BLE001,S110
            pass


async def kill_later(run: Run, group: ServerGroup, stats: Stats, after_s: float) -> None:
    await asyncio.sleep(after_s)
    name = "r1"
    sessions = sum(1 for replica in stats.replica_of.values() if replica == name)
    group.kill(name)
    run.killed = {"name": name, "at": time.monotonic(), "after_s": after_s, "sessions": sessions}
    print(f"killed replica {name} (SIGKILL) {after_s:g} s into the load; {sessions} sessions were on it", flush=True)


async def drive_ws(url: str, run: Run, group: ServerGroup, sampler: Sampler
                   ) -> tuple[Stats, dict[str, dict[str, int]]]:
    args = run.args
    memory: dict[str, dict[str, int]] = {}
    # First one session per replica on the main page, at once (leastconn spreads them): models loaded and
    # cached in every replica, the baseline for "per extra session".
    until = time.monotonic() + 5
    warm = [ws_session(-n, url, run, until, Stats(), first_page="") for n in range(max(1, args.replicas))]
    await asyncio.gather(*warm)
    memory["one session"] = sampler.memory_now()
    sampler.start()
    stats = Stats()
    run.began = time.monotonic()
    deadline = run.began + args.ramp + args.duration
    tasks = []
    if args.kill_replica_after is not None:
        tasks.append(asyncio.create_task(kill_later(run, group, stats, args.ramp + args.kill_replica_after)))
    for number in range(1, args.sessions + 1):
        tasks.append(asyncio.create_task(ws_session(number, url, run, deadline, stats)))
        await asyncio.sleep(args.ramp / max(args.sessions, 1))
    await asyncio.gather(*tasks)
    run.ended = time.monotonic()
    sampler.sample()
    memory["peak under load"] = dict(sampler.peak)
    await asyncio.sleep(2)
    memory["after"] = sampler.memory_now()
    return stats, memory


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.load", description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=30)
    parser.add_argument("--duration", type=float, default=60.0, help="seconds of load after the ramp")
    parser.add_argument("--ramp", type=float, default=10.0, help="seconds over which sessions start")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds one interaction may take")
    parser.add_argument("--think", type=float, default=1.0,
                        help="mean seconds a student pauses between interactions (websocket sessions)")
    parser.add_argument("--sentences", choices=["new", "shared"], default="new",
                        help="new: every typed sentence differs; shared: the class types the instructor's")
    parser.add_argument("--replicas", type=int, default=0,
                        help="0: one Streamlit process; N: make serve's N replicas behind HAProxy")
    parser.add_argument("--kill-replica-after", type=float, default=None, metavar="S",
                        help="kill replica r1 S seconds into the load (needs --replicas 2 or more)")
    parser.add_argument("--client", choices=["ws", "browser"], default="ws",
                        help="ws: Streamlit's websocket protocol, no drawing (default; the server is what a "
                             "class shares); browser: a Chromium context per session on this machine")
    parser.add_argument("--checkpoints", type=Path, default=None,
                        help="checkpoint folder (default: bundled checkpoints/, else tiny random ones)")
    args = parser.parse_args(argv)
    if args.kill_replica_after is not None and (args.replicas < 2 or args.client != "ws"):
        parser.error("--kill-replica-after needs --replicas 2 or more and --client ws")
    return args


def checkpoint_folder(args, tmp: Path) -> Path:
    from core.io.checkpoint import DEFAULT_DIR

    if args.checkpoints is not None:
        return args.checkpoints
    return Path(DEFAULT_DIR) if bundled_has_checkpoints() else tiny_checkpoint_folder(tmp / "ckpts")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    sys.path.insert(0, str(ROOT))
    chromium = chromium_path()
    if args.client == "browser" and not os.access(chromium, os.X_OK):
        print(f"no Chromium at {chromium}: apt-get install chromium (or set CHROMIUM)")
        print("RESULT load measured=nan target==0 pass=false")
        return 1
    with tempfile.TemporaryDirectory(prefix="attention-load-") as tmp:
        folder = checkpoint_folder(args, Path(tmp))
        group = ServerGroup(folder, Path(tmp), args.replicas)
        group.start()
        sampler = Sampler(group)
        try:
            where = "one Streamlit process" if args.replicas == 0 else f"{args.replicas} replicas behind HAProxy"
            print(f"server {group.url} ({where}, pids {group.pids()}), checkpoints {folder}; {args.sessions} "
                  f"{'websocket' if args.client == 'ws' else 'browser'} sessions ramped over {args.ramp:g} s, then "
                  f"{args.duration:g} s of load, {args.sentences} sentences"
                  + (f", {args.think:g} s mean pause" if args.client == "ws" else ""), flush=True)
            began, client_began = time.perf_counter(), time.process_time()
            run = Run(args, [page.url_path for page in APP_PAGES])
            if args.client == "ws":
                stats, memory = asyncio.run(drive_ws(group.url, run, group, sampler))
            else:
                from bench.load_browser import drive

                stats, memory = asyncio.run(drive(group.url, args.sessions, args.duration, args.ramp,
                                                  int(args.timeout * 1000), chromium, sampler, args.replicas))
            elapsed = run.ended - run.began if args.client == "ws" else time.perf_counter() - began
            client_cpu = time.process_time() - client_began
        finally:
            sampler.stopped.set()
            server_log = group.log_tail(4000)
            group.stop()
    report(args, stats, memory, elapsed, sampler.cpu_used(), run.killed, client_cpu)
    if "Traceback" in server_log:
        print("server log shows a traceback:\n" + server_log)
    passed = not stats.errors
    print(f"RESULT load measured={len(stats.errors)} target==0 pass={str(passed).lower()}")
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
