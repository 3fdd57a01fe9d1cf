"""The servers a load test talks to, and what they cost: one Streamlit process, or `python -m serve`'s
replicas behind HAProxy; their memory (VmRSS) and CPU time (utime + stime), sampled from /proc."""

from __future__ import annotations

import os
import signal
import statistics
import subprocess
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from serve.streamlit_process import free_port, read_state, start_healthy, start_serve, stop_process

ROOT = Path(__file__).resolve().parent.parent
TICKS = os.sysconf("SC_CLK_TCK")


@contextmanager
def trees_to_compare(baseline: str | None, tmp: Path) -> Iterator[tuple[list[Path], list[str]]]:
    """(roots, labels): this tree, and with `baseline` first a temporary `git worktree` of that revision (removed
    afterwards), for benchmarks that run both in one go and print a ratio."""
    if not baseline:
        yield [ROOT], ["this tree"]
        return
    worktree = tmp / "baseline"
    subprocess.run(["git", "worktree", "add", "--detach", str(worktree), baseline], cwd=ROOT, check=True,
                   capture_output=True)
    try:
        yield [worktree, ROOT], [baseline[:12], "this tree"]
    finally:
        subprocess.run(["git", "worktree", "remove", "--force", str(worktree)], cwd=ROOT, capture_output=True)


def print_medians(results: list[dict[str, list[float]]], labels: list[str], rows: Sequence[tuple[str, str]],
                  width: int) -> dict[str, float]:
    """The two-tree table of trees_to_compare's benchmarks: per (row, unit), each tree's median over its
    `results[tree][row]`, and with two trees baseline / this; returns those ratios by row."""
    print(f"{'':{width}}" + "".join(f"{label:>16}" for label in labels) + ("     ratio" if len(labels) == 2 else ""))
    ratios = {}
    for row, unit in rows:
        medians = [statistics.median(r[row]) for r in results]
        line = f"{row:{width}}" + "".join(f"{m:>10.3f} {unit:5}" for m in medians)
        if len(medians) == 2:
            ratios[row] = medians[0] / max(medians[1], 1e-9)
            line += f"  {ratios[row]:6.2f}x"
        print(line)
    return ratios


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
        if self.replicas == 0:
            server = start_healthy(self.log, extra_env={"ATTENTION_LAB_CHECKPOINTS": str(self.folder)})
            self.url, self.process = server.url, server.process
            return
        env = {**os.environ, "ATTENTION_LAB_CHECKPOINTS": str(self.folder)}
        self.process, state = start_serve(self.replicas, free_port(), self.run_dir, self.log, env, timeout_s=180)
        self.url = state["url"]

    def state(self) -> dict:
        return read_state(self.run_dir)

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
        stop_process(self.process)


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
