"""A generic Trainer (it knows nothing about the task); `python -m core.train` runs core/train/cli.py.

The Trainer follows the CS224N assignment's minGPT trainer: AdamW (betas 0.9/0.95) with its decay
groups, linear warmup then an unclamped cosine with a 10% floor measured in tokens, gradient
clipping (core/train/optim.py holds the groups and schedules; a recipe may name others).
It writes history rows (run, step, epoch, tokens, wall_time, split, metric, value): live to
`<checkpoint>.log.jsonl`, and into the checkpoint every `save_every` epochs and at the end, atomically. A sidecar
`<checkpoint>.resume` (safetensors: optimizer moments and every random state the run draws from: CPU, CUDA,
the data order's seeds) lets `--resume` continue with exactly the history an uninterrupted run would have
written. With `snapshots=N` the weights at N
log-spaced steps go to `<checkpoint>.snapshots.safetensors` (core/train/snapshots.py), kept by `--resume`.
"""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, save_file
from torch.utils.data import DataLoader, Dataset
from tqdm import tqdm

from core.data.loader import epoch_batches
from core.io import checkpoint as ckpt
from core.model.device import pick_device
from core.model.tokenizer import Tokenizer
from core.model.transformer import Transformer
from core.train.optim import lr_multiplier, make_adamw
from core.train.snapshots import SnapshotKeeper


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
    save_every: int = 1  # epochs between saves of checkpoint + resume file; the last epoch is always saved
    save_seconds: float = 0.0  # also save when this long has passed since the last save (0: off)
    log_every: int = 10  # steps between train-loss records
    snapshots: int = 0  # weights kept at this many log-spaced steps (core/train/snapshots.py); 0: none
    snapshot_dtype: str = "float16"  # float16 halves the file; float32 keeps the weights exactly
    seed: int = 0
    device: str = "auto"


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


EvaluateFn = Callable[[Transformer], dict[str, float]]


def resume_path(path: Path) -> Path:
    return path.with_name(path.name + ".resume")


def log_path(path: Path) -> Path:
    return path.with_name(path.stem + ".log.jsonl")


