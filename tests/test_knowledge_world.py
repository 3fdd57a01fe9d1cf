"""Issue 27: the knowledge world, the subword birthplace path, memorisation in tokens, the country prior."""

from __future__ import annotations

import random
import re
from collections import Counter
from pathlib import Path

import pytest
import torch

from core.data.datasets import (
    CharCorruptionDataset,
    DocumentStreamDataset,
    NameDataset,
    TokenCorruptionDataset,
    read_tsv_pairs,
)
from core.data.loader import epoch_batches, trim_to_longest
from core.data.world import KNOWLEDGE, KNOWLEDGE_COMMAND, generate_world, world_files
from core.data.world_tables import COUNTRIES
from core.lens.probe.evaluation import (
    _split_for_completion,
    country_prior_accuracy,
    country_prior_answers,
    memorization_rate,
    memorized,
)
from core.model.tokenizer import (
    MASK_CHAR,
    PAD_CHAR,
    CharTokenizer,
    SubwordTokenizer,
    TokenizerError,
    tokenizer_from_dict,
)
from tests.conftest import ROOT, tiny_model

KNOWLEDGE_DIR = ROOT / "data" / "knowledge"


@pytest.fixture(scope="module")
def small_knowledge_world():
    return generate_world(0, n_people=60, n_dev=12, n_test=6, bios=4)


@pytest.fixture(scope="module")
def bpe() -> SubwordTokenizer:
    return SubwordTokenizer.from_corpus((KNOWLEDGE_DIR / "wiki.txt").read_text(encoding="utf-8"), 600)


# --- the world -------------------------------------------------------------------------------------


def test_committed_knowledge_world_equals_fresh_regeneration(tmp_path: Path) -> None:
    world = generate_world(0, KNOWLEDGE["people"], KNOWLEDGE["dev"], KNOWLEDGE["test"], bios=KNOWLEDGE["bios"])
    for name, text in world_files(world).items():
        assert (KNOWLEDGE_DIR / name).read_text(encoding="utf-8") == text, name
    assert KNOWLEDGE_COMMAND in (KNOWLEDGE_DIR / "README.md").read_text(encoding="utf-8")


def test_several_biographies_agree_on_every_fact(small_knowledge_world) -> None:
    world = small_knowledge_world
    assert len(world.wiki) == 4 * len(world.people)
    assert Counter(world.wiki) == Counter(d for p in world.people for d in p.documents)
    stated = 0
    for person in world.people:
        assert len(set(person.documents)) == 4 and person.document == person.documents[0]
        years: set[int] = set()
        for document in person.documents:
            assert document.startswith(f"{person.name}. ")
            assert re.search(rf"(?<!\w){re.escape(person.birthplace)}(?!\w)", document)
            years |= {int(y) for y in re.findall(r"\b(1[89]\d\d|20[0-2]\d)\b", document)}
        # one birth year, one death year, one year of moving: facts drawn per document would give up to 12
        assert len(years) <= 3 and all(person.birth_year <= y <= (person.death_year or 2024) for y in years)
        stated += person.birth_year in years
    assert stated > len(world.people) / 2


def test_one_biography_world_is_unchanged_and_bios_only_adds_documents() -> None:
    one = generate_world(0, n_people=60, n_dev=12, n_test=6)
    four = generate_world(0, n_people=60, n_dev=12, n_test=6, bios=4)
    assert [(p.name, p.birthplace, p.split, p.birth_year) for p in one.people] == \
           [(p.name, p.birthplace, p.split, p.birth_year) for p in four.people]
    assert [p.document for p in one.people] == [p.document for p in four.people]
    with pytest.raises(ValueError, match="bios"):
        generate_world(0, n_people=10, n_dev=2, n_test=2, bios=0)


# --- the subword tokenizer ------------------------------------------------------------------------


