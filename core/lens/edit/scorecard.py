"""CounterFact's metrics (Meng et al. 2022) on the birthplace task, for one edit:

- efficacy: the edited question ('Where was NAME born?') now answers the new place (greedy, the assignment's
  decoding: `predict_birthplaces`);
- generalisation: the corpus's own sentences stating the birthplace, cut before the place ('... was born in'),
  completed greedily by the edited model with the new place; a form the model did not complete with the true
  place before the edit does not count (the card says how many did);
- specificity, three groups that fail differently, each the share of answers that did not change:
  every other dev person; namesakes (people sharing a part of the name, the probe's "borrowed" rule:
  core.lens.probe.corpus); people born in the original place;
- the rest of the person: the corpus's other places in the person's documents (where they lived, worked,
  died), each document cut before the place, completed before and after.

Every answer to a question is a `predict_birthplaces` answer of the edited model, so a card is exactly what
evaluating the edited model on those questions gives.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from core.lens.edit.methods import EditRequest
from core.lens.probe.answers import continuation_log_probs
from core.lens.probe.corpus import MIN_NAME_CHARS, ProbeData
from core.lens.probe.evaluation import _split_for_completion, context_length, predict_birthplaces
from core.lens.probe.questions import name_from_question, normalise_name, question_for
from core.lens.trace import model_device
from core.model.tokenizer import MASK_CHAR

GROUPS = ("other dev people", "namesakes", "born in the original place")


@dataclass
class Reference:
    """The unedited model's answer to every train and dev question, computed once per model."""

    answers: dict[str, str]  # question -> answer

    @classmethod
    def of(cls, model, tokenizer, data: ProbeData) -> Reference:
        questions = list(dict.fromkeys(q for q, _ in data.dev_pairs + data.train_pairs))
        return cls(dict(zip(questions, predict_birthplaces(model, tokenizer, questions))))


@dataclass
class Group:
    """Specificity in one group: the people asked, their answers before and after the edit."""

    label: str
    names: list[str]
    truths: list[str]
    before: list[str]
    after: list[str]

    @property
    def total(self) -> int:
        return len(self.names)

    @property
    def unchanged(self) -> int:
        return sum(b == a for b, a in zip(self.before, self.after))

    @property
    def rate(self) -> float:
        return self.unchanged / self.total if self.total else float("nan")

    @property
    def correct_before(self) -> int:
        return sum(b == t for b, t in zip(self.before, self.truths))

    @property
    def correct_after(self) -> int:
        return sum(a == t for a, t in zip(self.after, self.truths))

    def changed(self) -> list[tuple[str, str, str]]:
        return [(n, b, a) for n, b, a in zip(self.names, self.before, self.after) if b != a]


@dataclass
class Completion:
    """One corpus document cut before a place, completed greedily before and after the edit."""

    prompt: str
    place: str  # what the document says there
    before_ok: bool  # the unedited model wrote `place`
    after_ok: bool  # generalisation forms: the edited model wrote the new place; other facts: still `place`


@dataclass
class Scorecard:
    request: EditRequest
    original_place: str  # the true birthplace when known, else the unedited model's answer
    known: bool  # the person is a question of the train or dev file
    answer_before: str
    answer_after: str
    probabilities: dict[str, float]  # "new place before/after", "original place before/after"
    forms: list[Completion]
    groups: dict[str, Group]
    rest: list[Completion]

    @property
    def efficacy(self) -> bool:
        return self.answer_after == self.request.new_place

    @property
    def counted_forms(self) -> list[Completion]:
        return [f for f in self.forms if f.before_ok]

    @property
    def generalisation(self) -> float:
        counted = self.counted_forms
        return sum(f.after_ok for f in counted) / len(counted) if counted else float("nan")

    @property
    def rest_kept(self) -> tuple[int, int]:
        """(facts completed before and still after, facts completed before)."""
        known = [f for f in self.rest if f.before_ok]
        return sum(f.after_ok for f in known), len(known)

    def generalisation_sentence(self) -> str:
        counted, total = len(self.counted_forms), len(self.forms)
        if not total:
            return (f"No corpus sentence states {self.request.name}'s birthplace as 'born ... {self.original_place}', "
                    "so generalisation has nothing to test.")
        if not counted:
            return (f"None of the {total} corpus sentences stating the birthplace was completed with "
                    f"{self.original_place} before the edit, so none counts for generalisation.")
        hits = sum(f.after_ok for f in self.counted_forms)
        return (f"{counted} of the {total} corpus sentences stating the birthplace were completed with "
                f"{self.original_place} before the edit and count; {hits} of them now complete with "
                f"{self.request.new_place}.")

    def rows(self) -> list[dict]:
        """One row per metric: what it is, the count, the rate."""
        rows = [{"metric": "efficacy", "what": f"the question answers {self.request.new_place}",
                 "count": f"{int(self.efficacy)}/1", "rate": float(self.efficacy)}]
        counted = self.counted_forms
        rows.append({"metric": "generalisation", "what": "corpus sentences cut before the birthplace",
                     "count": f"{sum(f.after_ok for f in counted)}/{len(counted)}", "rate": self.generalisation})
        for group in self.groups.values():
            rows.append({"metric": f"specificity: {group.label}", "what": "answers unchanged",
                         "count": f"{group.unchanged}/{group.total}", "rate": group.rate})
        kept, known = self.rest_kept
        rows.append({"metric": "the rest of the person", "what": "other facts still completed",
                     "count": f"{kept}/{known}", "rate": kept / known if known else float("nan")})
        return rows


