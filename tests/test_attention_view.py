"""core.lens.attention and the attention page's URL state: numbers checked against hand computation and the model."""

from __future__ import annotations

import csv
import io

import numpy as np
import pytest
import torch

from core.lens import attention as av
from core.lens.probe.evaluation import answer_from_completion
from core.model.tokenizer import MASK_CHAR, CharTokenizer, SubwordTokenizer, WordTokenizer
from core.text import visible_token
from tests.conftest import TINY_CORPUS, tiny_model
from ui.page_state import MAX_URL_TEXT, AttentionState, from_url, to_url

CHARS = CharTokenizer.from_corpus(TINY_CORPUS + "Where was born?")
WORDS = WordTokenizer.from_corpus(TINY_CORPUS)


def make_run(attention, ids=None, causal=True, special=None, block_size=8, max_length=8, n_input=None):
    attention = np.asarray(attention, dtype=np.float32)
    T = attention.shape[-1]
    ids = list(range(2, 2 + T)) if ids is None else ids
    return av.AttentionRun(
        ids=ids, tokens=[f"t{i}" for i in range(T)], unknown=[], fallback_token="",
        attention=attention, allowed=np.tril(np.ones((T, T), bool)) if causal else
        np.broadcast_to(np.asarray(ids) != 0, (T, T)).copy(),
        special=np.zeros(T, bool) if special is None else np.asarray(special),
        causal=causal, block_size=block_size, max_length=max_length,
        n_input_tokens=T if n_input is None else n_input, notes=[], output=av.ModelOutput(title=""))


# --- combining -------------------------------------------------------------------------------------


def test_rollout_matches_a_hand_computed_two_layer_example():
    # layer 0: two heads whose mean is [[1, 0], [.5, .5]]; layer 1: one pattern twice.
    layer0 = [[[1, 0], [1, 0]], [[1, 0], [0, 1]]]
    layer1 = [[[1, 0], [0.2, 0.8]], [[1, 0], [0.2, 0.8]]]
    # A1 = .5*W1 + .5*I = [[1, 0], [.25, .75]];  A2 = [[1, 0], [.1, .9]]
    # rollout = A2 @ A1 = [[1, 0], [.1 + .9 * .25, .9 * .75]] = [[1, 0], [.325, .675]]
    rollout = av.attention_rollout(np.array([layer0, layer1], dtype=np.float32))
    np.testing.assert_allclose(rollout, [[1, 0], [0.325, 0.675]], atol=1e-7)


def test_rollout_renormalises_rows_that_do_not_sum_to_one():
    # A row of zeros (a fully masked query) becomes .5 * I before renormalisation, i.e. the identity.
    attention = np.array([[[[0, 0], [0.5, 0.5]]]], dtype=np.float32)
    np.testing.assert_allclose(av.attention_rollout(attention), [[1, 0], [0.25, 0.75]], atol=1e-7)


def test_rollout_of_real_attention_keeps_rows_stochastic_and_causal():
    model = tiny_model(CHARS.vocab_size)
    run = av.run_attention(model, CHARS, "lm", "Ada Lovelace was born in London.")
    rollout = av.attention_rollout(run.attention)
    np.testing.assert_allclose(rollout.sum(-1), 1.0, atol=1e-6)
    assert np.all(rollout[np.triu_indices(run.n_tokens, 1)] == 0)


def test_mean_and_max_over_heads():
    heads = np.array([[[[1, 0], [0.2, 0.8]], [[1, 0], [0.6, 0.4]]]], dtype=np.float32)
    run = make_run(heads)
    mean, allowed = av.combined_attention(run, "mean", 0)
    np.testing.assert_allclose(mean, [[1, 0], [0.4, 0.6]], atol=1e-7)
    maximum, _ = av.combined_attention(run, "max", 0)
    np.testing.assert_allclose(maximum, [[1, 0], [0.6, 0.8]], atol=1e-7)
    assert allowed.tolist() == [[True, False], [True, True]]


