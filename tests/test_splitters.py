"""Word splitters (issue 30): the regex default unchanged, NLTK's words for the CSE 256 PA2 vocabulary,
sentences found without Punkt's data, and the splitter saved with the tokenizer."""

from __future__ import annotations

import pytest
from nltk.tokenize.destructive import NLTKWordTokenizer

from core.model.splitters import SPLITTERS, sentences, split_nltk, split_regex
from core.model.tokenizer import TokenizerError, VocabularyChoice, WordTokenizer, tokenizer_from_dict

NLTK = NLTKWordTokenizer()


def test_regex_is_the_default_and_splits_as_before():
    assert split_regex("Don't stop, U.S. troops.") == ["Don", "'", "t", "stop", ",", "U", ".", "S", ".", "troops", "."]
    tokenizer = WordTokenizer.from_corpus("Don't stop.", lowercase=False)
    assert tokenizer.splitter == "regex" and VocabularyChoice("word").splitter == "regex"
    assert tokenizer.split("Don't") == ["Don", "'", "t"]


def test_nltk_splits_contractions_and_quotes_as_word_tokenize():
    assert split_nltk("Don't stop.") == ["Do", "n't", "stop", "."]
    assert split_nltk('He said "yes," twice.') == ["He", "said", "``", "yes", ",", "''", "twice", "."]


def test_a_sentence_is_a_line_or_ends_with_a_period_before_a_capital():
    # NLTKWordTokenizer alone keeps "met." whole: it splits off only the period that ends its input
    assert "met." in NLTK.tokenize("We met. Then we left.")
    assert split_nltk("We met. Then we left.") == ["We", "met", ".", "Then", "we", "left", "."]
    assert split_nltk("We met.\nthen we left.") == ["We", "met", ".", "then", "we", "left", "."]
    assert sentences('He said "we came." Then (Applause.)') == ['He said "we came."', " Then (Applause.)"]
    assert len(sentences("We grew 3 percent. The rest followed.")) == 2  # numbers end sentences too


@pytest.mark.parametrize("line", ["Dr. King spoke.", "George W. Bush spoke.", "U.S. troops left.",
                                  "J.P. Morgan and Mr. Smith left.", "Brown v. Board of Education ruled."])
def test_initials_titles_and_dotted_abbreviations_do_not_end_a_sentence(line):
    assert sentences(line) == [line]
    assert split_nltk(line) == NLTK.tokenize(line)


def test_the_splitter_is_saved_with_the_tokenizer_and_old_files_read_as_regex():
    tokenizer = VocabularyChoice("word", splitter="nltk").build("Don't stop.\n")
    assert tokenizer.splitter == "nltk" and "n't" in tokenizer.words
    again = tokenizer_from_dict(tokenizer.to_dict())
    assert again.splitter == "nltk" and again.encode("Don't stop.") == tokenizer.encode("Don't stop.")
    legacy = {"kind": "word", "words": ["<pad>", "<unk>", "Don"], "lowercase": False}
    assert tokenizer_from_dict(legacy).splitter == "regex"
    with pytest.raises(TokenizerError, match="Unknown word splitter 'spacy'"):
        tokenizer_from_dict({**legacy, "splitter": "spacy"})


def test_a_splitter_is_for_word_vocabularies_only():
    with pytest.raises(TokenizerError, match="--splitter applies to word vocabularies"):
        VocabularyChoice("char", splitter="nltk")
    with pytest.raises(TokenizerError, match="Unknown splitter"):
        VocabularyChoice("word", splitter="spacy")
    assert VocabularyChoice("word", splitter="nltk").to_dict()["splitter"] == "nltk"
    assert "splitter" not in VocabularyChoice("char").to_dict()
    assert set(SPLITTERS) == {"regex", "nltk"}


def test_without_nltk_the_splitter_says_how_to_install_it(monkeypatch):
    from core.model import splitters

    def missing():
        raise ImportError("No module named 'nltk'")

    splitters._nltk_words.cache_clear()
    monkeypatch.setattr(splitters, "_nltk_words", missing)
    with pytest.raises(TokenizerError, match="needs NLTK: .*pip install -r requirements.txt"):
        WordTokenizer(["<pad>", "<unk>"], splitter="nltk")
