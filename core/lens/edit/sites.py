"""Where to edit: the site the causal trace of a question points to, and a sweep that edits at every site.

Hase et al. (2023) found that where causal tracing points is not where an edit works best; the sweep puts the
two side by side on the same questions: for every (layer, position class), the rank-one edit's efficacy and
specificity over a few edits, beside the share of the answer that restoring that MLP's output brings back
(where_from's causal trace, noise on the name).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from core.lens.edit.key_statistics import KeyStatistics
from core.lens.edit.methods import POSITIONS, EditError, EditOptions, EditRequest, Site, edit, unreachable
from core.lens.edit.weights import EditedModel
from core.lens.probe.evaluation import predict_birthplaces
from core.lens.probe.questions import question_for
from core.lens.trace import Progress
from core.lens.where_from import WhereFromError, causal_trace, read_question

SWEEP_SAMPLES = 3  # noise draws per question for the sweep's traces (the page's own trace uses where_from's)


def unreachable_sites(n_layer: int) -> np.ndarray:
    """(n_layer, len(POSITIONS)) bool: the sites that cannot reach the answer."""
    return np.array([[unreachable(Site(layer, p), n_layer) for p in POSITIONS] for layer in range(n_layer)])


def position_index(site_position: str, name_positions: Sequence[int], n_tokens: int) -> int | None:
    if site_position == "last":
        return n_tokens - 1
    return name_positions[-1] if name_positions else None


def traced_shares(model, tokenizer, question: str, truth: str | None, samples: int | None = None,
                  seed: int = 0) -> np.ndarray:
    """(n_layer, len(POSITIONS)): the share of the answer's probability that restoring each MLP's output at each
    position class brings back (NaN where the class has no position)."""
    q = read_question(model, tokenizer, question, truth)
    kwargs = {"samples": samples} if samples else {}
    ct = causal_trace(model, tokenizer, q, seed=seed, **kwargs)
    grid = ct.recovered("MLP")  # (L, T)
    out = np.full((grid.shape[0], len(POSITIONS)), np.nan)
    for j, position in enumerate(POSITIONS):
        t = position_index(position, q.name_positions, grid.shape[1])
        if t is not None:
            out[:, j] = grid[:, t]
    return out


CLEAR_SHARE = 0.10  # below this the trace restores too little anywhere to point at a site


@dataclass
class TracedSite:
    site: Site  # the default site: the traced one, or the last layer at the last position when none is clear
    share: float  # of the corruption's effect, restored by the best editable MLP output alone
    shares: np.ndarray  # (n_layer, len(POSITIONS))
    traced: Site  # where the trace restores the most, clear or not

    @property
    def clear(self) -> bool:
        return self.share >= CLEAR_SHARE

    def sentence(self) -> str:
        if not self.clear:
            return (f"The causal trace of this question restores at most {self.share:.0%} of the answer's probability "
                    f"at any MLP output one can edit ({self.traced.label}), too little to point at a site, so the "
                    f"default is {self.site.label}.")
        return (f"The default site, {self.site.label}, is where the causal trace of this question restores the "
                f"most among the MLP outputs one can edit: {self.share:.0%} of the answer's probability the "
                "corrupted name took away.")


def traced_site(model, tokenizer, question: str, truth: str | None) -> TracedSite:
    """The editable site (MLP, layer x position class) whose restoration brings back the most."""
    try:
        shares = traced_shares(model, tokenizer, question, truth)
    except WhereFromError as exc:
        raise EditError(str(exc)) from None
    shares[unreachable_sites(shares.shape[0])] = np.nan
    if not np.isfinite(shares).any():
        raise EditError("The causal trace found no position to restore, so there is no traced site.")
    layer, j = np.unravel_index(int(np.nanargmax(shares)), shares.shape)
    traced = Site(int(layer), list(POSITIONS)[j])
    share = float(shares[layer, j])
    default = traced if share >= CLEAR_SHARE else Site(shares.shape[0] - 1, "last")
    return TracedSite(default, share, shares, traced)


@dataclass
class Sweep:
    """Per site (layer x position class): the edits' efficacy and specificity (other dev answers unchanged), and
    the mean traced share of the same questions."""

    requests: list[EditRequest]
    efficacy: np.ndarray  # (n_layer, len(POSITIONS))
    specificity: np.ndarray
    traced: np.ndarray
    impossible: np.ndarray  # (n_layer, len(POSITIONS)) bool: the site cannot reach the answer (NaN everywhere)
    method: str

    @property
    def positions(self) -> list[str]:
        return list(POSITIONS)

    def best_edit_site(self) -> Site:
        """The site with the best product efficacy x specificity (ties: the lower layer, the last position)."""
        score = np.nan_to_num(self.efficacy * self.specificity, nan=-1.0)
        layer, j = np.unravel_index(int(np.argmax(score)), score.shape)
        return Site(int(layer), self.positions[j])

    def traced_site(self) -> Site:
        layer, j = np.unravel_index(int(np.nanargmax(self.traced)), self.traced.shape)
        return Site(int(layer), self.positions[j])

    def sentence(self) -> str:
        best, traced = self.best_edit_site(), self.traced_site()
        i, j = best.layer, self.positions.index(best.position)
        k, m = traced.layer, self.positions.index(traced.position)
        head = (f"Over these {len(self.requests)} edits the best edit site is {best.label} (efficacy "
                f"{self.efficacy[i, j]:.0%}, other dev answers unchanged {self.specificity[i, j]:.0%}); ")
        if best == traced:
            return head + f"it is also where the causal trace restores the most ({self.traced[k, m]:.0%})."
        return (head + f"the causal trace points elsewhere, to {traced.label} ({self.traced[k, m]:.0%} restored, "
                f"against {self.traced[i, j]:.0%} at the best edit site): tracing does not pick the edit site here.")


def sweep_requests(data, answers: dict[str, str], n: int, seed: int) -> list[EditRequest]:
    """n dev people the model answers correctly, each with another dev birthplace (seeded)."""
    answered = [(q, p) for q, p in data.dev_pairs if answers.get(q) == p]
    rng = random.Random(seed)
    places = sorted({p for _, p in data.dev_pairs})
    chosen = rng.sample(answered, min(n, len(answered)))
    from core.lens.probe.questions import name_from_question
    return [EditRequest(name_from_question(q), rng.choice([p for p in places if p != t])) for q, t in chosen]


def sweep(model, tokenizer, data, stats: KeyStatistics, requests: Sequence[EditRequest], method: str = "rank-one",
          options: EditOptions | None = None, progress: Progress | None = None,
          samples: int = SWEEP_SAMPLES) -> Sweep:
    """Edit each request at every site (one at a time, undone before the next) on a copy of `model`."""
    n_layer = len(model.blocks)
    dev_questions = [q for q, _ in data.dev_pairs]
    before = dict(zip(dev_questions, predict_birthplaces(model, tokenizer, dev_questions)))
    truths = dict(data.dev_pairs)
    shape = (n_layer, len(POSITIONS))
    impossible = unreachable_sites(n_layer)
    efficacy, specificity = np.zeros(shape), np.zeros(shape)
    traced = np.zeros(shape)
    session = EditedModel.copy_of(model)
    total = len(requests) * (int((~impossible).sum()) + 1)
    done = 0
    for request in requests:
        question = question_for(request.name)
        try:
            traced += np.nan_to_num(traced_shares(model, tokenizer, question, truths.get(question), samples))
        except WhereFromError as exc:
            raise EditError(str(exc)) from None
        done += 1
        others = [q for q in dev_questions if q != question]
        for layer in range(n_layer):
            for j, position in enumerate(POSITIONS):
                if impossible[layer, j]:
                    continue
                session.apply(edit(session.model, tokenizer, method, request, Site(layer, position), stats, options))
                answers = predict_birthplaces(session.model, tokenizer, [question, *others])
                session.undo()
                efficacy[layer, j] += answers[0] == request.new_place
                specificity[layer, j] += np.mean([a == before[q] for q, a in zip(others, answers[1:])])
                done += 1
                if progress:
                    progress(done, total)
    n = max(len(requests), 1)
    efficacy, specificity, traced = efficacy / n, specificity / n, traced / n
    for grid in (efficacy, specificity, traced):
        grid[impossible] = np.nan
    return Sweep(requests=list(requests), efficacy=efficacy, specificity=specificity, traced=traced,
                 impossible=impossible, method=method)
