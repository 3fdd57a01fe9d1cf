"""A generic Trainer (it knows nothing about the task) and the `python -m core.train` CLI.

The Trainer follows the CS224N assignment's minGPT trainer: AdamW (betas 0.9/0.95) with its decay
groups, linear warmup then an unclamped cosine with a 10% floor measured in tokens, gradient
clipping (core/optim.py holds the groups and schedules; a recipe may name others).
It writes history rows (run, step, epoch, tokens, wall_time, split, metric, value): live to
`<checkpoint>.log.jsonl`, and into the checkpoint every `save_every` epochs and at the end, atomically. A sidecar
`<checkpoint>.resume` (safetensors: optimizer moments and RNG states) lets `--resume` continue
with exactly the history an uninterrupted run would have written.
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
from torch.utils.data import DataLoader, Dataset
from tqdm import tqdm

from core import checkpoint as ckpt
from core.data.loader import epoch_batches
from core.model import Transformer
from core.optim import lr_multiplier, make_adamw
from core.tokenizer import Tokenizer


@dataclass
class TrainerConfig:
    """Defaults are the CS224N assignment's recipe where it has one (see core/optim.py)."""

    max_epochs: int = 10
    batch_size: int = 64
    learning_rate: float = 3e-4
    betas: tuple[float, float] = (0.9, 0.95)
    grad_norm_clip: float = 1.0
    weight_decay: float = 0.1
    decay: str = "cs224n"  # which parameters are decayed: a core.optim.DECAY_POLICIES name
    schedule: str = "cosine"  # core.optim.SCHEDULES; "cosine" is the assignment's, unclamped
    lr_decay: bool = True  # False: a constant rate whatever `schedule` says
    warmup_tokens: int = 0  # CS224N counts every target position, PAD included
    final_tokens: int = 0  # 0: the whole run
    max_steps: int = 0  # stop after this many optimizer steps (0: run every epoch)
    save_every: int = 1  # epochs between saves of checkpoint + resume file; the last epoch is always saved
    save_seconds: float = 0.0  # also save when this long has passed since the last save (0: off)
    log_every: int = 10  # steps between train-loss records
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


def pick_device(name: str) -> str:
    if name != "auto":
        return name
    return "cuda" if torch.cuda.is_available() else "cpu"


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

    def _tokens_per_step(self) -> int:
        x, _ = self.train_dataset[0]
        return self.config.batch_size * x.numel()

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
        ckpt.save(plan.path, self.model, plan.tokenizer, plan.task, labels=plan.labels, history=self.history,
                  metrics=self.metrics, data=plan.data, command=plan.command, seed=self.config.seed,
                  extra={**plan.extra, "trainer": json.dumps(asdict(self.config)),
                         "progress": json.dumps({"epoch": self.epoch, "step": self.step,
                                                 "tokens": self.tokens, "wall_time": self.wall_time})})
        tensors = {"rng.torch": torch.get_rng_state()}
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
        torch.set_rng_state(tensors["rng.torch"])
        state = self.optimizer.state_dict()
        for i in range(len([p for g in state["param_groups"] for p in g["params"]])):
            if f"optim.{i}.step" in tensors:
                state["state"][i] = {k.split(".", 2)[2]: v.reshape(()) if k.endswith(".step") else v
                                     for k, v in tensors.items() if k.startswith(f"optim.{i}.")}
        self.optimizer.load_state_dict(state)
        # rewrite the live log so it matches the checkpoint (drop rows of an interrupted epoch)
        with open(log_path(self.plan.path), "w", encoding="utf-8") as fh:
            fh.writelines(json.dumps(row) + "\n" for row in self.history)

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
                self.optimizer.zero_grad(set_to_none=True)
                loss.backward()
                torch.nn.utils.clip_grad_norm_(self.model.parameters(), cfg.grad_norm_clip)
                self.optimizer.step()
                self.step += 1
                self.tokens += y.numel()
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


