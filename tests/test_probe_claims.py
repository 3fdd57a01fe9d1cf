"""Every sentence the probe's verdict can write, checked against an independent search of wiki.txt.

The sentence (core.lens.probe.corpus.verdict_sentence) makes claims a student can grep: "no document mentions
Jan Novák", "Jan Klemt's and Jan Lindqvist's documents name X and Y, not Faro", "Leeds comes from the document
about Karl Dunn". Here each claim is parsed back out of the sentence and checked with plain string and regex
searches over the bundled corpus lines, written in this file (nothing of core.lens.probe's search is reused),
for every dev person and for names invented here from the world's name lists.
"""

from __future__ import annotations

import re
from functools import cache

import pytest

from core.data.world import fabricate_names
from core.data.world_tables import COUNTRIES, LOCALES
from core.lens.probe import corpus

KNOWLEDGE = corpus.PROJECT_DATA / "knowledge"


@cache
def lines() -> tuple[str, ...]:
    return tuple(line.strip() for line in (KNOWLEDGE / "wiki.txt").read_text("utf-8").splitlines() if line.strip())


@cache
def heads() -> dict[str, list[str]]:
    """The person each line is about (the text before its first '. ') -> the lines."""
    found: dict[str, list[str]] = {}
    for line in lines():
        head, dot, _ = line.partition(". ")
        if dot and head:
            found.setdefault(" ".join(head.split()), []).append(line)
    return found


def tsv(name: str) -> list[tuple[str, str]]:
    rows = [line.split("\t") for line in (KNOWLEDGE / name).read_text("utf-8").splitlines() if line.strip()]
    return [(q, a) for q, a in rows]


def person(question: str) -> str:
    return question.removeprefix("Where was ").removesuffix(" born?")


@cache
def known_places() -> tuple[str, ...]:
    """What the probe calls a known place: the training and dev labels and the world's cities."""
    places = [a for _, a in tsv("birth_places_train.tsv") + tsv("birth_dev.tsv")]
    places += [city for country in COUNTRIES for city in country.city_names]
    return tuple(dict.fromkeys(places))


def has_word(text: str, word: str) -> bool:
    return re.search(r"(?<!\w)" + re.escape(word) + r"(?!\w)", text) is not None


def names(docs: list[str], word: str, own_name: str) -> bool:
    """Some document names `word` once the person's own name is taken out ("Florence" the first name)."""
    return any(has_word(doc.replace(own_name, " "), word) for doc in docs)


def own_documents(name: str) -> list[str]:
    """The lines about a name (it leads them); else, for a name of 3+ characters, lines mentioning it."""
    if name in heads():
        return heads()[name]
    return [line for line in lines() if has_word(line, name)] if len(name) >= 3 else []


def expected_namesakes(name: str) -> list[str]:
    """People with documents who share a capitalised name word of 2+ characters ('van', 'de' are not names)."""
    mine = {w for w in name.split() if len(w) >= 2 and w[0].isupper()}
    return [head for head in heads() if head != name and mine & {w for w in head.split()
                                                                   if len(w) >= 2 and w[0].isupper()}]


def places_in(docs: list[str], own_name: str) -> set[str]:
    """Known places a person's documents name: each occurrence read as the longest place it can be ('New York'
    is not also 'York'), found by blanking the longest places first."""
    found = set()
    for doc in docs:
        text = doc.replace(own_name, " ")
        for place in sorted(known_places(), key=len, reverse=True):
            pattern = r"(?<!\w)" + re.escape(place) + r"(?!\w)"
            if re.search(pattern, text):
                found.add(place)
                text = re.sub(pattern, lambda m: " " * len(m.group(0)), text)
    return found


def split_list(text: str) -> tuple[list[str], int]:
    """'A, B and C' -> ([A, B, C], 0); 'A, B, C and 5 more ...' -> ([A, B, C], 5)."""
    more = re.fullmatch(r"(.+) and (\d+) more(?: \w+'?s?)?", text)
    if more:
        return more.group(1).split(", "), int(more.group(2))
    items = text.rsplit(" and ", 1)
    return items[0].split(", ") + items[1:], 0


def check_sentence(name: str, answer: str) -> str:
    """Ask the probe's verdict for (name, answer), then check every claim of its sentence by hand."""
    found = corpus.verdict(index(), name, answer)
    sentence = corpus.verdict_sentence("M", name, answer, found, bool(index().documents_about(name)))
    mine = own_documents(name)
    sakes = expected_namesakes(name)
    naming = [s for s in sakes if names(heads()[s], answer, s)]
    if not answer:
        assert sentence == "M writes no answer (nothing between the two ⁇).", sentence
        return sentence
    if names(mine, answer, name):
        assert sentence == f"M answers {answer}, and a document about {name} names {answer}.", sentence
        assert found.label == "retrieved"
        return sentence
    assert sentence.startswith(f"M answers {answer}, but ")
    rest = sentence.removeprefix(f"M answers {answer}, but ")
    if mine:
        own = f"no document about {name} names {answer}"
    else:
        own = f"no document mentions {name}"
        assert not any(name in line for line in lines()) or len(name) < 3, name
    assert rest.startswith(own), (sentence, own)
    rest = rest.removeprefix(own)
    if naming:
        assert found.label == "borrowed", sentence
        match = re.fullmatch(r": (.+) comes from the documents? about (.+), who shares? a part of the name\.", rest)
        assert match and match.group(1) == answer, sentence
        listed, more = split_list(match.group(2))
        assert set(listed) <= set(naming) and len(listed) + more == len(naming), (sentence, naming)
        return sentence
    assert found.label == "made up", sentence
    if not sakes:
        assert rest == ", and no document is about anyone sharing a part of the name.", sentence
        return sentence
    match = re.fullmatch(r"; (.+) documents name (.+)\.", rest)
    assert match, sentence
    whose, listed_places = match.groups()
    people, more = split_list(whose)
    people = [p.removesuffix("'s").removesuffix("'") for p in people]
    assert set(people) <= set(sakes) and len(people) + more == len(sakes), (sentence, sakes)
    everywhere = set().union(*(places_in(heads()[s], s) for s in sakes)) - {answer}
    if listed_places.startswith("no known place, nor "):
        assert listed_places == f"no known place, nor {answer}" and not everywhere, (sentence, everywhere)
        return sentence
    places_text, _, not_answer = listed_places.rpartition(", not ")
    assert not_answer == answer, sentence
    places, more_places = split_list(places_text)
    assert set(places) <= everywhere and len(places) + more_places == len(everywhere), (sentence, everywhere)
    return sentence


