"""Names nobody wrote about: people drawn like the world's but absent from the corpus and the training
questions. A model cannot know where they were born, so its answers show its fallback strategy (one
popular city for everyone, a city of the name's country, any training label)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from core.data.world import fabricate_names
from core.data.world_tables import LOCALES
from core.lens.probe.corpus import CorpusIndex
from core.lens.probe.evaluation import country_priors

MAX_FABRICATED = 500


def fabricated_people(n: int, locales: Sequence[str], seed: int, index: CorpusIndex,
                      train_names: Iterable[str]) -> list[tuple[str, str]]:
    """n (name, locale) pairs of people no document and no training question is about."""
    if not 0 < n <= MAX_FABRICATED:
        raise ValueError(f"Choose between 1 and {MAX_FABRICATED} names.")
    unknown = [loc for loc in locales if loc not in LOCALES]
    if not locales or unknown:
        raise ValueError("Choose at least one locale of the world: " + ", ".join(LOCALES) + ".")
    exclude = index.names | set(train_names)
    for _ in range(5):
        people = fabricate_names(n, list(locales), seed, exclude=exclude)
        # The leading-name keys miss names mentioned inside other documents; the full search does not.
        found = {name for name, _ in people if index.documents_about(name)}
        if not found:
            return people
        exclude |= found
    raise ValueError("Could not find enough names absent from the corpus; try another seed.")


def fabricated_frame(people: Sequence[tuple[str, str]],
                     predictions: Mapping[str, Sequence[str]]) -> pd.DataFrame:
    """One row per fabricated person: name, locale, country, then one prediction column per model."""
    frame = pd.DataFrame({"name": [n for n, _ in people], "locale": [loc for _, loc in people],
                          "country": [LOCALES[loc].label if loc in LOCALES else "" for _, loc in people]})
    for model, answers in predictions.items():
        frame[model] = list(answers)
    return frame


def home_country_share(locales: Sequence[str], predictions: Sequence[str]) -> float:
    """Share of predictions that are a city of the country whose names the name was drawn from."""
    if not predictions:
        return float("nan")
    hits = [p in LOCALES[loc].city_names if loc in LOCALES else False for loc, p in zip(locales, predictions)]
    return float(np.mean(hits))


def expected_home_share(locales: Sequence[str], train_places: Sequence[str]) -> float:
    """The home-country share of a model that ignored the name and drew from the training labels."""
    counts = Counter(train_places)
    total = sum(counts.values())
    if not locales or not total:
        return float("nan")
    shares = [sum(counts[c] for c in LOCALES[loc].city_names) / total if loc in LOCALES else 0.0
              for loc in locales]
    return float(np.mean(shares))


def prior_places(locales: Sequence[str], train_places: Sequence[str]) -> list[str]:
    """Per name, its country prior: the most frequent training birthplace of the locale's country ('')."""
    priors = country_priors(train_places)
    return [priors.get(LOCALES[loc].label, "") if loc in LOCALES else "" for loc in locales]


def prior_share(locales: Sequence[str], predictions: Sequence[str], train_places: Sequence[str]) -> float:
    """Share of predictions that are the name's country prior."""
    if not predictions:
        return float("nan")
    priors = prior_places(locales, train_places)
    return float(np.mean([p == q and bool(q) for p, q in zip(predictions, priors, strict=True)]))


def expected_prior_share(locales: Sequence[str], train_places: Sequence[str]) -> float:
    """The country-prior share of a model that ignored the name and drew from the training labels."""
    counts, total = Counter(train_places), len(train_places)
    if not locales or not total:
        return float("nan")
    return float(np.mean([counts[q] / total if q else 0.0 for q in prior_places(locales, train_places)]))


def place_shares(predictions: Mapping[str, Sequence[str]], train_places: Sequence[str],
                 top: int = 20) -> pd.DataFrame:
    """Share of each place among the training labels and among each model's predictions.

    Rows: the `top` places most predicted or most frequent in training, training order first.
    """
    columns = {"training labels": Counter(train_places)} | {m: Counter(p) for m, p in predictions.items()}
    totals = {c: sum(counts.values()) or 1 for c, counts in columns.items()}
    places = list(dict.fromkeys([p for counts in columns.values() for p, _ in counts.most_common(top)]))
    ranked = sorted(places, key=lambda p: -max(columns[c][p] / totals[c] for c in columns))[:top]
    return pd.DataFrame({c: [columns[c][p] / totals[c] for p in ranked] for c in columns}, index=ranked)


def locale_place_counts(locales: Sequence[str], predictions: Sequence[str], top: int = 20) -> pd.DataFrame:
    """Counts of predicted places (columns, most common first) per name locale (rows)."""
    frame = pd.crosstab(pd.Series(list(locales), name="locale"), pd.Series(list(predictions), name="place"))
    order = frame.sum(axis=0).sort_values(ascending=False, kind="stable").index[:top]
    return frame[order]


def strategy_summary(locales: Sequence[str], predictions: Mapping[str, Sequence[str]],
                     train_places: Sequence[str]) -> pd.DataFrame:
    """Per model: distinct answers, the most common answer and its share, share in the name's country,
    share that are training labels."""
    labels = set(train_places)
    rows = []
    for model, answers in predictions.items():
        counts = Counter(answers)
        top_place, top_count = counts.most_common(1)[0] if counts else ("", 0)
        rows.append({"model": model, "distinct answers": len(counts), "most common answer": top_place,
                     "its share": top_count / max(len(answers), 1),
                     "share in the name's country": home_country_share(locales, answers),
                     "share = the country's prior": prior_share(locales, answers, train_places),
                     "share that are training labels": float(np.mean([a in labels for a in answers]))
                     if answers else float("nan")})
    return pd.DataFrame(rows)


@dataclass
class FabricatedStrategy:
    """Every model's answers for fabricated names, summarised: what the Fabricate tab shows."""

    summary: pd.DataFrame  # strategy_summary: one row per model
    chance: float  # expected_home_share: the home-country share of a model that ignores the name
    prior_chance: float  # expected_prior_share: its share of the country's prior
    frame: pd.DataFrame  # fabricated_frame: one row per name
    shares: pd.DataFrame  # place_shares: training labels and each model's answers
    locale_counts: dict[str, pd.DataFrame]  # model -> locale_place_counts


def strategy(people: Sequence[tuple[str, str]], predictions: Mapping[str, Sequence[str]],
             train_places: Sequence[str]) -> FabricatedStrategy:
    """Everything the tab shows about the models' answers (`predictions`: model -> one per person)."""
    locales = [loc for _, loc in people]
    return FabricatedStrategy(summary=strategy_summary(locales, predictions, train_places),
                              chance=expected_home_share(locales, train_places),
                              prior_chance=expected_prior_share(locales, train_places),
                              frame=fabricated_frame(people, predictions),
                              shares=place_shares(predictions, train_places),
                              locale_counts={m: locale_place_counts(locales, p) for m, p in predictions.items()})


def strategy_sentence(found: FabricatedStrategy, model: str) -> str:
    """The Fabricate tab's lead sentence, in numbers from the summary table: how often the focus model answers
    a city of the name's country, against a model that ignores the name."""
    row = found.summary.set_index("model").loc[model]
    home, prior = row["share in the name's country"], row["share = the country's prior"]
    return (f"For {len(found.frame)} names nobody wrote about, {model} answers a city of the name's country "
            f"{home:.0%} of the time, against {found.chance:.0%} by chance (ignoring the name, drawing from the "
            f"training birthplaces); {prior:.0%} of its answers are that country's most common birthplace "
            f"({found.prior_chance:.0%} by chance).")
