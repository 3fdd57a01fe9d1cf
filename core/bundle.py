"""`make checkpoints`: regenerate every bundled checkpoint from data/world/ with fixed seeds,
then write checkpoints/README.md with what each one is and what it measured.

The recipes are data (one row per checkpoint), run in order because finetuning reads the
pretrained files. Sizes are chosen to fit the 45-minute budget on a 2-core CPU.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from core import checkpoint as ckpt
from core import recipes
from core.recipes import ModelShape
from core.train import TrainerConfig, log_path, resume_path

ROOT = Path(__file__).resolve().parent.parent
WORLD = "data/world"
WIKI = f"{WORLD}/wiki.txt"

BIRTH = ModelShape(n_layer=3, n_head=4, n_embd=128, block_size=128, dropout=0.1)
LM = ModelShape(n_layer=3, n_head=4, n_embd=128, block_size=64, dropout=0.1)
ENCODER = ModelShape(n_layer=3, n_head=4, n_embd=128, block_size=32, dropout=0.1)


def shape(base: ModelShape, **changes) -> ModelShape:
    return ModelShape(**{**base.__dict__, **changes})


@dataclass
class Recipe:
    name: str
    recipe: str  # a function of core.recipes
    description: str
    kwargs: dict[str, Any] = field(default_factory=dict)
    shape: ModelShape = field(default_factory=lambda: BIRTH)
    trainer: TrainerConfig = field(default_factory=TrainerConfig)
    bundled: bool = True  # False: an intermediate file, deleted after use


# Pretraining memorises facts, so no dropout there; the CPU budget affords ~10 epochs, where the
# assignment runs 650 on a GPU (see checkpoints/README.md for what that costs in accuracy).
PRETRAIN = TrainerConfig(max_epochs=10, batch_size=64, learning_rate=4e-3, warmup_tokens=512 * 20, seed=0)
SYNTH_PRETRAIN = TrainerConfig(max_epochs=8, batch_size=64, learning_rate=4e-3, warmup_tokens=512 * 20, seed=0)
FINETUNE = TrainerConfig(max_epochs=8, batch_size=64, learning_rate=1e-3, warmup_tokens=512 * 20, seed=0)
LM_TRAIN = TrainerConfig(max_epochs=4, batch_size=32, learning_rate=2e-3, warmup_tokens=64 * 32 * 20, seed=0)
MLM = TrainerConfig(max_epochs=12, batch_size=64, learning_rate=2e-3, seed=0)
CLASSIFY = TrainerConfig(max_epochs=6, batch_size=32, learning_rate=1e-3, seed=0)


def _path(name: str) -> str:
    return f"checkpoints/{name}.safetensors"


RECIPES: list[Recipe] = [
    Recipe("wiki-vanilla-pretrained", "pretrain", "span-corruption pretraining on wiki.txt (CS224N)",
           dict(corpus_path=WIKI), shape(BIRTH, dropout=0.0), PRETRAIN),
    Recipe("birth-vanilla-pretrained", "finetune", "the pretrained model finetuned on birth_places_train.tsv",
           dict(corpus_path=WIKI, finetune_corpus_path=f"{WORLD}/birth_places_train.tsv",
                reading_params_path=_path("wiki-vanilla-pretrained"), eval_corpus_path=f"{WORLD}/birth_dev.tsv"),
           BIRTH, FINETUNE),
    Recipe("birth-vanilla-scratch", "finetune", "the same finetuning without pretraining",
           dict(corpus_path=WIKI, finetune_corpus_path=f"{WORLD}/birth_places_train.tsv",
                eval_corpus_path=f"{WORLD}/birth_dev.tsv"), BIRTH, FINETUNE),
    Recipe("wiki-synthesizer-pretrained", "pretrain", "span-corruption pretraining, synthesizer attention",
           dict(corpus_path=WIKI), shape(BIRTH, attention="synthesizer", dropout=0.0), SYNTH_PRETRAIN),
    Recipe("birth-synthesizer-pretrained", "finetune", "the synthesizer pretrained model, finetuned",
           dict(corpus_path=WIKI, finetune_corpus_path=f"{WORLD}/birth_places_train.tsv",
                reading_params_path=_path("wiki-synthesizer-pretrained"),
                eval_corpus_path=f"{WORLD}/birth_dev.tsv"), shape(BIRTH, attention="synthesizer"), FINETUNE),
    *[Recipe(f"lm-{p}", "train_lm", f"character LM on wiki.txt, {p} positions, block 64",
             dict(corpus_path=WIKI), shape(LM, positional=p), LM_TRAIN)
      for p in ("learned", "sinusoidal", "alibi", "rope")],
    Recipe("names-encoder", "pretrain_encoder", "masked-LM encoder pretraining on wiki.txt (intermediate)",
           dict(corpus_path=WIKI), ENCODER, MLM, bundled=False),
    Recipe("names-pretrained", "train_classifier", "name -> country, from the pretrained encoder",
           dict(train_path=f"{WORLD}/names_train.tsv", test_path=f"{WORLD}/names_test.tsv",
                reading_params_path=_path("names-encoder")), ENCODER, CLASSIFY),
    Recipe("names-scratch", "train_classifier", "name -> country, the same classifier from scratch",
           dict(train_path=f"{WORLD}/names_train.tsv", test_path=f"{WORLD}/names_test.tsv"), ENCODER, CLASSIFY),
]

FUNCTIONS = {"pretrain": recipes.pretrain, "finetune": recipes.finetune, "train_lm": recipes.train_lm,
             "pretrain_encoder": recipes.pretrain_encoder, "train_classifier": recipes.train_classifier}
OUTPUT_ARG = "writing_params_path"


def build(recipe: Recipe) -> dict[str, Any]:
    started = time.perf_counter()
    command = f"python -m core.bundle --only {recipe.name}"
    trainer = FUNCTIONS[recipe.recipe](**recipe.kwargs, **{OUTPUT_ARG: _path(recipe.name)}, shape=recipe.shape,
                                       trainer=recipe.trainer, force=True, command=command)
    seconds = time.perf_counter() - started
    resume_path(Path(_path(recipe.name))).unlink(missing_ok=True)
    log_path(Path(_path(recipe.name))).unlink(missing_ok=True)
    return {"name": recipe.name, "seconds": seconds, "metrics": trainer.metrics}


def reevaluate(name: str) -> dict[str, float]:
    """Recompute a bundled checkpoint's stored final metrics from its file and data/world/."""
    from core.data.datasets import ClassificationDataset, LanguageModelDataset, read_text, read_tsv_pairs
    from core.evaluate import evaluate_birthplaces
    from core.train import evaluate_loss

    recipe = next(r for r in RECIPES if r.name == name)
    loaded = ckpt.load(ROOT / _path(name))
    args = {k: str(ROOT / v) if isinstance(v, str) and v.startswith(("data/", "checkpoints/")) else v
            for k, v in recipe.kwargs.items()}
    if recipe.recipe == "finetune":
        result = evaluate_birthplaces(loaded.model, loaded.tokenizer, read_tsv_pairs(args["eval_corpus_path"]),
                                      baseline_place=loaded.metadata.get("baseline_place"))
        return {"val_accuracy": result.accuracy, "val_baseline_accuracy": result.baseline_accuracy}
    if recipe.recipe == "train_lm":
        text = read_text(args["corpus_path"])
        val = LanguageModelDataset(text[int(len(text) * 0.9):], loaded.tokenizer, loaded.config.block_size)
        scores = evaluate_loss(loaded.model, val)
        return {"val_loss": scores["loss"], "val_perplexity": scores["perplexity"]}
    if recipe.recipe == "train_classifier":
        test = ClassificationDataset(read_tsv_pairs(args["test_path"]), loaded.tokenizer,
                                     loaded.config.block_size, loaded.labels)
        return {"val_accuracy": evaluate_loss(loaded.model, test, accuracy=True)["accuracy"]}
    return {}