class Trainer:
    def __init__(self, model: Transformer, train_dataset: Dataset, config: TrainerConfig,
                 plan: CheckpointPlan | None = None, evaluate: EvaluateFn | None = None,
                 run_name: str | None = None) -> None:
        self.model = model
        self.train_dataset = train_dataset
        self.config = config
        self.plan = plan
        self.evaluate = evaluate
        self.run_name = run_name or (plan.path.stem if plan else "run")
        self.device = pick_device(config.device)
        self.model.to(self.device)
        self.optimizer = self._make_optimizer()
        self.history: list[dict[str, Any]] = []
        self.epoch = 0  # epochs completed
        self.step = 0
        self.tokens = 0
        self.wall_time = 0.0
        self.metrics: dict[str, float] = {}
        steps_per_epoch = math.ceil(len(train_dataset) / config.batch_size)
        whole_run = self._tokens_per_step() * steps_per_epoch * config.max_epochs
        self.final_tokens = config.final_tokens or whole_run
        total_steps = steps_per_epoch * config.max_epochs
        total_steps = min(total_steps, config.max_steps) if config.max_steps else total_steps
        self.snapshots = SnapshotKeeper(config.snapshots, config.snapshot_dtype, total_steps)

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

    # --- history ---------------------------------------------------------------------------
    def record(self, split: str, metric: str, value: float) -> None:
        row = {"run": self.run_name, "step": self.step, "epoch": self.epoch, "tokens": self.tokens,
               "wall_time": round(self.wall_time, 3), "split": split, "metric": metric, "value": float(value)}
        self.history.append(row)
        if self.plan is not None:
            with open(log_path(self.plan.path), "a", encoding="utf-8") as fh:
                fh.write(json.dumps(row) + "\n")

    # --- resume ----------------------------------------------------------------------------
    def save(self) -> None:
        if self.plan is None:
            return
        plan = self.plan
        self.snapshots.write(plan.path, self.model.config.to_json())  # before the checkpoint: see snapshots.py
        ckpt.save(plan.path, self.model, plan.tokenizer, plan.task, labels=plan.labels, history=self.history,
                  metrics=self.metrics, data=plan.data, command=plan.command, seed=self.config.seed,
                  extra={**plan.extra, "trainer": json.dumps(asdict(self.config)),
                         "progress": json.dumps({"epoch": self.epoch, "step": self.step,
                                                 "tokens": self.tokens, "wall_time": self.wall_time})})
        tensors = self._random_states()
        for i, state in self.optimizer.state_dict()["state"].items():
            for key, value in state.items():
                tensors[f"optim.{i}.{key}"] = value.detach().cpu().reshape(-1) if value.dim() == 0 else \
                    value.detach().cpu().contiguous()
        tmp = resume_path(plan.path).with_suffix(".tmp")
        save_file(tensors, str(tmp))
        os.replace(tmp, resume_path(plan.path))

    def resume(self) -> None:
        """Continue from the plan's checkpoint: weights, history, optimizer and RNG state."""
        assert self.plan is not None
        loaded = ckpt.load(self.plan.path, device=self.device)
        self.model.load_state_dict(loaded.model.state_dict())
        progress = json.loads(loaded.metadata.get("progress", "{}"))
        self.epoch, self.step = progress.get("epoch", 0), progress.get("step", 0)
        self.tokens, self.wall_time = progress.get("tokens", 0), progress.get("wall_time", 0.0)
        self.history = list(loaded.history)
        self.metrics = dict(loaded.metadata.get("metrics") or {})
        tensors = load_file(str(resume_path(self.plan.path)))
        self._restore_random_states(tensors)
        state = self.optimizer.state_dict()
        for i in range(len([p for g in state["param_groups"] for p in g["params"]])):
            if f"optim.{i}.step" in tensors:
                state["state"][i] = {k.split(".", 2)[2]: v.reshape(()) if k.endswith(".step") else v
                                     for k, v in tensors.items() if k.startswith(f"optim.{i}.")}
        self.optimizer.load_state_dict(state)
        self.snapshots.resume(self.plan.path, self.step)
        # rewrite the live log so it matches the checkpoint (drop rows of an interrupted epoch)
        with open(log_path(self.plan.path), "w", encoding="utf-8") as fh:
            fh.writelines(json.dumps(row) + "\n" for row in self.history)

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
    def _finished(self) -> bool:
        cfg = self.config
        return self.epoch >= cfg.max_epochs or bool(cfg.max_steps and self.step >= cfg.max_steps)

    def train(self) -> list[dict[str, Any]]:
        cfg = self.config
        on_cuda = self.device.startswith("cuda")
        last_save = time.perf_counter()
        while not self._finished():
            self.model.train()
            started = time.perf_counter()
            wall_at_start = self.wall_time
            batches = epoch_batches(self.train_dataset, cfg.batch_size, self.epoch, cfg.seed * 1000 + self.epoch,
                                    pin=on_cuda)
            bar = tqdm(batches, total=math.ceil(len(self.train_dataset) / cfg.batch_size), leave=False,
                       desc=f"{self.run_name} epoch {self.epoch + 1}/{cfg.max_epochs}", dynamic_ncols=True,
                       disable=None)
            for x, y in bar:
                x, y = x.to(self.device, non_blocking=True), y.to(self.device, non_blocking=True)
                lr = self.learning_rate()
                for group in self.optimizer.param_groups:
                    group["lr"] = lr
                _, loss = self.model(x, y)
                # the weights after `step` optimizer steps, with the loss they give (this batch's, before its
                # own step: the loss of the batch that made the step would belong to the weights before it)
                if self.snapshots.wants(self.step):
                    self._snapshot(loss, wall_at_start + time.perf_counter() - started)
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
                    self.wall_time = wall_at_start + time.perf_counter() - started
                    self.record("train", "loss", loss.item())
                    self.record("train", "lr", lr)
                    bar.set_postfix(loss=f"{loss.item():.3f}", tok_s=f"{self.tokens / max(self.wall_time, 1e-9):.0f}")
                if cfg.max_steps and self.step >= cfg.max_steps:
                    break
            bar.close()
            if on_cuda:
                torch.cuda.synchronize()
            self.wall_time = wall_at_start + time.perf_counter() - started
            self.epoch += 1
            if self._finished() and self.snapshots.wants(self.step):  # no next batch: the last one's loss
                with torch.no_grad():
                    _, last_loss = self.model(x, y)
                self._snapshot(last_loss, self.wall_time)
            if self.evaluate is not None:
                self.model.eval()
                for metric, value in self.evaluate(self.model).items():
                    split, _, name = metric.partition("_")
                    self.record(split, name, value)
                    self.metrics[metric] = value
                self.model.train()
            overdue = cfg.save_seconds and time.perf_counter() - last_save >= cfg.save_seconds
            if self._finished() or self.epoch % max(1, cfg.save_every) == 0 or overdue:
                self.save()
                last_save = time.perf_counter()
        self.model.eval()
        return self.history

    def _snapshot(self, loss: torch.Tensor, wall_time: float) -> None:
        self.snapshots.take(self.model, self.step, self.epoch, self.tokens, loss.item(), wall_time)


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
