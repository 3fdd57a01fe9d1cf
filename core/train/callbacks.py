"""The Trainer's optional parts, each a Callback (core/train/trainer.py), and `standard`, the list a recipe runs.

- ProgressBar: a tqdm bar per epoch (loss and tokens/s every `log_every` steps); silent off a terminal.
- Snapshots: the weights at log-spaced steps (core/train/snapshots.py), written beside the checkpoint
  before it at every save, and read back on resume.
- Evaluation: a recipe's evaluate function after every epoch: one `split_metric` row each, into `metrics`.
- Checkpointing: the checkpoint and its `.resume` sidecar every `save_every` epochs (or `save_seconds`) and
  at the end, atomically; the live `<checkpoint>.log.jsonl`; and `resume`, which puts all of it back.
The sidecar (safetensors: optimizer moments and every random state the run draws from: CPU, CUDA, the data
order's seeds) lets a resumed run write exactly the history an uninterrupted run would have written.
"""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, save_file
from tqdm import tqdm

from core.io import checkpoint as ckpt
from core.model.tokenizer import Tokenizer
from core.model.transformer import Transformer
from core.train.progress import EpochReport
from core.train.snapshots import SnapshotKeeper
from core.train.trainer import Batch, Callback, Trainer

EvaluateFn = Callable[[Transformer], dict[str, float]]


@dataclass
class CheckpointPlan:
    """Where and how the trainer saves; the caller supplies the task-specific parts."""

    path: Path
    tokenizer: Tokenizer
    task: str
    labels: list[str] | None = None
    data: list[dict] = field(default_factory=list)
    command: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


def resume_path(path: Path) -> Path:
    return path.with_name(path.name + ".resume")


def log_path(path: Path) -> Path:
    return path.with_name(path.stem + ".log.jsonl")


class ProgressBar(Callback):
    def __init__(self) -> None:
        self.bar: Any = None

    def on_epoch_start(self, trainer: Trainer) -> None:
        cfg = trainer.config
        self.bar = tqdm(total=math.ceil(len(trainer.train_dataset) / cfg.batch_size), leave=False,
                        desc=f"{trainer.run_name} epoch {trainer.epoch + 1}/{cfg.max_epochs}", dynamic_ncols=True,
                        disable=None)

    def on_batch_end(self, trainer: Trainer, loss: torch.Tensor) -> None:
        self.bar.update(1)
        if trainer.step % trainer.config.log_every == 0:  # the loop has just waited for this loss anyway
            self.bar.set_postfix(loss=f"{loss.item():.3f}",
                                 tok_s=f"{trainer.tokens / max(trainer.wall_time, 1e-9):.0f}")

    def on_epoch_end(self, trainer: Trainer) -> None:
        self.bar.close()


