"""The text a run reads: the validation split training used, found from a checkpoint's metadata."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from core.io.loaded import CheckpointInfo
from core.lens.extrapolation.scoring import ExtrapolationError

_ROOT = Path(__file__).resolve().parents[3]


@dataclass
class DevText:
    text: str
    source: str  # what the text is, in words
    notes: list[str] = field(default_factory=list)


def resolve_data_path(path: str) -> Path | None:
    """A corpus path recorded in a checkpoint: absolute, relative to the working folder, or the repo."""
    candidate = Path(path)
    for option in ([candidate] if candidate.is_absolute() else [Path.cwd() / candidate, _ROOT / candidate]):
        if option.is_file():
            return option
    return None


def dev_text_from_metadata(metadata: dict[str, Any], name: str = "The checkpoint") -> DevText:
    """The validation split training used: `text[int(len(text) * (1 - val_fraction)):]` of the corpus
    recorded in the checkpoint's `data` metadata (the split of `core.train.recipes.train_lm`)."""
    data = metadata.get("data") or []
    if not data or not isinstance(data[0], dict) or not data[0].get("path"):
        raise ExtrapolationError(f"{name} records no training corpus; give a text to evaluate on.")
    recorded = str(data[0]["path"])
    path = resolve_data_path(recorded)
    if path is None:
        raise ExtrapolationError(f"The corpus {recorded} that {name} was trained on is not on this machine; "
                                 "give a text to evaluate on.")
    raw = path.read_bytes()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ExtrapolationError(f"{recorded} is not UTF-8 text.") from None
    notes = []
    if data[0].get("sha256") and hashlib.sha256(raw).hexdigest() != data[0]["sha256"]:
        notes.append(f"{recorded} has changed since {name} was trained (its sha256 differs), so the split "
                     "is not exactly the one training validated on.")
    try:
        val_fraction = float(metadata.get("val_fraction", 0.1))
    except (TypeError, ValueError):
        val_fraction = 0.1
    if "val_fraction" not in metadata:
        notes.append(f"{name} records no validation fraction; using the last 10% of {recorded}.")
    val_fraction = min(max(val_fraction, 0.0), 1.0)
    cut = int(len(text) * (1 - val_fraction))
    return DevText(text[cut:], f"the last {val_fraction:.0%} of {recorded} (characters {cut:,} to "
                               f"{len(text):,}), the validation split of training", notes)


def family_dev_text(members: Sequence[CheckpointInfo]) -> DevText:
    """The dev split of the first member's recorded corpus; a note when members recorded other corpora."""
    if not members:
        raise ExtrapolationError("No checkpoints to evaluate.")
    text = dev_text_from_metadata(members[0].metadata, members[0].name)
    first = _corpus_hashes(members[0])
    others = [m.name for m in members[1:] if _corpus_hashes(m) != first]
    if others:
        text.notes.append(f"{', '.join(others)} recorded a different training corpus than {members[0].name}; "
                          f"all are evaluated on {members[0].name}'s dev split.")
    return text


def _corpus_hashes(info: CheckpointInfo) -> list[Any]:
    data = info.metadata.get("data") or []
    return [(d.get("sha256"), d.get("path")) if isinstance(d, dict) else d for d in data]
