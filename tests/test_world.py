"""The demo world generator: determinism, the committed files, and the task's invariants."""

from __future__ import annotations

import importlib
import re
import time
from collections import Counter
from pathlib import Path

import pytest

from core.data.world import World, fabricate_names, generate_world, main, world_files, write_world
from core.data.world_documents import BIRTH_VISIBLE_WITHIN, MASK_CHAR, PAD_CHAR, check_text
from core.data.world_tables import COUNTRIES, LOCALES, TEMPLATES, all_cities

COMMITTED = Path(__file__).resolve().parent.parent / "data" / "world"
FILES = {
    "wiki.txt", "birth_places_train.tsv", "birth_dev.tsv", "birth_test_inputs.tsv",
    "names_train.tsv", "names_test.tsv", "people.tsv", "README.md",
}
QUESTION = re.compile(r"^Where was (.+) born\?$")


def tiny(seed: int = 1) -> World:
    return generate_world(seed, n_people=200, n_dev=40, n_test=20)


@pytest.fixture(scope="module")
def default_world() -> World:
    return generate_world()


def read_lines(name: str) -> list[str]:
    text = (COMMITTED / name).read_text(encoding="utf-8")
    assert text.endswith("\n")
    return text[:-1].split("\n")


def tsv_questions(name: str) -> dict[str, str]:
    answers = {}
    for line in read_lines(name):
        question, place = line.split("\t")
        answers[QUESTION.match(question).group(1)] = place
    return answers


def wiki_names() -> set[str]:
    return {doc.split(". ", 1)[0] for doc in read_lines("wiki.txt")}


def first_names(locale: str) -> set[str]:
    provider = importlib.import_module(f"faker.providers.person.{locale}").Provider
    return set(provider.first_names_male) | set(provider.first_names_female)


def starts_with_first_name(name: str, locale: str) -> bool:
    return any(name.startswith(first + " ") for first in first_names(locale))


# --- determinism -------------------------------------------------------------------------


def test_same_seed_writes_byte_identical_files(tmp_path: Path) -> None:
    write_world(tiny(7), tmp_path / "a")
    write_world(tiny(7), tmp_path / "b")
    names_a = {p.name for p in (tmp_path / "a").iterdir()}
    assert names_a == FILES
    for name in FILES:
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes(), name


def test_different_seed_gives_different_world() -> None:
    a, b = tiny(1), tiny(2)
    assert a.wiki != b.wiki
    assert {p.name for p in a.people} != {p.name for p in b.people}
    assert world_files(a)["birth_dev.tsv"] != world_files(b)["birth_dev.tsv"]


def test_committed_files_equal_fresh_regeneration(default_world: World) -> None:
    assert {p.name for p in COMMITTED.iterdir()} == FILES
    for name, text in world_files(default_world).items():
        assert (COMMITTED / name).read_bytes() == text.encode("utf-8"), (
            f"data/world/{name} differs from a regeneration; run "
            "`python -m core.data.world --seed 0 --out data/world`")


def test_tiny_world_is_fast() -> None:
    start = time.perf_counter()
    tiny(3)
    # Measured ~0.25 s; the bound only catches a pathological slowdown on a busy machine.
    assert time.perf_counter() - start < 3.0


# --- the committed files -----------------------------------------------------------------


def test_split_sizes_and_dev_never_in_train() -> None:
    train = tsv_questions("birth_places_train.tsv")
    dev = tsv_questions("birth_dev.tsv")
    test = [QUESTION.match(q).group(1) for q in read_lines("birth_test_inputs.tsv")]
    assert len(dev) == 500 == len(read_lines("birth_dev.tsv"))
    assert len(test) == 300
    assert 1800 <= len(train) <= 2300
    assert not set(dev) & set(train)
    assert not set(test) & (set(train) | set(dev))
    in_wiki = wiki_names()
    assert set(train) <= in_wiki and set(dev) <= in_wiki and set(test) <= in_wiki


def test_wiki_has_one_document_per_unique_person() -> None:
    docs = read_lines("wiki.txt")
    names = [doc.split(". ", 1)[0] for doc in docs]
    assert len(docs) == 3000
    assert len(set(names)) == len(names)


def test_tsv_lines_have_exactly_one_tab() -> None:
    for name in ("birth_places_train.tsv", "birth_dev.tsv", "names_train.tsv", "names_test.tsv"):
        lines = read_lines(name)
        assert lines and all(line.count("\t") == 1 for line in lines), name
    assert all("\t" not in line for line in read_lines("birth_test_inputs.tsv"))
    assert all(QUESTION.match(q) for q in read_lines("birth_test_inputs.tsv"))


