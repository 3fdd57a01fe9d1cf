"""The query-key view (issue 28, section 1): each weight rebuilt from the queries and keys recorded in the
trace's own pass equals the trace's attention to 1e-6, for every positional scheme and for Hugging Face
BERT and GPT-2 folders; the synthesizer says in one sentence that it has no query-key product."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from core.lens import query_key as qk
from core.lens.trace import trace
from core.model.positional import POSITIONAL
from tests.conftest import require_hf_extra, tiny_model

TOL = 1e-6
IDS = [3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 0, 0]  # ends in PAD (id 0): an encoder masks those keys


def assert_every_row_rebuilt(record) -> None:
    assert record.queries_keys is not None and len(record.queries_keys) == record.n_layer
    for layer in range(record.n_layer):
        layer_qk = qk.queries_keys_of(record.queries_keys, layer)
        for head in range(record.n_head):
            for query in range(record.n_tokens):
                row = qk.decompose(layer_qk, record.allowed[query], layer, head, query)
                assert np.abs(row.weights - record.attention[layer, head, query]).max() <= TOL
                assert np.allclose(row.products.sum(axis=1), row.dots)
                assert (row.weights[~row.allowed] == 0).all()


@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("positional", sorted(POSITIONAL))
def test_every_weight_is_rebuilt_from_the_recorded_queries_and_keys(positional, causal):
    model = tiny_model(30, positional=positional, causal=causal)
    torch.manual_seed(1)
    with torch.no_grad():  # random biases too: a zero-initialised bias would hide a missed term
        for p in model.parameters():
            p.add_(0.3 * torch.randn_like(p))
    record = trace(model, IDS, queries_keys=True)
    assert_every_row_rebuilt(record)
    first = record.queries_keys[0]
    assert first.q.shape == first.k.shape == (4, len(IDS), 8) and first.q.dtype == np.float32
    assert (first.bias is not None) == (positional == "alibi")
    if positional == "alibi":
        assert record.queries_keys[1].bias is first.bias  # one bias array for every layer


def test_the_option_does_not_change_the_pass():
    model = tiny_model(30, positional="rope")
    plain, recorded = trace(model, IDS), trace(model, IDS, queries_keys=True)
    assert plain.queries_keys is None
    np.testing.assert_array_equal(plain.attention, recorded.attention)
    torch.testing.assert_close(plain.logits, recorded.logits)


def test_rope_queries_are_rotated_by_position():
    """What the view shows for RoPE is q after the rotation: the same token at two positions differs."""
    model = tiny_model(30, positional="rope")
    record = trace(model, [7, 7], queries_keys=True)
    q = record.queries_keys[0].q
    assert not np.allclose(q[:, 0], q[:, 1])
    none = trace(tiny_model(30, positional="none"), [7, 7], queries_keys=True).queries_keys[0].q
    np.testing.assert_allclose(none[:, 0], none[:, 1], rtol=1e-6)


def test_the_synthesizer_says_it_has_no_query_key_product():
    record = trace(tiny_model(30, attention="synthesizer"), IDS, queries_keys=True)
    assert record.queries_keys == [None, None]
    with pytest.raises(qk.QueryKeyError) as caught:
        qk.queries_keys_of(record.queries_keys, 0)
    message = str(caught.value)
    assert message.count(".") == 1 and message.endswith(".") and "query-key product" in message


def test_the_steps_add_up_to_the_weight_and_the_top_dimensions_are_sorted():
    model = tiny_model(30, positional="alibi")
    record = trace(model, IDS, queries_keys=True)
    row = qk.decompose(record.queries_keys[1], record.allowed[6], 1, 2, 6)
    key = row.best_key()
    assert row.allowed[key] and row.weights[key] == row.weights.max()
    steps = qk.weight_steps(row, key, "ALiBi bias")
    assert steps[0].value == pytest.approx(row.dots[key])
    assert steps[1].value == pytest.approx(row.dots[key] / np.sqrt(8)) and "1/√8" in steps[1].what
    assert "ALiBi bias" in steps[2].what and steps[2].value == pytest.approx(row.scores[key])
    assert abs(steps[-1].value - record.attention[1, 2, 6, key]) <= TOL
    dims, values = qk.top_dimensions(row, key, 5)
    assert len(dims) == 5 and list(np.abs(values)) == sorted(np.abs(values), reverse=True)
    np.testing.assert_allclose(values, row.q[dims] * row.keys[key, dims])
    caption = qk.contribution_caption(row, key)
    assert f"{row.dots[key]:+.3g}" in caption and "of 8" in caption
    masked = qk.weight_steps(row, 9, "ALiBi bias")  # key 9 is after query 6: causal mask
    assert masked[-1].value == 0.0 and "masked" in masked[-1].what


@pytest.fixture(scope="module")
def hf_folders(tmp_path_factory):
    require_hf_extra()
    from tests.hf_models import bert_folder, distilbert_folder, gpt2_folder

    root = tmp_path_factory.mktemp("hf-qk")
    return {"bert": bert_folder(root / "bert"), "gpt2": gpt2_folder(root / "gpt2"),
            "distilbert": distilbert_folder(root / "distilbert")}


@pytest.mark.parametrize("name,text", [("bert", "the cats playing on the mat."),
                                       ("gpt2", "Hello world, the cat played!"),
                                       ("distilbert", "a dog ran on the mat.")])
def test_hugging_face_weights_are_rebuilt_from_their_queries_and_keys(hf_folders, name, text):
    from core.io.checkpoint import load
    from tests.hf_models import reference_attention

    loaded = load(hf_folders[name])
    tokenized = loaded.tokenizer.tokenize(text)
    record = trace(loaded.model, tokenized.ids, tokenized.tokens, queries_keys=True)
    reference, _ = reference_attention(hf_folders[name], tokenized.ids)
    assert np.abs(record.attention - reference.numpy()).max() <= TOL  # the pass itself is transformers' own
    assert_every_row_rebuilt(record)
    assert record.queries_keys[0].scale == pytest.approx(8 ** -0.5)  # 16 wide, 2 heads


# --- figures: data in, Figure out -------------------------------------------------------------------


def test_the_figures_show_the_numbers_of_the_row():
    from core.figures import query_key as figs

    record = trace(tiny_model(30, positional="rope"), IDS[:6], queries_keys=True)
    row = qk.decompose(record.queries_keys[0], record.allowed[4], 0, 1, 4)
    labels = ["a", "b", "a", "<c>", "d", "e"]
    fig = figs.products_figure(row.products, row.weights, row.q, row.keys, labels, chosen=2, allowed=row.allowed)
    bars, heat = fig.data
    np.testing.assert_allclose(np.asarray(bars.y, dtype=float)[:5], row.weights[:5])
    assert np.isnan(np.asarray(bars.y, dtype=float)[5])  # a masked key is a gap, not weight 0
    np.testing.assert_allclose(np.asarray(heat.z, dtype=float)[:, :5], row.products[:5].T)
    assert np.isnan(np.asarray(heat.z, dtype=float)[:, 5]).all()  # the masked key's column too
    assert list(heat.x) == ["a", "b", "a\u200b", "&lt;c&gt;", "d", "e"]  # distinct, escaped categories
    np.testing.assert_allclose(np.asarray(heat.customdata)[3, 2], [row.q[3], row.keys[2, 3]])
    assert [s["x0"] for s in fig.layout.shapes[1:]] == [1.5, 1.5]  # the chosen key framed in both panels
    assert heat.zmid == 0 and heat.zmax == -heat.zmin
    vectors = figs.vectors_figure(row.q, row.keys, "4: d", labels)
    np.testing.assert_allclose(vectors.data[0].z, row.q[:, None])
    np.testing.assert_allclose(vectors.data[1].z, row.keys.T)
    assert vectors.layout.coloraxis.cmid == 0
    dims, values = qk.top_dimensions(row, 2, 5)
    top = figs.top_dimensions_figure(dims, values)
    assert list(top.data[0].y) == [f"dim {d}" for d in dims] and list(top.data[0].x) == list(values)
    assert [c == figs.POSITIVE for c in top.data[0].marker.color] == [v >= 0 for v in values]