# --- command line ------------------------------------------------------------------------------
USAGE = """Train and evaluate models (CS224N words for the birthplace task).

  python -m core.train pretrain vanilla data/world/wiki.txt --writing_params_path vanilla.pretrain.safetensors
  python -m core.train finetune vanilla data/world/wiki.txt --reading_params_path vanilla.pretrain.safetensors \\
      --finetune_corpus_path data/world/birth_places_train.tsv --writing_params_path vanilla.finetune.safetensors
  python -m core.train evaluate vanilla data/world/wiki.txt --reading_params_path vanilla.finetune.safetensors \\
      --eval_corpus_path data/world/birth_dev.tsv --outputs_path vanilla.dev.predictions
  python -m core.train lm data/world/wiki.txt --positional alibi --writing_params_path lm.safetensors
  python -m core.train classify data/world/names_train.tsv --eval_corpus_path data/world/names_test.tsv \\
      --writing_params_path names.safetensors
"""


def build_parser():
    import argparse

    parser = argparse.ArgumentParser(prog="python -m core.train", description=USAGE,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("function", choices=["pretrain", "finetune", "evaluate", "lm", "mlm", "classify"])
    parser.add_argument("variant", nargs="?", default="vanilla", choices=["vanilla", "synthesizer"],
                        help="attention variant (birthplace functions)")
    parser.add_argument("pretrain_corpus_path", nargs="?",
                        help="wiki.txt (pretrain/finetune/evaluate/lm/mlm) or the train TSV (classify)")
    parser.add_argument("--reading_params_path")
    parser.add_argument("--writing_params_path")
    parser.add_argument("--finetune_corpus_path")
    parser.add_argument("--eval_corpus_path")
    parser.add_argument("--outputs_path")
    model = parser.add_argument_group("model")
    model.add_argument("--n-layer", type=int, default=4)
    model.add_argument("--n-head", type=int, default=8)
    model.add_argument("--n-embd", type=int, default=256)
    model.add_argument("--block-size", type=int, default=128)
    model.add_argument("--dropout", type=float, default=0.1)
    model.add_argument("--positional", default="learned")
    model.add_argument("--level", choices=["char", "word"], default="char")
    model.add_argument("--pooling", default="mean")
    train = parser.add_argument_group("training")
    train.add_argument("--epochs", type=int, default=None)
    train.add_argument("--batch-size", type=int, default=None)
    train.add_argument("--lr", type=float, default=None)
    train.add_argument("--warmup-tokens", type=int, default=None)
    train.add_argument("--seed", type=int, default=0)
    train.add_argument("--device", default="auto")
    train.add_argument("--resume", action="store_true", help="continue the run at --writing_params_path")
    train.add_argument("--force", action="store_true", help="overwrite an existing output")
    return parser


# The assignment's settings where it has them (finetuning without --reading_params_path: 75 epochs).
DEFAULTS = {
    "pretrain": dict(epochs=650, batch_size=128, lr=6e-3, warmup_tokens=512 * 20),
    "finetune": dict(epochs=10, batch_size=256, lr=6e-4, warmup_tokens=512 * 20),
    "lm": dict(epochs=10, batch_size=64, lr=1e-3, warmup_tokens=0),
    "mlm": dict(epochs=20, batch_size=128, lr=2e-3, warmup_tokens=0),
    "classify": dict(epochs=10, batch_size=64, lr=1e-3, warmup_tokens=0),
}


def run_command(args, command: str) -> str:
    from core import recipes

    shape = recipes.ModelShape(n_layer=args.n_layer, n_head=args.n_head, n_embd=args.n_embd,
                               block_size=args.block_size, dropout=args.dropout,
                               positional=args.positional, attention=args.variant)

    def trainer_config(function: str) -> TrainerConfig:
        d = DEFAULTS[function]
        epochs = args.epochs or (75 if function == "finetune" and not args.reading_params_path else d["epochs"])
        # ~20 saves a run, and one at least every 5 minutes: 650 epochs do not write 650 checkpoints
        return TrainerConfig(max_epochs=epochs, batch_size=args.batch_size or d["batch_size"],
                             save_every=max(1, epochs // 20), save_seconds=300.0,
                             learning_rate=args.lr or d["lr"], seed=args.seed, device=args.device,
                             warmup_tokens=d["warmup_tokens"] if args.warmup_tokens is None else args.warmup_tokens)

    def need(name: str) -> str:
        value = getattr(args, name)
        if not value:
            raise recipes.DataError(f"{args.function} needs --{name}" if name != "pretrain_corpus_path"
                                    else f"{args.function} needs the corpus path argument.")
        return value

    common = dict(resume=args.resume, force=args.force, command=command)
    if args.function == "pretrain":
        t = recipes.pretrain(need("pretrain_corpus_path"), need("writing_params_path"), shape,
                             trainer_config("pretrain"), **common)
    elif args.function == "finetune":
        t = recipes.finetune(need("pretrain_corpus_path"), need("finetune_corpus_path"),
                             need("writing_params_path"), shape, trainer_config("finetune"),
                             reading_params_path=args.reading_params_path,
                             eval_corpus_path=args.eval_corpus_path, **common)
    elif args.function == "lm":
        t = recipes.train_lm(need("pretrain_corpus_path"), need("writing_params_path"), shape,
                             trainer_config("lm"), level=args.level, **common)
    elif args.function == "mlm":
        t = recipes.pretrain_encoder(need("pretrain_corpus_path"), need("writing_params_path"), shape,
                                     trainer_config("mlm"), **common)
    elif args.function == "classify":
        t = recipes.train_classifier(need("pretrain_corpus_path"), need("eval_corpus_path"),
                                     need("writing_params_path"), shape, trainer_config("classify"),
                                     reading_params_path=args.reading_params_path, level=args.level,
                                     pooling=args.pooling, **common)
    else:
        return evaluate_command(args, need)
    return f"wrote {args.writing_params_path}: " + ", ".join(f"{k} {v:.4g}" for k, v in t.metrics.items())


def evaluate_command(args, need) -> str:
    from core.data.datasets import DataError, read_tsv_pairs
    from core.evaluate import evaluate_birthplaces

    loaded = ckpt.load(need("reading_params_path"))
    if loaded.task != "birthplace":
        raise DataError(f"{Path(args.reading_params_path).name} is a {loaded.task} model, not a birthplace model.")
    pairs = read_tsv_pairs(need("eval_corpus_path"))
    has_answers = any(a for _, a in pairs)
    bar = tqdm(total=len(pairs), desc="evaluate", disable=None)
    result = evaluate_birthplaces(loaded.model, loaded.tokenizer, pairs,
                                  baseline_place=loaded.metadata.get("baseline_place") or None,
                                  progress=lambda done, total: bar.update(done - bar.n))
    bar.close()
    if args.outputs_path:
        out = Path(args.outputs_path)
        if out.exists() and not args.force:
            raise DataError(f"{out} already exists; pass --force to overwrite it.")
        out.write_text("".join(p + "\n" for p in result.predictions), encoding="utf-8")
    if not has_answers:
        return f"wrote {len(pairs)} predictions to {args.outputs_path} (no answers to score)"
    return result.summary()


def main(argv: list[str] | None = None) -> int:
    import shlex
    import sys

    from core.checkpoint import CheckpointError
    from core.config import ConfigError
    from core.data.datasets import DataError
    from core.tokenizer import TokenizerError

    argv = sys.argv[1:] if argv is None else argv
    args = build_parser().parse_args(argv)
    if args.function == "evaluate":
        args.pretrain_corpus_path = args.pretrain_corpus_path or ""
    command = "python -m core.train " + shlex.join(argv)
    try:
        print(run_command(args, command))
    except (DataError, CheckpointError, ConfigError, TokenizerError, FileNotFoundError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted: the last saved epoch is kept; continue with --resume", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
