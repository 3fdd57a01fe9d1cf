"""An SAE trained from the page: `python -m core.lens.sae train ...` in its own process, one per server, stoppable.

As core.train.job does for a model: `SAEJobSlot.start(checkpoint, layer, site, steps)` runs the command in a new
process group, its progress written as JSON lines to a file the page reads (`progress(job)`), its error output kept
(`error(job)`: the command's one sentence); `stop()` sends SIGTERM (the command ends training after the step in
progress, then evaluates and saves what it has), then SIGKILL after STOP_SECONDS. The switch is the one training
uses (`core.train.job.training_allowed`: ATTENTION_LAB_TRAINING, off under `make serve` unless the operator set it).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from core.train.job import ROOT, JobError, training_allowed  # noqa: F401 - the page asks this module

STOP_SECONDS = 20.0  # after SIGTERM the command still evaluates and saves (a few seconds), then SIGKILL


@dataclass
class SAEJob:
    checkpoint: Path
    out: Path
    progress_file: Path
    error_file: Path
    process: subprocess.Popen
    total: int
    started: float = field(default_factory=time.time)

    def running(self) -> bool:
        return self.process.poll() is None


def progress(job: SAEJob) -> tuple[str, int, int]:
    """(stage, done, total) from the last whole line of the job's progress file; ("start", 0, total) before any."""
    try:
        lines = job.progress_file.read_text(encoding="utf-8").splitlines()
    except OSError:
        return "start", 0, job.total
    for line in reversed(lines):
        try:
            row = json.loads(line)
            return str(row["stage"]), int(row["done"]), int(row["total"])
        except (ValueError, KeyError, TypeError):
            continue
    return "start", 0, job.total


def error(job: SAEJob) -> str:
    """The command's last `error: ...` sentence, or its last line of output, or ''."""
    try:
        lines = [ln for ln in job.error_file.read_text(encoding="utf-8", errors="replace").splitlines() if ln.strip()]
    except OSError:
        return ""
    said = [ln.removeprefix("error: ") for ln in lines if ln.startswith("error: ")]
    return said[-1] if said else (lines[-1] if lines and not lines[-1].startswith("step ") else "")


class SAEJobSlot:
    """At most one SAE job per server process (the page keeps one in st.cache_resource)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.job: SAEJob | None = None

    def current(self) -> SAEJob | None:
        return self.job

    def start(self, checkpoint: Path, layer: int, site: str, steps: int) -> SAEJob:
        from core.lens.sae import sae_path

        with self._lock:
            if self.job is not None and self.job.running():
                raise JobError(f"An SAE is already being trained on this server ({self.job.out.name}); stop it or "
                               "wait for it to end.")
            checkpoint = Path(checkpoint)
            out = sae_path(checkpoint, layer, site)
            if not os.access(checkpoint.parent, os.W_OK):
                raise JobError(f"The folder of {checkpoint.name} cannot be written to, so an SAE cannot be saved "
                               "beside it.")
            folder = Path(tempfile.mkdtemp(prefix="sae-job-"))
            progress_file, error_file = folder / "progress.jsonl", folder / "errors.txt"
            command = [sys.executable, "-m", "core.lens.sae", "train", str(checkpoint), "--layer", str(layer),
                       "--site", site, "--steps", str(steps), "--progress", str(progress_file)]
            with open(error_file, "wb") as errors:
                process = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=errors,
                                           start_new_session=True)
            self.job = SAEJob(checkpoint, out, progress_file, error_file, process, steps)
            return self.job

    def stop(self) -> bool:
        """Ask the running job to end (SIGTERM: it evaluates and saves what it has, a few seconds), without waiting;
        SIGKILL from a watcher thread if it is not gone within STOP_SECONDS. True when one was running."""
        with self._lock:
            job = self.job
            if job is None or not job.running():
                return False
            try:
                os.killpg(job.process.pid, signal.SIGTERM)
            except ProcessLookupError:
                return True
            threading.Thread(target=_kill_later, args=(job.process,), daemon=True).start()
            return True


def _kill_later(process: subprocess.Popen) -> None:
    try:
        process.wait(timeout=STOP_SECONDS)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
