"""`make checkpoints`: regenerate every bundled checkpoint from data/world/ with fixed seeds,
then write checkpoints/README.md with what each one is and what it measured.

The recipes are data (one row per checkpoint), run in order because finetuning reads the
pretrained files. The bundled birthplace family is trained on the knowledge world (data/knowledge/: 1,000
people, four consistent biographies each) with the recipe the grid chose on a 2-core CPU
(core/train/knowledge_grid.py: 2,000 BPE pieces, next-token pretraining over packed documents, a 2x128
model). `make checkpoints COURSE=1` (`--course`) trains the family with the CS224N assignment's recipe
exactly (its model size, 650 pretraining epochs, its decay groups and schedule: see core/train/optim.py)
on data/world/, into checkpoints/course/: minutes on a GPU, days on a 2-core CPU.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import platform
import sys
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import torch

from core.io import checkpoint as ckpt
from core.io.snapshots import snapshots_path
from core.lens.history.bands import seed_of
from core.model.tokenizer import VocabularyChoice
from core.train import recipes
from core.train.callbacks import log_path, resume_path
from core.train.recipes import ModelShape
from core.train.trainer import TrainerConfig

ROOT = Path(__file__).resolve().parents[2]
WORLD = "data/world"
WIKI = f"{WORLD}/wiki.txt"

BIRTH = ModelShape(n_layer=4, n_head=8, n_embd=256, block_size=128, dropout=0.1)  # the assignment's GPTConfig
KNOWLEDGE = "data/knowledge"
KNOWLEDGE_WIKI = f"{KNOWLEDGE}/wiki.txt"
KNOW = ModelShape(n_layer=2, n_head=4, n_embd=128, block_size=64, dropout=0.0)  # the grid's choice
LM = ModelShape(n_layer=3, n_head=4, n_embd=128, block_size=64, dropout=0.1)


def shape(base: ModelShape, **changes) -> ModelShape:
    return ModelShape(**{**base.__dict__, **changes})


@dataclass
class Recipe:
    name: str
    recipe: str  # a function of core.train.recipes
    description: str
    kwargs: dict[str, Any] = field(default_factory=dict)
    shape: ModelShape = field(default_factory=lambda: BIRTH)
    trainer: TrainerConfig = field(default_factory=TrainerConfig)
    bundled: bool = True  # False: an intermediate file, deleted after use


# The assignment's run.py settings. Decay groups (all but biases) and the unclamped cosine are the
# TrainerConfig defaults; final_tokens (200 pretraining epochs' worth) is set by core.train.recipes.
PRETRAIN = TrainerConfig(max_epochs=650, batch_size=128, learning_rate=6e-3, warmup_tokens=512 * 20, seed=0,
                         save_every=50, save_seconds=300)
FINETUNE = TrainerConfig(max_epochs=10, batch_size=256, learning_rate=6e-4, warmup_tokens=512 * 20, seed=0)
FINETUNE_SCRATCH = TrainerConfig(max_epochs=75, batch_size=256, learning_rate=6e-4, warmup_tokens=512 * 20,
                                 seed=0, save_every=5)
# The other families are this project's own: minGPT decay groups and a cosine that stays at its floor.
LM_CHAR_TRAIN = TrainerConfig(max_epochs=4, batch_size=32, learning_rate=2e-3, warmup_tokens=64 * 32 * 20, seed=0,
                              decay="mingpt", schedule="cosine-clamped")
# The language-model family reads the knowledge world's pieces (the birthplace family's 2,000-piece BPE, built
# the same way from the same wiki.txt) with the knowledge family's 2x128 shape and a paragraph of context
# (128 pieces, ~300 characters); the four differ only in their positional encoding.
LM_PIECES = shape(KNOW, block_size=128)
LM_TRAIN = TrainerConfig(max_epochs=40, batch_size=32, learning_rate=1e-3, warmup_tokens=128 * 32 * 20, seed=0,
                         decay="mingpt", schedule="cosine-clamped")
# lm-learned: the attention page's training-step slider; 4 float16 snapshots of 1.85 MB keep checkpoints/
# within its 80 MB
LM_SNAPSHOTS = replace(LM_TRAIN, snapshots=4)
CLASSIFY = TrainerConfig(max_epochs=6, batch_size=32, learning_rate=1e-3, seed=0, decay="mingpt",
                         schedule="cosine-clamped")

# The knowledge family (core/train/knowledge_grid.py chose it): pretraining as the language models are
# trained, finetuning at a lower rate on the answer's pieces only; no pretraining gets 3x the epochs at
# the higher rate, so that it learns the train answers by heart (what the assignment's 75 epochs are for).
KNOW_PRETRAIN = TrainerConfig(max_epochs=100, batch_size=64, learning_rate=1e-3, decay="mingpt",
                              schedule="cosine-clamped", seed=0, save_every=10, snapshots=10)
# Three finetuning epochs: in the grid, dev accuracy peaked at epoch 2-3 of 20 and then fell as the model
# learnt the train answers by heart (checkpoints/README.md shows the curve).
KNOW_FINETUNE = TrainerConfig(max_epochs=3, batch_size=32, learning_rate=3e-4, decay="mingpt",
                              schedule="cosine-clamped", seed=0, save_every=3)
KNOW_SCRATCH = replace(KNOW_FINETUNE, max_epochs=60, learning_rate=1e-3, save_every=20)
SUBWORDS = dict(level="bpe", vocab_size=2000)
PIECES = VocabularyChoice(level="bpe", vocab_size=SUBWORDS["vocab_size"])


# The induction run (Olsson et al. 2022): a 2-layer attention-only model on repeated random segments of 6-16 of 62
# symbols placed anywhere in a 32-token block, where an induction head forms in a phase change a few hundred steps
# into 1,500. Measured at seed 0 on this CPU: with AdamW's weight decay 0.1, or at block 48, or with segments of
# 6-12 only, no clear induction head (on 16-token probes) had formed by step 1,500; at rate 2e-3 or 3e-3 the loss
# falls to 0.6-0.7 with no induction head at all (best L1 score 0.40, 0.04). Two heads of 32, not four of 16
# (the same weights, the same file size): with four the best layer-1 head's induction score lagged the loss
# (0.74 when the smoothed loss first reached 0.8 at step 575, 0.8 only at step 650, seed 0), with two it rises
# with it (0.73 at 450, 0.82 at 525). Its 3 snapshots are
# loss-driven (step 0, then where the averaged loss first falls below 2/3 and 1/3 of its first value): dense
# where the loss falls, and what checkpoints/'s 80 MB leaves (float16, ~88 kB each). The measured seeds
# (`induction-seed0..2`, not bundled: the same runs with a snapshot every 25 steps, at every loss record, seed 0
# the bundled run's seed) write checkpoints/induction.seeds.json and the README's table.
INDUCTION = ModelShape(n_layer=2, n_head=2, n_embd=64, block_size=32, dropout=0.0)
INDUCTION_TRAIN = TrainerConfig(max_epochs=15, batch_size=32, learning_rate=1e-3, weight_decay=0.0, decay="mingpt",
                                lr_decay=False, seed=0, log_every=25, save_every=15, snapshots=3,
                                snapshot_spacing="loss")  # log_every 25: the history fits the 80 MB too
INDUCTION_DATA = {"segment": (6, 16)}
INDUCTION_SEEDS = (0, 1, 2)
NAMES_SEEDS = (0, 1, 2)  # the names pair at three seeds (`names-pretrained-seed1`, ...): their histories only
INDUCTION_SEED_SNAPSHOTS = 60  # every 25th of 1,500 steps: a kept step at every loss record

FOLDER = "checkpoints"


def _path(name: str, folder: str = FOLDER) -> str:
    return f"{folder}/{name}.safetensors"


def birthplace_recipes(world: str, wiki: str, folder: str, shape_: ModelShape, pretrain: TrainerConfig,
                       finetune: TrainerConfig, scratch: TrainerConfig, vocabulary: dict[str, Any],
                       objective: dict[str, Any], what: str) -> list[Recipe]:
    """The five birthplace files: vanilla and synthesizer pretrained then finetuned, and vanilla from scratch."""
    questions = dict(corpus_path=wiki, finetune_corpus_path=f"{world}/birth_places_train.tsv",
                     eval_corpus_path=f"{world}/birth_dev.tsv", **vocabulary)
    synth = shape(shape_, attention="synthesizer")
    return [
        Recipe("wiki-vanilla-pretrained", "pretrain", f"pretraining on {wiki} ({what})",
               dict(corpus_path=wiki, **vocabulary, **objective), shape_, pretrain),
        Recipe("birth-vanilla-pretrained", "finetune", "the pretrained model finetuned on birth_places_train.tsv",
               dict(**questions, reading_params_path=_path("wiki-vanilla-pretrained", folder)), shape_,
               replace(finetune, snapshots=6)),  # the probe's answer at each finetuning step
        Recipe("birth-vanilla-scratch", "finetune", "the same finetuning without pretraining", questions, shape_,
               scratch),
        Recipe("wiki-synthesizer-pretrained", "pretrain", f"pretraining, synthesizer attention ({what})",
               dict(corpus_path=wiki, **vocabulary, **objective), synth, replace(pretrain, snapshots=0)),
        Recipe("birth-synthesizer-pretrained", "finetune", "the synthesizer pretrained model, finetuned",
               dict(**questions, reading_params_path=_path("wiki-synthesizer-pretrained", folder)), synth, finetune),
    ]


NAMES = dict(train_path=f"{KNOWLEDGE}/names_train.tsv", test_path=f"{KNOWLEDGE}/names_test.tsv",
             reading_params_path=_path("wiki-vanilla-pretrained"))

RECIPES: list[Recipe] = [
    *birthplace_recipes(KNOWLEDGE, KNOWLEDGE_WIKI, FOLDER, KNOW, KNOW_PRETRAIN, KNOW_FINETUNE, KNOW_SCRATCH,
                        SUBWORDS, dict(objective="lm"), "2,000 BPE pieces, next-token prediction"),
    *[Recipe(f"lm-{p}", "train_lm", f"piece LM on {KNOWLEDGE_WIKI}, {p} positions, block 128 pieces",
             dict(corpus_path=KNOWLEDGE_WIKI, vocabulary=PIECES), shape(LM_PIECES, positional=p),
             LM_SNAPSHOTS if p == "learned" else LM_TRAIN)
      for p in ("learned", "sinusoidal", "alibi", "rope")],
    # uploaded CS224N .params files are character level: one character LM stays to compare them with
    Recipe("lm-char", "train_lm", "character LM on wiki.txt, learned positions, block 64",
           dict(corpus_path=WIKI), shape(LM, positional="learned"), LM_CHAR_TRAIN),
    # pretraining's lesson: the birthplace family's pretrained LM (its pieces, shape and weights; a new head on
    # the last piece) against the same model and pieces from fresh weights, same epochs and seed
    Recipe("names-pretrained", "train_classifier", "name -> country, from wiki-vanilla-pretrained (a new head)",
           NAMES, KNOW, CLASSIFY),
    Recipe("names-scratch", "train_classifier", "name -> country, the same model and pieces from fresh weights",
           {**NAMES, "warm_start": False}, KNOW, CLASSIFY),
    # the pair at three seeds (checkpoints/README.md's table of them): histories kept, weights not (one band each)
    *[Recipe(f"{name}-seed{seed}", "train_classifier", f"{name} at seed {seed}, measured", data, KNOW,
             replace(CLASSIFY, seed=seed), bundled=False)
      for name, data in (("names-pretrained", NAMES), ("names-scratch", {**NAMES, "warm_start": False}))
      for seed in NAMES_SEEDS],
    # an induction head forming: the phase change on the curves page, head roles at every kept step
    Recipe("induction", "train_induction", "attention-only, repeated random segments (an induction head forms)",
           INDUCTION_DATA, INDUCTION, INDUCTION_TRAIN),
    *[Recipe(f"induction-seed{seed}", "train_induction", f"the induction run at seed {seed}, measured",
             INDUCTION_DATA, INDUCTION, replace(INDUCTION_TRAIN, seed=seed, snapshots=INDUCTION_SEED_SNAPSHOTS,
                                                  snapshot_spacing="linear"),
             bundled=False) for seed in INDUCTION_SEEDS],
]

COURSE_FOLDER = "checkpoints/course"


def course_recipes() -> list[Recipe]:
    """The birthplace family with the CS224N assignment's recipe exactly, on data/world/, into checkpoints/course/."""
    return birthplace_recipes(WORLD, WIKI, COURSE_FOLDER, BIRTH, PRETRAIN, FINETUNE, FINETUNE_SCRATCH,
                              {}, {}, "CS224N span corruption, the assignment's recipe")


