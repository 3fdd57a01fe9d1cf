"""A generic Trainer (it knows nothing about the task); `python -m core.train` runs core/train/cli.py.

The Trainer follows the CS224N assignment's minGPT trainer: AdamW (betas 0.9/0.95) with its decay
groups, linear warmup then an unclamped cosine with a 10% floor measured in tokens, gradient
clipping (core/train/optim.py holds the groups and schedules; a recipe may name others).
`Trainer.train()` is the bare loop: batches, learning rate, forward, backward, clip, step, counters,
and history rows (run, step, epoch, tokens, wall_time, split, metric, value) of the train loss and rate
every `log_every` steps. `Trainer(model, data, config)` trains and writes nothing.

Everything else is a `Callback`, called in the order given (minGPT's `add_callback`, typed). The
standard list (core/train/callbacks.py `standard`), in its order: ProgressBar (the tqdm bar),
Snapshots (weights at log-spaced steps, core/train/snapshots.py), Evaluation (a recipe's evaluate
function after every epoch: `split_metric` rows and `metrics`), EpochReport (core/train/progress.py:
one line per epoch) and Checkpointing (checkpoint + `.resume` sidecar + live `.log.jsonl`, and
`resume`). At an epoch's end they run in that order: the last snapshot's forward, then evaluation, then
the save, so the random draws come in the same order as ever.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, TypeVar

import torch
from torch.utils.data import DataLoader, Dataset

from core.data.loader import epoch_batches
from core.model.device import pick_device
from core.model.transformer import Transformer
from core.train.optim import lr_multiplier, make_adamw

Batch = tuple[torch.Tensor, torch.Tensor]


class Callback:
    """One optional part of a run. Every method does nothing unless a subclass says otherwise; the
    Trainer calls each callback's method in the order the callbacks were given."""

    def on_train_start(self, trainer: Trainer) -> None:
        """`train()` begins (after any resume)."""

    def on_epoch_start(self, trainer: Trainer) -> None:
        """An epoch begins; `trainer.epoch` is the number of epochs done."""

    def on_batch_loss(self, trainer: Trainer, batch: Batch, loss: torch.Tensor) -> None:
        """A batch's loss, on the weights after `trainer.step` steps, before its backward and step."""

    def on_batch_end(self, trainer: Trainer, loss: torch.Tensor) -> None:
        """After the optimizer step, the counters and any train rows of that step."""

    def on_epoch_end(self, trainer: Trainer) -> None:
        """After an epoch (`trainer.epoch` counts it, `wall_time` includes it), the model in train mode."""

    def on_record(self, trainer: Trainer, row: dict[str, Any]) -> None:
        """A history row was appended (by the loop or by a callback)."""

    def on_save(self, trainer: Trainer, path: Path) -> None:
        """Checkpointing is about to write the checkpoint at `path` (a file beside it goes first)."""

    def on_resume(self, trainer: Trainer, path: Path) -> None:
        """Checkpointing restored the trainer from `path` (weights, counters, history, optimizer, RNG)."""


C = TypeVar("C", bound=Callback)


@dataclass
class TrainerConfig:
    """Defaults are the CS224N assignment's recipe where it has one (see core/train/optim.py)."""

    max_epochs: int = 10
    batch_size: int = 64
    learning_rate: float = 3e-4
    betas: tuple[float, float] = (0.9, 0.95)
    grad_norm_clip: float = 1.0  # 0: no clipping (torch.optim's own loop, as CSE 256 PA2 trains)
    weight_decay: float = 0.1
    decay: str = "cs224n"  # which parameters are decayed: a core.train.optim.DECAY_POLICIES name
    schedule: str = "cosine"  # core.train.optim.SCHEDULES; "cosine" is the assignment's, unclamped
    lr_decay: bool = True  # False: a constant rate whatever `schedule` says
    warmup_tokens: int = 0  # CS224N counts every target position, PAD included
    final_tokens: int = 0  # 0: the whole run
    max_steps: int = 0  # stop after this many optimizer steps (0: run every epoch)
    save_every: int = 1  # epochs between saves (Checkpointing: checkpoint + resume file); the last is always saved
    save_seconds: float = 0.0  # also save when this long has passed since the last save (0: off)
    log_every: int = 10  # steps between train-loss records
    snapshots: int = 0  # weights kept at this many steps (the Snapshots callback); 0: none
    snapshot_spacing: str = "log"  # "log": dense early; "linear": evenly; "loss": where the loss falls (snapshots.py)
    snapshot_dtype: str = "float16"  # float16 halves the file; float32 keeps the weights exactly
    seed: int = 0
    device: str = "auto"


