"""`python -m core.lens.edit CHECKPOINT --random N --seed S [--method rank-one|finetune|memit ...] [--layer L]
[--position last|subject]`: edits N random dev people the model answers correctly, one at a time (each to another
birthplace of the dev set, undone before the next), and prints efficacy, generalisation, the three
specificities and the rest of the person, averaged over the edits, per method. `--edits FILE`
(NAME<TAB>NEW PLACE per line) edits the given facts, one at a time, or all at once with `--together` (MEMIT's
batched update). The checkpoint file is never written; the key statistics are kept in the user's cache folder
(core.lens.edit.key_statistics.cache_dir: ATTENTION_LAB_EDIT_CACHE, else ~/.cache/attention-lab/edit-statistics).
"""

from __future__ import annotations

import argparse
import math
import random
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from core.data.datasets import DataError
from core.lens.edit.key_statistics import key_statistics
from core.lens.edit.methods import (
    METHODS,
    POSITIONS,
    EditError,
    EditOptions,
    EditRequest,
    Site,
    check_editable,
    edit,
    edit_together,
)
from core.lens.edit.scorecard import GROUPS, Reference, Scorecard, score
from core.lens.edit.weights import EditedModel
from core.lens.probe.corpus import CORPUS_FILE, WORLD_CITIES, load_probe_data, world_dir
from core.lens.probe.questions import name_from_question

MAX_EDITS = 1000


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m core.lens.edit", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("checkpoint", help="a birthplace .safetensors checkpoint")
    which = parser.add_mutually_exclusive_group(required=True)
    which.add_argument("--random", type=int, metavar="N", help="edit N random dev people the model answers correctly")
    which.add_argument("--edits", metavar="FILE", help="NAME<TAB>NEW PLACE per line")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--method", nargs="+", choices=list(METHODS), default=["rank-one"],
                        help="one or more methods, each run on the same edits (default rank-one)")
    parser.add_argument("--layer", type=int, help="the MLP layer edited (default: the last)")
    parser.add_argument("--position", choices=list(POSITIONS), default="last",
                        help="last: the question's last position; subject: the name's last piece (default last)")
    parser.add_argument("--together", action="store_true", help="with --edits: all facts in one MEMIT update")
    parser.add_argument("--steps", type=int, default=EditOptions.steps, help="Adam steps for the new value")
    parser.add_argument("--target-prob", type=float, default=EditOptions.target_prob,
                        help="stop the value's steps once every piece of the new answer has this probability")
    parser.add_argument("--kl", type=float, default=EditOptions.kl_weight, help="weight of the KL term")
    parser.add_argument("--ft-eps", type=float, default=EditOptions.ft_eps, help="finetune: the L-infinity bound")
    parser.add_argument("--ft-steps", type=int, default=EditOptions.ft_steps, help="finetune: Adam steps")
    parser.add_argument("-v", "--verbose", action="store_true", help="one line per edit")
    return parser


@dataclass
class Tally:
    """Per method: the cards and the seconds each edit and each card took."""

    cards: list[Scorecard] = field(default_factory=list)
    edit_seconds: list[float] = field(default_factory=list)
    card_seconds: list[float] = field(default_factory=list)

    def mean(self, values) -> float:
        values = [v for v in values if not math.isnan(v)]
        return sum(values) / len(values) if values else float("nan")

    def lines(self, label: str) -> list[str]:
        n = len(self.cards)
        out = [f"{label}: {n} edits",
               f"  {'efficacy':<40} {self.mean([float(c.efficacy) for c in self.cards]):7.1%}"]
        out.append(f"  {'generalisation':<40} {self.mean([c.generalisation for c in self.cards]):7.1%}  "
                   f"({sum(len(c.counted_forms) for c in self.cards)} of {sum(len(c.forms) for c in self.cards)} "
                   "forms counted: completed correctly before)")
        for i, group in enumerate(GROUPS):
            rates = [list(c.groups.values())[i].rate for c in self.cards]
            with_group = sum(not math.isnan(r) for r in rates)
            out.append(f"  {'specificity, ' + group:<40} {self.mean(rates):7.1%}  (unchanged; {with_group} edits "
                       "have this group)")
        kept = sum(c.rest_kept[0] for c in self.cards)
        known = sum(c.rest_kept[1] for c in self.cards)
        rest = kept / known if known else float("nan")
        out.append(f"  {'the rest of the person':<40} {rest:7.1%}  ({kept} of {known} "
                   "other facts completed before are completed after)")
        if self.edit_seconds:
            out.append(f"  seconds per edit {self.mean(self.edit_seconds):.3f}, per scorecard "
                       f"{self.mean(self.card_seconds):.3f}")
        return out


