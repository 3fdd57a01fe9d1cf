"""Causal traces over a question file: one record per question (what the command line writes as JSON lines)
and the grids averaged per group of people, computed once per (weights, questions, options) and kept.

Averaging needs one grid shape for questions of different lengths, so positions are put in ROME's classes
(Meng et al. 2022, figure 1): before the name, the name's first piece, its middle pieces, its last piece, the
pieces after it, the last position. A group's cell is the mean effect over its questions divided by their mean
total effect (a ratio of means: a question whose corruption changed little cannot blow the average up), and
the joint restorations ROME reports in words (layer l's state at the name's last piece, at all its pieces, at
the last position) are summarised by the median over questions of each one's recovered share.

Groups: every question, the stored x answered 2x2 (core.lens.probe.dev_set: memorised by the pretrained
file x answered by this model) when the memorisation flags are known, and the wrong answers. Every question is
traced with its true answer, so in "wrong" the grid shows where what is left of the truth sits.

Kept in a sidecar JSON file beside the checkpoint (`NAME.where_from.json`), keyed by the sha256 of the weights
(core.lens.extrapolation.recorded.weights_digest) and of the question file, not in the checkpoint's own
metadata as the extrapolation record is: rewriting a bundled 7 MB checkpoint for a cache would conflict with
every other change to it, and the page reads a small JSON file without loading any tensor.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from core.lens.extrapolation.recorded import text_digest, weights_digest
from core.lens.probe.dev_set import ANSWERED, STORED
from core.lens.trace import Progress
from core.lens.where_from.attribution import direct_attribution
from core.lens.where_from.logitlens import logit_lens
from core.lens.where_from.question import WhereFromError, read_question, record
from core.lens.where_from.saliency import IG_STEPS, input_attribution
from core.lens.where_from.tracing import (
    KINDS,
    NOISE,
    POSITION_CLASSES,
    SEED,
    CausalTrace,
    causal_trace,
    weak_effect_note,
)

SIDECAR_SUFFIX = ".where_from.json"
SIDECAR_VERSION = 1
# Noise draws per question when averaging: ROME's 10, as for one question. Fewer are not just noisier: the
# recovered share is a ratio of means over draws of a heavy-tailed probability, and on birth-vanilla-pretrained's
# 200 dev questions 3 draws gave layer 0's residual a median 1.4% / 5.3% (name's last piece / all its pieces)
# where 10 gave 5.8% / 12.4% (bench/where_from.py's run; checkpoints/README.md).
DEV_SAMPLES = 10


def position_classes(name_positions: Sequence[int], n_tokens: int) -> list[list[int]]:
    """Positions of each POSITION_CLASSES class in one question (a one-piece name is its first and last)."""
    if not name_positions:
        return [[] for _ in POSITION_CLASSES]
    first, last = name_positions[0], name_positions[-1]
    return [list(range(0, first)), [first], list(range(first + 1, last)), [last],
            list(range(last + 1, n_tokens - 1)), [n_tokens - 1]]


def classed(grid: np.ndarray, name_positions: Sequence[int]) -> np.ndarray:
    """(L, T) -> (L, 6): the mean over each class's positions; NaN for a class with none."""
    classes = position_classes(name_positions, grid.shape[1])
    out = np.full((grid.shape[0], len(classes)), np.nan)
    for i, positions in enumerate(classes):
        if positions:
            out[:, i] = grid[:, positions].mean(axis=1)
    return out


