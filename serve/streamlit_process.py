"""Starting, checking and stopping Streamlit servers, in one place: a free port, the `streamlit run` command
line, the health poll on /_stcore/health, and a stop that ends a server's whole process group (Streamlit
and anything it started). `make serve` (serve/__main__.py) starts its replicas here; the benchmarks
(bench/) and the tests (tests/browser/conftest.py, tests/test_serve.py) start `streamlit run app.py` and
`python -m serve` here too."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
START_TIMEOUT_S = 90.0  # a loaded 2-core box imports torch slowly


class ServerError(RuntimeError):
    """A server that did not start or stopped answering, said in one sentence (plus its log's tail)."""


def free_port(host: str = "127.0.0.1") -> int:
    """A port nobody listens on right now (the OS picks it)."""
    with socket.socket() as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def healthy(url: str, timeout_s: float = 1.0) -> bool:
    """Streamlit's own health endpoint answers 'ok' (through HAProxy too: it forwards the request)."""
    try:
        with urllib.request.urlopen(f"{url}/_stcore/health", timeout=timeout_s) as response:
            return response.status == 200 and response.read().strip() == b"ok"
    except OSError:
        return False


def wait_until(check: Callable[[], object], timeout_s: float, what: str,
               alive: Callable[[], bool] = lambda: True, log: Path | None = None, poll_s: float = 0.2) -> object:
    """Poll `check` until it returns something true (returned); ServerError if `alive` turns false first
    or `timeout_s` passes. `log`: its tail goes into the message."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = check()
        if value:
            return value
        if not alive():
            raise ServerError(f"{what} exited while starting; its log says why.{log_tail(log)}")
        if time.monotonic() > deadline:
            raise ServerError(f"{what} did not answer within {timeout_s:.0f} s; its log says why.{log_tail(log)}")
        time.sleep(poll_s)


def log_tail(log: Path | None, chars: int = 3000) -> str:
    if log is None or not log.exists():
        return ""
    return "\n" + log.read_text(errors="replace")[-chars:]


def stop_process(process: subprocess.Popen | None, grace_s: float = 10.0) -> None:
    """SIGTERM to the process group (started with start_new_session), SIGKILL if it lingers past `grace_s`."""
    if process is None or process.poll() is not None:
        return
    try:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=grace_s)
    except (ProcessLookupError, PermissionError):
        pass
    except subprocess.TimeoutExpired:
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        process.wait(timeout=grace_s)


def streamlit_command(script: str | Path, host: str, port: int, options: Mapping[str, str] | None = None) -> list[str]:
    """`python -m streamlit run SCRIPT` headless on host:port, plus `--section.option value` pairs."""
    command = [sys.executable, "-m", "streamlit", "run", str(script), "--server.address", host,
               "--server.port", str(port), "--server.headless", "true"]
    for option, value in (options or {}).items():
        command += [f"--{option}", value]
    return command


def spawn(command: list[str], log: Path, env: Mapping[str, str] | None = None, cwd: Path = ROOT,
          append: bool = False) -> subprocess.Popen:
    """Start `command` in a process group of its own (so stop_process ends it and its children), its output
    into `log`. `env` replaces the environment (default: this process's); Python output is unbuffered."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "ab" if append else "wb") as out:
        return subprocess.Popen(command, cwd=cwd, env={**(os.environ if env is None else env), "PYTHONUNBUFFERED": "1"},
                                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)


def start_streamlit(script: str | Path, host: str, port: int, log: Path, env: Mapping[str, str] | None = None,
                    cwd: Path = ROOT, options: Mapping[str, str] | None = None, append: bool = False
                    ) -> subprocess.Popen:
    """Start (do not wait for) `streamlit run SCRIPT` on host:port."""
    return spawn(streamlit_command(script, host, port, options), log, env, cwd, append)


@dataclass
class StreamlitServer:
    url: str
    process: subprocess.Popen
    log: Path

    def log_tail(self, chars: int = 3000) -> str:
        return self.log.read_text(errors="replace")[-chars:] if self.log.exists() else ""

    def stop(self) -> None:
        stop_process(self.process)


def start_healthy(log: Path, script: str | Path = "app.py", root: Path = ROOT,
                  extra_env: Mapping[str, str] | None = None, options: Mapping[str, str] | None = None,
                  host: str = "127.0.0.1", port: int | None = None, timeout_s: float = START_TIMEOUT_S
                  ) -> StreamlitServer:
    """`streamlit run SCRIPT` of the tree at `root` on a free loopback port (or `port`), once it answers its
    health check; stopped again (and ServerError) if it exits or does not answer in time."""
    port = port or free_port(host)
    process = start_streamlit(script, host, port, log, {**os.environ, **(extra_env or {})}, root, options)
    server = StreamlitServer(f"http://{host}:{port}", process, log)
    try:
        wait_until(lambda: healthy(server.url, timeout_s=5), timeout_s, f"streamlit run {script}",
                   alive=lambda: process.poll() is None, log=log, poll_s=0.3)
    except BaseException:
        stop_process(process)
        raise
    return server


# --------------------------------------------------------------------------- `python -m serve` as a child


def read_state(run_dir: Path) -> dict:
    """`make serve`'s state.json (url, proxy_pid, stats_socket, replicas), or {} while it is not written."""
    try:
        return json.loads((run_dir / "state.json").read_text())
    except (OSError, ValueError):
        return {}


def start_serve(replicas: int, port: int, run_dir: Path, log: Path, env: Mapping[str, str] | None = None,
                host: str = "127.0.0.1", timeout_s: float = 150.0) -> tuple[subprocess.Popen, dict]:
    """`python -m serve` (HAProxy in front of `replicas` Streamlit processes) in a process group of its own,
    once HAProxy is up: (the launcher, its state.json). Stop it with stop_process (it stops what it started)."""
    launcher = spawn([sys.executable, "-m", "serve", "--replicas", str(replicas), "--host", host, "--port", str(port),
                      "--run-dir", str(run_dir)], log, env)
    try:
        state = wait_until(lambda: read_state(run_dir).get("proxy_pid") and read_state(run_dir), timeout_s,
                           "make serve (HAProxy and its replicas)", alive=lambda: launcher.poll() is None, log=log,
                           poll_s=0.3)
    except BaseException:
        stop_process(launcher, grace_s=30)
        raise
    return launcher, state