def read_edits(path: str, limit: int = MAX_EDITS) -> list[EditRequest]:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise EditError(f"{path} is not UTF-8 text.") from None
    requests = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        name, tab, place = line.partition("\t")
        if not tab or not name.strip() or not place.strip():
            raise EditError(f"{path}, line {number}: expected NAME<TAB>NEW PLACE.")
        requests.append(EditRequest(name_from_question(name.strip()), place.strip()))
    if not requests:
        raise EditError(f"{path} has no NAME<TAB>NEW PLACE lines.")
    if len(requests) > limit:
        raise EditError(f"{path} has {len(requests)} edits; at most {limit} at a time.")
    return requests


def random_edits(data, reference: Reference, n: int, seed: int) -> list[EditRequest]:
    answered = [(q, p) for q, p in data.dev_pairs if reference.answers.get(q) == p]
    if n < 1:
        raise EditError("--random needs at least 1 edit.")
    if n > len(answered):
        raise EditError(f"The model answers {len(answered)} dev people correctly; --random {n} asks for more.")
    rng = random.Random(seed)
    places = sorted({p for _, p in data.dev_pairs})
    chosen = rng.sample(answered, n)
    return [EditRequest(name_from_question(q), rng.choice([p for p in places if p != truth])) for q, truth in chosen]


def main(argv: list[str] | None = None) -> int:
    from core.io.checkpoint import CheckpointError, load

    args = build_parser().parse_args(sys.argv[1:] if argv is None else argv)
    try:
        if args.together and not args.edits:
            raise EditError("--together edits the facts of an --edits file at once.")
        if Path(args.checkpoint).is_dir():
            raise EditError(f"{Path(args.checkpoint).name} is a Hugging Face folder; editing writes this lab's own "
                            "Transformer's MLP weights, so give an Attention Lab .safetensors checkpoint.")
        loaded = load(args.checkpoint)
        model, tokenizer = loaded.model, loaded.tokenizer
        check_editable(model)
        site = Site(len(model.blocks) - 1 if args.layer is None else args.layer, args.position)
        data = load_probe_data(world_dir([d.get("path", "") for d in loaded.metadata.get("data") or []]))
        known = set(data.labels) | {p for _, p in data.dev_pairs} | set(WORLD_CITIES)
        options = EditOptions(steps=args.steps, target_prob=args.target_prob, kl_weight=args.kl, ft_eps=args.ft_eps,
                              ft_steps=args.ft_steps)
        stats = None
        if any(METHODS[m].needs_statistics for m in args.method) or args.together:
            stats = key_statistics(args.checkpoint, model, tokenizer,
                                   (data.folder / CORPUS_FILE).read_text(encoding="utf-8"))
        reference = Reference.of(model, tokenizer, data)
        requests = read_edits(args.edits) if args.edits else random_edits(data, reference, args.random, args.seed)
        print(f"{Path(args.checkpoint).name}: {len(requests)} edits at {site.label}"
              + (f", seed {args.seed}" if args.random else "") + (", all at once" if args.together else ""))
        session = EditedModel.copy_of(model)
        if args.together:
            start = time.perf_counter()
            delta = edit_together(session.model, tokenizer, requests, site, stats, options, sorted(known))
            seconds = time.perf_counter() - start
            session.apply(delta)
            tally = Tally(edit_seconds=[seconds])
            names = [r.name for r in requests]
            for request in requests:
                tally.cards.append(score(model, session.model, tokenizer, data, request, reference, exclude=names))
            session.undo()
            print("\n".join(tally.lines(f"MEMIT, {len(requests)} facts in one update (layers "
                                        f"{', '.join(map(str, delta.record['layers']))})")))
            return 0
        for method in args.method:
            tally = Tally()
            for request in requests:
                start = time.perf_counter()
                delta = edit(session.model, tokenizer, method, request, site, stats, options, sorted(known))
                tally.edit_seconds.append(time.perf_counter() - start)
                session.apply(delta)
                start = time.perf_counter()
                card = score(model, session.model, tokenizer, data, request, reference)
                tally.card_seconds.append(time.perf_counter() - start)
                tally.cards.append(card)
                session.undo()
                if args.verbose:
                    print(f"  {request.name} -> {request.new_place}: answers {card.answer_after!r}; other dev "
                          f"unchanged {card.groups[GROUPS[0]].rate:.1%}", file=sys.stderr)
            print("\n".join(tally.lines(METHODS[method].label)))
    except (EditError, CheckpointError, DataError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0