def _fmt_metrics(metrics: dict[str, float]) -> str:
    shown = {k: v for k, v in metrics.items() if not k.startswith("train_")}
    return ", ".join(f"{k.removeprefix('val_')} {v:.3f}" if isinstance(v, float) else f"{k} {v}"
                     for k, v in shown.items()) or "(pretraining: see its loss curve)"


def write_readme(timings: dict[str, float]) -> str:
    rows = []
    for recipe in RECIPES:
        if not recipe.bundled or not Path(_path(recipe.name)).exists():
            continue
        meta = ckpt.read_metadata(_path(recipe.name))
        cfg = meta["config"]
        with torch.device("meta"):
            from core.config import ModelConfig
            from core.model import Transformer

            params = Transformer(ModelConfig.from_dict(cfg)).num_parameters()
        data = ", ".join(Path(d["path"]).name for d in meta.get("data", []))
        seconds = timings.get(recipe.name)
        rows.append(f"| `{recipe.name}` | {meta['task']} | {cfg['attention']} | {cfg['positional']} | "
                    f"{params:,} | {data} | {f'{seconds / 60:.1f} min' if seconds else 'n/a'} | "
                    f"{_fmt_metrics(meta.get('metrics', {}))} |")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m core.bundle", description=__doc__)
    parser.add_argument("--only", nargs="*", help="rebuild only these checkpoints (names)")
    parser.add_argument("--readme-only", action="store_true")
    args = parser.parse_args(argv)
    torch.set_num_threads(max(1, torch.get_num_threads()))
    timings_file = ROOT / "checkpoints" / "timings.json"
    timings = json.loads(timings_file.read_text()) if timings_file.exists() else {}
    chosen = [r for r in RECIPES if not args.only or r.name in args.only]
    if args.only and len(chosen) != len(args.only):
        print(f"error: unknown checkpoint name(s); choose from {', '.join(r.name for r in RECIPES)}",
              file=sys.stderr)
        return 2
    device = "cuda" if torch.cuda.is_available() else f"CPU ({torch.get_num_threads()} threads)"
    if not args.readme_only:
        for recipe in chosen:
            result = build(recipe)
            # re-read: two `--only` groups may run side by side
            timings = json.loads(timings_file.read_text()) if timings_file.exists() else {}
            timings[recipe.name] = round(result["seconds"], 1)
            timings_file.write_text(json.dumps(timings, indent=1, sort_keys=True) + "\n")
            print(f"{recipe.name}: {result['seconds'] / 60:.1f} min, {_fmt_metrics(result['metrics'])}", flush=True)
        for recipe in chosen:
            if not recipe.bundled:
                Path(_path(recipe.name)).unlink(missing_ok=True)
    total = sum(timings.values())
    table = write_readme(timings)
    readme = ROOT / "checkpoints" / "README.md"
    header_file = ROOT / "checkpoints" / "README.header.md"
    header = header_file.read_text() if header_file.exists() else "{TABLE}\n"
    readme.write_text(
        header.replace("{TABLE}", table).replace("{TOTAL}", f"{total / 60:.1f}")
        .replace("{DEVICE}", f"{device}, {platform.machine()}"))
    print(f"total {total / 60:.1f} min; wrote {readme.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