FUNCTIONS = {"pretrain": recipes.pretrain, "finetune": recipes.finetune, "train_lm": recipes.train_lm,
             "pretrain_encoder": recipes.pretrain_encoder, "train_classifier": recipes.train_classifier,
             "train_induction": recipes.train_induction}
OUTPUT_ARG = "writing_params_path"


def build(recipe: Recipe, folder: str = FOLDER, device: str = "auto") -> dict[str, Any]:
    started, cpu_started = time.perf_counter(), time.process_time()
    command = f"python -m core.train.bundle {'--course ' if folder == COURSE_FOLDER else ''}--only {recipe.name}"
    out = _path(recipe.name, folder)
    trainer = FUNCTIONS[recipe.recipe](**recipe.kwargs, **{OUTPUT_ARG: out}, shape=recipe.shape,
                                       trainer=replace(recipe.trainer, device=device), force=True, command=command)
    if recipe.recipe == "train_lm":  # the positional page's default extrapolation, shown without a click
        from core.lens.extrapolation.recorded import record

        record(out, trainer.device)
    if recipe.recipe == "pretrain":  # the knowledge it stored: what finetuning can reach (the probe's 2x2)
        trainer.metrics.update(record_memorisation(out))
    if recipe.recipe == "train_classifier" and recipe.bundled:  # names the corpus never mentions: what is left
        trainer.metrics.update(record_fabricated(out))  # without knowledge
    if recipe.recipe == "train_induction" and not recipe.bundled:  # the phase change, for the README's seeds
        record_induction_seed(out, recipe.trainer.seed, folder)
    if not recipe.bundled and seed_of(recipe.name):  # a seed run: its history, one band on the curves page
        record_seed_history(out, recipe.name, folder)
    seconds, cpu_seconds = time.perf_counter() - started, time.process_time() - cpu_started
    resume_path(Path(out)).unlink(missing_ok=True)
    log_path(Path(out)).unlink(missing_ok=True)
    return {"name": recipe.name, "seconds": seconds, "cpu_seconds": cpu_seconds, "metrics": trainer.metrics}


