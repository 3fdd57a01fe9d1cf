"""The demo world: a fabricated encyclopedia in the CS224N birthplace-task file formats.

No external data set may be committed, so the project generates its own. People get
Faker names from the locale of their birth country (so a name carries a real cue of
origin), a real city of that country as birthplace, and a one-line Wikipedia-style
biography that also names other places they lived or worked, so the birthplace is not the
only place in the document. Birthplaces are weighted so that London is the most common one
at about 5%, as in the real CS224N data (the "always answer London" baseline).
The static tables (countries and their cities, occupations, templates) live in
`core.data.world_tables`, the biography writer in `core.data.world_documents`.

Regenerate the committed files (bit-identical for the pinned Faker version):

    python -m core.data.world --seed 0 --out data/world
"""

from __future__ import annotations

import argparse
import random
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from faker import VERSION as FAKER_VERSION
from faker import Faker
from faker.config import AVAILABLE_LOCALES

from core.data.world_documents import BIRTH_VISIBLE_WITHIN, check_text, compose_documents
from core.data.world_tables import COUNTRIES, LOCALES, TEMPLATES, Country, all_cities

DEFAULT_SEED = 0
DEFAULT_PEOPLE = 3000
DEFAULT_DEV = 500
DEFAULT_TEST = 300
DEFAULT_NAMES_TEST_FRACTION = 0.2

REGENERATE_COMMAND = "python -m core.data.world --seed 0 --out data/world"
# The birthplace models' world (issue 27): fewer people, four consistent biographies each, so a 2-core
# CPU can store every fact within an hour (see checkpoints/README.md for the grid that chose it).
KNOWLEDGE = {"people": 1000, "dev": 200, "test": 100, "bios": 4}
KNOWLEDGE_COMMAND = ("python -m core.data.world --seed 0 --people 1000 --dev 200 --test 100 --bios 4 "
                     "--out data/knowledge")


@dataclass(frozen=True)
class Person:
    name: str
    country: str  # Country.label of the birth country
    locale: str  # Faker locale the name was drawn from
    birthplace: str
    gender: str  # "female" or "male": picks first name and pronouns
    birth_year: int
    death_year: int | None  # None: alive
    document: str  # the first of the person's wiki.txt lines
    other_places: tuple[str, ...]  # places the document names besides the birthplace
    split: str  # birthplace task: "train", "dev" or "test"
    names_split: str  # name classification: "train" or "test"
    documents: tuple[str, ...] = ()  # every wiki.txt line about the person (same facts, other templates)


@dataclass(frozen=True)
class World:
    seed: int
    people: tuple[Person, ...]  # generation order; the TSV files follow it
    wiki: tuple[str, ...]  # every person's documents, shuffled: the wiki.txt lines
    command: str = REGENERATE_COMMAND  # how the files were made (written into the README)

    def split(self, name: str) -> tuple[Person, ...]:
        return tuple(p for p in self.people if p.split == name)

    def birthplace_counts(self) -> Counter[str]:
        return Counter(p.birthplace for p in self.people)


def _sub_seed(seed: int, purpose: str) -> int:
    # String seeds hash through SHA-512 in random.Random, so this is stable across runs
    # and independent of PYTHONHASHSEED.
    return random.Random(f"{seed}/{purpose}").getrandbits(64)


def _faker(locale: str, seed: int) -> Faker:
    fake = Faker(locale)
    fake.seed_instance(seed)
    return fake


def _clean(part: str) -> bool:
    # Faker's de_DE and nl_NL lists contain abbreviations ("Hans-J.") and inverted forms
    # ("Bourgondië, van"); a "." or "," inside a name would blur the "NAME." prefix of
    # each wiki line.
    return bool(part) and not any(ch in part for ch in ".,\t\n?") and part == part.strip()


def _draw_name(fake: Faker, gender: str, surnames: int) -> str:
    while True:
        if gender == "female":
            parts = [fake.first_name_female()]
            parts += [fake.last_name_female() for _ in range(surnames)]
        else:
            parts = [fake.first_name_male()]
            parts += [fake.last_name_male() for _ in range(surnames)]
        if all(_clean(part) for part in parts):
            return " ".join(parts)


