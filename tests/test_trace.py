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