def namesakes(data: ProbeData, name: str) -> list[str]:
    """People with a train or dev question who share a part of the name (3+ characters): the rule by which the
    probe's verdict calls an answer borrowed (core.lens.probe.corpus.verdict)."""
    name = normalise_name(name)
    parts = {p for p in name.split() if len(p) >= MIN_NAME_CHARS}
    asked = {name_from_question(q) for q, _ in data.dev_pairs + data.train_pairs}
    return sorted(other for other in set(data.index.by_name) & asked
                  if other != name and parts & set(other.split()))


def _truths(data: ProbeData) -> dict[str, str]:
    out = {}
    for question, place in data.train_pairs + data.dev_pairs:
        out.setdefault(name_from_question(question), place)
    return out


def stated_forms(data: ProbeData, name: str, place: str) -> list[str]:
    """Each document about `name` cut right before the first `place` after the name, where the cut text says
    'born' (the corpus's sentence stating the birthplace)."""
    out = []
    for i in data.index.documents_about(name):
        document = data.index.documents[i]
        at = document.find(place, document.find(name) + len(name) if name in document else 0)
        if at > 0 and "born" in document[:at]:
            out.append(document[:at])
    return list(dict.fromkeys(out))


def other_facts(data: ProbeData, name: str, birthplace: str) -> list[tuple[str, str]]:
    """(document cut before a place, the place) for every other known place the person's documents mention."""
    evidence = data.index.evidence(name)
    out = []
    for document in evidence.documents:
        start = document.find(name) + len(name) if name in document else 0
        for place in evidence.places:
            if place == birthplace or birthplace in place:
                continue
            at = document.find(place, start)
            if at > 0:
                out.append((document[:at], place))
    return list(dict.fromkeys(out))


@torch.no_grad()
def completes(model, tokenizer, prompt: str, place: str) -> bool:
    """Does the model continue `prompt` with `place`, greedily and piece for piece?"""
    head, target = _split_for_completion(tokenizer, prompt, place)
    context = context_length(model) - 1
    ids = torch.tensor([head[-(context - len(target)):]], dtype=torch.long, device=model_device(model))
    generated = model.generate(ids, len(target))
    return generated[0, ids.size(1):].tolist() == target


def _probability(model, tokenizer, question: str, place: str) -> float:
    return float(np.exp(continuation_log_probs(model, tokenizer, [question + MASK_CHAR], [place + MASK_CHAR])[0]))