def _quotas(n: int, weights: Sequence[float]) -> list[int]:
    """Largest-remainder apportionment of n items to weights.

    Exact quotas instead of independent draws keep London's share at its target for
    every seed and size, instead of wandering by sampling noise.
    """
    total = sum(weights)
    exact = [n * w / total for w in weights]
    counts = [int(x) for x in exact]
    by_remainder = sorted(range(len(weights)), key=lambda i: (-(exact[i] - counts[i]), i))
    for i in by_remainder[: n - sum(counts)]:
        counts[i] += 1
    return counts


def _names_test_split(people_countries: Sequence[str], fraction: float,
                      rng: random.Random) -> set[int]:
    """Indices of the name-classification test set, stratified by country.

    Stratifying keeps every label in both files, even in a tiny world.
    """
    test: set[int] = set()
    for country in COUNTRIES:
        members = [i for i, label in enumerate(people_countries) if label == country.label]
        rng.shuffle(members)
        k = round(fraction * len(members))
        if len(members) >= 2:
            k = min(max(k, 1), len(members) - 1)
        test.update(members[:k])
    return test


def generate_world(seed: int = DEFAULT_SEED, n_people: int = DEFAULT_PEOPLE,
                   n_dev: int = DEFAULT_DEV, n_test: int = DEFAULT_TEST,
                   names_test_fraction: float = DEFAULT_NAMES_TEST_FRACTION, bios: int = 1) -> World:
    """Build a world in memory; deterministic in all arguments.

    Birthplace questions: n_dev dev people, n_test test people, the rest train; everyone
    has `bios` wiki documents (other templates, the same facts). Stages draw from separate seeded
    streams, so changing the templates or `bios` does not change who is born where.
    """
    if n_people < 1 or n_dev < 0 or n_test < 0 or n_dev + n_test > n_people:
        raise ValueError(f"need n_people >= 1 and 0 <= n_dev + n_test <= n_people, got "
                         f"n_people={n_people}, n_dev={n_dev}, n_test={n_test}")
    if not 1 <= bios <= 8:
        raise ValueError(f"bios must be 1 to 8 documents per person, got {bios}")
    if not 0.0 <= names_test_fraction < 1.0:
        raise ValueError(f"names_test_fraction must be in [0, 1), got {names_test_fraction}")

    cities = all_cities()
    slots = [(country, city)
             for (country, city, _), count in zip(cities, _quotas(n_people, [w for *_, w in cities]),
                                                  strict=True)
             for _ in range(count)]
    people_rng = random.Random(_sub_seed(seed, "people"))
    people_rng.shuffle(slots)

    fakers: dict[str, Faker] = {}
    taken: set[str] = set()
    drawn: list[tuple[Country, str, str, str]] = []  # country, birthplace, gender, name
    for country, city in slots:
        if country.locale not in fakers:
            fakers[country.locale] = _faker(country.locale, _sub_seed(seed, country.locale))
        gender = people_rng.choice(("female", "male"))
        name = _draw_name(fakers[country.locale], gender, country.surnames)
        while name in taken:
            name = _draw_name(fakers[country.locale], gender, country.surnames)
        taken.add(name)
        drawn.append((country, city, gender, name))

    order = list(range(n_people))
    random.Random(_sub_seed(seed, "splits")).shuffle(order)
    split = {i: "dev" for i in order[:n_dev]}
    split |= {i: "test" for i in order[n_dev:n_dev + n_test]}
    names_test = _names_test_split([c.label for c, *_ in drawn], names_test_fraction,
                                   random.Random(_sub_seed(seed, "names")))

    doc_rng = random.Random(_sub_seed(seed, "documents"))
    people = []
    for i, (country, city, gender, name) in enumerate(drawn):
        documents, others, birth_year, death_year = compose_documents(doc_rng, name, country, city, gender,
                                                                      bios)
        for document in documents:
            check_text(document, "document")
        people.append(Person(
            name=name, country=country.label, locale=country.locale, birthplace=city,
            gender=gender, birth_year=birth_year, death_year=death_year, document=documents[0],
            other_places=others, split=split.get(i, "train"),
            names_split="test" if i in names_test else "train", documents=documents,
        ))

    wiki = [document for p in people for document in p.documents]
    random.Random(_sub_seed(seed, "wiki")).shuffle(wiki)
    command = REGENERATE_COMMAND
    if (n_people, n_dev, n_test, bios) != (DEFAULT_PEOPLE, DEFAULT_DEV, DEFAULT_TEST, 1):
        command = (f"python -m core.data.world --seed {seed} --people {n_people} --dev {n_dev} --test {n_test}"
                   f" --bios {bios} --out FOLDER")
    if (n_people, n_dev, n_test, bios) == tuple(KNOWLEDGE.values()):
        command = KNOWLEDGE_COMMAND.replace("--seed 0", f"--seed {seed}")
    return World(seed=seed, people=tuple(people), wiki=tuple(wiki), command=command)


