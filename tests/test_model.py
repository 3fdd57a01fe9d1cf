import math

import numpy as np
import pytest
import torch

from core.model.config import ConfigError, ModelConfig
from core.model.positional import alibi_bias, alibi_slopes, rope_angles, rope_rotate, sinusoidal_table
from tests.conftest import tiny_model

VARIANTS = [(p, a) for p in ("learned", "sinusoidal", "alibi", "rope", "none")
            for a in ("vanilla", "synthesizer") if not (p == "rope" and a == "synthesizer")]


@pytest.mark.parametrize("positional,attention", VARIANTS)
@pytest.mark.parametrize("causal", [True, False])
def test_attention_rows_and_fast_path(positional, attention, causal):
    model = tiny_model(positional=positional, attention=attention, causal=causal)
    idx = torch.randint(2, 30, (3, 20))
    if not causal:
        idx[1, 15:] = 0  # padding at the end of one row
    fast_logits, _ = model(idx)
    logits, attn = model.run_with_attention(idx)
    assert attn.shape == (2, 3, 4, 20, 20)  # (n_layer, B, n_head, T, T)
    assert torch.allclose(attn.sum(-1), torch.ones(2, 3, 4, 20), atol=1e-6)
    assert torch.allclose(fast_logits, logits, atol=1e-5)
    if causal:
        assert torch.all(attn.triu(diagonal=1) == 0)
    else:
        assert torch.all(attn[:, 1, :, :, 15:] == 0)  # nothing attends to padding
        assert torch.all(attn[:, 0, :, :, 15:] > 0)  # the unpadded row does attend there


def test_alibi_slopes_match_official_code():
    assert alibi_slopes(8) == [2.0 ** -i for i in range(1, 9)]
    assert alibi_slopes(6) == [2.0 ** -2, 2.0 ** -4, 2.0 ** -6, 2.0 ** -8, 2.0 ** -1, 2.0 ** -3]
    assert alibi_slopes(4) == [2.0 ** -2, 2.0 ** -4, 2.0 ** -6, 2.0 ** -8]


def test_alibi_bias_is_minus_slope_times_distance():
    bias = alibi_bias(8, 5, 5)
    assert bias[0, 4, 1].item() == pytest.approx(-0.5 * 3)
    assert bias[7, 3, 0].item() == pytest.approx(-(2.0 ** -8) * 3)
    assert torch.all(bias[:, torch.arange(5), torch.arange(5)] == 0)


def test_sinusoidal_table_matches_closed_form():
    table = sinusoidal_table(50, 16)
    for pos in (0, 1, 7, 49):
        for i in range(8):
            angle = pos / 10000 ** (2 * i / 16)
            assert table[pos, 2 * i].item() == pytest.approx(math.sin(angle), abs=1e-6)
            assert table[pos, 2 * i + 1].item() == pytest.approx(math.cos(angle), abs=1e-6)


def test_rope_score_depends_only_on_relative_distance():
    torch.manual_seed(0)
    q, k = torch.randn(1, 8), torch.randn(1, 8)

    def score(m, n):
        qm = rope_rotate(q, rope_angles(torch.tensor([m]), 8))
        kn = rope_rotate(k, rope_angles(torch.tensor([n]), 8))
        return (qm * kn).sum().item()

    assert score(5, 2) == pytest.approx(score(13, 10), abs=1e-5)
    assert score(0, 0) == pytest.approx((q * k).sum().item(), abs=1e-6)


@pytest.mark.parametrize("positional", ["learned", "alibi"])
def test_synthesizer_is_causal(positional):
    model = tiny_model(attention="synthesizer", positional=positional)
    idx = torch.randint(2, 30, (1, 16))
    changed = idx.clone()
    changed[0, 10] = (idx[0, 10] + 1) % 30
    a, _ = model(idx)
    b, _ = model(changed)
    assert torch.equal(a[0, :10], b[0, :10])
    assert not torch.equal(a[0, 10:], b[0, 10:])


@pytest.mark.parametrize("positional,attention", VARIANTS)
def test_cached_generation_equals_uncached_greedy(positional, attention):
    model = tiny_model(positional=positional, attention=attention)
    prompts = torch.randint(2, 30, (3, 6))
    cached = model.generate(prompts, 20)
    plain = model.generate(prompts, 20, use_cache=False)
    assert torch.equal(cached, plain)
    # and it equals stepping the plain forward pass by hand
    idx = prompts
    for _ in range(20):
        logits, _ = model(idx[:, -(model.max_length or model.config.block_size):])
        idx = torch.cat((idx, logits[:, -1].argmax(-1, keepdim=True)), dim=1)
    assert torch.equal(cached, idx)


def test_generation_runs_past_the_block_size_on_a_window():
    model = tiny_model(positional="learned")
    out = model.generate(torch.randint(2, 30, (2, 30)), 10)
    assert out.shape == (2, 40)


