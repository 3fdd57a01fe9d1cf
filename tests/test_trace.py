"""core.lens.trace: the one recorded forward pass every analysis reads."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from core.lens.trace import Trace, TraceError, trace
from core.text import MASK_CHAR
from tests.conftest import tiny_model


@pytest.mark.parametrize("overrides", [{}, {"causal": False}, {"positional": "alibi"}, {"attention": "synthesizer"},
                                       {"positional": "rope"}])
def test_a_trace_is_the_models_own_pass(overrides):
    model = tiny_model(30, **overrides)
    ids = [3, 1, 4, 1, 5, 9, 2, 6]
    record = trace(model, ids)
    assert isinstance(record, Trace) and record.ids == ids
    assert record.attention.shape == (2, 4, 8, 8) and record.attention.dtype == np.float32
    with torch.no_grad():
        logits, attention = model.run_with_attention(torch.tensor([ids]))
        fast_logits, _ = model(torch.tensor([ids]))
    np.testing.assert_allclose(record.attention, attention[:, 0].numpy(), rtol=1e-6)
    torch.testing.assert_close(record.logits, logits)
    torch.testing.assert_close(fast_logits, logits, rtol=1e-4, atol=1e-5)  # fused path == explicit softmax
    np.testing.assert_array_equal(record.allowed, model.attention_mask(torch.tensor([ids]))[0, 0].numpy())
    assert (record.attention[..., ~record.allowed] == 0).all()
    np.testing.assert_allclose(record.attention.sum(-1), 1.0, rtol=1e-5)
    assert (record.n_layer, record.n_head, record.n_tokens) == (2, 4, 8)


def test_tokens_are_labelled_for_people():
    record = trace(tiny_model(30), [1, 2, 3], [" ", MASK_CHAR, "\u202e"])
    assert record.tokens == ["\u2423", "MASK", "U+202E"]
    assert trace(tiny_model(30), [1, 2]).tokens == ["0", "1"]


def test_a_length_the_model_refuses_is_one_sentence():
    with pytest.raises(TraceError, match="at most 32 tokens"):
        trace(tiny_model(30), list(range(1, 30)) * 2)


def test_labels_must_match_the_ids():
    with pytest.raises(ValueError, match="2 token labels for 3 ids"):
        trace(tiny_model(30), [1, 2, 3], ["a", "b"])


# --- the activation record ------------------------------------------------------------------------


@pytest.mark.parametrize("overrides", [{}, {"positional": "alibi"}, {"attention": "synthesizer"},
                                       {"positional": "rope"}, {"positional": "sinusoidal"}])
def test_the_activation_record_adds_up_to_the_models_own_logits(overrides):
    model = tiny_model(30, **overrides)
    ids = [3, 1, 4, 1, 5, 9, 2, 6]
    plain = trace(model, ids)
    record = trace(model, ids, activations=True)
    acts = record.activations
    assert plain.activations is None and acts is not None
    torch.testing.assert_close(record.logits, plain.logits)  # recording changes nothing
    L, H, T, C = 2, 4, 8, 32
    assert acts.resid_pre.shape == acts.resid_post.shape == acts.attn_out.shape == acts.mlp_out.shape == (L, T, C)
    assert acts.head_out.shape == (L, H, T, C) and acts.attn_bias.shape == (L, C) and acts.final_scale.shape == (T,)
    with torch.no_grad():
        embedded = model.pos.embed(model.tok_emb(torch.tensor([ids])), 0)[0].numpy()
        ln, unembed = model.readout()
        logits = ln(torch.from_numpy(acts.resid_post[-1])) @ unembed.T
    np.testing.assert_allclose(acts.embedded, embedded, atol=1e-6)
    np.testing.assert_allclose(acts.resid_post, acts.resid_pre + acts.attn_out + acts.mlp_out, atol=1e-5)
    np.testing.assert_allclose(acts.resid_pre[1:], acts.resid_post[:-1])
    np.testing.assert_allclose(acts.head_out.sum(1) + acts.attn_bias[:, None], acts.attn_out, atol=1e-5)
    np.testing.assert_allclose(logits.numpy(), record.logits[0].numpy(), atol=1e-5)
    last = acts.resid_post[-1].astype(np.float64)
    np.testing.assert_allclose(acts.final_scale, np.sqrt(last.var(-1) + 1e-5), rtol=1e-6)


def test_one_rule_cuts_long_inputs_from_the_end_or_the_front():
    from core.lens.trace import cut_to_limit, trace_text
    from core.model.tokenizer import CharTokenizer

    assert cut_to_limit(10, 4, "start") == slice(0, 4) and cut_to_limit(10, 4, "end") == slice(6, 10)
    assert cut_to_limit(3, 4, "end") == slice(0, 3)
    with pytest.raises(ValueError):
        cut_to_limit(3, 4, "middle")
    tokenizer = CharTokenizer.from_corpus("abcdef")
    model = tiny_model(tokenizer.vocab_size, block_size=4)
    start = trace_text(model, tokenizer, "abcdef", 4, "start")
    end = trace_text(model, tokenizer, "abcdef", 4, "end")
    assert start.tokens == list("abcd") and end.tokens == list("cdef")
    assert start.cut == end.cut == 2 and start.n_input_tokens == 6
    with pytest.raises(TraceError, match="nothing to read"):
        trace_text(model, tokenizer, "", 4)
