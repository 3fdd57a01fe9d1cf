"""Which birthplace recipe stores facts and lets finetuning extract them, on a 2-core CPU? A grid.

Each row pretrains on a world's wiki.txt with the project's own `pretrain` recipe (a vocabulary, an
objective, a model shape, epochs), measures how many dev people the pretrained model completes from
their own document (`memorization_rate`), finetunes it with the project's `finetune` recipe on the
world's train questions, and scores the dev questions the assignment's way, beside two baselines: the
most frequent place, and the name's country prior (the most frequent train birthplace of the person's
country). CPU minutes are wall-clock minutes of each stage on this machine.

    python -m core.train.knowledge_grid                     # every row, into checkpoints/grid/
    python -m core.train.knowledge_grid --rows bpe2k-lm char-lm
    python -m core.train.knowledge_grid --table             # the table of the rows measured so far

Results go to one JSON line per row (`grid.jsonl`); a row already there is not run again, so an
interrupted grid continues where it stopped.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import torch

from core.data.datasets import DataError, read_text, read_tsv_pairs
from core.io import checkpoint as ckpt
from core.lens.probe.evaluation import country_prior_accuracy, evaluate_birthplaces, memorization_rate
from core.train import recipes
from core.train.callbacks import Checkpointing, resume_path
from core.train.recipes import ModelShape
from core.train.trainer import TrainerConfig

WORLD = "data/knowledge"
SMALL = ModelShape(n_layer=2, n_head=4, n_embd=128, block_size=64, dropout=0.0)
# Pretraining as the language models are trained (minGPT groups, a cosine that ends at 10%), without
# warmup; finetuning at a lower rate, batch 32, the answer's tokens only (NameDataset's targets).
PRETRAIN = TrainerConfig(max_epochs=100, batch_size=64, learning_rate=1e-3, decay="mingpt",
                         schedule="cosine-clamped", seed=0, save_every=10, log_every=20)
FINETUNE = TrainerConfig(max_epochs=20, batch_size=32, learning_rate=3e-4, decay="mingpt",
                         schedule="cosine-clamped", seed=0, save_every=20, log_every=20)


@dataclass
class Row:
    name: str
    level: str = "bpe"
    vocab_size: int = 2000
    objective: str = "lm"
    shape: ModelShape = field(default_factory=lambda: SMALL)
    epochs: int = 60
    finetune_epochs: int = 20
    world: str = WORLD
    note: str = ""


def _shape(**changes) -> ModelShape:
    return replace(SMALL, **changes)


ROWS = [  # 60 pretraining epochs each unless said: the bundled family trains the chosen row longer
    Row("bpe2k-lm", note="2,000 byte-level BPE pieces, LM over packed documents"),
    Row("bpe8k-lm", vocab_size=8000, note="8,000 pieces: nearly every word of the world is one piece"),
    Row("char-lm", level="char", shape=_shape(block_size=128), epochs=10,
        note="characters (the assignment's vocabulary), LM over packed documents, block 128"),
    Row("bpe2k-span", objective="span", epochs=30, note="span corruption in pieces (the assignment's objective)"),
    Row("bpe2k-lm-1bio", world="checkpoints/grid/world-1bio",
        note="one biography per person (4x fewer documents, same people)"),
    Row("bpe2k-lm-drop0.1", shape=_shape(dropout=0.1), note="dropout 0.1"),
    Row("bpe2k-lm-4x128", shape=_shape(n_layer=4), epochs=40, note="4 layers"),
]


def ensure_one_bio_world(folder: Path) -> None:
    """The knowledge world's people with one biography each (same seed: same names, places, splits)."""
    if (folder / "wiki.txt").exists():
        return
    from core.data.world import KNOWLEDGE, generate_world, write_world

    write_world(generate_world(0, KNOWLEDGE["people"], KNOWLEDGE["dev"], KNOWLEDGE["test"], bios=1), folder)


def remove_row_files(*checkpoints: Path) -> None:
    """A row's checkpoints are temporaries (its result is the JSON line): they go, with the trainer's
    `.resume` files beside them (2 x 7 MB a row, which counted against checkpoints/'s size budget)."""
    for path in checkpoints:
        path.unlink(missing_ok=True)
        resume_path(path).unlink(missing_ok=True)