def memorisation_file(corpus_path: str | Path) -> Path:
    """The dev questions a pretrained model's memorisation is measured on: birth_dev.tsv beside its corpus."""
    return Path(corpus_path).with_name("birth_dev.tsv")


def measure_memorisation(loaded, corpus_path: Path, dev_path: Path) -> dict[str, float]:
    from core.data.datasets import read_text, read_tsv_pairs
    from core.lens.probe.evaluation import memorization_rate

    hits, people = memorization_rate(loaded.model, loaded.tokenizer, read_text(corpus_path), read_tsv_pairs(dev_path))
    return {"dev_memorised": hits / max(people, 1), "dev_memorised_people": float(people)}


def record_memorisation(path: str) -> dict[str, float]:
    """Measure how many dev people a pretrained file completes from their own document; store it in its
    metrics (tensors unchanged). Nothing when its corpus has no birth_dev.tsv beside it."""
    loaded = ckpt.load(path)
    corpus = ROOT / loaded.metadata["data"][0]["path"]
    dev = memorisation_file(corpus)
    if not dev.is_file():
        return {}
    measured = measure_memorisation(loaded, corpus, dev)
    ckpt.update_metadata(path, {"metrics": json.dumps({**loaded.metadata.get("metrics", {}), **measured}),
                                "memorised_on": str(dev.relative_to(ROOT))})
    return measured


