"""One planner and one runner for the page and the command line: the (model, protocol, length) units of a
run, what each costs in token positions read, and the run itself -- every unit through a scorer (the page
passes its cached `score_length`, the CLI a plain one), and, on the recorded dev split, the check that the
weights give back the dev loss training recorded.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import torch

from core.io.loaded import CheckpointInfo, LoadedCheckpoint
from core.lens.extrapolation.report import recorded_val_loss, reproduction_note
from core.lens.extrapolation.scoring import (
    WINDOWS_PER_BATCH,
    LengthScore,
    VariantExtrapolation,
    past_the_limit,
    score_length,
    token_stream,
    window_length,
)
from core.lens.trace import Progress


@dataclass(frozen=True)
class ExtrapolationUnit:
    protocol: str
    factor: float
    length: int


def extrapolation_plan(block_size: int, factors: Sequence[float], protocols: Sequence[str]
                       ) -> list[ExtrapolationUnit]:
    """Protocol by protocol, the lengths shortest first."""
    return [ExtrapolationUnit(p, f, window_length(block_size, f)) for p in protocols for f in sorted(factors)]


def work_estimate(n_predictions: int, unit: ExtrapolationUnit, max_length: int | None) -> int:
    """Tokens the forward passes of one unit read (0 when not applicable): what the run will cost."""
    if past_the_limit(unit.length, max_length):
        return 0
    if unit.protocol == "windows":
        return (n_predictions // unit.length) * unit.length
    return unit.length + max(0, n_predictions - unit.length) * unit.length


def unit_work(unit: ExtrapolationUnit, cap: int | None, n_text_tokens: int, max_length: int | None) -> int:
    """work_estimate for a unit that scores at most `cap` predictions of a text of n_text_tokens."""
    return work_estimate(min(cap or n_text_tokens, n_text_tokens), unit, max_length)


def planned_work(block_size: int, factors: Sequence[float], protocols: Sequence[str],
                 limits: dict[str, int | None], n_text_tokens: int, max_length: int | None = None) -> int:
    """Token positions one model reads for these settings (what the Run button will cost)."""
    return sum(unit_work(u, limits.get(u.protocol), n_text_tokens, max_length)
               for u in extrapolation_plan(block_size, factors, protocols))


# score(info, loaded, max predictions or None, unit, progress within the unit) -> LengthScore
Scorer = Callable[[CheckpointInfo, LoadedCheckpoint, int | None, ExtrapolationUnit, Progress], LengthScore]


def text_scorer(text: str, batch_size: int = WINDOWS_PER_BATCH) -> Scorer:
    """A Scorer on one text: `score_length` on its first cap+1 tokens, tokenised once per model and cap."""
    streams: dict[tuple[int, int | None], torch.Tensor] = {}

    def score(info: CheckpointInfo, loaded: LoadedCheckpoint, cap: int | None, unit: ExtrapolationUnit,
              progress: Progress) -> LengthScore:
        key = (id(loaded), cap)
        if key not in streams:
            streams[key], _ = token_stream(loaded.tokenizer, text, cap)
        return score_length(loaded.model, streams[key], unit.length, unit.protocol, unit.factor, batch_size,
                            progress)

    return score


@dataclass
class ExtrapolationRun:
    variants: list[VariantExtrapolation]
    problems: list[str]  # models whose weights do not give back the dev loss training recorded
    checked: bool  # whether that check ran (only on the recorded dev split)
    work: int  # token positions read through the models, planned
    checks: dict[str, float] = field(default_factory=dict)  # checkpoint name -> dev loss at 1x, whole split


@dataclass(frozen=True)
class _Job:
    info: CheckpointInfo
    loaded: LoadedCheckpoint
    unit: ExtrapolationUnit
    cap: int | None
    work: int
    is_check: bool = False


def run_extrapolation(models: Sequence[tuple[CheckpointInfo, LoadedCheckpoint]], n_text_tokens: int,
                      factors: Sequence[float], protocols: Sequence[str], limits: dict[str, int | None],
                      check: bool, score: Scorer,
                      progress: Callable[[float, str], None] | None = None) -> ExtrapolationRun:
    """Every (model, protocol, length) through `score`, and, on the recorded dev split, the windows protocol
    at 1x over the whole split, which must give back the dev loss training recorded (the same computation)
    -- if not, the numbers are not the trained model's.

    `limits`: max predictions per protocol (None: the whole text); progress(fraction done, what runs now)
    is weighted by the token positions each unit reads, and moves within a unit when `score` reports.
    """
    jobs = []
    for info, loaded in models:
        block, max_length = loaded.config.block_size, loaded.model.max_length
        for unit in extrapolation_plan(block, factors, protocols):
            cap = limits.get(unit.protocol)
            jobs.append(_Job(info, loaded, unit, cap, unit_work(unit, cap, n_text_tokens, max_length)))
        if check:  # the whole split (cap None), at the training length
            jobs.append(_Job(info, loaded, ExtrapolationUnit("windows", 1.0, block), None, n_text_tokens, True))
    total, done = max(sum(j.work for j in jobs), 1), 0
    scores: dict[str, list[LengthScore]] = {info.name: [] for info, _ in models}
    checks: dict[str, float] = {}
    for job in jobs:
        what = f"{job.info.name}: {job.unit.protocol}, {job.unit.length} tokens"

        def within(d: int, t: int, base: int = done, job: _Job = job, what: str = what) -> None:
            if progress and t:
                progress(min((base + job.work * min(d, t) / t) / total, 1.0), what)

        if progress:
            progress(min(done / total, 1.0), what)
        measured = score(job.info, job.loaded, job.cap, job.unit, within)
        if job.is_check:
            checks[job.info.name] = measured.loss
        else:
            scores[job.info.name].append(measured)
        done += job.work
    if progress:
        progress(1.0, "done")
    problems = [reproduction_note(info.name, recorded_val_loss(info.metadata), checks[info.name])
                for info, _ in models if info.name in checks]
    variants = [VariantExtrapolation(info.name, loaded.config.positional, loaded.config.block_size,
                                     loaded.model.max_length, scores[info.name]) for info, loaded in models]
    return ExtrapolationRun(variants, [p for p in problems if p], check, total, checks)
