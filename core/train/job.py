"""A training run started from the Training curves page: its own process, one per server, stoppable.

`JobSlot.start(recipe)` runs `python -m core.train.job RECIPE OUT` in a new process group; the child trains one
of the small bundled recipes (`SMALL_RECIPES`: a run of a minute or two on a CPU) into a folder of its own
(`runs_dir()`: `$ATTENTION_LAB_RUNS`, default `runs/` beside `checkpoints/`), never over a bundled checkpoint, and
writes the live log (`<run>.log.jsonl`) the curves page already follows, its snapshots and its checkpoint as
`make checkpoints` would. `JobSlot.stop()` sends SIGTERM: the child ends its run after the step in progress as if
that step were its last (the epoch's evaluation, the snapshots taken so far and the checkpoint are saved, the log
ends with whole lines), then SIGKILL if it is not gone within `STOP_SECONDS` (the log and the files of its last
save are kept). `progress(job)` reads the log: the last step recorded, of the run's total.

The switch, an environment variable of the process that runs the app: `ATTENTION_LAB_TRAINING` (on unless set to
0/false/no/off); `make serve` (serve/__main__.py) turns it off unless the operator set it to 1.
"""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

from core.train.trainer import Callback

TRAINING_ENV = "ATTENTION_LAB_TRAINING"
RUNS_ENV = "ATTENTION_LAB_RUNS"
ROOT = Path(__file__).resolve().parents[2]
OFF = ("0", "false", "no", "off")
STOP_SECONDS = 1.5  # SIGTERM, then SIGKILL after this long: the process is gone within 2 s
# what the page trains: a bundled recipe, whole or cut to a number of steps, that runs in a minute or two on a CPU.
# lm-learned cut to 300 steps is not among them: it had done 120 after 5 minutes on this shared 2-core box (its BPE
# built first, a validation pass and a 7 MB resume file every epoch). lm-char (the character LM, 3x128, block 64)
# cut to 300 steps is: 67 CPU s on one thread of this box under load (2026-11-28), its loss 3.86 -> 1.77.
SMALL_RECIPES: dict[str, tuple[str, int]] = {"induction": ("induction", 0), "lm-char-300": ("lm-char", 300)}


class JobError(RuntimeError):
    """A job that cannot start; str() is one sentence for the user."""


def training_allowed(environ=None) -> bool:
    value = (os.environ if environ is None else environ).get(TRAINING_ENV)
    return value is None or value.strip().lower() not in OFF


def runs_dir(environ=None) -> Path:
    value = (os.environ if environ is None else environ).get(RUNS_ENV)
    return Path(value) if value else ROOT / "runs"


def _recipe(name: str):
    """The bundled recipe behind a page recipe, its steps cut where the page's name says."""
    from core.train.bundle import RECIPES

    if name not in SMALL_RECIPES:
        raise JobError(f"{name!r} is not one of the recipes the page trains ({', '.join(SMALL_RECIPES)}).")
    bundled, steps = SMALL_RECIPES[name]
    recipe = next(r for r in RECIPES if r.name == bundled)
    return replace(recipe, trainer=replace(recipe.trainer, max_steps=steps)) if steps else recipe


def total_steps(name: str) -> int:
    """The optimizer steps a small recipe runs (what progress counts towards)."""
    recipe = _recipe(name)
    if recipe.trainer.max_steps:
        return recipe.trainer.max_steps  # the cut runs are far shorter than their bundled epochs
    rows = recipe.kwargs.get("epoch_rows", 3200)
    return math.ceil(rows / recipe.trainer.batch_size) * recipe.trainer.max_epochs


@dataclass
class TrainingJob:
    recipe: str
    path: Path  # the checkpoint the run writes (its log and snapshots beside it)
    process: subprocess.Popen
    total: int
    started: float = field(default_factory=time.time)
    owner: str = ""  # who started it (the page passes its browser session's token): only they may stop it

    @property
    def log(self) -> Path:
        from core.train.callbacks import log_path

        return log_path(self.path)

    def running(self) -> bool:
        return self.process.poll() is None


