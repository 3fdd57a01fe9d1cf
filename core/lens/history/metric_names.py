"""Other tools' metric names mapped onto the curves page's (split, metric), by each tool's own conventions.

`train/loss` (TensorBoard, W&B), `train_loss` (Lightning), `loss` (Keras, the Hugging Face Trainer) -> (train,
loss); `eval_loss` (Trainer), `val_loss` (Keras, Lightning), `val/loss`, `validation loss` -> (val, loss); the
same for accuracy, perplexity and the learning rate. Every other name is kept whole, as its own metric
(`grad_norm`, `mfu`, `train/global_norm`): nothing is dropped, and `map_metric` says it was not mapped.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

SPLIT_WORDS = {"train": "train", "training": "train", "trn": "train",
               "val": "val", "valid": "val", "validation": "val", "eval": "val", "evaluation": "val", "dev": "val",
               "test": "test"}
METRIC_WORDS = {"loss": "loss", "acc": "accuracy", "accuracy": "accuracy", "ppl": "perplexity",
                "perplexity": "perplexity", "lr": "lr", "learning_rate": "lr", "learningrate": "lr"}
# Lightning's self.log(..., on_step=True, on_epoch=True) writes `train_loss_step` and `train_loss_epoch`: the
# per-step one is the curve; the epoch average stays its own metric (one value per epoch, not a second curve)
STEP_SUFFIXES = ("_step",)
AXIS_NAMES = {"epoch", "train/epoch", "step", "global_step", "trainer/global_step", "iter", "iteration"}
_SEPARATORS = re.compile(r"[/\s.\-]+")


@dataclass(frozen=True)
class MappedName:
    split: str
    metric: str
    mapped: bool  # False: kept under its own name (listed on the page as not mapped)


def _words(name: str) -> list[str]:
    text = _SEPARATORS.sub("_", name.strip().lower()).strip("_")
    text = text.replace("learning_rate", "learningrate")
    return [w for w in text.split("_") if w]


def map_metric(name: str) -> MappedName:
    """(split, metric) on the page for a name another tool logged.

    A name is mapped when it is a metric word alone (`loss`: training) or a split word and a metric word in
    either order (`val_loss`, `loss/val`, `eval_accuracy`, `train loss`). Anything else keeps its whole name,
    split by its prefix where it has one (`eval_runtime` is a validation-time number), else train."""
    words = _words(name)
    for suffix in STEP_SUFFIXES:
        if len(words) > 1 and words[-1] == suffix.strip("_"):
            words = words[:-1]
    if len(words) == 1 and words[0] in METRIC_WORDS:
        return MappedName("train", METRIC_WORDS[words[0]], True)
    if len(words) == 2:
        first, second = words
        if first in SPLIT_WORDS and second in METRIC_WORDS:
            return MappedName(SPLIT_WORDS[first], METRIC_WORDS[second], True)
        if second in SPLIT_WORDS and first in METRIC_WORDS:
            return MappedName(SPLIT_WORDS[second], METRIC_WORDS[first], True)
    split = SPLIT_WORDS.get(words[0], "train") if words else "train"
    return MappedName(split, name.strip() or "(unnamed)", False)


def is_axis(name: str) -> bool:
    """A logged epoch or step counter (`train/epoch` in a Trainer's TensorBoard file): an x axis, not a curve."""
    return name.strip().lower() in AXIS_NAMES