def run_row(row: Row, out: Path, threads: int) -> dict:
    torch.set_num_threads(threads)
    world = Path(row.world)
    if row.world != WORLD:
        ensure_one_bio_world(world)
    wiki, train, dev = (str(world / f) for f in ("wiki.txt", "birth_places_train.tsv", "birth_dev.tsv"))
    pretrained, finetuned = out / f"{row.name}.pretrain.safetensors", out / f"{row.name}.finetune.safetensors"
    started = time.perf_counter()
    t = recipes.pretrain(wiki, str(pretrained), row.shape, replace(PRETRAIN, max_epochs=row.epochs), force=True,
                         level=row.level, vocab_size=row.vocab_size, objective=row.objective,
                         command=f"python -m core.train.knowledge_grid --rows {row.name}")
    pretrain_min = (time.perf_counter() - started) / 60
    loss = next(r["value"] for r in reversed(t.history) if r["metric"] == "loss" and r["split"] == "train")
    pairs = read_tsv_pairs(dev)
    loaded = ckpt.load(pretrained)
    memorised, people = memorization_rate(loaded.model, loaded.tokenizer, read_text(str(world / "wiki.txt")), pairs)
    started = time.perf_counter()
    f = recipes.finetune(wiki, train, str(finetuned), row.shape, replace(FINETUNE, max_epochs=row.finetune_epochs),
                         reading_params_path=str(pretrained), eval_corpus_path=dev, force=True, level=row.level,
                         vocab_size=row.vocab_size)
    finetune_min = (time.perf_counter() - started) / 60
    curve = [r["value"] for r in f.history if r["metric"] == "accuracy" and r["split"] == "val"]
    plan = f.callback(Checkpointing).plan
    result = evaluate_birthplaces(f.model, plan.tokenizer, pairs, baseline_place=plan.extra["baseline_place"])
    prior = country_prior_accuracy([a for _, a in read_tsv_pairs(train)], [a for _, a in pairs])
    remove_row_files(pretrained, finetuned)
    return {**asdict(row), "pretrain_minutes": round(pretrain_min, 2), "finetune_minutes": round(finetune_min, 2),
            "final_loss": round(loss, 4), "memorised": memorised, "people": people, "dev": result.total,
            "accuracy": result.accuracy, "best_finetune_accuracy": max(curve, default=0.0),
            "baseline": result.baseline_accuracy,
            "country_prior": prior,
            "params": loaded.model.num_parameters(), "vocab": loaded.tokenizer.vocab_size, "threads": threads}


def table(results: list[dict]) -> str:
    lines = ["| row | vocabulary | objective | layers x width, block | pretraining epochs | CPU minutes "
             "(pretrain + finetune) | final loss | memorised (dev) | dev accuracy (best epoch) | "
             "most frequent place | country prior |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        s = r["shape"]
        vocab = "characters" if r["level"] == "char" else f"BPE {r['vocab_size']:,}"
        lines.append(
            f"| `{r['name']}` | {vocab} ({r['vocab']:,}) | {r['objective']} | {s['n_layer']}x{s['n_embd']}, "
            f"{s['block_size']} | {r['epochs']} | {r['pretrain_minutes']:.1f} + {r['finetune_minutes']:.1f} | "
            f"{r['final_loss']:.3f} | {r['memorised']}/{r['people']} | {r['accuracy']:.1%} "
            f"({r['best_finetune_accuracy']:.1%}) | {r['baseline']:.1%} | {r['country_prior']:.1%} |")
    return "\n".join(lines)


def read_results(path: Path) -> list[dict]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m core.train.knowledge_grid", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", nargs="*", help="row names (default: all)")
    parser.add_argument("--out", default="checkpoints/grid", help="folder for grid.jsonl and the temporary files")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--table", action="store_true", help="print the table of the measured rows and stop")
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    results_file = out / "grid.jsonl"
    known = {r.name for r in ROWS}
    if args.rows and set(args.rows) - known:
        print(f"error: unknown row(s); choose from {', '.join(r.name for r in ROWS)}", file=sys.stderr)
        return 2
    if not args.table:
        for row in ROWS:
            if (args.rows and row.name not in args.rows) or row.name in {r["name"] for r in read_results(results_file)}:
                continue
            try:
                result = run_row(row, out, args.threads)
            except DataError as exc:
                print(f"error: {row.name}: {exc}", file=sys.stderr)
                return 2
            with results_file.open("a") as f:
                f.write(json.dumps(result) + "\n")
            print(table([result]).splitlines()[-1], flush=True)
    print(table(read_results(results_file)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