def test_no_mask_pad_or_carriage_return_anywhere() -> None:
    for name in FILES:
        text = (COMMITTED / name).read_text(encoding="utf-8")
        assert MASK_CHAR not in text and PAD_CHAR not in text, name
        assert "\r" not in text, name


def test_answers_agree_with_the_documents() -> None:
    docs = {doc.split(". ", 1)[0]: doc for doc in read_lines("wiki.txt")}
    answers = tsv_questions("birth_places_train.tsv") | tsv_questions("birth_dev.tsv")
    for name, place in answers.items():
        body = docs[name].replace(name, "#" * len(name))
        assert re.search(rf"(?<!\w){re.escape(place)}(?!\w)", body), (name, place)


def test_readme_states_the_command_and_stats() -> None:
    readme = (COMMITTED / "README.md").read_text(encoding="utf-8")
    assert "python -m core.data.world --seed 0 --out data/world" in readme
    assert "people: 3000" in readme
    assert re.search(r"most common birthplace: London, \d+ people \([45]\.\d%\)", readme)
    n_chars = len(set((COMMITTED / "wiki.txt").read_text(encoding="utf-8")) - {"\n"})
    assert f"{n_chars} distinct characters" in readme


# --- documents ---------------------------------------------------------------------------


def test_documents_follow_the_cs224n_style(default_world: World) -> None:
    for person in default_world.people:
        doc = person.document
        assert doc.startswith(f"{person.name}. ") and doc.endswith(" .")
        assert 80 <= len(doc) <= 200, doc
        # Outside the name: "Florence" is a first name as well as a city.
        body = doc.replace(person.name, "#" * len(person.name))
        match = re.search(rf"(?<!\w){re.escape(person.birthplace)}(?!\w)", body)
        assert match and match.end() <= BIRTH_VISIBLE_WITHIN, doc
    assert sorted(default_world.wiki) == sorted(p.document for p in default_world.people)
    # The wiki is shuffled, not in generation (= train file) order.
    assert list(default_world.wiki) != [p.document for p in default_world.people]


def test_documents_name_other_places(default_world: World) -> None:
    people = default_world.people
    for person in people:
        assert person.birthplace not in person.other_places
        for place in person.other_places:
            assert place in person.document
    share = sum(bool(p.other_places) for p in people) / len(people)
    assert share > 0.4
    # Some of those places are abroad, so the country is not a giveaway either.
    city_country = {city: c.label for c in COUNTRIES for city in c.city_names}
    abroad = sum(any(city_country[o] != p.country for o in p.other_places) for p in people)
    assert abroad / len(people) > 0.2


def test_many_templates_are_used(default_world: World) -> None:
    assert len(TEMPLATES) >= 12
    # Distinct wordings of the birth statement that occur in the corpus.
    phrasings = ["born in", "a native of", "was born on", "Born in", "whose birthplace was"]
    for phrase in phrasings:
        assert sum(phrase in doc for doc in default_world.wiki) > 50, phrase


# --- birthplaces, names, countries -------------------------------------------------------


@pytest.mark.parametrize("seed,n_people", [(0, 3000), (5, 3000), (2, 1000)])
def test_london_is_the_most_common_birthplace_at_about_5_percent(seed: int, n_people: int) -> None:
    world = generate_world(seed, n_people=n_people, n_dev=100, n_test=50)
    (top, count), (_, runner_up) = world.birthplace_counts().most_common(2)
    assert top == "London"
    assert 0.04 <= count / n_people <= 0.06
    assert runner_up < count


def test_birthplaces_are_cities_of_the_name_locale_country(default_world: World) -> None:
    for person in default_world.people:
        country = LOCALES[person.locale]
        assert person.country == country.label
        assert person.birthplace in country.city_names
    # Names come from the locale of the birth country (first names from Faker's lists).
    for person in default_world.people[:300]:
        assert starts_with_first_name(person.name, person.locale), person


def test_names_are_unique_and_clean(default_world: World) -> None:
    names = [p.name for p in default_world.people]
    assert len(set(names)) == len(names)
    assert not any(ch in name for name in names for ch in ".,\t?")
    # Spanish names carry two surnames.
    spanish = [p.name for p in default_world.people if p.locale == "es_ES"]
    assert all(len(name.split()) >= 3 for name in spanish)