FABRICATED_NAMES, FABRICATED_SEED = 240, 0  # 20 per country of the world


def measure_fabricated(loaded, folder: Path, n: int = FABRICATED_NAMES,
                       seed: int = FABRICATED_SEED) -> dict[str, float]:
    """A name -> country classifier's accuracy on `n` names fabricated as the probe fabricates them (the world's
    name style, none in its corpus, its questions or its names files), the countries taking turns."""
    from core.data.datasets import ClassificationDataset, read_tsv_pairs
    from core.data.world_tables import LOCALES
    from core.lens.probe.corpus import load_probe_data
    from core.lens.probe.fabricated import fabricated_people
    from core.train.trainer import evaluate_loss

    probe = load_probe_data(folder)
    known = {name for f in ("names_train.tsv", "names_test.tsv") for _, name in read_tsv_pairs(folder / f)}
    people = fabricated_people(n, list(LOCALES), seed, probe.index, probe.train_names | known)
    pairs = [(LOCALES[locale].label, name) for name, locale in people]
    data = ClassificationDataset(pairs, loaded.tokenizer, loaded.config.block_size, loaded.labels)
    return {"fabricated_accuracy": evaluate_loss(loaded.model, data, accuracy=True)["accuracy"]}


def record_fabricated(path: str) -> dict[str, float]:
    """Measure a names classifier on fabricated names of the world its test file comes from; store it in its
    metrics (tensors unchanged). Nothing when that folder has no wiki.txt (no corpus to stay out of)."""
    loaded = ckpt.load(path)
    folder = (ROOT / loaded.metadata["data"][-1]["path"]).parent
    if not (folder / "wiki.txt").is_file():
        return {}
    measured = measure_fabricated(loaded, folder)
    ckpt.update_metadata(path, {"metrics": json.dumps({**loaded.metadata.get("metrics", {}), **measured}),
                                "fabricated_on": str(folder.relative_to(ROOT))})
    return measured


