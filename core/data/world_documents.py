"""One wiki.txt line per person: a biography template filled in, the birthplace early, other places as distractors."""

from __future__ import annotations

import random
import re

from core.data.world_tables import MONTHS, OCCUPATIONS, TEMPLATES, Country, all_cities
from core.text import MASK_CHAR, PAD_CHAR  # reserved by the CS224N vocabulary: never in a document

# CS224N span corruption truncates each document to at most int(block_size * 7/8) = 112
# characters (block_size 128), so a birthplace mentioned later is never seen in
# pretraining and could not be learned.
BIRTH_VISIBLE_WITHIN = 112
DOC_MIN_CHARS = 80
DOC_MAX_CHARS = 200

_OTHER_SLOTS = ("o1", "o2", "o3")
# Share of "other places" drawn from the person's own country; the rest are abroad.
_DOMESTIC_OTHER = 0.6


def _article(word: str) -> str:
    return f"an {word}" if word[0].lower() in "aeiou" else f"a {word}"


def _date(rng: random.Random, year: int) -> str:
    return f"{rng.randint(1, 28)} {rng.choice(MONTHS)} {year}"


def _other_places(rng: random.Random, country: Country, birth: str) -> list[str]:
    domestic = [(city, w) for city, w in country.cities if city != birth]
    abroad = [(city, w) for c, city, w in all_cities() if c is not country]
    places: list[str] = []
    while len(places) < len(_OTHER_SLOTS):
        pool = domestic if rng.random() < _DOMESTIC_OTHER else abroad
        city = rng.choices([c for c, _ in pool], weights=[w for _, w in pool])[0]
        if city not in places:
            places.append(city)
    return places


def _birth_mention_end(document: str, name: str, birth: str) -> int:
    # Blank the name first: "Florence" is a first name as well as a city.
    text = document.replace(name, "\0" * len(name))
    match = re.search(rf"(?<!\w){re.escape(birth)}(?!\w)", text)
    return match.end() if match else len(document) + 1


def compose_documents(rng: random.Random, name: str, country: Country, birth: str, gender: str,
                      count: int = 1) -> tuple[tuple[str, ...], tuple[str, ...], int, int | None]:
    """`count` wiki lines about one person, each from another template but with the same facts (one
    birth date, occupations, other places: the knowledge augmentation of Allen-Zhu & Li), the other
    places they name, and the birth and death years. count=1 draws exactly what the 1-line world does."""
    birth_year = rng.randint(1860, 1995)
    death_year: int | None = birth_year + rng.randint(28, 99)
    if death_year > 2024:
        death_year = None
    occ, occ2 = rng.sample(OCCUPATIONS, 2)
    # Moves happen in adult life, before death and not in the future.
    move_age = rng.randint(16, min(40, (death_year or 2024) - birth_year - 1))
    bdate = _date(rng, birth_year)
    ddate = _date(rng, death_year) if death_year else ""
    others = _other_places(rng, country, birth)
    fields = {
        "name": name, "birth": birth, "country": country.label,
        "a_nat": _article(country.adjective), "a_occ": _article(occ),
        "occ": occ, "occ2": occ2, "be": "was" if death_year else "is",
        "bdate": bdate, "byear": birth_year, "ddate": ddate, "dyear": death_year or "",
        "life": f"({bdate} – {ddate})" if death_year else f"(born {bdate})",
        "he": "she" if gender == "female" else "he",
        "his": "her" if gender == "female" else "his",
        "age": move_age, "move_year": birth_year + move_age,
        **dict(zip(_OTHER_SLOTS, others, strict=True)),
    }
    candidates = [t for t in TEMPLATES if death_year or not t.dead_only]
    rng.shuffle(candidates)
    rendered = [(t, f"{name}. " + t.text.format(**fields)) for t in candidates]
    # A stable sort: the first fitting template comes first, as min() would pick it.
    chosen = sorted(rendered, key=lambda td: _misfit(td[1], name, birth))[:count]
    used = tuple(dict.fromkeys(fields[slot] for template, _ in chosen for slot in _OTHER_SLOTS
                               if "{" + slot + "}" in template.text))
    return tuple(document for _, document in chosen), used, birth_year, death_year


def compose_document(rng: random.Random, name: str, country: Country, birth: str,
                     gender: str) -> tuple[str, tuple[str, ...], int, int | None]:
    """One wiki line, the other places it names, and the birth and death years."""
    documents, used, birth_year, death_year = compose_documents(rng, name, country, birth, gender)
    return documents[0], used, birth_year, death_year


def _misfit(document: str, name: str, birth: str) -> tuple[bool, bool]:
    """Sort key: (False, False) fits; min() then keeps the first fitting template.

    Very long names fit no template; an early birth mention matters more for learning
    than the length bounds, so that is the first criterion.
    """
    hidden = _birth_mention_end(document, name, birth) > BIRTH_VISIBLE_WITHIN
    return hidden, not DOC_MIN_CHARS <= len(document) <= DOC_MAX_CHARS


def check_text(text: str, what: str) -> None:
    """Raise ValueError naming `what` if text holds MASK, PAD, a tab or a line break."""
    # The character vocabulary reserves MASK and PAD, and the file formats split on tabs
    # and newlines, so none of these may occur inside a document, name or place.
    for ch, label in ((MASK_CHAR, "MASK U+2047"), (PAD_CHAR, "PAD U+25A1"),
                      ("\t", "tab"), ("\n", "newline"), ("\r", "carriage return")):
        if ch in text:
            raise ValueError(f"{what} contains a {label} character: {text!r}")
