import statistics

import pytest

from core.data.datasets import (
    CharCorruptionDataset,
    ClassificationDataset,
    DataError,
    LanguageModelDataset,
    NameDataset,
    parse_tsv_pairs,
)
from core.model.tokenizer import MASK_CHAR, PAD_CHAR, CharTokenizer, WordTokenizer
from tests.conftest import ROOT

WIKI = (ROOT / "data/world/wiki.txt").read_text(encoding="utf-8")


def test_span_corruption_invariants_over_many_samples():
    dataset = CharCorruptionDataset(WIKI, block_size=128)
    tok = dataset.tokenizer
    fractions = []
    for index in range(0, 3000, 3):
        x, y = dataset[index]
        assert len(x) == len(y) == 127
        text = tok.decode(x.tolist() + y[-1:].tolist())  # the whole padded string
        assert len(text) == 128
        assert text.count(MASK_CHAR) == 2
        body = text.rstrip(PAD_CHAR)
        prefix, suffix, masked = body.split(MASK_CHAR)
        document = dataset.documents[index]
        # the document's characters, in order, apart from the moved span
        assert document.startswith(prefix + masked + suffix)
        assert 4 <= len(prefix + masked + suffix) <= int(128 * 7 / 8)
        assert len(masked) >= 1
        fractions.append(len(masked) / len(prefix + masked + suffix))
        assert tok.decode(x.tolist()[1:]) == tok.decode(y.tolist()[:-1])  # y is x shifted by one
    assert 0.2 < statistics.mean(fractions) < 0.3  # a quarter on average


def test_span_corruption_is_reproducible_per_epoch():
    dataset = CharCorruptionDataset(WIKI, block_size=128, seed=3)
    first = dataset[5][0]
    assert (dataset[5][0] == first).all()
    dataset.set_epoch(1)
    assert not all((dataset[i][0] == CharCorruptionDataset(WIKI, 128, seed=3)[i][0]).all() for i in range(20))


def test_corpus_with_mask_character_is_refused_with_its_line():
    with pytest.raises(DataError, match="line 2"):
        CharCorruptionDataset("fine\nnot " + MASK_CHAR + " fine", 32)


def test_name_dataset_targets_are_pad_over_the_question():
    tok = CharTokenizer.from_corpus(WIKI)
    question, answer = "Where was Ada Lovelace born?", "London"
    x, y = NameDataset([(question, answer)], tok, 128)[0]
    assert len(x) == len(y) == 127
    assert tok.decode(x.tolist()).startswith(question + MASK_CHAR + answer + MASK_CHAR + PAD_CHAR)
    assert y[: len(question) - 1].tolist() == [0] * (len(question) - 1)
    assert tok.decode(y[len(question) - 1: len(question) + len(answer) + 1].tolist()) == MASK_CHAR + answer + MASK_CHAR


def test_tsv_parsing_names_the_bad_line():
    assert parse_tsv_pairs("a\tb\n\nc\td\n") == [("a", "b"), ("c", "d")]
    with pytest.raises(DataError, match="Line 2 .* no tab"):
        parse_tsv_pairs("a\tb\nno tab here\n")
    with pytest.raises(DataError, match="no lines"):
        parse_tsv_pairs("\n\n")


def test_language_model_blocks_are_contiguous():
    tok = CharTokenizer.from_corpus("abcdefghij")
    dataset = LanguageModelDataset("abcdefghij" * 3, tok, 8)
    assert len(dataset) == 3
    x, y = dataset[1]
    assert tok.decode(x.tolist()) == "ijabcdef" and tok.decode(y.tolist()) == "jabcdefg"


def test_classification_reads_the_speeches_format():
    pairs = parse_tsv_pairs("0\tWe will rebuild .\n1\tThe economy grows .\n")
    tok = WordTokenizer.from_corpus("we will rebuild . the economy grows .")
    dataset = ClassificationDataset(pairs, tok, 6)
    assert dataset.labels == ["0", "1"]
    x, y = dataset[1]
    assert x.tolist()[:4] == tok.encode("The economy grows .") and x.tolist()[4:] == [0, 0]
    assert y.item() == 1
    with pytest.raises(DataError, match="not in the model's label set"):
        ClassificationDataset([("2", "x")], tok, 6, labels=["0", "1"])