def test_sampling_is_reproducible_with_a_generator():
    model = tiny_model()
    prompt = torch.randint(2, 30, (2, 4))
    a = model.generate(prompt, 8, do_sample=True, top_k=5, generator=torch.Generator().manual_seed(1))
    b = model.generate(prompt, 8, do_sample=True, top_k=5, generator=torch.Generator().manual_seed(1))
    assert torch.equal(a, b)


def test_learned_positions_refuse_to_run_past_their_table():
    model = tiny_model(positional="learned")
    with pytest.raises(ValueError, match="at most 32 tokens"):
        model(torch.randint(2, 30, (1, 33)))
    tiny_model(positional="alibi")(torch.randint(2, 30, (1, 64)))  # relative schemes can


def test_classifier_head_and_loss():
    model = tiny_model(head="classifier", n_classes=3, causal=False, pooling="mean")
    idx = torch.randint(2, 30, (4, 10))
    idx[0, 5:] = 0
    logits, loss = model(idx, torch.tensor([0, 1, 2, 0]))
    assert logits.shape == (4, 3) and loss.item() > 0
    # padding does not change a mean-pooled prediction
    longer = torch.cat((idx[:1, :5], torch.zeros(1, 7, dtype=torch.long)), dim=1)
    assert torch.allclose(model(longer)[0], model(idx[:1, :5])[0], atol=1e-5)


def test_lm_loss_ignores_pad_targets():
    model = tiny_model()
    idx = torch.randint(2, 30, (2, 10))
    targets = idx.clone()
    _, full = model(idx, targets)
    targets[:, :5] = 0
    logits, partial = model(idx, targets)
    expected = torch.nn.functional.cross_entropy(logits[:, 5:].reshape(-1, 30), idx[:, 5:].reshape(-1))
    assert partial.item() == pytest.approx(expected.item(), rel=1e-5)
    assert partial.item() != pytest.approx(full.item())


@pytest.mark.parametrize("bad,match", [
    (dict(positional="fourier"), "Unknown positional"),
    (dict(attention="linear"), "Unknown attention"),
    (dict(n_embd=30, n_head=4), "divisible"),
    (dict(attention="synthesizer", positional="rope"), "RoPE"),
    (dict(head="classifier", n_classes=1), "n_classes"),
    (dict(n_layer=0), "positive"),
])
def test_config_refuses_with_a_sentence(bad, match):
    fields = dict(vocab_size=10, block_size=8, n_layer=1, n_head=2, n_embd=8) | bad
    with pytest.raises(ConfigError, match=match):
        ModelConfig(**fields)


def test_cs224n_preset_parameter_count():
    from core.model.config import PRESETS
    from core.model.transformer import Transformer

    with torch.device("meta"):
        assert Transformer(ModelConfig(**PRESETS["cs224n-mingpt"])).num_parameters() == 3_323_392


def test_sinusoidal_scheme_scales_embeddings_by_sqrt_d_as_vaswani():
    model = tiny_model(positional="sinusoidal")
    x = torch.randn(1, 5, 32)
    expected = x * math.sqrt(32) + sinusoidal_table(5, 32)
    assert torch.allclose(model.pos.embed(x), expected, atol=1e-6)


def test_generation_stops_once_every_row_produced_the_stop_token():
    model = tiny_model()
    prompts = torch.randint(2, 30, (3, 4))
    full = model.generate(prompts, 25)
    stop = int(full[0, 6])  # a token row 0 is known to produce
    early = model.generate(prompts, 25, stop_id=stop)
    assert torch.equal(early, full[:, : early.size(1)])
    for row in early[:, 4:]:
        assert stop in row.tolist() or early.size(1) == full.size(1)


def test_an_attention_only_model_has_no_feed_forward_and_reads_the_same_both_ways():
    from core.lens.trace import trace
    from core.model.transformer import Transformer

    torch.manual_seed(0)
    model = Transformer(ModelConfig(vocab_size=20, block_size=16, n_layer=2, n_head=2, n_embd=16, dropout=0.0,
                                    mlp=False)).eval()
    assert all(block.mlp is None and block.ln2 is None for block in model.blocks)
    assert not any(".mlp." in name or ".ln2." in name for name in model.state_dict())
    idx = torch.randint(0, 20, (2, 9))
    logits, _ = model(idx)
    recorded, attention = model.run_with_attention(idx)
    torch.testing.assert_close(logits, recorded)
    assert attention.shape == (2, 2, 2, 9, 9)
    record = trace(model, idx[0].tolist(), activations=True)  # the hook points: a zero where the MLP would add
    assert np.all(record.activations.mlp_out == 0)
    torch.testing.assert_close(record.logits, logits[:1])