def test_hiding_the_first_token_drops_it_and_renormalises_rows():
    weights = np.array([[1, 0, 0], [0.5, 0.5, 0], [0.5, 0.25, 0.25]])
    allowed = np.tril(np.ones((3, 3), bool))
    sub, sub_allowed, positions = av.hide_positions(weights, allowed, np.array([False, True, True]))
    assert positions.tolist() == [1, 2]
    np.testing.assert_allclose(sub, [[1, 0], [0.5, 0.5]])
    assert sub_allowed.tolist() == [[True, False], [True, True]]


def test_a_row_with_all_its_weight_hidden_becomes_masked_not_nan_or_zero_weight():
    weights = np.array([[1.0, 0.0], [1.0, 0.0]])
    allowed = np.ones((2, 2), bool)
    sub, sub_allowed, _ = av.hide_positions(weights, allowed, np.array([False, True]))
    assert sub_allowed.tolist() == [[False]] and np.isfinite(sub).all()


def test_keep_mask_hides_first_and_special_tokens():
    run = make_run(np.full((1, 1, 4, 4), 0.25), causal=False, special=[False, True, False, True])
    assert av.keep_mask(run, True, False).tolist() == [False, True, True, True]
    assert av.keep_mask(run, True, True).tolist() == [False, False, True, False]


def test_special_ids_are_pad_and_mask_for_characters_and_pad_for_words():
    assert av.special_ids(CHARS) == {0, 1}
    assert av.special_ids(WORDS) == {0}


# --- the forward pass --------------------------------------------------------------------------


def test_run_attention_returns_exactly_the_models_attention():
    model = tiny_model(CHARS.vocab_size)
    text = "Ada was born in London."
    run = av.run_attention(model, CHARS, "lm", text)
    idx = torch.tensor([CHARS.encode(text)])
    with torch.no_grad():
        _, attention = model.run_with_attention(idx)
    np.testing.assert_array_equal(run.attention, attention[:, 0].numpy())
    assert run.tokens[3] == "\u2423"  # the space, made visible
    assert run.attention.shape == (2, 4, len(text), len(text))


def test_run_carries_the_models_own_mask_for_decoders_and_encoders():
    for causal in (True, False):
        model = tiny_model(CHARS.vocab_size, causal=causal)
        run = av.run_attention(model, CHARS, "lm", "Ada\u25a1L")  # '□' is PAD: masked for encoders
        expected = np.tril(np.ones((5, 5), bool)) if causal else np.array([[1, 1, 1, 0, 1]] * 5, bool)
        np.testing.assert_array_equal(run.allowed, expected)
        assert np.all(run.attention[..., ~run.allowed] == 0)


@pytest.mark.parametrize("text", ["", "   \n\t  "])
def test_empty_or_whitespace_input_is_a_sentence_not_a_crash(text):
    with pytest.raises(av.AttentionInputError, match="Type a sentence"):
        av.run_attention(tiny_model(CHARS.vocab_size), CHARS, "lm", text)


def test_a_word_model_with_no_words_says_so():
    class NoWords(WordTokenizer):
        def split(self, text):  # a splitter that finds nothing (e.g. a stricter word pattern)
            return []

    model = tiny_model(WORDS.vocab_size, head="classifier", n_classes=3, causal=False)
    with pytest.raises(av.AttentionInputError, match="words"):
        av.run_attention(model, NoWords(WORDS.words), "classify", "!!!", ["a", "b", "c"])


def test_long_input_is_cut_to_the_hard_limit_with_a_note():
    model = tiny_model(CHARS.vocab_size)  # learned positions, block 32
    run = av.run_attention(model, CHARS, "lm", "a" * 10_000)
    assert run.n_tokens == 32 and run.n_input_tokens == 10_000
    assert any("10000 tokens" in n and "at most 32" in n for n in run.notes)


