"""The servers a load test talks to, and what they cost: one Streamlit process, or `python -m serve`'s
replicas behind HAProxy; their memory (VmRSS) and CPU time (utime + stime), sampled from /proc."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TICKS = os.sysconf("SC_CLK_TCK")


def rss_kb(pid: int) -> int:
    """Resident memory (kB) of one process."""
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds a process has used so far."""
    with open(f"/proc/{pid}/stat") as fh:
        fields = fh.read().rsplit(") ", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


class ServerGroup:
    """`replicas == 0`: one `streamlit run app.py` on a free loopback port (what the product did before
    `make serve`); `replicas >= 1`: `python -m serve --replicas N` on free loopback ports, and the load goes
    through HAProxy."""

    def __init__(self, folder: Path, tmp: Path, replicas: int) -> None:
        self.folder, self.tmp, self.replicas = folder, tmp, replicas
        self.url = ""
        self.process: subprocess.Popen | None = None
        self.run_dir = tmp / "serve"
        self.log = tmp / "server.log"

    def start(self) -> None:
        from tests.browser.conftest import free_port, start_server

        if self.replicas == 0:
            server = start_server(self.folder, self.log)
            self.url, self.process = server.url, server.process
            return
        env = {**os.environ, "ATTENTION_LAB_CHECKPOINTS": str(self.folder), "PYTHONUNBUFFERED": "1"}
        with open(self.log, "wb") as out:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "serve", "--replicas", str(self.replicas), "--host", "127.0.0.1",
                 "--port", str(free_port()), "--run-dir", str(self.run_dir)],
                cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + 180
        while not self.state().get("proxy_pid"):
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"make serve did not start: {self.log_tail()}")
            time.sleep(0.3)
        self.url = self.state()["url"]

    def state(self) -> dict:
        try:
            return json.loads((self.run_dir / "state.json").read_text())
        except (OSError, ValueError):
            return {}

    def pids(self) -> dict[str, int]:
        """Server processes by name: "server", or each replica's name and "haproxy"."""
        if self.replicas == 0:
            return {"server": self.process.pid}
        state = self.state()
        pids = {r["name"]: r["pid"] for r in state.get("replicas", []) if r.get("pid")}
        if state.get("proxy_pid"):
            pids["haproxy"] = state["proxy_pid"]
        return pids

    def kill(self, name: str) -> None:
        os.kill(self.pids()[name], signal.SIGKILL)

    def log_tail(self, chars: int = 2000) -> str:
        text = self.log.read_text(errors="replace") if self.log.exists() else ""
        for replica in self.state().get("replicas", []):
            path = Path(replica["log"])
            if path.exists():
                text += path.read_text(errors="replace")
        return text[-chars:]

    def stop(self) -> None:
        from tests.browser.conftest import stop

        if self.process is not None:
            stop(self.process)


class Sampler(threading.Thread):
    """Every half second: each server process's memory (peak and last, by name) and CPU time (by pid, so a
    restarted replica counts as a new process)."""

    def __init__(self, group: ServerGroup, interval_s: float = 0.5) -> None:
        super().__init__(daemon=True)
        self.group, self.interval_s = group, interval_s
        self.peak: dict[str, int] = {}
        self.cpu_first: dict[int, float] = {}
        self.cpu_last: dict[int, float] = {}
        self.stopped = threading.Event()

    def memory_now(self) -> dict[str, int]:
        memory = {}
        for name, pid in self.group.pids().items():
            try:
                memory[name] = rss_kb(pid)
            except OSError:
                continue
        return memory

    def sample(self) -> None:
        for name, kb in self.memory_now().items():
            self.peak[name] = max(self.peak.get(name, 0), kb)
        for pid in self.group.pids().values():
            try:
                seconds = cpu_seconds(pid)
            except OSError:
                continue
            self.cpu_first.setdefault(pid, seconds)
            self.cpu_last[pid] = seconds

    def run(self) -> None:
        while not self.stopped.is_set():
            self.sample()
            self.stopped.wait(self.interval_s)

    def cpu_used(self) -> float:
        """CPU seconds all server processes used since sampling began."""
        return sum(self.cpu_last[pid] - self.cpu_first[pid] for pid in self.cpu_last)
