"""Extrapolation scores recorded in a checkpoint, so a page shows them at once instead of recomputing.

`record` runs the page's default extrapolation (every length, both protocols, DEFAULT_LIMITS, and the check
at 1x over the whole dev split) on a checkpoint's own dev split and writes the scores into its metadata
under RECORD_KEY, with a digest of the text and one of the weights they were measured on. `recorded_scores`
gives them back only when both digests match what is loaded now: numbers measured on other weights or
another text are never shown as this model's. A record that cannot be read is ignored, never an error:
the scores are then computed as before.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import asdict
from pathlib import Path
from typing import Any

import torch

from core.io import checkpoint as ckpt
from core.io.loaded import CheckpointInfo, LoadedCheckpoint
from core.lens.extrapolation.plan import (
    ExtrapolationRun,
    ExtrapolationUnit,
    extrapolation_plan,
    run_extrapolation,
    text_scorer,
)
from core.lens.extrapolation.scoring import (
    DEFAULT_LIMITS,
    EXTRAPOLATION_FACTORS,
    EXTRAPOLATION_PROTOCOLS,
    LengthScore,
    check_language_model,
    dev_text_from_metadata,
)
from core.model.transformer import Transformer

RECORD_KEY = "extrapolation"
RECORD_VERSION = 1
# (protocol, window length, predictions cap; None: the whole text)
RecordKey = tuple[str, int, int | None]


def text_digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def weights_digest(model: Transformer) -> str:
    """sha256 over every tensor's name, dtype, shape and bytes, in name order (a few ms for these models)."""
    h = hashlib.sha256()
    for name, tensor in sorted(model.state_dict().items()):
        flat = tensor.detach().cpu().contiguous().view(-1)
        h.update(f"{name}|{flat.dtype}|{tuple(tensor.shape)}|".encode())
        h.update(flat.view(torch.uint8).numpy().tobytes())
    return h.hexdigest()


def record_payload(scores: list[tuple[int | None, LengthScore]], text: str, model: Transformer) -> str:
    entries = [{"cap": cap, **asdict(score)} for cap, score in scores]
    return json.dumps({"version": RECORD_VERSION, "text_sha256": text_digest(text),
                       "weights_sha256": weights_digest(model), "scores": entries}, allow_nan=True)


def _number(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError("not a number")
    return float(value)


def _score(entry: Any) -> tuple[RecordKey, LengthScore]:
    if not isinstance(entry, dict):
        raise ValueError("not an object")
    protocol, length, cap = entry.get("protocol"), entry.get("length"), entry.get("cap")
    if protocol not in EXTRAPOLATION_PROTOCOLS or not isinstance(length, int) or length < 1:
        raise ValueError("bad unit")
    if cap is not None and (not isinstance(cap, int) or cap < 1):
        raise ValueError("bad cap")
    reason, position_loss = entry.get("reason"), entry.get("position_loss")
    if reason is not None and not isinstance(reason, str):
        raise ValueError("bad reason")
    if position_loss is not None:
        if not isinstance(position_loss, list) or len(position_loss) != length:
            raise ValueError("bad position losses")
        position_loss = [_number(v) for v in position_loss]
    tokens, windows = entry.get("tokens"), entry.get("windows")
    if not isinstance(tokens, int) or not isinstance(windows, int) or tokens < 0 or windows < 0:
        raise ValueError("bad counts")
    loss = _number(entry.get("loss"))
    if reason is None and not math.isfinite(loss):
        raise ValueError("no loss")
    parts = entry.get("part_losses")  # absent from records made before the spread was measured
    if parts is not None:
        if not isinstance(parts, list) or len(parts) > 64:
            raise ValueError("bad part losses")
        parts = [_number(v) for v in parts]
    score = LengthScore(protocol, _number(entry.get("factor")), length, loss, tokens, windows,
                        reason[:300] if reason else None, position_loss, parts)
    return (protocol, length, cap), score


def recorded_scores(metadata: dict[str, Any], text: str, model: Transformer) -> dict[RecordKey, LengthScore]:
    """The scores recorded for exactly this text and these weights; {} when there are none (or they were
    measured on something else, or cannot be read)."""
    raw = metadata.get(RECORD_KEY)
    if not isinstance(raw, str) or len(raw) > 8_000_000:
        return {}
    try:
        record = json.loads(raw)
        if not isinstance(record, dict) or record.get("version") != RECORD_VERSION:
            return {}
        if record.get("text_sha256") != text_digest(text) or record.get("weights_sha256") != weights_digest(model):
            return {}
        entries = record.get("scores")
        return dict(_score(e) for e in entries) if isinstance(entries, list) else {}
    except (ValueError, TypeError, RecursionError):
        return {}


def covers(scores: dict[RecordKey, LengthScore], block_size: int, factors, protocols, max_windows: int,
           max_sliding: int, check: bool = True) -> bool:
    """Whether `scores` hold every unit of these settings (and the whole-split check): nothing to compute."""
    limits = {"windows": max_windows, "sliding": max_sliding}
    needed = [(u.protocol, u.length, limits[u.protocol]) for u in extrapolation_plan(block_size, factors, protocols)]
    if check:
        needed.append(("windows", block_size, None))
    return all(key in scores for key in needed)


def record(path: str | Path, device: str = "cpu", progress=None) -> ExtrapolationRun:
    """Score a language-model checkpoint on its own dev split with the page's defaults and store the scores
    in its metadata (tensors unchanged). Returns the run (its `problems` say if the check failed)."""
    path = Path(path)
    loaded = ckpt.load(path, device=device)
    check_language_model(loaded.model, path.stem)
    text = dev_text_from_metadata(loaded.metadata, path.stem).text
    stat = path.stat()
    info = CheckpointInfo(path, path.stem, stat.st_size, stat.st_mtime, loaded.metadata)
    base = text_scorer(text)
    kept: list[tuple[int | None, LengthScore]] = []

    def score(info: CheckpointInfo, lc: LoadedCheckpoint, cap: int | None, unit: ExtrapolationUnit,
              within) -> LengthScore:
        measured = base(info, lc, cap, unit, within)
        kept.append((cap, measured))
        return measured

    n_text = len(loaded.tokenizer.tokenize(text).ids) - 1
    run = run_extrapolation([(info, loaded)], n_text, EXTRAPOLATION_FACTORS, EXTRAPOLATION_PROTOCOLS,
                            dict(DEFAULT_LIMITS), True, score, progress)
    ckpt.update_metadata(path, {RECORD_KEY: record_payload(kept, text, loaded.model)})
    return run