def test_no_hard_limit_reads_block_size_by_default_and_more_on_request():
    model = tiny_model(CHARS.vocab_size, positional="sinusoidal")
    assert model.max_length is None
    short = av.run_attention(model, CHARS, "lm", "a" * 100)
    assert short.n_tokens == 32 and any("Run past the block size" in n for n in short.notes)
    long = av.run_attention(model, CHARS, "lm", "a" * 100, run_past_block=True)
    assert long.n_tokens == 100 and any("beyond the length" in n for n in long.notes)
    huge = av.run_attention(model, CHARS, "lm", "a" * 10_000, run_past_block=True)
    assert huge.n_tokens == av.MAX_TOKENS_PAST_BLOCK


def test_unknown_characters_are_named_with_code_points_and_escaped():
    model = tiny_model(CHARS.vocab_size)
    run = av.run_attention(model, CHARS, "lm", "Ada <é>\x07 😀")
    assert run.unknown == ["<", "é", ">", "\x07", "😀"]
    assert run.fallback_token == "\u25a1"
    message = av.unknown_message(run.unknown, run.fallback_token)
    assert "U+00E9" in message and "U+0007" in message and "U+1F600" in message
    assert "<" not in message.replace("\\<", "")  # every '<' is backslash-escaped for Markdown
    assert run.tokens[-1] == "😀" and "U+0007" in run.tokens


def test_visible_token_and_markdown_escape():
    assert visible_token(" ") == "\u2423"
    assert visible_token("\u202e") == "U+202E"  # right-to-left override: shown, not obeyed
    assert visible_token("שלום") == "שלום"
    assert visible_token("e\u0301") == "e\u25cc\u0301"  # a combining accent on a dotted circle
    assert av.markdown_escape("*a* <b>") == "\\*a\\* \\<b\\>"


def test_one_visible_token_for_lenses_and_charts():
    """Charts and lenses share core.text.visible_token (charts once had their own, with other glyphs): the
    same glyph for a newline everywhere, '∅' for an empty token, and a label made twice (a lens's label
    drawn by a chart) is the label made once."""
    from core.figures import attention as attention_figures
    from core.figures import common as figure_common
    from core.figures import teaching

    assert attention_figures.visible_token is teaching.visible_token is visible_token
    assert not hasattr(figure_common, "visible_token")
    assert [visible_token(t) for t in ["\n", "\t", "", "\u2047"]] == ["\u23ce", "\u21e5", "\u2205", "MASK"]
    for token in [" a\n", "e\u0301", "a\u0301\u0302", "\u202e\x00", "", "\u2047", "\u25cc\u0301", "漢字 👩🏽‍💻"]:
        once = visible_token(token)
        assert visible_token(once) == once, token
    fig = attention_figures.attention_heatmap(np.full((2, 2), 0.5), ["a\n", "e\u0301"])
    assert "a\u23ce" in list(fig.data[0].x) and "e\u25cc\u0301" in list(fig.data[0].x)


def test_token_chips_are_plain_text():
    assert av.token_chips(["a", "\u2423", "<"]) == "[a] [\u2423] [<]"


def test_default_sentences_fit_each_task_and_vocabulary():
    assert av.default_sentence("birthplace", CHARS) == "Where was Ada Lovelace born?"
    assert av.default_sentence("lm", CHARS) == "Ada Lovelace was born in London."
    assert av.default_sentence("classify", WORDS) == "Ada Lovelace"


# --- outputs -----------------------------------------------------------------------------------


def test_lm_output_is_top5_next_characters_per_position():
    model = tiny_model(CHARS.vocab_size)
    run = av.run_attention(model, CHARS, "lm", "Ada")
    rows = run.output.rows
    assert len(rows) == 3 and rows[0]["token"] == "A"
    assert [k for k in rows[0] if k.startswith("next")] == [f"next #{i}" for i in range(1, 6)]
    idx = torch.tensor([CHARS.encode("Ada")])
    with torch.no_grad():
        best = model(idx)[0][0, 0].argmax().item()
    assert rows[0]["next #1"].startswith(visible_token(CHARS.decode([best])))