def test_subword_round_trip_is_exact_with_pad_and_mask_as_ids_0_and_1(bpe) -> None:
    assert bpe.pad_id == 0 and bpe.mask_id == 1
    text = f"Where was Zoë Ødegaard-Łukasz 李 born?{MASK_CHAR}Saint-Denis{MASK_CHAR}{PAD_CHAR}{PAD_CHAR}"
    ids = bpe.encode(text)
    assert bpe.decode(ids) == text
    assert ids[-2:] == [0, 0] and ids.count(1) == 2
    assert bpe.encode("Where was X born?" + MASK_CHAR) == bpe.encode("Where was X born?") + [1]
    again = tokenizer_from_dict(bpe.to_dict())
    assert again.encode(text) == ids and again.seen == bpe.seen


def test_subword_pieces_show_the_text_they_cover_and_unseen_pieces_are_named(bpe) -> None:
    got = bpe.tokenize("Ada Lovelace born?")
    assert "".join(got.tokens) == "Ada Lovelace born?"
    assert got.untrained == ["?"] and got.unknown == []  # no document of wiki.txt has a question mark
    assert bpe.tokenize("李").untrained  # bytes the corpus never had: in the vocabulary, never trained


def test_a_broken_subword_description_is_one_sentence() -> None:
    with pytest.raises(TokenizerError, match="cannot be read"):
        tokenizer_from_dict({"kind": "bpe", "spec": "{not json"})


# --- data ----------------------------------------------------------------------------------------------


def test_token_corruption_on_characters_is_the_assignments_span_corruption() -> None:
    corpus = "Ada Lovelace. Ada Lovelace was born in London in 1815 .\nAlan Turing. Alan was born in Maida Vale .\n"
    chars = CharCorruptionDataset(corpus, 32, seed=3)
    tokens = TokenCorruptionDataset(corpus, 32, chars.tokenizer, seed=3)
    for epoch in range(3):
        chars.set_epoch(epoch)
        tokens.set_epoch(epoch)
        for i in range(len(chars)):
            assert all(torch.equal(a, b) for a, b in zip(chars[i], tokens[i], strict=True))


def test_name_dataset_from_token_ids_equals_the_assignments_strings() -> None:
    tok = CharTokenizer.from_corpus("Where was Ada born? London Paris")
    pairs = [("Where was Ada born?", "London"), ("Where was Ada born?", "Paris")]
    block = 40
    for (question, answer), (x, y) in zip(pairs, NameDataset(pairs, tok, block), strict=True):
        s = question + MASK_CHAR + answer + MASK_CHAR  # the assignment's NameDataset, as strings
        s += PAD_CHAR * (block - len(s))
        assert x.tolist() == tok.encode(s[:-1])
        assert y.tolist() == tok.encode(PAD_CHAR * (len(question) - 1) + s[len(question):])


def test_trimming_a_batch_to_its_longest_row_leaves_the_loss_unchanged(bpe) -> None:
    pairs = read_tsv_pairs(KNOWLEDGE_DIR / "birth_dev.tsv")[:24]
    data = NameDataset(pairs, bpe, 64, trim_to_longest=True)
    model = tiny_model(bpe.vocab_size, block_size=64)
    x, y = torch.stack([data[i][0] for i in range(24)]), torch.stack([data[i][1] for i in range(24)])
    tx, ty = trim_to_longest(x, y)
    assert tx.shape[1] < x.shape[1] and (y[:, tx.shape[1]:] == 0).all()
    assert model(tx, ty)[1].item() == pytest.approx(model(x, y)[1].item(), abs=1e-6)
    batches = list(epoch_batches(data, 8, 0, 0))
    assert all(b[0].shape[1] <= 63 for b in batches) and sum(b[0].shape[0] for b in batches) == 24


def test_document_stream_packs_every_token_once_in_a_new_order_each_epoch(bpe) -> None:
    corpus = "\n".join((KNOWLEDGE_DIR / "wiki.txt").read_text(encoding="utf-8").split("\n")[:40])
    data = DocumentStreamDataset(corpus, 32, bpe, seed=0)
    whole = [i for d in data.documents for i in d]
    streams = []
    for epoch in (0, 1):
        data.set_epoch(epoch)
        ids = torch.cat([data[i][0] for i in range(len(data))]).tolist()
        assert Counter(ids) <= Counter(whole) and len(whole) - len(ids) <= 31  # only the last partial block
        assert bpe.pad_id not in ids and len(ids) == len(data) * 31  # x has block_size - 1 tokens
        x, y = data[0]
        assert torch.equal(x[1:], y[:-1])
        streams.append(ids)
    assert streams[0] != streams[1]