def fabricate_names(n: int, locales: Sequence[str], seed: int = 0,
                    exclude: Iterable[str] = frozenset()) -> list[tuple[str, str]]:
    """n distinct (name, locale) pairs in the world's name style, none of them in exclude.

    Locales take turns, so each chosen locale gets n / len(locales) names. Pass the
    world's names as exclude to get people the models have never read about.
    """
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    if not locales:
        raise ValueError("choose at least one locale")
    unknown = [loc for loc in locales if loc not in AVAILABLE_LOCALES]
    if unknown:
        raise ValueError(f"unknown Faker locale(s): {', '.join(unknown)}")
    excluded = set(exclude)
    # A separate seed namespace, so fabricated names are not the world's own draws.
    fakers = {loc: _faker(loc, _sub_seed(seed, f"fabricate/{loc}")) for loc in locales}
    rng = random.Random(_sub_seed(seed, "fabricate"))
    result: list[tuple[str, str]] = []
    seen: set[str] = set()
    attempts = 0
    while len(result) < n:
        attempts += 1
        if attempts > 100 * n + 1000:
            raise RuntimeError(f"could only fabricate {len(result)} of {n} new names from "
                               f"{', '.join(locales)}; the exclude set covers the rest")
        locale = locales[len(result) % len(locales)]
        surnames = LOCALES[locale].surnames if locale in LOCALES else 1
        name = _draw_name(fakers[locale], rng.choice(("female", "male")), surnames)
        if name not in excluded and name not in seen:
            seen.add(name)
            result.append((name, locale))
    return result


def _lines(rows: Iterable[str]) -> str:
    return "".join(f"{row}\n" for row in rows)


def _question(person: Person) -> str:
    return f"Where was {person.name} born?"


def _readme(world: World, files: dict[str, str]) -> str:
    people = world.people
    counts = world.birthplace_counts()
    top_city, top_count = counts.most_common(1)[0]
    dev = world.split("dev")
    dev_london = sum(p.birthplace == "London" for p in dev) / len(dev) if dev else 0.0
    wiki = files["wiki.txt"]
    chars = sorted(set(wiki) - {"\n"})
    lengths = [len(doc) for doc in world.wiki]
    with_others = sum(bool(p.other_places) for p in people) / len(people)
    by_country = Counter(p.country for p in people)
    country_rows = "\n".join(
        f"| {c.label} | `{c.locale}` | {by_country[c.label]} | {c.city_names[0]} |"
        for c in COUNTRIES)
    top5 = ", ".join(f"{city} {count / len(people):.1%}" for city, count in counts.most_common(5))
    sizes = {split: len(world.split(split)) for split in ("train", "dev", "test")}
    names_sizes = Counter(p.names_split for p in people)
    return f"""# Demo world

A fabricated encyclopedia in the file formats of the CS224N "pretrained transformers and
knowledge access" birthplace task. Every person is invented: names are drawn with Faker
(faker=={FAKER_VERSION}) from the locale of the birth country, birthplaces are real cities
of that country, and each biography is one line built from {len(TEMPLATES)} templates that
also name other places the person lived or worked{_bios_sentence(world)}. Generated by `core/data/world.py`;
do not edit by hand.

Regenerate (bit-identical with the pinned Faker version):

    {world.command}

## Files

| file | format | lines |
|---|---|---|
| `wiki.txt` | one document per line: `NAME. biography .` (pretraining corpus) | {len(world.wiki)} |
| `birth_places_train.tsv` | `Where was NAME born?<TAB>PLACE` | {sizes["train"]} |
| `birth_dev.tsv` | same; dev people are in `wiki.txt`, never in the train file | {sizes["dev"]} |
| `birth_test_inputs.tsv` | `Where was NAME born?` (question only) | {sizes["test"]} |
| `names_train.tsv` | `COUNTRY<TAB>NAME` (name classification, stratified split) | {names_sizes["train"]} |
| `names_test.tsv` | same, disjoint from `names_train.tsv` | {names_sizes["test"]} |
| `people.tsv` | header, then `name, country, locale, birthplace, split, names_split` | {len(people)} |

All files are UTF-8 with `\\n` line endings and a final newline. Birthplaces use ASCII
English city names; names keep their diacritics.

## Stats

- people: {len(people)} (seed {world.seed});
  birthplace train / dev / test: {sizes["train"]} / {sizes["dev"]} / {sizes["test"]}
- most common birthplace: {top_city}, {top_count} people ({top_count / len(people):.1%});
  answering "London" for every dev question scores {dev_london:.1%}
- top birthplaces: {top5}
- distinct cities as birthplace: {len(counts)}
- `wiki.txt`: {len(wiki.encode("utf-8"))} bytes, {len(chars)} distinct characters besides the
  newline (character vocabulary {len(chars) + 3} with newline, MASK and PAD)
- document length: {min(lengths)} to {max(lengths)} characters, mean {sum(lengths) / len(lengths):.0f}
- documents naming a place besides the birthplace: {with_others:.0%}
- every birthplace is mentioned within the first {BIRTH_VISIBLE_WITHIN} characters of its
  document (the longest span CS224N pretraining sees with block size 128)

| country (label) | Faker locale | people | largest city |
|---|---|---|---|
{country_rows}
"""