def score(original, edited, tokenizer, data: ProbeData, request: EditRequest, reference: Reference,
          exclude: Sequence[str] = ()) -> Scorecard:
    """The card of one edit: `original` is the unedited model (its answers are in `reference`), `edited` the
    model with the edit applied. `exclude`: names left out of every group (the other facts of a batch edit)."""
    name = normalise_name(request.name)
    question = question_for(name)
    truths = _truths(data)
    known = name in truths
    answer_before = reference.answers.get(question) or predict_birthplaces(original, tokenizer, [question])[0]
    original_place = truths.get(name, answer_before)
    skip = {name, *(normalise_name(n) for n in exclude)}
    dev_names = [n for n in (name_from_question(q) for q, _ in data.dev_pairs) if n not in skip]
    same_place = sorted(n for n, p in truths.items() if p == original_place and n not in skip)
    plan = {GROUPS[0]: dev_names, GROUPS[1]: [n for n in namesakes(data, name) if n not in skip],
            GROUPS[2]: same_place}
    asked = list(dict.fromkeys([question] + [question_for(n) for names in plan.values() for n in names]))
    after = dict(zip(asked, predict_birthplaces(edited, tokenizer, asked)))
    missing = [q for q in asked if q not in reference.answers]
    before = dict(reference.answers)
    if missing:
        before.update(zip(missing, predict_birthplaces(original, tokenizer, missing)))
    groups = {}
    for label, names in plan.items():
        qs = [question_for(n) for n in names]
        groups[label] = Group(label=label if label != GROUPS[2] else f"born in {original_place}", names=names,
                              truths=[truths.get(n, "") for n in names], before=[before[q] for q in qs],
                              after=[after[q] for q in qs])
    forms = [Completion(prompt, original_place, completes(original, tokenizer, prompt, original_place),
                        completes(edited, tokenizer, prompt, request.new_place))
             for prompt in stated_forms(data, name, original_place)]
    rest = []
    for prompt, place in other_facts(data, name, original_place):
        if place == request.new_place:
            continue
        rest.append(Completion(prompt, place, completes(original, tokenizer, prompt, place),
                               completes(edited, tokenizer, prompt, place)))
    probabilities = {f"{which} {when}": _probability(model, tokenizer, question, place)
                     for which, place in (("new place", request.new_place), ("original place", original_place))
                     for when, model in (("before", original), ("after", edited))}
    # the greedy answer's own probability, P(answer + ⁇ | question + ⁇), before and after
    probabilities["answer before"] = _probability(original, tokenizer, question, before[question])
    probabilities["answer after"] = _probability(edited, tokenizer, question, after[question])
    return Scorecard(request=EditRequest(name, request.new_place), original_place=original_place, known=known,
                     answer_before=before[question], answer_after=after[question], probabilities=probabilities,
                     forms=forms, groups=groups, rest=rest)


def _shown(count: int, total: int) -> str:
    return f"{count / total:.1%} ({count}/{total})" if total else "none to score"


def comparison_rows(cards: dict[str, Scorecard]) -> list[dict]:
    """One row per measure, one column per method (label -> its card on the same edit): 'rate (count/total)'."""
    labels = list(cards)
    first = next(iter(cards.values()))
    rows = [{"measure": "answer after", **{m: c.answer_after or "(nothing)" for m, c in cards.items()}},
            {"measure": "P(answer) after", **{m: f"{c.probabilities['answer after']:.1%}" for m, c in cards.items()}},
            {"measure": "efficacy", **{m: _shown(int(c.efficacy), 1) for m, c in cards.items()}},
            {"measure": "generalisation", **{m: _shown(sum(f.after_ok for f in c.counted_forms),
                                                       len(c.counted_forms)) for m, c in cards.items()}}]
    for i, group in enumerate(first.groups.values()):
        rows.append({"measure": f"unchanged: {group.label}",
                     **{m: _shown(list(cards[m].groups.values())[i].unchanged,
                                  list(cards[m].groups.values())[i].total) for m in labels}})
    rows.append({"measure": "rest of the person kept", **{m: _shown(*c.rest_kept) for m, c in cards.items()}})
    return rows


def generalisation_sentence(cards: dict[str, Scorecard]) -> str:
    """The corpus sentences that count for generalisation (the same before every method) and, per method by its
    label, how many of them each edited model now completes with the new place."""
    if not cards:
        return ""
    first = next(iter(cards.values()))
    if not first.counted_forms:
        return first.generalisation_sentence()  # nothing counts: no method to name
    counted, total = len(first.counted_forms), len(first.forms)
    hits = [f"{label} {sum(f.after_ok for f in card.counted_forms)}" for label, card in cards.items()]
    return (f"{counted} of the {total} corpus sentences stating the birthplace were completed with "
            f"{first.original_place} before the edit and count; now completed with {first.request.new_place}: "
            f"{', '.join(hits)}.")


def comparison_sentence(cards: dict[str, Scorecard]) -> str:
    """Which method kept the neighbours (the other dev people's answers) best, and whether it also made the edit."""
    if not cards:
        return ""
    rates = {label: card.groups[GROUPS[0]].rate for label, card in cards.items()}
    best = max(rates.values())
    keepers = [label for label, rate in rates.items() if rate == best]
    card = cards[keepers[0]]
    who = " and ".join(keepers)
    verb = "keep" if len(keepers) > 1 else "keeps"
    made = ("and it makes the edit" if card.efficacy else "but it does not make the edit (the question still "
            f"answers {card.answer_after or 'nothing'})") if len(keepers) == 1 else ""
    changed = card.groups[GROUPS[0]].total - card.groups[GROUPS[0]].unchanged
    others = [f"{label} {rate:.1%}" for label, rate in rates.items() if label not in keepers]
    tail = f"; {', '.join(others)}" if others else ""
    return (f"{who} {verb} the neighbours best: {best:.1%} of the other dev answers unchanged ({changed} changed)"
            f"{', ' + made if made else ''}{tail}.")