def reevaluate(name: str) -> dict[str, float]:
    """Recompute a bundled checkpoint's stored final metrics from its file and data/world/."""
    from core.data.datasets import ClassificationDataset, LanguageModelDataset, read_text, read_tsv_pairs
    from core.lens.probe.evaluation import evaluate_birthplaces
    from core.train.trainer import evaluate_loss

    recipe = next(r for r in RECIPES if r.name == name)
    loaded = ckpt.load(ROOT / _path(name))
    args = {k: str(ROOT / v) if isinstance(v, str) and v.startswith(("data/", "checkpoints/")) else v
            for k, v in recipe.kwargs.items()}
    if recipe.recipe == "finetune":  # the dev file the checkpoint names, checked against its stored sha256
        dev = loaded.metadata.get("eval_corpus_path") or recipe.kwargs["eval_corpus_path"]
        stored = {d["path"]: d["sha256"] for d in loaded.metadata.get("data", [])}
        if stored.get(dev) != hashlib.sha256((ROOT / dev).read_bytes()).hexdigest():
            raise AssertionError(f"{dev} is not the file {name} was evaluated on (sha256 differs)")
        result = evaluate_birthplaces(loaded.model, loaded.tokenizer, read_tsv_pairs(ROOT / dev),
                                      baseline_place=loaded.metadata.get("baseline_place"))
        return {"val_accuracy": result.accuracy, "val_baseline_accuracy": result.baseline_accuracy}
    if recipe.recipe == "pretrain" and loaded.metadata.get("memorised_on"):
        return measure_memorisation(loaded, ROOT / loaded.metadata["data"][0]["path"],
                                    ROOT / loaded.metadata["memorised_on"])
    if recipe.recipe == "train_lm":
        text = read_text(args["corpus_path"])
        val = LanguageModelDataset(text[int(len(text) * 0.9):], loaded.tokenizer, loaded.config.block_size)
        scores = evaluate_loss(loaded.model, val)
        return {"val_loss": scores["loss"], "val_perplexity": scores["perplexity"]}
    if recipe.recipe == "train_induction":  # the same 512 held-out rows the run measured after each epoch
        from core.data.datasets import RepeatedSegmentDataset

        held_out = RepeatedSegmentDataset(loaded.config.block_size, 512, recipe.kwargs.get("segment", (6, 12)),
                                          seed=recipe.trainer.seed + 10_000)
        return {"val_loss": evaluate_loss(loaded.model, held_out)["loss"]}
    if recipe.recipe == "train_classifier":
        test = ClassificationDataset(read_tsv_pairs(args["test_path"]), loaded.tokenizer,
                                     loaded.config.block_size, loaded.labels)
        measured = {"val_accuracy": evaluate_loss(loaded.model, test, accuracy=True)["accuracy"]}
        if loaded.metadata.get("fabricated_on"):
            measured.update(measure_fabricated(loaded, ROOT / loaded.metadata["fabricated_on"]))
        return measured
    return {}


def _fmt_metrics(metrics: dict[str, float]) -> str:
    shown = {k: v for k, v in metrics.items() if not k.startswith("train_")}
    return ", ".join(f"{k.removeprefix('val_')} {v:.3f}" if isinstance(v, float) else f"{k} {v}"
                     for k, v in shown.items()) or "(pretraining: see its loss curve)"


def _timing(entry: Any) -> tuple[float | None, str]:
    """timings.json rows: {"seconds": s, "hardware": "..."} (and "cpu_seconds": the process's CPU time, which on
    a shared machine says more than the wall time: it is shown when present); older rows are bare seconds."""
    if isinstance(entry, dict):
        if entry.get("cpu_seconds"):
            return entry["cpu_seconds"], f"{entry.get('hardware', '')} (CPU time)"
        return entry.get("seconds"), entry.get("hardware", "")
    return (entry, "2-core CPU (shared)") if entry else (None, "")


def recipe_summary(meta: dict[str, Any]) -> str:
    """Epochs, decay groups and schedule as stored in the file (files older than core/train/optim.py used
    minGPT groups and a clamped cosine)."""
    trainer = json.loads(meta.get("trainer", "{}"))
    epochs = json.loads(meta.get("progress", "{}")).get("epoch", "?")
    decay = trainer.get("decay", "mingpt")
    schedule = trainer.get("schedule", "cosine-clamped") if trainer.get("lr_decay", True) else "constant"
    return f"{epochs} ep, lr {trainer.get('learning_rate', '?')}, {decay}, {schedule}"


def hardware() -> str:
    if torch.cuda.is_available():
        return torch.cuda.get_device_name(0)
    return f"{platform.machine()} CPU, {torch.get_num_threads()} threads"


def write_readme(timings: dict[str, Any], recipes_: list[Recipe] | None = None, folder: str = FOLDER) -> str:
    rows = []
    for recipe in recipes_ or RECIPES:
        path = ROOT / _path(recipe.name, folder)
        if not recipe.bundled or not path.exists():
            continue
        meta = ckpt.read_metadata(path)
        cfg = meta["config"]
        with torch.device("meta"):
            from core.model.config import ModelConfig
            from core.model.transformer import Transformer

            params = Transformer(ModelConfig.from_dict(cfg)).num_parameters()
        data = ", ".join(Path(d["path"]).name for d in meta.get("data", []))
        seconds, where = _timing(timings.get(recipe.name))
        minutes = f"{seconds / 60:.1f} min" if seconds else "n/a"
        rows.append(f"| `{recipe.name}` | {meta['task']} | {cfg['attention']} | {cfg['n_layer']}x{cfg['n_embd']} | "
                    f"{params:,} | {recipe_summary(meta)} | {data} | {minutes} | {where or 'n/a'} | "
                    f"{_fmt_metrics(meta.get('metrics', {}))} |")
    return "\n".join(rows)