def question_record(model, tokenizer, question: str, truth: str | None, corruption: str = "noise",
                    metric: str | None = None, noise: float = NOISE, samples: int = 10, seed: int = SEED,
                    swap_names: Sequence[str] = (), steps: int = IG_STEPS) -> dict:
    """Everything the views show for one question, as JSON-ready data (one line of the command's output)."""
    q = read_question(model, tokenizer, question, truth)
    rec = record(model, q)
    lens = logit_lens(model, tokenizer, rec, q.answer_id)
    attribution = direct_attribution(model, rec, q.answer_id, answer_piece=q.answer_piece)
    out = {"question": q.question, "truth": q.truth, "name": q.name, "tokens": q.tokens,
           "name_positions": q.name_positions, "cut": q.cut, "answer_piece": q.answer_piece,
           "traces_own_answer": q.own_answer, "note": q.note,
           "logit_lens": {"layers": lens.layers, "top_pieces": lens.top_pieces,
                          "top_probability": np.round(lens.top_prob, 6).tolist(),
                          "answer_probability": np.round(lens.answer_prob, 6).tolist(),
                          "answer_rank": lens.answer_rank.tolist(), "sentence": lens.sentence()},
           "attribution": {"logit": attribution.logit, "pieces": attribution.rows(),
                           "by_layer": attribution.by_layer(), "sentence": attribution.sentence(),
                           "final_layernorm_scale": "frozen at its value in this pass"}}
    try:
        out["causal_trace"] = causal_trace(model, tokenizer, q, rec, corruption, metric, noise, samples, seed,
                                           swap_names=swap_names).to_json()
    except WhereFromError as exc:
        out["causal_trace"] = {"problem": str(exc)}
    salience = input_attribution(model, q, steps)
    out["input_attribution"] = {"rows": salience.rows(), "steps": steps, "baseline": "zero token embeddings",
                                "completeness_gap": salience.completeness_gap}
    return out


@dataclass
class GroupGrids:
    count: int
    grids: dict[str, list[list[float | None]]]  # kind -> (L, 6) recovered share (ratio of means); None: no data
    clean: float  # mean clean metric
    corrupted: float  # mean corrupted metric
    medians: dict[str, dict[str, float]]  # kind -> joint restoration -> median recovered share


@dataclass
class AveragedTraces:
    corruption: str
    metric: str
    noise: float
    samples: int
    seed: int
    n_layer: int
    questions: int
    traced: int
    skipped: dict[str, int]  # reason -> questions
    groups: dict[str, GroupGrids]
    classes: list[str] = field(default_factory=lambda: list(POSITION_CLASSES))

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict) -> AveragedTraces:
        groups = {k: GroupGrids(**v) for k, v in data["groups"].items()}
        return cls(**{**data, "groups": groups})

    def grid(self, group: str, kind: str) -> np.ndarray:
        return np.array([[np.nan if v is None else v for v in row] for row in self.groups[group].grids[kind]])

    def sentence(self, group: str = "all") -> str:
        g = self.groups.get(group)
        if g is None or not g.count:
            return f"No question of this file is in the group {group!r}."
        best = None
        for kind in KINDS:
            grid = self.grid(group, kind)
            if kind == "residual":
                grid[-1, -1] = np.nan  # the final state itself: always all of it, so it says nothing
            if np.isfinite(grid).any():
                layer, c = np.unravel_index(int(np.nanargmax(grid)), grid.shape)
                if best is None or grid[layer, c] > best[0]:
                    best = (float(grid[layer, c]), kind, int(layer), self.classes[c])
        if best is None:
            return "Nothing was recovered anywhere."
        share, kind, layer, where = best
        return (f"Over {g.count} questions ({group}), apart from the final state itself, restoring the {kind} "
                f"output of layer {layer} at {where} "
                f"brings back the most: {share:.0%} of the mean {self.metric} the corruption took away "
                f"({g.clean:.3f} clean, {g.corrupted:.3f} corrupted, means)."
                + weak_effect_note(self.metric, g.clean, g.corrupted))


def _group_of(memorised: bool | None, answered: bool) -> str:
    return f"{STORED[0] if memorised else STORED[1]} / {ANSWERED[0] if answered else ANSWERED[1]}"


