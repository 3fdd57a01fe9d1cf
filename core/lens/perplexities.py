"""One quantity on three pages: a language model's held-out perplexity, and why each page's number differs.

For the bundled lm-learned the three numbers are 2.678, 2.637 and 2.7876; none is a bug, they score different
predictions with the same final weights:

- Training curves shows the trainer's own measurement (core.train.recipes.train_lm, after each epoch; the page's
  final value is the last epoch's): the last `val_fraction` of the corpus by characters, cut where the character
  count falls (mid-line), in non-overlapping windows of the block size (LanguageModelDataset); the pieces after the
  last whole window are not scored.
- Errors (core.lens.errors.lm) scores the whole lines of that part only (core.lens.errors.inputs.held_out_part:
  the cut line is left out), every piece after the first, the tail that fills no window included (score_ids'
  windows). Its windows start at other pieces, so other pieces are predicted from little context.
- The positional page's "Longer than trained" table, at 1x with the windows protocol, is the trainer's computation
  on the same split, but on its first predictions only (DEFAULT_LIMITS["windows"] = 4,096 unless the reader asks
  for more); over the whole split (the check it runs) it gives back the trainer's number.

`trainer_dev` reads what the trainer recorded; each `*_sentence` is the one sentence a page shows beside its number.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import PurePath
from typing import Any


@dataclass(frozen=True)
class TrainerDev:
    """The held-out perplexity the trainer recorded for a language model."""

    run: str
    file: str  # the corpus it held a part of out, e.g. "wiki.txt"
    fraction: float  # the last `fraction` of it by characters
    block: int  # window length (the block size)
    epoch: int  # the epoch of the last held-out record (what the curves page's final value is)
    perplexity: float  # ... and its value
    best: float  # the lowest held-out perplexity of the run
    best_epoch: int


def trainer_dev(run: str, metadata: dict[str, Any], history: Sequence[dict]) -> TrainerDev | None:
    """What the trainer recorded on the held-out split (None: not a language model with one)."""
    if metadata.get("task") != "lm":
        return None
    try:
        fraction = float(metadata.get("val_fraction") or 0.0)
    except (TypeError, ValueError):
        return None
    data = metadata.get("data") or []
    config = metadata.get("config") if isinstance(metadata.get("config"), dict) else {}

    def number(value) -> float | None:
        return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None

    # a history is data from a file: records that are not {split, metric, value, step, epoch} are left out
    rows = [{**r, "step": number(r.get("step")), "epoch": number(r.get("epoch"))} for r in history
            if isinstance(r, dict) and r.get("split") == "val" and r.get("metric") in ("perplexity", "loss")
            and number(r.get("value")) is not None and math.isfinite(r["value"])]
    per = {}
    for r in rows:  # the perplexity where the trainer logged it, else exp(loss) of the same record
        value = r["value"] if r["metric"] == "perplexity" else math.exp(min(r["value"], 50.0))
        if r["metric"] == "perplexity" or (r.get("step"), r.get("epoch")) not in per:
            per[(r.get("step"), r.get("epoch"))] = value
    if not 0 < fraction < 1 or not per or not data or not isinstance(data[0], dict):
        return None
    ordered = sorted(per.items(), key=lambda kv: (kv[0][0] or 0, kv[0][1] or 0))
    (_, last_epoch), last = ordered[-1]
    (_, best_epoch), best = min(ordered, key=lambda kv: kv[1])
    block = number(config.get("block_size")) or 0
    return TrainerDev(run=run, file=PurePath(str(data[0].get("path", "the corpus"))).name, fraction=fraction,
                      block=int(block), epoch=int(last_epoch or 0), perplexity=float(last),
                      best=float(best), best_epoch=int(best_epoch or 0))


def trainer_split(text: str, fraction: float) -> tuple[str, int]:
    """(the trainer's held-out text, where the whole lines Errors reads start in it, in characters): the trainer
    cuts at `int(len(text) * (1 - fraction))`; Errors starts after the newline that ends the cut line."""
    cut = int(len(text) * (1 - fraction))
    start = text.find("\n", max(cut - 1, 0)) + 1 if cut > 0 and text[cut - 1] != "\n" else cut
    return text[cut:], start - cut


def window_predictions(n_ids: int, block: int) -> tuple[int, int]:
    """(windows, predictions) the trainer scores on `n_ids` pieces: whole windows of `block` only."""
    if block <= 0 or n_ids < block + 1:
        return 0, 0
    windows = (n_ids - 1 - block) // block + 1
    return windows, windows * block


def _what(dev: TrainerDev) -> str:
    return f"the last {dev.fraction:.0%} of {dev.file}"


def curves_sentence(dev: TrainerDev) -> str:
    """Beside the curves page's held-out value."""
    best = (f"; its lowest, {dev.best:.4g}, was after epoch {dev.best_epoch}" if dev.best_epoch != dev.epoch
            else "")
    return (f"{dev.run}'s held-out perplexity {dev.perplexity:.4g} (loss {math.log(dev.perplexity):.4f}) is the "
            f"trainer's after its last epoch ({dev.epoch}"
            f"{best}): {_what(dev)} from the character where that part starts, in non-overlapping windows of "
            f"{dev.block} pieces, the pieces after the last whole window not scored. Errors gives another number "
            f"because it scores only that part's whole lines, every piece after the first, tail included; the "
            f"positional page's 1x row scores only the first predictions of the same windows.")


def errors_sentence(dev: TrainerDev, perplexity: float, pieces: int, trainer_ids: int, skipped_chars: int) -> str:
    """Beside the Errors page's caption, on the held-out part of the model's own corpus. `trainer_ids`: the pieces
    of the trainer's held-out text; `skipped_chars`: the end of the cut line, which the trainer reads first."""
    windows, predictions = window_predictions(trainer_ids, dev.block)
    unscored = max(trainer_ids - 1 - predictions, 0)
    cut = (f"it begins with the last {skipped_chars:,} characters of a line cut in two, which Errors leaves out, "
           if skipped_chars else "")
    return (f"This {perplexity:.4g} scores the whole lines of {_what(dev)} with the final weights: {pieces:,} "
            f"pieces, every piece after the first, in windows of {dev.block} read afresh, the last short one too. "
            f"The trainer's {dev.perplexity:.4g} (Training curves, epoch {dev.epoch}) scores {predictions:,} "
            f"predictions of the same part in {windows:,} whole windows: {cut}its last {unscored:,} pieces fill no "
            f"window and are not scored, and so its windows start at other pieces and other pieces are predicted "
            f"from little context.")


@dataclass(frozen=True)
class AtOne:
    """One model's 1x windows row on the positional page, and the same over the whole split (None: not run)."""

    dev: TrainerDev
    perplexity: float
    predictions: int
    windows: int
    whole: float | None = None


def positional_sentence(rows: Sequence[AtOne]) -> str:
    """Beside the positional page's table: what its 1x windows rows score and why Training curves and Errors give
    other numbers, once for the family (one sentence, the models' numbers in it)."""
    if not rows:
        return ""
    first = rows[0]
    same = all(r.predictions == first.predictions and r.windows == first.windows for r in rows)
    each = ", ".join(f"{r.dev.run} {r.perplexity:.4f}" for r in rows)
    if all(r.whole is not None and abs(r.whole - r.perplexity) < 1e-9 for r in rows):
        scored = "all the predictions of the dev split, as the trainer does"
    elif same:
        scored = f"only the first {first.predictions:,} predictions ({first.windows:,} windows) of the dev split"
    else:
        scored = "only the first predictions of the dev split (the 'tokens scored' column)"
    back = [r for r in rows if r.whole is not None and abs(r.whole - r.dev.perplexity) < 5e-4]
    trainer = ", ".join(f"{r.dev.run} {r.dev.perplexity:.4f}" for r in rows)
    over_all = ("over the whole split each gives back the trainer's last-epoch value on Training curves" if
                len(back) == len(rows) else "over the whole split the trainer measured (Training curves, last epoch)")
    return (f"At 1x (windows of {first.dev.block}) the table's numbers ({each}) score {scored}, {_what(first.dev)}; "
            f"{over_all}: {trainer}. Errors reads only that part's whole lines and its tail too, so it gives a third "
            "number.")