def _bios_sentence(world: World) -> str:
    per_person = len(world.wiki) / max(len(world.people), 1)
    if per_person == 1:
        return ""
    return (f"; every person has {per_person:g} biographies in different templates that agree on every "
            "fact (one birth date, the same occupations and places)")


def world_files(world: World) -> dict[str, str]:
    """File name -> exact text content of each file of the world."""
    people = world.people
    files = {
        "wiki.txt": _lines(world.wiki),
        "birth_places_train.tsv": _lines(f"{_question(p)}\t{p.birthplace}"
                                         for p in people if p.split == "train"),
        "birth_dev.tsv": _lines(f"{_question(p)}\t{p.birthplace}"
                                for p in people if p.split == "dev"),
        "birth_test_inputs.tsv": _lines(_question(p) for p in people if p.split == "test"),
        "names_train.tsv": _lines(f"{p.country}\t{p.name}"
                                  for p in people if p.names_split == "train"),
        "names_test.tsv": _lines(f"{p.country}\t{p.name}"
                                 for p in people if p.names_split == "test"),
        "people.tsv": _lines(
            ["name\tcountry\tlocale\tbirthplace\tsplit\tnames_split"]
            + [f"{p.name}\t{p.country}\t{p.locale}\t{p.birthplace}\t{p.split}\t{p.names_split}"
               for p in people]),
    }
    files["README.md"] = _readme(world, files)
    return files


def write_world(world: World, folder: str | Path) -> list[Path]:
    """Write the world's files into folder (created if missing); returns the paths."""
    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name, text in world_files(world).items():
        path = out / name
        path.write_text(text, encoding="utf-8", newline="\n")
        written.append(path)
    return written


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m core.data.world",
        description="Generate the demo world (CS224N birthplace-task formats).")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED)
    parser.add_argument("--out", type=Path, default=Path("data/world"))
    parser.add_argument("--people", type=int, default=DEFAULT_PEOPLE)
    parser.add_argument("--dev", type=int, default=DEFAULT_DEV)
    parser.add_argument("--test", type=int, default=DEFAULT_TEST)
    parser.add_argument("--bios", type=int, default=1,
                        help="biographies per person, each from another template with the same facts")
    parser.add_argument("--names-test-fraction", type=float,
                        default=DEFAULT_NAMES_TEST_FRACTION)
    args = parser.parse_args(argv)
    try:
        world = generate_world(args.seed, args.people, args.dev, args.test,
                               args.names_test_fraction, args.bios)
    except ValueError as error:
        parser.error(str(error))
    paths = write_world(world, args.out)
    top_city, top_count = world.birthplace_counts().most_common(1)[0]
    print(f"wrote {len(paths)} files to {args.out}: {len(world.people)} people, "
          f"most common birthplace {top_city} ({top_count / len(world.people):.1%})")


if __name__ == "__main__":
    main()