class Snapshots(Callback):
    """Keeps `config.snapshots` steps of the weights (log, linear or loss-driven spacing); `path`: the checkpoint."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.keeper: SnapshotKeeper | None = None
        self._last: Batch | None = None

    def _keeper(self, trainer: Trainer) -> SnapshotKeeper:
        if self.keeper is None:
            cfg = trainer.config
            self.keeper = SnapshotKeeper(cfg.snapshots, cfg.snapshot_dtype, trainer.total_steps, cfg.snapshot_spacing)
        return self.keeper

    def on_train_start(self, trainer: Trainer) -> None:
        self._keeper(trainer)  # a wrong snapshot_dtype stops the run before its first step

    def on_batch_loss(self, trainer: Trainer, batch: Batch, loss: torch.Tensor) -> None:
        # the weights after `step` optimizer steps, with the loss they give (this batch's, before its own
        # step: the loss of the batch that made the step would belong to the weights before it)
        self._last = batch
        keeper = self._keeper(trainer)
        if keeper.wants(trainer.step, float(loss.item()) if keeper.spacing == "loss" else None):
            self._take(trainer, loss, trainer.clock())

    def on_epoch_end(self, trainer: Trainer) -> None:
        if trainer.finished() and self._keeper(trainer).wants(trainer.step) and self._last is not None:
            with torch.no_grad():  # no next batch: the last one's loss, on the final weights (train mode)
                _, last_loss = trainer.model(*self._last)
            self._take(trainer, last_loss, trainer.wall_time)

    def _take(self, trainer: Trainer, loss: torch.Tensor, wall_time: float) -> None:
        self._keeper(trainer).take(trainer.model, trainer.step, trainer.epoch, trainer.tokens, loss.item(), wall_time)

    def on_save(self, trainer: Trainer, path: Path) -> None:
        self._keeper(trainer).write(path, trainer.model.config.to_json())  # before the checkpoint: snapshots.py

    def on_resume(self, trainer: Trainer, path: Path) -> None:
        self._keeper(trainer).resume(path, trainer.step)


class Evaluation(Callback):
    """After every epoch, in eval mode: each metric `split_name` becomes a row (split, name) and
    `trainer.metrics[split_name]`."""

    def __init__(self, evaluate: EvaluateFn) -> None:
        self.evaluate = evaluate

    def on_epoch_end(self, trainer: Trainer) -> None:
        trainer.model.eval()
        for metric, value in self.evaluate(trainer.model).items():
            split, _, name = metric.partition("_")
            trainer.record(split, name, value)
            trainer.metrics[metric] = value
        trainer.model.train()


class Checkpointing(Callback):
    """Saves to `plan.path` after every `save_every` epochs, when `save_seconds` have passed since the
    last save, and after the last epoch; appends every history row to the live log."""

    def __init__(self, plan: CheckpointPlan) -> None:
        self.plan = plan
        self._last_save = time.perf_counter()

    def on_train_start(self, trainer: Trainer) -> None:
        self._last_save = time.perf_counter()

    def on_record(self, trainer: Trainer, row: dict[str, Any]) -> None:
        with open(log_path(self.plan.path), "a", encoding="utf-8") as fh:
            fh.write(json.dumps(row) + "\n")

    def on_epoch_end(self, trainer: Trainer) -> None:
        cfg = trainer.config
        overdue = cfg.save_seconds and time.perf_counter() - self._last_save >= cfg.save_seconds
        if trainer.finished() or trainer.epoch % max(1, cfg.save_every) == 0 or overdue:
            self.save(trainer)
            self._last_save = time.perf_counter()

    def save(self, trainer: Trainer) -> None:
        plan = self.plan
        trainer.trigger("on_save", plan.path)
        ckpt.save(plan.path, trainer.model, plan.tokenizer, plan.task, labels=plan.labels, history=trainer.history,
                  metrics=trainer.metrics, data=plan.data, command=plan.command, seed=trainer.config.seed,
                  extra={**plan.extra, "trainer": json.dumps(asdict(trainer.config)),
                         "progress": json.dumps(trainer.progress())})
        tmp = resume_path(plan.path).with_suffix(".tmp")
        save_file(trainer.state_tensors(), str(tmp))
        os.replace(tmp, resume_path(plan.path))

    def resume(self, trainer: Trainer) -> None:
        """Continue from the plan's checkpoint: weights, history, optimizer and RNG state, then each
        callback's own (on_resume)."""
        loaded = ckpt.load(self.plan.path, device=trainer.device)
        trainer.model.load_state_dict(loaded.model.state_dict())
        trainer.restore(json.loads(loaded.metadata.get("progress", "{}")), loaded.history,
                        loaded.metadata.get("metrics") or {}, load_file(str(resume_path(self.plan.path))))
        trainer.trigger("on_resume", self.plan.path)
        # rewrite the live log so it matches the checkpoint (drop rows of an interrupted epoch)
        with open(log_path(self.plan.path), "w", encoding="utf-8") as fh:
            fh.writelines(json.dumps(row) + "\n" for row in trainer.history)


def standard(plan: CheckpointPlan | None = None, evaluate: EvaluateFn | None = None,
             report: EpochReport | None = None) -> list[Callback]:
    """A recipe's callbacks, in the order they must run: the bar, then (with a plan) snapshots, then
    evaluation, the epoch's line, and the save last."""
    return [ProgressBar(), *([Snapshots(plan.path)] if plan else []), *([Evaluation(evaluate)] if evaluate else []),
            *([report] if report else []), *([Checkpointing(plan)] if plan else [])]


def resume_run(trainer: Trainer) -> None:
    """Continue `trainer` from its Checkpointing callback's checkpoint."""
    saving = trainer.callback(Checkpointing)
    if saving is None:
        raise ValueError("Only a run that saves (a Checkpointing callback) can resume.")
    saving.resume(trainer)