def average_traces(model, tokenizer, pairs: Sequence[tuple[str, str]], answered: Sequence[bool],
                   memorised: Sequence[bool | None] | None = None, corruption: str = "noise",
                   metric: str | None = None, noise: float = NOISE, samples: int = DEV_SAMPLES, seed: int = SEED,
                   swap_names: Sequence[str] = (), progress: Progress | None = None) -> AveragedTraces:
    """Causal traces of every (question, truth), averaged per group (see the module doc)."""
    if len(answered) != len(pairs) or (memorised is not None and len(memorised) != len(pairs)):
        raise ValueError("One answered (and memorised) flag per question is needed.")
    members: dict[str, list[tuple[CausalTrace, np.ndarray]]] = {}
    skipped: dict[str, int] = {}
    n_layer = model.config.n_layer
    used_metric = metric
    for i, (question, truth) in enumerate(pairs):
        try:
            q = read_question(model, tokenizer, question, truth)
            ct = causal_trace(model, tokenizer, q, None, corruption, metric, noise, samples, seed,
                              swap_names=swap_names)
        except WhereFromError as exc:
            reason = str(exc).split(",")[0]
            skipped[reason] = skipped.get(reason, 0) + 1
        else:
            used_metric = ct.metric
            groups = ["all", "answered" if answered[i] else "wrong"]
            if memorised is not None:
                groups.append(_group_of(memorised[i], answered[i]))
            for g in groups:
                members.setdefault(g, []).append((ct, q.name_positions))
        if progress:
            progress(i + 1, len(pairs))
    out = {}
    for group, traces in members.items():
        grids = {}
        totals = np.array([ct.total_effect for ct, _ in traces])
        for kind in KINDS:
            effects = np.stack([classed(ct.effect(kind), names) for ct, names in traces])  # (Q, L, 6)
            with np.errstate(invalid="ignore"):
                mean = np.nanmean(effects, axis=0) / totals.mean() if abs(totals.mean()) > 1e-12 else \
                    np.full(effects.shape[1:], np.nan)
            grids[kind] = [[None if not math.isfinite(v) else round(float(v), 6) for v in row] for row in mean]
        medians = {kind: {label: float(np.median([ct.summary[kind][label] for ct, _ in traces
                                                   if label in ct.summary.get(kind, {})]))
                          for label in traces[0][0].summary.get(kind, {})} for kind in KINDS}
        out[group] = GroupGrids(count=len(traces), grids=grids, clean=float(np.mean([ct.clean for ct, _ in traces])),
                                corrupted=float(np.mean([ct.corrupted for ct, _ in traces])), medians=medians)
    traced = len(members.get("all", []))
    return AveragedTraces(corruption=corruption, metric=used_metric or "probability",
                          noise=float(noise) if corruption == "noise" else 0.0, samples=int(samples),
                          seed=int(seed), n_layer=n_layer, questions=len(pairs), traced=traced, skipped=skipped,
                          groups=out)


# --------------------------------------------------------------------------- kept beside the checkpoint


def sidecar_path(checkpoint: str | Path) -> Path:
    checkpoint = Path(checkpoint)
    return checkpoint.with_name(checkpoint.name.removesuffix(".safetensors") + SIDECAR_SUFFIX)


def options_key(corruption: str, metric: str | None, noise: float, samples: int, seed: int) -> str:
    return json.dumps({"corruption": corruption, "metric": metric, "noise": float(noise), "samples": int(samples),
                       "seed": int(seed)}, sort_keys=True)


def read_kept(checkpoint: str | Path, model, questions_text: str, key: str) -> AveragedTraces | None:
    """The kept averages for these weights, questions and options; None when absent, stale or unreadable."""
    path = sidecar_path(checkpoint)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        if (data.get("version") != SIDECAR_VERSION or data.get("weights_sha256") != weights_digest(model)
                or data.get("questions_sha256") != text_digest(questions_text)):
            return None
        entry = data.get("averages", {}).get(key)
        return AveragedTraces.from_json(entry) if entry else None
    except (OSError, ValueError, TypeError, KeyError):
        return None


def keep(checkpoint: str | Path, model, questions_text: str, key: str, averages: AveragedTraces) -> Path:
    """Add (or replace) one entry of the sidecar, written atomically; other entries for the same weights and
    questions are kept."""
    path = sidecar_path(checkpoint)
    digest, questions = weights_digest(model), text_digest(questions_text)
    data = {"version": SIDECAR_VERSION, "weights_sha256": digest, "questions_sha256": questions, "averages": {}}
    try:
        old = json.loads(path.read_text(encoding="utf-8"))
        if old.get("weights_sha256") == digest and old.get("questions_sha256") == questions:
            data["averages"] = dict(old.get("averages", {}))
    except (OSError, ValueError, AttributeError):
        pass
    data["averages"][key] = averages.to_json()
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
    with os.fdopen(handle, "w", encoding="utf-8") as out:
        json.dump(data, out, allow_nan=False)
    os.chmod(temporary, 0o644)  # mkstemp's 0600 would hide it from a server running as another user
    os.replace(temporary, path)
    return path


# --------------------------------------------------------------------------- question files and groups


MAX_QUESTIONS = 5000


