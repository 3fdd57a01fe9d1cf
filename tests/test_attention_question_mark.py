"""On the attention page a birthplace question typed with '?' is answered: the MASK is appended."""

from core.lens.attention import birthplace_prompt, run_attention
from core.model.tokenizer import MASK_CHAR, CharTokenizer
from tests.conftest import tiny_model


def test_question_marks_become_the_mask_prompt():
    assert birthplace_prompt("Where was Ada born?") == "Where was Ada born?" + MASK_CHAR
    assert birthplace_prompt("Where was Ada born？ ") == "Where was Ada born?" + MASK_CHAR
    assert birthplace_prompt("Where was Ada born?" + MASK_CHAR) == "Where was Ada born?" + MASK_CHAR
    assert birthplace_prompt("Ada Lovelace") == "Ada Lovelace"


def test_a_typed_question_gets_an_answer_not_a_note():
    tokenizer = CharTokenizer.from_corpus("Where was Ada born? London")
    model = tiny_model(tokenizer.vocab_size, block_size=64)
    run = run_attention(model, tokenizer, "birthplace", "Where was Ada born?")
    assert run.ids[-1] == tokenizer.mask_id
    assert run.output.note is None or "end it with" not in run.output.note
    assert run.output.completion is not None


def test_the_appended_mask_is_labelled_not_shown_as_two_question_marks():
    tokenizer = CharTokenizer.from_corpus("Where was Ada born? London")
    run = run_attention(tiny_model(tokenizer.vocab_size, block_size=64), tokenizer, "birthplace",
                        "Where was Ada born?")
    assert run.tokens[-2:] == ["?", "MASK"]


def test_the_completion_line_labels_every_mask():
    tokenizer = CharTokenizer.from_corpus("Where was Ada born? London")
    run = run_attention(tiny_model(tokenizer.vocab_size, block_size=64), tokenizer, "birthplace",
                        "Where was Ada born?")
    shown = run.output.shown_completion
    assert MASK_CHAR in run.output.completion and MASK_CHAR not in shown
    assert shown.startswith("Where was Ada born?[MASK]")
    assert shown.count("[MASK]") == run.output.completion.count(MASK_CHAR)