class Trainer:
    def __init__(self, model: Transformer, train_dataset: Dataset, config: TrainerConfig,
                 callbacks: Iterable[Callback] = (), run_name: str = "run") -> None:
        self.model = model
        self.train_dataset = train_dataset
        self.config = config
        self.callbacks: list[Callback] = list(callbacks)
        self.run_name = run_name
        self.device = pick_device(config.device)
        self.model.to(self.device)
        self.optimizer = self._make_optimizer()
        self.history: list[dict[str, Any]] = []
        self.epoch = 0  # epochs completed
        self.step = 0
        self.tokens = 0
        self.wall_time = 0.0
        self.metrics: dict[str, float] = {}
        self._started, self._wall_at_start = time.perf_counter(), 0.0
        steps_per_epoch = math.ceil(len(train_dataset) / config.batch_size)
        whole_run = self._tokens_per_step() * steps_per_epoch * config.max_epochs
        self.final_tokens = config.final_tokens or whole_run
        total_steps = steps_per_epoch * config.max_epochs
        self.total_steps = min(total_steps, config.max_steps) if config.max_steps else total_steps

    # --- callbacks -------------------------------------------------------------------------
    def add_callback(self, callback: Callback) -> None:
        self.callbacks.append(callback)

    def trigger(self, event: str, *args: Any) -> None:
        """Call `event` (a Callback method's name) on every callback, in order."""
        for callback in self.callbacks:
            getattr(callback, event)(self, *args)

    def callback(self, kind: type[C]) -> C | None:
        """The first callback of this kind, if the run has one."""
        return next((c for c in self.callbacks if isinstance(c, kind)), None)

    def _tokens_per_step(self) -> int:
        x, _ = self.train_dataset[0]
        return self.config.batch_size * x.numel()

    @property
    def positions_per_row(self) -> int:
        """Target positions in one untrimmed item (1 for a class label)."""
        if not hasattr(self, "_positions_per_row"):
            self._positions_per_row = self.train_dataset[0][1].numel()
        return self._positions_per_row

    def _make_optimizer(self) -> torch.optim.Optimizer:
        cfg = self.config
        return make_adamw(self.model, cfg.decay, cfg.learning_rate, cfg.weight_decay, cfg.betas)

    def learning_rate(self) -> float:
        """The rate of the next step. As in the assignment's trainer, the schedule is applied after each
        step from the tokens trained on so far, so the very first step runs at the base rate."""
        cfg = self.config
        if self.step == 0:
            return cfg.learning_rate
        schedule = cfg.schedule if cfg.lr_decay else "constant"
        return cfg.learning_rate * lr_multiplier(schedule, self.tokens, cfg.warmup_tokens, self.final_tokens)

    def clock(self) -> float:
        """The run's wall time now (the epochs before this one plus this one's time so far)."""
        return self._wall_at_start + time.perf_counter() - self._started

    # --- history ---------------------------------------------------------------------------
    def record(self, split: str, metric: str, value: float) -> None:
        row = {"run": self.run_name, "step": self.step, "epoch": self.epoch, "tokens": self.tokens,
               "wall_time": round(self.wall_time, 3), "split": split, "metric": metric, "value": float(value)}
        self.history.append(row)
        self.trigger("on_record", row)

    # --- state, for a callback that saves and resumes --------------------------------------
    def progress(self) -> dict[str, Any]:
        return {"epoch": self.epoch, "step": self.step, "tokens": self.tokens, "wall_time": self.wall_time}

    def state_tensors(self) -> dict[str, torch.Tensor]:
        """What a resumed run needs beyond the weights and history: every random state and the optimizer's."""
        tensors = self._random_states()
        for i, state in self.optimizer.state_dict()["state"].items():
            for key, value in state.items():
                tensors[f"optim.{i}.{key}"] = value.detach().cpu().reshape(-1) if value.dim() == 0 else \
                    value.detach().cpu().contiguous()
        return tensors

    def restore(self, progress: dict[str, Any], history: list[dict[str, Any]], metrics: dict[str, float],
                tensors: dict[str, torch.Tensor]) -> None:
        """Put back what `progress` and `state_tensors` gave (the weights are the caller's to load)."""
        self.epoch, self.step = progress.get("epoch", 0), progress.get("step", 0)
        self.tokens, self.wall_time = progress.get("tokens", 0), progress.get("wall_time", 0.0)
        self.history = list(history)
        self.metrics = dict(metrics)
        self._restore_random_states(tensors)
        state = self.optimizer.state_dict()
        for i in range(len([p for g in state["param_groups"] for p in g["params"]])):
            if f"optim.{i}.step" in tensors:
                state["state"][i] = {k.split(".", 2)[2]: v.reshape(()) if k.endswith(".step") else v
                                     for k, v in tensors.items() if k.startswith(f"optim.{i}.")}
        self.optimizer.load_state_dict(state)

    def _random_states(self) -> dict[str, torch.Tensor]:
        """Every random state the run draws from: torch's CPU generator (dropout on the CPU, anything
        seeded globally), each CUDA device's when training there (dropout on a GPU), and the seeds the
        data order comes from (the epoch's shuffle and an epoch-seeded dataset's corruption draw from
        (seed, epoch) alone, so seed + the saved epoch is that state)."""
        states = {"rng.torch": torch.get_rng_state(),
                  "rng.order_seed": torch.tensor([self.config.seed], dtype=torch.int64)}
        if hasattr(self.train_dataset, "set_epoch"):
            states["rng.dataset_seed"] = torch.tensor([int(self.train_dataset.seed)], dtype=torch.int64)
        if self.device.startswith("cuda"):
            states.update({f"rng.cuda.{i}": state for i, state in enumerate(torch.cuda.get_rng_state_all())})
        return states

    def _restore_random_states(self, tensors: dict[str, torch.Tensor]) -> None:
        torch.set_rng_state(tensors["rng.torch"])
        if "rng.order_seed" in tensors:  # the run's seed wins over the one this trainer was built with
            self.config = replace(self.config, seed=int(tensors["rng.order_seed"][0]))
        if "rng.dataset_seed" in tensors and hasattr(self.train_dataset, "set_epoch"):
            self.train_dataset.seed = int(tensors["rng.dataset_seed"][0])
        cuda = {int(key.rsplit(".", 1)[1]): state for key, state in tensors.items() if key.startswith("rng.cuda.")}
        if cuda and torch.cuda.is_available():
            for index, state in cuda.items():
                if index < torch.cuda.device_count():
                    torch.cuda.set_rng_state(state, index)

    # --- the loop --------------------------------------------------------------------------
    def finished(self) -> bool:
        cfg = self.config
        return self.epoch >= cfg.max_epochs or bool(cfg.max_steps and self.step >= cfg.max_steps)

    def train(self) -> list[dict[str, Any]]:
        cfg = self.config
        on_cuda = self.device.startswith("cuda")
        self.trigger("on_train_start")
        while not self.finished():
            self.model.train()
            self._started, self._wall_at_start = time.perf_counter(), self.wall_time
            self.trigger("on_epoch_start")
            for x, y in epoch_batches(self.train_dataset, cfg.batch_size, self.epoch, cfg.seed * 1000 + self.epoch,
                                      pin=on_cuda):
                x, y = x.to(self.device, non_blocking=True), y.to(self.device, non_blocking=True)
                lr = self.learning_rate()
                for group in self.optimizer.param_groups:
                    group["lr"] = lr
                _, loss = self.model(x, y)
                self.trigger("on_batch_loss", (x, y), loss)
                self.optimizer.zero_grad(set_to_none=True)
                loss.backward()
                if cfg.grad_norm_clip > 0:
                    torch.nn.utils.clip_grad_norm_(self.model.parameters(), cfg.grad_norm_clip)
                self.optimizer.step()
                self.step += 1
                # every target position of the untrimmed rows, PAD included (the CS224N count), so a
                # dataset that trims its batches keeps the schedule it would have had
                self.tokens += y.size(0) * self.positions_per_row
                if self.step % cfg.log_every == 0:  # .item() waits for the device: only when logging
                    self.wall_time = self.clock()
                    self.record("train", "loss", loss.item())
                    self.record("train", "lr", lr)
                self.trigger("on_batch_end", loss)
                if cfg.max_steps and self.step >= cfg.max_steps:
                    break
            if on_cuda:
                torch.cuda.synchronize()
            self.wall_time = self.clock()
            self.epoch += 1
            self.trigger("on_epoch_end")
        self.model.eval()
        return self.history


@torch.no_grad()
def evaluate_loss(model: Transformer, dataset: Dataset, batch_size: int = 128, device: str = "cpu",
                  accuracy: bool = False) -> dict[str, float]:
    """Mean loss over target tokens (PAD ignored), its perplexity, and optionally classification accuracy."""
    model.eval()
    total, count, correct, seen = 0.0, 0, 0, 0
    for x, y in DataLoader(dataset, batch_size=batch_size):
        x, y = x.to(device), y.to(device)
        logits, loss = model(x, y)
        n = y.numel() if accuracy else int((y != model.config.pad_id).sum())
        total += loss.item() * n
        count += n
        if accuracy:
            correct += int((logits.argmax(-1) == y).sum())
            seen += y.numel()
    mean = total / max(count, 1)
    out = {"loss": mean, "perplexity": math.exp(min(mean, 50))}
    if accuracy:
        out["accuracy"] = correct / max(seen, 1)
    return out
