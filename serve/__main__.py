"""`make serve`: N Streamlit replicas on loopback ports behind HAProxy, on one public port.

    python -m serve [--replicas N] [--port 8501] [--host 0.0.0.0] [--upstream HOST:PORT ...]
    python -m serve --replicas-only --replicas N --replica-host 0.0.0.0 --first-replica-port 8601

One Streamlit process runs every session's script on one core (its GIL), so a class shares one core per
process. This starts N of them (default: one per core) and HAProxy in front (serve/haproxy.cfg.template):
websocket proxying, sticky sessions by cookie (a session's uploads and state live in one replica), health
checks on /_stcore/health, and one public port. Every replica gets this process's environment, so
ATTENTION_LAB_ALLOWED_DIRS, ATTENTION_LAB_CHECKPOINTS and every other hosting rule apply to each of them
(the Hugging Face cache listing, ATTENTION_LAB_HF_CACHE, is off here unless the operator sets it to 1, and so
is a typed folder outside the allowed ones on the Training curves page, ATTENTION_LAB_ANY_FOLDER),
and one cookie secret (STREAMLIT_SERVER_COOKIE_SECRET, made here unless set) so that a browser moved to
another replica keeps a valid upload token. A replica that exits is started again on its port; HAProxy
sends it students again once its health check passes. Ctrl+C (or SIGTERM) stops everything it started.

--upstream adds replicas running on other machines (each started there with --replicas-only); they must
read the same checkpoints folder (read-only) and have the same STREAMLIT_SERVER_COOKIE_SECRET.
The run folder (printed) holds each process's log, HAProxy's configuration and state.json (ports, pids).
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from serve.proxy import ServeError, Upstream, check_config, find_haproxy, parse_upstream, render_config
from serve.streamlit_process import ServerError, free_port, healthy, start_streamlit, stop_process, wait_until

ROOT = Path(__file__).resolve().parent.parent
COOKIE_SECRET_ENV = "STREAMLIT_SERVER_COOKIE_SECRET"
HF_CACHE_ENV = "ATTENTION_LAB_HF_CACHE"  # core.io.hf_cache.CACHE_ENV (serve imports nothing of the app)
TRAINING_ENV = "ATTENTION_LAB_TRAINING"  # core.train.job.TRAINING_ENV
ANY_FOLDER_ENV = "ATTENTION_LAB_ANY_FOLDER"  # core.io.folders.ANY_FOLDER_ENV
RESTART_LIMIT = 5  # restarts within RESTART_WINDOW_S before a replica is given up
RESTART_WINDOW_S = 60.0


@dataclass
class Replica:
    name: str
    host: str
    port: int
    log: Path
    process: subprocess.Popen | None = None
    restarts: list[float] = field(default_factory=list)
    given_up: bool = False

    def start(self, env: dict[str, str]) -> None:
        self.process = start_streamlit("app.py", self.host, self.port, self.log, env, append=True)


def require_free(host: str, port: int, what: str) -> None:
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError as exc:
            raise ServeError(f"Port {port} on {host or 'all addresses'} ({what}) is taken ({exc.strerror}): "
                             f"choose another, e.g. make serve PORT={port + 1}.") from None


class Stop(Exception):
    pass


def write_state(run_dir: Path, public_url: str, proxy: subprocess.Popen | None, replicas: list[Replica]) -> None:
    """state.json, replaced atomically: what a bench or a test needs to find (and kill) each process."""
    state = {"url": public_url, "proxy_pid": proxy.pid if proxy else None,
             "stats_socket": str(run_dir / "haproxy.sock") if proxy else None,
             "replicas": [{"name": r.name, "port": r.port, "pid": r.process.pid if r.process else None,
                           "log": str(r.log)} for r in replicas]}
    temporary = run_dir / "state.json.tmp"
    temporary.write_text(json.dumps(state, indent=1))
    os.replace(temporary, run_dir / "state.json")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m serve", description=__doc__.splitlines()[0])
    parser.add_argument("--replicas", type=int, default=os.cpu_count() or 1,
                        help="Streamlit processes on this machine (default: one per core)")
    parser.add_argument("--port", type=int, default=8501, help="the public port, HAProxy's (default 8501)")
    parser.add_argument("--host", default="0.0.0.0", help="the public address HAProxy listens on (default all)")
    parser.add_argument("--upstream", action="append", default=[], metavar="HOST:PORT",
                        help="a replica on another machine (repeatable)")
    parser.add_argument("--replicas-only", action="store_true",
                        help="start the replicas without a proxy (for a machine behind another's --upstream)")
    parser.add_argument("--replica-host", default="127.0.0.1", help="address the replicas listen on")
    parser.add_argument("--first-replica-port", type=int, default=None,
                        help="replica ports are this and the next ones (default: free loopback ports)")
    parser.add_argument("--run-dir", type=Path, default=None, help="logs, configuration and state.json")
    args = parser.parse_args(argv)
    if args.replicas < 0 or (args.replicas == 0 and not args.upstream):
        parser.error("--replicas must be 1 or more (0 only with --upstream).")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    stopping = False

    def on_signal(signum, frame):  # noqa: ARG001 - signal handler signature
        nonlocal stopping
        if not stopping:
            stopping = True
            raise Stop

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    proxy: subprocess.Popen | None = None
    replicas: list[Replica] = []
    try:
        remote = [parse_upstream(text, n) for n, text in enumerate(args.upstream, start=1)]
        haproxy = None if args.replicas_only else find_haproxy()
        if not args.replicas_only:
            require_free(args.host, args.port, "the public port")
        run_dir = args.run_dir or Path(tempfile.mkdtemp(prefix="attention-lab-serve-"))
        run_dir.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        env.setdefault(COOKIE_SECRET_ENV, secrets.token_hex(32))
        env.setdefault(HF_CACHE_ENV, "0")  # a hosted app does not list its server's Hugging Face cache unless asked
        env.setdefault(TRAINING_ENV, "0")  # nor lets every visitor start training on it (the Train button)
        env.setdefault(ANY_FOLDER_ENV, "0")  # nor open any folder of the server a visitor types (only the allowed)
        for number in range(1, args.replicas + 1):
            port = free_port(args.replica_host) if args.first_replica_port is None else \
                args.first_replica_port + number - 1
            require_free(args.replica_host, port, f"replica {number}")
            replicas.append(Replica(f"r{number}", args.replica_host, port, run_dir / f"replica-{number}.log"))
        for replica in replicas:
            replica.start(env)
        public_url = f"http://{'127.0.0.1' if args.host in ('0.0.0.0', '') else args.host}:{args.port}"
        write_state(run_dir, public_url, None, replicas)
        for replica in replicas:
            wait_until(lambda r=replica: healthy(f"http://{r.host}:{r.port}"), 120,
                       f"Replica {replica.name} (port {replica.port}, log {replica.log})",
                       alive=lambda r=replica: r.process.poll() is None)
        if haproxy is not None:
            upstreams = [Upstream(r.name, r.host, r.port) for r in replicas] + remote
            config = run_dir / "haproxy.cfg"
            config.write_text(render_config(f"{args.host}:{args.port}", upstreams, run_dir / "haproxy.sock"))
            check_config(haproxy, config)
            with open(run_dir / "haproxy.log", "ab") as out:
                proxy = subprocess.Popen([haproxy, "-db", "-f", str(config)], stdout=out, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, start_new_session=True)
            wait_until(lambda: healthy(public_url), 30, f"HAProxy (log {run_dir / 'haproxy.log'})",
                       alive=lambda: proxy.poll() is None)
        write_state(run_dir, public_url, proxy, replicas)
        print(announce(args, public_url, replicas, remote, run_dir), flush=True)
        supervise(replicas, proxy, env, run_dir, public_url)
    except Stop:
        print("Stopping: HAProxy and every replica this started.", flush=True)
    except (ServeError, ServerError) as exc:
        print(exc, file=sys.stderr, flush=True)
        return 2
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        stop_process(proxy)
        for replica in replicas:
            stop_process(replica.process)
    return 0


def announce(args, public_url: str, replicas: list[Replica], remote: list[Upstream], run_dir: Path) -> str:
    from core.io.folders import ALLOWED_DIRS_ENV

    where = ", ".join([f"{r.host}:{r.port}" for r in replicas] + [u.address for u in remote])
    count = len(replicas) + (0 if args.replicas_only else len(remote))
    replicas_word = f"{count} replica{'' if count == 1 else 's'}"
    allowed = os.environ.get(ALLOWED_DIRS_ENV) or "none"
    if args.replicas_only:
        return (f"Attention Lab: {replicas_word} on {where} (no proxy: list them with --upstream on the "
                f"proxy's machine). Allowed folders: {allowed}. Logs: {run_dir}. Ctrl+C stops them.")
    return (f"Attention Lab: {public_url} (HAProxy on {args.host}:{args.port}) -> {replicas_word} on {where}. "
            f"Allowed folders: {allowed}. Logs and state.json: {run_dir}. "
            f"Ctrl+C stops everything.")


def supervise(replicas: list[Replica], proxy: subprocess.Popen | None, env: dict[str, str], run_dir: Path,
              public_url: str) -> None:
    """Until stopped: start again a replica that exited; stop everything if HAProxy itself exits."""
    while True:
        time.sleep(0.5)
        if proxy is not None and proxy.poll() is not None:
            raise ServeError(f"HAProxy exited (status {proxy.returncode}); see {run_dir / 'haproxy.log'}.")
        for replica in replicas:
            if replica.given_up or replica.process is None or replica.process.poll() is None:
                continue
            now = time.monotonic()
            replica.restarts = [t for t in replica.restarts if now - t < RESTART_WINDOW_S] + [now]
            if len(replica.restarts) > RESTART_LIMIT:
                replica.given_up = True
                print(f"Replica {replica.name} exited {RESTART_LIMIT} times within {RESTART_WINDOW_S:.0f} s; "
                      f"it stays down (see {replica.log}).", file=sys.stderr, flush=True)
                continue
            print(f"Replica {replica.name} (port {replica.port}) exited with status {replica.process.returncode}; "
                  f"starting it again.", flush=True)
            replica.start(env)
            write_state(run_dir, public_url, proxy, replicas)


if __name__ == "__main__":
    sys.exit(main())