def progress(job: TrainingJob) -> tuple[int, int]:
    """(the last step the log records, the run's total); 0 before its first record."""
    step = 0
    try:
        with open(job.log, "rb") as fh:
            fh.seek(max(0, fh.seek(0, os.SEEK_END) - 4096))
            lines = fh.read().decode("utf-8", "replace").splitlines()
    except OSError:
        return 0, job.total
    for line in reversed(lines):
        try:
            step = int(json.loads(line)["step"])
            break
        except (ValueError, KeyError, TypeError):
            continue  # a first line cut by the seek, or a line being written
    return step, job.total


class JobSlot:
    """At most one training job per server process (the page keeps one slot in st.cache_resource)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.job: TrainingJob | None = None

    def current(self) -> TrainingJob | None:
        return self.job

    def start(self, recipe: str, folder: Path | None = None, owner: str = "") -> TrainingJob:
        with self._lock:
            if self.job is not None and self.job.running():
                whose = "" if not owner or self.job.owner == owner else ", started in another browser session"
                raise JobError(f"A training job is already running on this server ({self.job.path.stem}{whose}); "
                               "stop it or wait for it to end." if not whose else
                               f"A training job is already running on this server ({self.job.path.stem}{whose}); "
                               "one job runs at a time, so Train is free again when it ends.")
            total = total_steps(recipe)
            folder = Path(folder or runs_dir())
            folder.mkdir(parents=True, exist_ok=True)
            path = folder / f"{recipe}-{time.strftime('%Y%m%d-%H%M%S')}.safetensors"
            n = 1
            while path.exists():
                n += 1
                path = path.with_name(f"{recipe}-{time.strftime('%Y%m%d-%H%M%S')}-{n}.safetensors")
            with open(path.with_suffix(".err"), "wb") as errors:  # the child's traceback, if it has one
                process = subprocess.Popen([sys.executable, "-m", "core.train.job", recipe, str(path)], cwd=ROOT,
                                           stdout=subprocess.DEVNULL, stderr=errors, start_new_session=True)
            self.job = TrainingJob(recipe, path, process, total, owner=owner)
            return self.job

    def stop(self, owner: str | None = None) -> bool:
        """End the running job (SIGTERM, then SIGKILL); True when one was running. `owner`: the asker, who must be
        the one that started it (another browser session sees the job, not a Stop of its own)."""
        with self._lock:
            job = self.job
            if job is None or not job.running() or (owner is not None and job.owner and owner != job.owner):
                return False
            try:
                os.killpg(job.process.pid, signal.SIGTERM)
                job.process.wait(timeout=STOP_SECONDS)
            except subprocess.TimeoutExpired:
                os.killpg(job.process.pid, signal.SIGKILL)
                job.process.wait(timeout=5)
            except ProcessLookupError:
                pass
            return True


class StopWhenAsked(Callback):
    """Once asked (SIGTERM), the step just done becomes the run's last, so the trainer ends its epoch and saves as it
    does at the end of a run."""

    def __init__(self) -> None:
        self.asked = False

    def ask(self, _signum=None, _frame=None) -> None:
        self.asked = True

    def on_batch_end(self, trainer, loss) -> None:
        if self.asked:
            trainer.config.max_steps = trainer.step  # the loop reads its config after every step


def main(argv: list[str] | None = None) -> int:
    """`python -m core.train.job RECIPE OUT`: train a small bundled recipe into OUT (never into checkpoints/)."""
    from core.train.bundle import FUNCTIONS, OUTPUT_ARG

    recipe_name, out = (sys.argv[1:] if argv is None else argv)[:2]
    try:
        recipe = _recipe(recipe_name)
    except JobError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    out_path = Path(out).resolve()
    if (ROOT / "checkpoints").resolve() in out_path.parents:
        print("error: a run from the page is never written into checkpoints/.", file=sys.stderr)
        return 2
    stopper = StopWhenAsked()
    signal.signal(signal.SIGTERM, stopper.ask)
    kwargs = {k: str(ROOT / v) if isinstance(v, str) and v.startswith("data/") else v  # the data, wherever we run
              for k, v in recipe.kwargs.items()}
    FUNCTIONS[recipe.recipe](**kwargs, **{OUTPUT_ARG: str(out_path)}, shape=recipe.shape,
                             trainer=replace(recipe.trainer, device="cpu"), force=False, report=stopper,
                             command=f"python -m core.train.job {recipe_name} {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