def grid_table() -> str:
    """The knowledge grid's measured rows (checkpoints/grid/grid.jsonl), as python -m core.train.knowledge_grid
    --table prints them."""
    from core.train.knowledge_grid import read_results, table

    results = read_results(ROOT / "checkpoints" / "grid" / "grid.jsonl")
    return table(results) if results else "(no grid rows measured yet: python -m core.train.knowledge_grid)"


POSITIONAL_FAMILY = ("learned", "sinusoidal", "alibi", "rope")


def positional_table(folder: str = FOLDER) -> str:
    """The "Longer than trained" run each lm-* file stores (its `extrapolation` metadata): dev loss per piece at
    each length, both protocols; "n/a" where the scheme has no positions that far."""
    rows, header = [], None
    for scheme in POSITIONAL_FAMILY:
        path = ROOT / _path(f"lm-{scheme}", folder)
        if not path.exists():
            continue
        raw = ckpt.read_metadata(path).get("extrapolation")
        record = json.loads(raw) if isinstance(raw, str) else raw or {}
        scores = [e for e in record.get("scores", []) if e.get("cap") is not None]
        for protocol in ("windows", "sliding"):
            found = sorted((e for e in scores if e["protocol"] == protocol), key=lambda e: e["factor"])
            if not found:
                continue
            if header is None:
                header = ["| model | protocol | " + " | ".join(f"{e['factor']:g}x ({e['length']})" for e in found)
                          + " |", "|---|---|" + "---|" * len(found)]
            cells = ["n/a" if e.get("reason") or e["loss"] != e["loss"] else f"{e['loss']:.3f}" for e in found]
            rows.append(f"| `lm-{scheme}` | {protocol} | " + " | ".join(cells) + " |")
    return "\n".join([*(header or []), *rows]) or "(the lm-* files carry no extrapolation record yet)"


def snapshot_facts(folder: str = FOLDER) -> dict[str, str]:
    """{SNAPSHOT_STEPS}, {SNAPSHOT_LAST} and {SNAPSHOT_MB} of the README: what lm-learned's snapshot file holds."""
    from core.io import snapshots

    path = ROOT / _path("lm-learned", folder)
    found = snapshots.snapshots_of(ckpt.load(path)) if path.exists() else None
    if not found or not found.snapshots:
        return {"{SNAPSHOT_STEPS}": "(none yet)", "{SNAPSHOT_LAST}": "?", "{SNAPSHOT_MB}": "?"}
    steps = [f"{s:,}" for s in found.steps]
    return {"{SNAPSHOT_STEPS}": "steps " + ", ".join(steps[:-1]) + " and " + steps[-1],
            "{SNAPSHOT_LAST}": steps[-1], "{SNAPSHOT_MB}": f"{found.bytes_per_snapshot / 1e6:.2f}"}


def induction_window(total: int, loss_steps, smooth_losses, kept: list[int], induction: list[float],
                     previous: list[float], steepest: int, high: float = 2.0, low: float = 0.8,
                     share: float = 0.2) -> tuple[int, int] | None:
    """The window of issue 54's numbers: a stretch between two kept steps, at most `share` of the run's `total`
    steps long and containing the `steepest` fall of the loss, over which the smoothed loss falls from >= `high`
    to <= `low`. Of those, the shortest in which the scores do what the issue says too (the best layer-1
    `induction` score from < 0.4 to >= 0.8, the best layer-0 `previous`-token score at least doubled); where none
    does, the one over which the induction score rose most (the table then says the numbers were missed). None: no
    stretch has the loss fall (it does not fall that far that fast, or too few steps are kept to see it)."""
    import numpy as np

    loss_at = np.interp(kept, loss_steps, smooth_losses)
    best: tuple = ()
    for i, a in enumerate(kept):
        for j in range(i + 1, len(kept)):
            b = kept[j]
            if b - a > share * total:
                break
            if not (a <= steepest <= b and loss_at[i] >= high and loss_at[j] <= low):
                continue
            scores = induction[i] < 0.4 and induction[j] >= 0.8 and previous[j] >= 2 * previous[i]
            key = (scores, -(b - a) if scores else induction[j] - induction[i], a, b)
            best = max(best, key) if best else key
    return (best[2], best[3]) if best else None