def test_answer_is_the_text_between_the_first_two_masks():
    assert answer_from_completion(f"Where was X born?{MASK_CHAR}Paris{MASK_CHAR}\u25a1\u25a1") == "Paris"
    assert answer_from_completion(f"Where{MASK_CHAR}Rome") == "Rome"
    assert answer_from_completion("no mask") == ""  # the assignment's rule; the page shows no answer then


def test_birthplace_answer_equals_plain_greedy_generation():
    model = tiny_model(CHARS.vocab_size)
    prompt = f"Where was Ada born?{MASK_CHAR}"
    run = av.run_attention(model, CHARS, "birthplace", prompt)
    idx = torch.tensor([CHARS.encode(prompt)])
    expected = CHARS.decode(model.generate(idx, av.ANSWER_CHARS)[0].tolist())
    assert expected.startswith(run.output.completion)
    assert run.output.answer == answer_from_completion(expected)
    assert sum(av.ANSWER_CHUNKS) == av.ANSWER_CHARS


def test_output_titles_name_the_models_own_unit():
    model = tiny_model(CHARS.vocab_size)
    run = av.run_attention(model, CHARS, "birthplace", f"Where was Ada born?{MASK_CHAR}")
    assert run.output.title == f"Generated answer (greedy, {av.ANSWER_CHARS} characters)"
    assert av.run_attention(model, CHARS, "lm", "Ada").output.title == "Top-5 next character after each position"
    words = WordTokenizer.from_corpus(TINY_CORPUS)
    run = av.run_attention(tiny_model(words.vocab_size), words, "lm", "Ada Lovelace")
    assert run.output.title == "Top-5 next word after each position"
    pieces = SubwordTokenizer.from_corpus(TINY_CORPUS, 60)
    run = av.run_attention(tiny_model(pieces.vocab_size), pieces, "birthplace", "Where was Ada born?")
    assert run.output.title == f"Generated answer (greedy, {av.ANSWER_CHARS} pieces)"


def test_birthplace_generation_stops_once_the_answer_is_closed():
    model = tiny_model(CHARS.vocab_size)
    with torch.no_grad():  # a model that always says MASK: ln_f emits e0, the head maps e0 to MASK
        model.ln_f.weight.zero_()
        model.ln_f.bias.zero_()
        model.ln_f.bias[0] = 1.0
        model.head.unembed.weight.zero_()
        model.head.unembed.weight[CHARS.mask_id, 0] = 10.0
    prompt = f"Where was Ada born?{MASK_CHAR}"
    run = av.run_attention(model, CHARS, "birthplace", prompt)
    assert run.output.answer == ""
    assert run.output.completion == prompt + MASK_CHAR * av.ANSWER_CHUNKS[0]


def test_birthplace_without_a_question_asks_for_one():
    run = av.run_attention(tiny_model(CHARS.vocab_size), CHARS, "birthplace", "Where was Ada born")
    assert run.output.answer is None and "end it with '?'" in run.output.note
    typed = av.run_attention(tiny_model(CHARS.vocab_size), CHARS, "birthplace", "Where was Ada born?")
    assert typed.output.note is None and typed.tokens[-1] != "?"  # the MASK was appended


def test_classifier_output_uses_the_checkpoint_labels():
    model = tiny_model(WORDS.vocab_size, head="classifier", n_classes=3, causal=False)
    run = av.run_attention(model, WORDS, "classify", "Ada Lovelace", ["England", "France", "Italy"])
    rows = run.output.rows
    assert sorted(r["label"] for r in rows) == ["England", "France", "Italy"]
    assert abs(sum(r["probability"] for r in rows) - 1) < 1e-5
    assert rows[0]["probability"] >= rows[-1]["probability"]


# --- compare, sanity, export -------------------------------------------------------------------


def test_difference_only_between_identical_tokenisations():
    a = make_run(np.full((1, 1, 2, 2), 0.5))
    b = make_run(np.full((1, 1, 2, 2), 0.25))
    assert av.same_tokenisation(a, b)
    diff, allowed = av.attention_difference(a.attention[0, 0], a.allowed, b.attention[0, 0], b.allowed)
    np.testing.assert_allclose(diff, 0.25)
    assert allowed.tolist() == [[True, False], [True, True]]
    assert not av.same_tokenisation(a, make_run(np.full((1, 1, 2, 2), 0.5), ids=[9, 9]))