# --- memorisation and the country prior -------------------------------------------------------------


def test_completion_is_cut_where_the_tokenizer_cuts(bpe) -> None:
    chars = CharTokenizer.from_corpus("Ada was born in London .")
    head, target = _split_for_completion(chars, "Ada was born in ", "London")
    assert chars.decode(head) == "Ada was born in " and chars.decode(target) == "London"
    head, target = _split_for_completion(bpe, "Ada was born in ", "London")  # a space is a piece of its own
    assert bpe.decode(head) == "Ada was born in " and bpe.decode(target) == "London"
    assert bpe.encode("Ada was born in London") == head + target

    class SpaceGlued:  # GPT-2's way: a word's piece carries the space before it ('ĠLondon')
        def __init__(self):
            self.vocab: dict[str, int] = {}

        def encode(self, text):
            return [self.vocab.setdefault(w, len(self.vocab)) for w in re.findall(r" ?\S+| ", text)]

        def decode(self, ids):
            words = {i: w for w, i in self.vocab.items()}
            return "".join(words[i] for i in ids)

    glued = SpaceGlued()
    head, target = _split_for_completion(glued, "Ada was born in ", "London")
    assert glued.decode(head) == "Ada was born in" and glued.decode(target) == " London"


def test_memorized_counts_a_model_that_completes_the_document_token_for_token(bpe) -> None:
    corpus = "Ada Lovelace. Ada Lovelace was born in London .\n"
    pairs = [("Where was Ada Lovelace born?", "London"), ("Where was Nobody born?", "Paris")]
    head, target = _split_for_completion(bpe, "Ada Lovelace. Ada Lovelace was born in ", "London")

    class Parrot(torch.nn.Module):  # greedy generation reproduces `target` after `head`, nothing else
        config = tiny_model(bpe.vocab_size).config
        max_length = None

        def __init__(self, answer):
            super().__init__()
            self.answer, self.w = answer, torch.nn.Parameter(torch.zeros(1))

        def generate(self, idx, n):
            return torch.cat([idx, torch.tensor([self.answer[:n]])], dim=1)

    assert memorized(Parrot(target), bpe, corpus, pairs) == [True, None]
    assert memorization_rate(Parrot(target), bpe, corpus, pairs) == (1, 1)
    assert memorized(Parrot([t + 1 for t in target]), bpe, corpus, pairs) == [False, None]


def test_country_prior_is_each_countrys_most_frequent_train_birthplace() -> None:
    uk, fr = COUNTRIES[0], next(c for c in COUNTRIES if c.label == "France")
    a, b = uk.city_names[:2]
    paris, lyon = fr.city_names[:2]
    train = [a, b, b, paris, lyon, lyon, lyon]
    truths = [a, b, paris, lyon, "Atlantis"]
    assert country_prior_answers(train, truths) == [b, b, lyon, lyon, ""]
    assert country_prior_accuracy(train, truths) == pytest.approx(2 / 5)
    random.Random(0).shuffle(train)
    assert country_prior_answers(train, truths)[:2] == [b, b]  # order does not matter, counts do


def test_the_probe_names_pieces_a_subword_model_never_read(bpe) -> None:
    from core.lens.probe.questions import unknown_summary

    finetuned = bpe.reading(["Where was Ada born?"])  # finetuning reads the questions' pieces too
    assert "?" in bpe.tokenize("born?").untrained and not finetuned.tokenize("born?").untrained
    unseen = [piece for piece in finetuned.tokenize("Where was 李 Qxzyk born?").untrained]
    assert unseen
    message = unknown_summary(["Where was 李 Qxzyk born?"], {"m": finetuned})
    assert message.startswith("m has never read") and "learned nothing" in message and "PAD" not in message
    assert unknown_summary(["Where was Ada born?"], {"m": finetuned}) is None