@cache
def index() -> corpus.CorpusIndex:
    return corpus.CorpusIndex.build("\n".join(lines()), known_places())


def answers_for(name: str, truth: str | None = None) -> list[str]:
    """Answers that reach every branch: the truth, places namesakes' documents name, places nobody names,
    a string that is no place, and the empty answer."""
    picks = [truth] if truth else []
    for sake in expected_namesakes(name)[:3]:
        picks += sorted(places_in(heads()[sake], sake))[:1]
    picks += ["Faro", "Paris", "idtolome", ""]
    return list(dict.fromkeys(picks))


def invented_names() -> list[str]:
    """Names nobody wrote about: crossings of the corpus's first names and surnames (namesakes exist), names
    drawn with the world's generator (its Faker lists per locale), the issue's, and a 200-character one."""
    people = list(heads())
    crossed = [f"{people[i].split()[0]} {people[(i * 7 + 3) % len(people)].split()[-1]}" for i in range(0, 400, 10)]
    drawn = [n for n, _ in fabricate_names(30, list(LOCALES), seed=41, exclude=set(people))]
    odd = ["Jan Novák", "Tomasz Delahaye", "Zqwx Vblorpt", "Eva van Qlyx", "Noa de Zqx", ("Jan Novák " * 20)[:200]]
    return [n for n in dict.fromkeys(crossed + drawn + odd) if n not in heads()]


def test_every_dev_persons_sentences_survive_a_search_of_the_corpus():
    dev = [(person(q), a) for q, a in tsv("birth_dev.tsv")]
    assert len(dev) == 200
    kinds = set()
    for name, truth in dev:
        for answer in answers_for(name, truth):
            kinds.add(corpus.verdict(index(), name, answer).label)
            check_sentence(name, answer)
    assert kinds == {"retrieved", "borrowed", "made up"}


def test_invented_names_sentences_survive_a_search_of_the_corpus():
    invented = invented_names()
    assert len(invented) > 60
    for name in invented:
        assert not any(line.startswith(name + ". ") for line in lines())
        for answer in answers_for(name):
            check_sentence(name, answer)


def test_the_issues_jan_novak_names_his_namesakes_and_what_they_name():
    sentence = check_sentence("Jan Novák", "Faro")
    assert "Jan Klemt's" in sentence and "Jan Lindqvist's" in sentence and sentence.endswith(", not Faro.")
    assert "nor one about anyone" not in sentence


@pytest.mark.parametrize("name", ["Eva van Qlyx", "Noa de Zqx"])
def test_a_lowercase_particle_makes_no_namesake(name):
    particle = name.split()[1]
    assert any(particle in head.split() for head in heads())  # the corpus has people with it
    sakes = corpus.namesakes(index(), name)
    assert all(particle not in s.shared for s in sakes)
    assert {s.name for s in sakes} == set(expected_namesakes(name))


def test_a_200_character_name_gets_a_sentence_the_corpus_confirms():
    long_name = ("Jan Novák " * 20)[:200].strip()
    for answer in ("idtolome", "Faro", "Stockholm"):
        sentence = check_sentence(long_name, answer)
        assert "Jan Klemt" in sentence or "Jan Lindqvist" in sentence, sentence


def test_namesakes_from_the_part_index_are_everyone_sharing_a_part_in_corpus_order():
    """The namesake search reads an index built once per corpus (name part -> names), not every name per search:
    the same people, in the corpus's order, as a scan of every line's person (issue 52, item 5)."""
    built = index()
    for name in ["Jan Novák", "Eva van Qlyx", *list(heads())[:40:7]]:
        assert [s.name for s in corpus.namesakes(built, name)] == expected_namesakes(name)
        assert [s.name for s in corpus.namesakes(built, name)] == expected_namesakes(name)  # kept places: same


def test_the_truth_lookup_is_the_dev_file_first_then_the_train_file():
    data = corpus.load_probe_data(KNOWLEDGE)
    for question, _ in tsv("birth_dev.tsv")[:20] + tsv("birth_places_train.tsv")[:20]:
        name = person(question)
        dev = [a for q, a in tsv("birth_dev.tsv") if person(q) == name]
        expected = (dev[0], corpus.DEV_FILE) if dev else \
            ([a for q, a in tsv("birth_places_train.tsv") if person(q) == name][0], corpus.TRAIN_FILE)
        assert data.truth(name) == data.truth(f"  {name} ") == expected
    assert data.truth("Nobody Qlyxwz") is None