def test_name_classification_files() -> None:
    train = [line.split("\t") for line in read_lines("names_train.tsv")]
    test = [line.split("\t") for line in read_lines("names_test.tsv")]
    labels = {c.label for c in COUNTRIES}
    assert {label for label, _ in train} == labels == {label for label, _ in test}
    train_names = {name for _, name in train}
    test_names = {name for _, name in test}
    assert not train_names & test_names
    assert train_names | test_names == wiki_names()
    assert 0.15 <= len(test) / (len(train) + len(test)) <= 0.25


def test_tiny_world_keeps_every_label_in_both_name_splits() -> None:
    world = tiny(4)
    files = world_files(world)
    for name in ("names_train.tsv", "names_test.tsv"):
        labels = {line.split("\t")[0] for line in files[name].splitlines()}
        assert labels == {c.label for c in COUNTRIES}, name


def test_tables_are_consistent() -> None:
    # Shares add up, so the quotas apportion exactly the requested number of people.
    assert sum(c.weight for c in COUNTRIES) == pytest.approx(1.0)
    for country in COUNTRIES:
        assert sum(w for _, w in country.cities) == pytest.approx(1.0), country.label
    assert sum(w for *_, w in all_cities()) == pytest.approx(1.0)
    # A city names one country, and answers are ASCII (the CS224N NameDataset drops the rest).
    cities = [city for _, city, _ in all_cities()]
    assert len(cities) == len(set(cities))
    assert all(city.isascii() for city in cities)
    assert set(LOCALES) == {c.locale for c in COUNTRIES} and len(LOCALES) == len(COUNTRIES)


@pytest.mark.parametrize("bad", [MASK_CHAR, PAD_CHAR, "\t", "\n", "\r"])
def test_check_text_rejects_reserved_and_separator_characters(bad: str) -> None:
    check_text("Ada Lovelace. Ada was born in London .", "document")
    with pytest.raises(ValueError, match="document contains"):
        check_text(f"Ada{bad}Lovelace", "document")


def test_generate_world_rejects_impossible_splits() -> None:
    with pytest.raises(ValueError):
        generate_world(0, n_people=100, n_dev=80, n_test=30)
    with pytest.raises(ValueError):
        generate_world(0, n_people=0)


# --- fabricated names --------------------------------------------------------------------


def test_fabricate_names_avoids_exclude_and_is_deterministic(default_world: World) -> None:
    world_names = {p.name for p in default_world.people}
    locales = ["fr_FR", "pl_PL"]
    names = fabricate_names(40, locales, seed=3, exclude=world_names)
    assert names == fabricate_names(40, locales, seed=3, exclude=world_names)
    assert names != fabricate_names(40, locales, seed=4, exclude=world_names)
    assert len(names) == 40 and len({n for n, _ in names}) == 40
    assert not {n for n, _ in names} & world_names


def test_fabricate_names_skips_excluded_draws() -> None:
    unrestricted = fabricate_names(10, ["it_IT"], seed=0)
    banned = {unrestricted[0][0], unrestricted[3][0]}
    names = [n for n, _ in fabricate_names(10, ["it_IT"], seed=0, exclude=banned)]
    assert not banned & set(names)
    assert len(names) == 10


def test_fabricate_names_respects_the_chosen_locales() -> None:
    names = fabricate_names(30, ["cs_CZ", "sv_SE", "es_ES"], seed=1)
    assert Counter(locale for _, locale in names) == {"cs_CZ": 10, "sv_SE": 10, "es_ES": 10}
    for name, locale in names:
        assert starts_with_first_name(name, locale), (name, locale)
    only_danish = fabricate_names(5, ["da_DK"], seed=1)
    assert {locale for _, locale in only_danish} == {"da_DK"}


def test_fabricate_names_errors() -> None:
    assert fabricate_names(0, ["en_GB"], seed=0) == []
    with pytest.raises(ValueError):
        fabricate_names(3, ["xx_XX"], seed=0)
    with pytest.raises(ValueError):
        fabricate_names(3, [], seed=0)


# --- command line ------------------------------------------------------------------------


def test_cli_writes_the_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    main(["--seed", "2", "--out", str(tmp_path), "--people", "150", "--dev", "30",
          "--test", "10"])
    assert {p.name for p in tmp_path.iterdir()} == FILES
    assert len((tmp_path / "birth_dev.tsv").read_text(encoding="utf-8").splitlines()) == 30
    assert "150 people" in capsys.readouterr().out
    expected = world_files(generate_world(2, n_people=150, n_dev=30, n_test=10))
    assert (tmp_path / "wiki.txt").read_text(encoding="utf-8") == expected["wiki.txt"]


def test_cli_rejects_bad_sizes(tmp_path: Path) -> None:
    with pytest.raises(SystemExit):
        main(["--out", str(tmp_path), "--people", "10", "--dev", "20"])
