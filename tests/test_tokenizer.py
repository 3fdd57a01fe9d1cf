import pytest

from core.model.tokenizer import (
    MASK_CHAR,
    PAD_CHAR,
    CharTokenizer,
    TokenizerError,
    WordTokenizer,
    tokenizer_from_dict,
)


def test_char_vocabulary_is_cs224n_exact():
    tok = CharTokenizer.from_corpus("banana split")
    assert tok.chars == [PAD_CHAR, MASK_CHAR, " ", "a", "b", "i", "l", "n", "p", "s", "t"]
    assert tok.stoi[PAD_CHAR] == 0 and tok.stoi[MASK_CHAR] == 1
    assert tok.decode(tok.encode("a nap")) == "a nap"


def test_unknown_characters_fall_back_to_pad_and_are_reported():
    tok = CharTokenizer.from_corpus("abc")
    result = tok.tokenize("abzzc😀")
    assert result.ids == [2, 3, 0, 0, 4, 0]
    assert result.unknown == ["z", "😀"]
    assert result.tokens == list("abzzc😀")


def test_corpus_with_reserved_characters_is_refused():
    with pytest.raises(TokenizerError, match="U\\+2047"):
        CharTokenizer.from_corpus("a" + MASK_CHAR)


def test_word_tokenizer_splits_punctuation_and_counts():
    tok = WordTokenizer.from_corpus("The cat sat. The cat ran!", min_freq=2)
    assert tok.words == ["<pad>", "<unk>", "cat", "the"]
    result = tok.tokenize("The dog, the cat.")
    assert result.tokens == ["the", "dog", ",", "the", "cat", "."]
    assert result.ids == [3, 1, 1, 3, 2, 1]
    assert result.unknown == ["dog", ",", "."]


@pytest.mark.parametrize("tok", [CharTokenizer.from_corpus("hello wörld"),
                                 WordTokenizer.from_corpus("Hello World", lowercase=False)])
def test_json_round_trip(tok):
    import json

    again = tokenizer_from_dict(json.loads(json.dumps(tok.to_dict())))
    assert again.to_dict() == tok.to_dict()
    assert again.encode("Hello wörld") == tok.encode("Hello wörld")


def test_unknown_tokenizer_kind_is_refused():
    with pytest.raises(TokenizerError):
        tokenizer_from_dict({"kind": "bpe"})