def test_clip_index():
    assert av.clip_index(7, 4) == 3 and av.clip_index(-2, 4) == 0 and av.clip_index(2, 4) == 2
    assert av.clip_index(None, 5, -1) == 4 and av.clip_index(None, 5) == 0 and av.clip_index(3, 0) == 0


def test_sanity_checks_pass_on_real_attention():
    run = av.run_attention(tiny_model(CHARS.vocab_size), CHARS, "lm", "Ada was born.")
    checks = {c.name: c for c in av.sanity_checks(run)}
    assert all(c.passed for c in checks.values()), checks
    assert "13 tokens read" in checks["Length within block size"].detail


def test_sanity_checks_catch_leaks_bad_rows_and_overlong_input():
    leaky = make_run([[[[0.5, 0.5], [0.5, 0.5]]]], block_size=1, max_length=None, n_input=5)
    checks = {c.name: c for c in av.sanity_checks(leaky)}
    assert checks["Rows sum to 1"].passed
    assert checks["Causal mask respected"].passed is False
    assert checks["Length within block size"].passed is False
    assert "cut from 5" in checks["Length within block size"].detail
    bad_rows = make_run([[[[1.0, 0.0], [0.5, 0.5 + 1e-5]]]])
    assert {c.name: c for c in av.sanity_checks(bad_rows)}["Rows sum to 1"].passed is False


def test_sanity_checks_for_encoders_check_padding_instead():
    run = make_run([[[[0.5, 0.5, 0], [0.5, 0.5, 0], [0.5, 0.5, 0]]]], ids=[4, 5, 0], causal=False)
    checks = {c.name: c for c in av.sanity_checks(run)}
    assert "Causal mask respected" not in checks
    assert checks["Padding keys get no attention"].passed


def test_csv_is_long_format_with_every_weight():
    attention = np.arange(2 * 1 * 2 * 2, dtype=np.float32).reshape(2, 1, 2, 2) / 10
    rows = list(csv.DictReader(io.StringIO(av.attention_csv(attention, ["=cmd", "b"]))))
    assert len(rows) == 8 and list(rows[0]) == list(av.CSV_COLUMNS)
    last = rows[-1]
    assert (last["layer"], last["head"], last["query_pos"], last["key_pos"]) == ("1", "0", "1", "1")
    assert float(last["weight"]) == float(np.float32(0.7))
    assert rows[0]["query_token"] == "'=cmd"  # no spreadsheet formula injection


# --- the page's state in the URL (ui/page_state.py) ---------------------------------------------------


def test_attention_state_round_trips_through_the_url():
    state = AttentionState(text="Where was <b>X</b> born?⁇ & more", layer=3, head=5,
                             view="combine", token=7, combine="rollout", compare="lm-rope",
                             past=True, hide_first=True, hide_special=False)
    params = to_url(state)
    assert all(isinstance(v, str) for v in params.values())
    assert from_url(AttentionState, params)[0] == state


@pytest.mark.parametrize("params", [
    {"layer": "-1", "head": "abc", "view": "nope", "token": "1e3", "combine": "median", "past": "maybe"},
    {"layer": "99999999999", "head": "²", "view": "", "token": " ", "hidefirst": "2"},
    {"layer": ["x"], "head": [], "view": ["model", "bogus"]},
])
def test_attention_state_bad_values_fall_back_to_defaults(params):
    state = from_url(AttentionState, params)[0]
    default = AttentionState()
    assert (state.layer, state.head, state.token, state.combine) == (0, 0, None, "mean")
    assert state.view == default.view and state.past is False and state.hide_first is False


def test_attention_state_takes_the_last_repeated_value_and_caps_text():
    state = from_url(AttentionState, {"view": ["single", "model"], "text": "a" * 10_000})[0]
    assert state.view == "model" and len(state.text) == MAX_URL_TEXT
