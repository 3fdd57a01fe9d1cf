"""Train short, test long, as plain data: plan the (model, protocol, length) units of a run, put the
scores that `core.lens.extrapolation.score_length` returns back together, and check that the weights give back
the dev loss training recorded. No streamlit; the page passes its cached scorer in.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from core.io.checkpoint import CheckpointInfo
from core.lens.extrapolation import (
    DevText,
    ExtrapolationError,
    LengthScore,
    VariantExtrapolation,
    dev_text_from_metadata,
    recorded_val_loss,
    reproduction_note,
    window_length,
)


@dataclass(frozen=True)
class ExtrapolationUnit:
    protocol: str
    factor: float
    length: int


def extrapolation_plan(block_size: int, factors: Sequence[float], protocols: Sequence[str]
                       ) -> list[ExtrapolationUnit]:
    return [ExtrapolationUnit(p, f, window_length(block_size, f)) for p in protocols for f in sorted(factors)]


def work_estimate(n_predictions: int, unit: ExtrapolationUnit, max_length: int | None) -> int:
    """Tokens the forward passes of one unit read (0 when not applicable): what the run will cost."""
    if max_length is not None and unit.length > max_length:
        return 0
    if unit.protocol == "windows":
        return (n_predictions // unit.length) * unit.length
    return unit.length + max(0, n_predictions - unit.length) * unit.length


def planned_work(block_size: int, factors: Sequence[float], protocols: Sequence[str],
                 limits: dict[str, int | None], n_text_tokens: int, max_length: int | None = None) -> int:
    """Token positions one model reads for these settings (what the Run button will cost)."""
    return sum(work_estimate(min(limits.get(u.protocol) or n_text_tokens, n_text_tokens), u, max_length)
               for u in extrapolation_plan(block_size, factors, protocols))


def assemble(name: str, positional: str, block_size: int, max_length: int | None,
             scores: Sequence[LengthScore], text_source: str, stream_tokens: int,
             notes: Sequence[str] = ()) -> VariantExtrapolation:
    return VariantExtrapolation(name, positional, block_size, max_length, list(scores), text_source,
                                stream_tokens, list(notes))


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




@dataclass
class ExtrapolationRun:
    variants: list[VariantExtrapolation]
    problems: list[str]  # models whose weights do not give back the dev loss training recorded
    checked: bool  # whether that check ran (only on the recorded dev split)
    work: int  # token positions read through the models, planned


def run_extrapolation(models: Sequence[tuple[CheckpointInfo, Any]], n_text_tokens: int,
                      factors: Sequence[float], protocols: Sequence[str], limits: dict[str, int | None],
                      check: bool,
                      score: Callable[[CheckpointInfo, Any, int | None, ExtrapolationUnit], LengthScore],
                      progress: Callable[[float, str], None] | None = None) -> ExtrapolationRun:
    """Every (model, protocol, length) through `score` (the page passes its cached `score_length`), and,
    on the recorded dev split, the windows protocol at 1x over the whole split, which must give back the
    dev loss training recorded (the same computation) -- if not, the numbers are not the trained model's.

    `models`: (CheckpointInfo, LoadedCheckpoint) pairs; `limits`: max predictions per protocol;
    progress(fraction done, what runs now) is weighted by the token positions each unit reads.
    """
    jobs = []
    for info, loaded in models:
        block, max_length = loaded.config.block_size, loaded.model.max_length
        for unit in extrapolation_plan(block, factors, protocols):
            cap = limits.get(unit.protocol)
            work = work_estimate(min(cap or n_text_tokens, n_text_tokens), unit, max_length)
            jobs.append((info, loaded, unit, cap, work, False))
        if check:  # the whole split (cap None), at the training length
            jobs.append((info, loaded, ExtrapolationUnit("windows", 1.0, block), None, n_text_tokens, True))
    total, done = max(sum(j[4] for j in jobs), 1), 0
    scores: dict[str, list[LengthScore]] = {info.name: [] for info, _ in models}
    problems = []
    for info, loaded, unit, cap, work, is_check in jobs:
        if progress:
            progress(min(done / total, 1.0), f"{info.name}: {unit.protocol}, {unit.length} tokens")
        if is_check:
            measured = score(info, loaded, cap, unit)
            problems.append(reproduction_note(info.name, recorded_val_loss(info.metadata), measured.loss))
        else:
            scores[info.name].append(score(info, loaded, cap, unit))
        done += work
    if progress:
        progress(1.0, "done")
    variants = [assemble(info.name, loaded.config.positional, loaded.config.block_size,
                         loaded.model.max_length, scores[info.name], "", 0) for info, loaded in models]
    return ExtrapolationRun(variants, [p for p in problems if p], check, total)