def induction_measures(path: str | Path, high: float = 2.0, low: float = 0.8, share: float = 0.2) -> dict[str, Any]:
    """The phase change of an induction run: the step where its repeated-token loss falls fastest, the window
    `induction_window` picks around it, and at the window's two ends the smoothed loss, the best layer-1 induction
    score and the best layer-0 previous-token score."""
    import numpy as np

    from core.io import snapshots
    from core.lens.phase_change import _smooth, phase_change, roles_over_steps

    loaded = ckpt.load(path)
    rows = sorted((r for r in loaded.history if r["metric"] == "loss" and r["split"] == "train"),
                  key=lambda r: r["step"])
    steps, losses = [r["step"] for r in rows], [r["value"] for r in rows]
    change = phase_change(steps, losses)
    total = int(max(steps, default=0))  # the last loss record is the last step (1,500 = 60 x 25)
    out: dict[str, Any] = {"steps": total, "share": share, "high": high, "low": low}
    if change is None:
        return out
    out["step"] = change.step
    found = snapshots.snapshots_of(loaded)
    history = roles_over_steps(loaded, found) if found and found.snapshots else []
    if not history:
        return out
    smooth = _smooth(np.asarray(losses, dtype=float), 5)
    kept = [s for s, _ in history]
    induction = [float(r.best_per_layer("induction")[1]) for _, r in history]
    previous = [float(r.best_per_layer("previous-token")[0]) for _, r in history]
    window = induction_window(total, steps, smooth, kept, induction, previous, change.step, high, low, share)
    out["probe_length"] = history[0][1].length
    if window is None:
        return out
    i, j = kept.index(window[0]), kept.index(window[1])
    out.update(start=window[0], end=window[1],
               loss=[round(float(v), 3) for v in np.interp(window, steps, smooth)],
               induction_l1=[round(induction[i], 3), round(induction[j], 3)],
               previous_l0=[round(previous[i], 3), round(previous[j], 3)])
    return out


def induction_met(m: dict[str, Any]) -> bool:
    """Issue 54's numbers for one measured seed: the window is at most 20% of the run; in it the loss falls from
    >= 2.0 to <= 0.8, the best layer-1 induction score rises from < 0.4 to >= 0.8, and the best layer-0
    previous-token score at least doubles."""
    if "start" not in m:
        return False
    ind, prev, loss = m["induction_l1"], m["previous_l0"], m["loss"]
    return (m["end"] - m["start"] <= 0.2 * m["steps"] and loss[0] >= 2.0 and loss[1] <= 0.8
            and ind[0] < 0.4 and ind[1] >= 0.8 and prev[1] >= 2 * prev[0])


def _induction_file(folder: str) -> Path:
    return ROOT / folder / "induction.seeds.json"


def record_induction_seed(path: str, seed: int, folder: str = FOLDER) -> None:
    file = _induction_file(folder)
    seeds = json.loads(file.read_text()) if file.exists() else {}
    seeds[str(seed)] = induction_measures(path)
    file.write_text(json.dumps(seeds, indent=1, sort_keys=True) + "\n")


def record_seed_history(path: str, name: str, folder: str = FOLDER) -> None:
    """A seed run's history (not its weights: the file is deleted after) into `<recipe>.seed-histories.json`, which
    the curves page draws as the recipe's seeds, one band (core.lens.history.records)."""
    from core.lens.history.records import seed_histories_file, write_seed_history

    base = seed_of(name)
    history = ckpt.read_metadata(path).get("history") or []
    write_seed_history(seed_histories_file(ROOT / folder, base[0] if base else name), name, history)


def induction_table(folder: str = FOLDER) -> str:
    """{INDUCTION} of the README: each measured seed's phase change (checkpoints/induction.seeds.json)."""
    file = _induction_file(folder)
    seeds = json.loads(file.read_text()) if file.exists() else {}
    if not seeds:
        return "(not measured yet: python -m core.train.bundle --only induction-seed0 induction-seed1 induction-seed2)"
    rows = ["| seed | loss falls fastest at | window (share of the run) | smoothed loss | best L1 induction | "
            "best L0 previous-token | issue 54's numbers |", "|---|---|---|---|---|---|---|"]
    for seed, m in sorted(seeds.items()):
        if "step" not in m:
            rows.append(f"| {seed} | the loss never falls | | | | | no |")
            continue
        if "start" not in m:
            rows.append(f"| {seed} | step {m['step']:,} | no window of <= {m.get('share', 0.2):.0%} from >= "
                        f"{m.get('high', 2.0)} to <= {m.get('low', 0.8)} | | | | no |")
            continue
        loss, ind, prev = m["loss"], m["induction_l1"], m["previous_l0"]
        rows.append(f"| {seed} | step {m['step']:,} | steps {m['start']:,} -> {m['end']:,}: "
                    f"{m['end'] - m['start']:,} of {m['steps']:,} ({(m['end'] - m['start']) / max(m['steps'], 1):.0%})"
                    f" | {loss[0]:.2f} -> {loss[1]:.2f} | {ind[0]:.2f} -> {ind[1]:.2f} | {prev[0]:.2f} -> "
                    f"{prev[1]:.2f} | {'met' if induction_met(m) else 'missed'} |")
    return "\n".join(rows)


