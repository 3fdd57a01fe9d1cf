"""Which part of the CS224N recipe makes span-corruption pretraining memorise? An ablation.

Each row pretrains the same model, from the same weights, on the same batches, changing one thing:
which parameters get weight decay (core/train/optim.py's policies) and whether the cosine is clamped at
final_tokens or rises again as the assignment's does. It reports the final training loss, how many
people's birthplaces the pretrained model completes from their own document (`memorization_rate`),
and the norms that explain the difference: the token embedding's RMS and the residual stream's RMS
entering the last LayerNorm.

    python -m core.train.ablation                      # CPU scale: a slice of data/world, a small model
    python -m core.train.ablation --preset assignment  # the assignment's scale (a GPU: minutes; a CPU: days)

The CPU preset keeps the assignment's rates and schedule shape (lr 6e-3, warmup 512*20 tokens,
final_tokens at 200/650 of the run) and shrinks data, model and epochs.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import dataclass, replace

import torch

from core.data.datasets import CharCorruptionDataset, DataError, read_text, read_tsv_pairs
from core.lens.probe.evaluation import memorization_rate
from core.train.callbacks import ProgressBar
from core.train.recipes import ModelShape, build_model
from core.train.trainer import Trainer, TrainerConfig

ROWS = [  # (label, decay policy, schedule)
    ("assignment: all but biases decayed, cyclic cosine", "cs224n", "cosine"),
    ("embeddings not decayed", "no-embedding", "cosine"),
    ("LayerNorm gains not decayed", "no-norm", "cosine"),
    ("neither decayed (minGPT groups)", "mingpt", "cosine"),
    ("assignment groups, clamped cosine", "cs224n", "cosine-clamped"),
    ("minGPT groups, clamped cosine (this project before)", "mingpt", "cosine-clamped"),
]


@dataclass
class Preset:
    documents: int  # the first N people of wiki.txt (0: all)
    epochs: int
    batch_size: int
    shape: ModelShape


PRESETS = {
    "cpu": Preset(documents=128, epochs=100, batch_size=32,
                  shape=ModelShape(n_layer=2, n_head=4, n_embd=64, block_size=128, dropout=0.1)),
    "assignment": Preset(documents=0, epochs=650, batch_size=128,
                         shape=ModelShape(n_layer=4, n_head=8, n_embd=256, block_size=128, dropout=0.1)),
}


@torch.no_grad()
def residual_rms(model, x: torch.Tensor) -> float:
    """RMS of the residual stream entering the final LayerNorm, over a fixed probe batch."""
    seen: list[float] = []
    handle = model.ln_f.register_forward_hook(lambda _m, inputs, _o: seen.append(
        inputs[0].float().pow(2).mean().sqrt().item()))
    model.eval()
    model(x)
    handle.remove()
    return seen[0]


def run_row(corpus: str, pairs, preset: Preset, decay: str, schedule: str, device: str, seed: int = 0) -> dict:
    dataset = CharCorruptionDataset(corpus, preset.shape.block_size, seed=seed)
    model = build_model(preset.shape, dataset.tokenizer.vocab_size, seed)
    tokens_per_epoch = len(dataset) * (preset.shape.block_size - 1)
    config = TrainerConfig(max_epochs=preset.epochs, batch_size=preset.batch_size, learning_rate=6e-3,
                           warmup_tokens=512 * 20, decay=decay, schedule=schedule, seed=seed, device=device,
                           final_tokens=round(tokens_per_epoch * preset.epochs * 200 / 650), log_every=5)
    trainer = Trainer(model, dataset, config, [ProgressBar()], run_name=f"{decay}/{schedule}")
    started = time.perf_counter()
    trainer.train()
    losses = [r["value"] for r in trainer.history if r["metric"] == "loss"]
    tail = losses[-max(1, len(losses) // 20):]  # the last 5% of logged steps: less noise than one batch
    probe = torch.stack([dataset[i][0] for i in range(min(64, len(dataset)))]).to(trainer.device)
    hits, total = memorization_rate(model, dataset.tokenizer, corpus, pairs)
    return {"decay": decay, "schedule": schedule, "final_loss": sum(tail) / len(tail), "memorised": hits,
            "people": total, "embedding_rms": model.tok_emb.weight.float().pow(2).mean().sqrt().item(),
            "residual_rms": residual_rms(model, probe),
            "minutes": (time.perf_counter() - started) / 60}


def table(rows: list[dict], labels: dict[tuple[str, str], str]) -> str:
    lines = ["| run | decay groups | schedule | final train loss | memorised | token-embedding RMS | "
             "residual RMS at ln_f |", "|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {labels[(r['decay'], r['schedule'])]} | {r['decay']} | {r['schedule']} | "
                     f"{r['final_loss']:.3f} | {r['memorised']}/{r['people']} | {r['embedding_rms']:.3f} | "
                     f"{r['residual_rms']:.2f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m core.train.ablation", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--world", default="data/world")
    parser.add_argument("--preset", choices=sorted(PRESETS), default="cpu")
    parser.add_argument("--epochs", type=int, help="override the preset's epochs")
    parser.add_argument("--only", type=int, nargs="*", help="row numbers (0-based) to run")
    parser.add_argument("--device", default="auto")
    parser.add_argument("--json", help="also write the rows here")
    parser.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: torch's default)")
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    preset = PRESETS[args.preset]
    if args.epochs:
        preset = replace(preset, epochs=args.epochs)
    try:
        lines = [line for line in read_text(f"{args.world}/wiki.txt").split("\n") if line.strip()]
        pairs = read_tsv_pairs(f"{args.world}/birth_places_train.tsv") + read_tsv_pairs(f"{args.world}/birth_dev.tsv")
    except (DataError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.epochs is not None and args.epochs < 1:
        print("error: --epochs must be 1 or more.", file=sys.stderr)
        return 2
    if any(i not in range(len(ROWS)) for i in args.only or []):
        print(f"error: --only takes row numbers 0 to {len(ROWS) - 1}.", file=sys.stderr)
        return 2
    corpus = "\n".join(lines[: preset.documents] if preset.documents else lines)
    chosen = [ROWS[i] for i in args.only] if args.only is not None else ROWS
    rows = []
    for label, decay, schedule in chosen:
        row = run_row(corpus, pairs, preset, decay, schedule, args.device)
        rows.append(row)
        print(f"{label}: loss {row['final_loss']:.3f}, memorised {row['memorised']}/{row['people']}, "
              f"{row['minutes']:.1f} min", flush=True)
        if args.json:
            with open(args.json, "w", encoding="utf-8") as fh:
                json.dump({"preset": args.preset, "epochs": preset.epochs, "rows": rows}, fh, indent=1)
    print(table(rows, {(d, s): label for label, d, s in ROWS}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