def read_questions(path: str | Path) -> tuple[list[tuple[str, str | None]], str]:
    """A CS224N `Where was NAME born?<TAB>PLACE` file, or one question per line -> ([(question, truth or None)],
    the text); raises WhereFromError with one sentence for a file that cannot be used."""
    from core.data.datasets import DataError, check_no_reserved_characters, read_text

    try:
        text = read_text(path)
        check_no_reserved_characters(text, str(path))
    except DataError as exc:
        raise WhereFromError(str(exc)) from None
    if "\0" in text:
        raise WhereFromError(f"{path} contains NUL bytes; it is not a text file.")
    rows: list[tuple[str, str | None]] = []
    for line in text.split("\n"):
        line = line.rstrip("\r")
        if not line.strip():
            continue
        question, _, truth = line.partition("\t")
        rows.append((question.strip(), truth.strip() or None))
    if len(rows) > MAX_QUESTIONS:
        raise WhereFromError(f"{path} has {len(rows)} questions; up to {MAX_QUESTIONS} are traced at once.")
    return rows, text


def names_in(rows: Sequence[tuple[str, str | None]]) -> list[str]:
    from core.lens.probe.questions import name_from_question

    return [name_from_question(q) for q, _ in rows]


def swap_pool(questions_path: str | Path, rows: Sequence[tuple[str, str | None]]) -> list[str]:
    """Names to swap in: the file's own, and the training file's beside it (birth_places_train.tsv) if any."""
    pool = names_in(rows)
    train = Path(questions_path).with_name("birth_places_train.tsv")
    if train.is_file() and train.resolve() != Path(questions_path).resolve():
        try:
            pool += names_in(read_questions(train)[0])
        except WhereFromError:
            pass
    return pool


def pretrained_beside(checkpoint: str | Path, metadata: dict) -> Path | None:
    """The file a finetuned model was pretrained as (metadata `pretrained_from`), beside it; None if none."""
    name = str(metadata.get("pretrained_from") or "")
    path = Path(checkpoint).parent / Path(name).name
    return path if name and path.is_file() else None


def memorised_flags(checkpoint: str | Path, loaded, pairs: Sequence[tuple[str, str]],
                    questions_path: str | Path) -> list[bool | None] | None:
    """Per question, does the model's pretrained file complete the person's own document with the place
    (core.lens.probe.evaluation.memorized)? None when there is no pretrained file or no wiki.txt beside the
    questions."""
    from core.io.checkpoint import load
    from core.lens.probe.evaluation import memorized

    source = pretrained_beside(checkpoint, loaded.metadata)
    corpus = Path(questions_path).with_name("wiki.txt")
    if source is None or not corpus.is_file():
        return None
    pretrained = load(source)
    return memorized(pretrained.model, pretrained.tokenizer, corpus.read_text(encoding="utf-8"), pairs)


def answered_flags(loaded, pairs: Sequence[tuple[str, str]]) -> list[bool]:
    from core.lens.probe.evaluation import predict_birthplaces

    answers = predict_birthplaces(loaded.model, loaded.tokenizer, [q for q, _ in pairs])
    return [a == t for a, (_, t) in zip(answers, pairs, strict=True)]


def kept_averages(checkpoint: str | Path, loaded, questions_path: str | Path, corruption: str = "noise",
                  metric: str | None = None, noise: float = NOISE, samples: int = DEV_SAMPLES, seed: int = SEED,
                  progress: Progress | None = None, recompute: bool = False) -> tuple[AveragedTraces, bool]:
    """The averaged grids of a question file for one checkpoint: read from its sidecar when kept for these
    weights, questions and options, else computed (answers, memorisation, every trace) and kept.
    Returns (averages, True if they were read from the sidecar)."""
    rows, text = read_questions(questions_path)
    pairs = [(q, t) for q, t in rows if t]
    if not pairs:
        raise WhereFromError(f"{questions_path} has no answers (QUESTION<TAB>PLACE lines), so there is nothing "
                             "to average over people.")
    key = options_key(corruption, metric, noise, samples, seed)
    if not recompute:
        found = read_kept(checkpoint, loaded.model, text, key)
        if found is not None:
            return found, True
    answered = answered_flags(loaded, pairs)
    memorised = memorised_flags(checkpoint, loaded, pairs, questions_path)
    averages = average_traces(loaded.model, loaded.tokenizer, pairs, answered, memorised, corruption, metric,
                              noise, samples, seed, swap_pool(questions_path, rows), progress)
    try:
        keep(checkpoint, loaded.model, text, key, averages)
    except OSError:
        pass  # a read-only folder: the averages are still returned, only not kept
    return averages, False