def names_table(folder: str = FOLDER) -> str:
    """The names pair epoch by epoch (test and train accuracy from each file's history), then what fabricated names
    and the most frequent country get: the README's numbers are the files' own."""
    from collections import Counter

    from core.data.datasets import read_tsv_pairs

    runs = ("names-pretrained", "names-scratch")
    paths = [ROOT / _path(n, folder) for n in runs]
    if not all(p.exists() for p in paths):
        return "(the names pair is not trained yet: python -m core.train.bundle --only names-pretrained names-scratch)"
    metas = [ckpt.read_metadata(p) for p in paths]
    by_epoch = [{(r["split"], r["epoch"]): r["value"] for r in m["history"] if r["metric"] == "accuracy"}
                for m in metas]
    epochs = sorted({e for split, e in by_epoch[0] if split == "val"})
    rows = ["| epoch | names-pretrained test | names-scratch test | gap (points) | names-pretrained train | "
            "names-scratch train |", "|---|---|---|---|---|---|"]
    for e in epochs:
        pre, scratch = by_epoch[0][("val", e)], by_epoch[1][("val", e)]
        train = [b.get(("train", e), float("nan")) for b in by_epoch]
        rows.append(f"| {e} | {pre:.1%} | {scratch:.1%} | {100 * (pre - scratch):+.1f} | {train[0]:.1%} | "
                    f"{train[1]:.1%} |")
    data = [d["path"] for d in metas[0]["data"]]
    train_pairs, test = (read_tsv_pairs(ROOT / p) for p in data[:2])
    top, _ = Counter(label for label, _ in train_pairs).most_common(1)[0]
    share = sum(label == top for label, _ in test) / len(test)
    fabricated = [m.get("metrics", {}) for m in metas]
    rows.append("")
    rows.append(f"The most frequent training country ({top}) is {share:.1%} of `{Path(data[1]).name}`. On "
                f"{FABRICATED_NAMES} fabricated names (seed {FABRICATED_SEED}, drawn as the probe draws them: none "
                f"in the corpus, its questions or the names files) names-pretrained is right for "
                f"{fabricated[0].get('fabricated_accuracy', float('nan')):.1%} and names-scratch for "
                f"{fabricated[1].get('fabricated_accuracy', float('nan')):.1%}.")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m core.train.bundle", description=__doc__)
    parser.add_argument("--only", nargs="*", help="rebuild only these checkpoints (names)")
    parser.add_argument("--course", action="store_true",
                        help="the birthplace family with the CS224N assignment's recipe on data/world/, into "
                             "checkpoints/course/ (a GPU: minutes; this CPU: days)")
    parser.add_argument("--device", default="auto", help="cpu, cuda or auto (CUDA when present)")
    parser.add_argument("--readme-only", action="store_true")
    args = parser.parse_args(argv)
    folder, table_recipes = (COURSE_FOLDER, course_recipes()) if args.course else (FOLDER, RECIPES)
    (ROOT / folder).mkdir(parents=True, exist_ok=True)
    timings_file = ROOT / folder / "timings.json"
    timings = json.loads(timings_file.read_text()) if timings_file.exists() else {}
    chosen = [r for r in table_recipes if not args.only or r.name in args.only]
    if args.only and len(chosen) != len(args.only):
        print(f"error: unknown checkpoint name(s); choose from {', '.join(r.name for r in table_recipes)}",
              file=sys.stderr)
        return 2
    if not args.readme_only:
        for recipe in chosen:
            result = build(recipe, folder, args.device)
            # re-read: two `--only` groups may run side by side
            timings = json.loads(timings_file.read_text()) if timings_file.exists() else {}
            timings[recipe.name] = {"seconds": round(result["seconds"], 1), "hardware": hardware(),
                                    "cpu_seconds": round(result["cpu_seconds"], 1)}
            timings_file.write_text(json.dumps(timings, indent=1, sort_keys=True) + "\n")
            print(f"{recipe.name}: {result['seconds'] / 60:.1f} min, {_fmt_metrics(result['metrics'])}", flush=True)
        for recipe in chosen:
            if not recipe.bundled:
                Path(_path(recipe.name, folder)).unlink(missing_ok=True)
                snapshots_path(_path(recipe.name, folder)).unlink(missing_ok=True)
    total = sum(_timing(v)[0] or 0 for v in timings.values())
    table = write_readme(timings, table_recipes, folder)
    readme = ROOT / folder / "README.md"
    header_file = ROOT / "checkpoints" / ("README.course.md" if args.course else "README.header.md")
    header = header_file.read_text() if header_file.exists() else "{TABLE}\n"
    for key, value in (snapshot_facts() if not args.course else {}).items():
        header = header.replace(key, value)
    readme.write_text(header.replace("{TABLE}", table).replace("{TOTAL}", f"{total / 60:.1f}")
                      .replace("{GRID}", grid_table()).replace("{NAMES}", names_table(folder))
                      .replace("{POSITIONAL}", positional_table(folder))
                      .replace("{INDUCTION}", induction_table(folder)))
    print(f"total {total / 60:.1f} min; wrote {readme.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

