"""The probe's slowest click, server side: a new name with "Where from" open, against a baseline revision.

    python -m bench.probe_server [--baseline REV] [--names 12] [--typed] [--checkpoints DIR]

Starts `streamlit run app.py` from this tree (and, with --baseline, from a temporary `git worktree` of REV) on
loopback ports, opens the probe's Ask tab with "Where from" open in one session per server (Streamlit's websocket
protocol, serve/streamlit_ws.py, as bench.load and bench.server_work), then asks each server, in turn, for names
no one asked before (every cache misses: three models' answers, the reading, the causal trace, six figures).
Per rerun it records the wall time until the server's script_finished and the server's CPU seconds (user +
system, /proc): medians over the names, and baseline / this. No browser draws here: bench.browser_latency's
"probe: name, with 'Where from' open" row adds the browser's drawing on the same 2 cores.

Each name comes as a link (the name in the URL: the whole page runs) or, with `--typed`, typed into the name box as
a browser sends it: only the fragment the box is drawn in reruns, if it is in one (the Ask tab is, since issue 45's
session 15; the whole page where it is not).

The last line is `RESULT probe_server measured=<CPU ratio baseline / this> ...` (not in bench.run_all's list: it
starts two servers).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
import urllib.parse
from pathlib import Path

from bench.load_servers import cpu_seconds, print_medians, trees_to_compare
from bench.server_work import start

ROOT = Path(__file__).resolve().parent.parent
NAMES = ["Lise Meitner", "Paul Dirac", "Max Born", "Otto Hahn", "Rosalind Franklin", "Dorothy Hodgkin", "Niels Bohr",
         "Enrico Fermi", "Hedy Lamarr", "Alan Kay", "Edith Clarke", "Hans Bethe", "Emil Fischer", "Max Planck",
         "Otto Stern", "Jan Oort", "Carl Bosch", "Ida Noddack", "Fritz Haber", "Mary Somerville"]


LABEL = "A name, or a question 'Where was NAME born?'"  # the Ask tab's name box


async def drive(servers, names: list[str], typed: bool = False) -> list[dict[str, list[float]]]:
    from serve.streamlit_ws import StreamlitSession

    sessions = []
    for server in servers:
        session = StreamlitSession(server.url, 120)
        await session.connect()
        await session.rerun(page_name="probe", query_string="tab=ask&name=Alan+Turing&wf=1")  # models, corpus
        await session.rerun(page_hash=session.pages["probe"], query_string="tab=ask&name=Ada+Lovelace&wf=1")
        sessions.append(session)
    out: list[dict[str, list[float]]] = [{"wall": [], "cpu": []} for _ in servers]
    for name in names:
        query = urllib.parse.urlencode({"tab": "ask", "name": name, "wf": "1"})
        for server, session, times in zip(servers, sessions, out, strict=True):
            await asyncio.sleep(0.05)  # the previous run's sending finished
            before, start_s = cpu_seconds(server.process.pid), time.perf_counter()
            drawn = (await session.rerun(page_hash=session.pages["probe"], text={LABEL: name}, as_typed=True) if typed
                     else await session.rerun(page_hash=session.pages["probe"], query_string=query))
            times["wall"].append(time.perf_counter() - start_s)
            await asyncio.sleep(0.05)
            times["cpu"].append(cpu_seconds(server.process.pid) - before)
            if drawn.get("plotly_chart", 0) < 6:
                raise RuntimeError(f"{name}: {drawn.get('plotly_chart', 0)} charts, not the probe's 6 with Where from")
            if urllib.parse.parse_qs(session.query_string).get("name") != [name]:
                raise RuntimeError(f"{name}: the page did not take the name (its link says {session.query_string})")
    for session in sessions:
        await session.close()
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.probe_server", description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", help="a git revision measured in the same run (a temporary worktree)")
    parser.add_argument("--names", type=int, default=12, help=f"new names asked of each server (at most {len(NAMES)})")
    parser.add_argument("--typed", action="store_true",
                        help="type each name into the box as a browser does (its fragment reruns), not as a link")
    parser.add_argument("--checkpoints", type=Path, default=ROOT / "checkpoints")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    with tempfile.TemporaryDirectory(prefix="attention-probe-server-") as tmp, \
            trees_to_compare(args.baseline, Path(tmp)) as (roots, labels):
        servers = []
        try:
            for index, root in enumerate(roots):
                servers.append(start(root, args.checkpoints, Path(tmp) / f"server{index}.log"))
            results = asyncio.run(drive(servers, NAMES[:max(1, min(args.names, len(NAMES)))], args.typed))
        finally:
            for server in servers:
                server.stop()
    print(f"probe: a new name with 'Where from' open, server side, medians of {len(results[0]['wall'])} names "
          f"(servers taking turns; names {'typed' if args.typed else 'as links'})")
    ratios = print_medians(results, labels, [("wall", "s"), ("cpu", "s CPU")], 12)
    if ratios:
        print(f"RESULT probe_server measured={ratios['cpu']:.2f} target>=1 pass={str(ratios['cpu'] >= 1).lower()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
