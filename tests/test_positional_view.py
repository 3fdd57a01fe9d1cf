"""Positional encodings page data: every figure's numbers equal the closed forms of the papers."""

import dataclasses
import json
import math

import numpy as np
import pytest
import torch

from core.figures import positional as viz
from core.io import checkpoint
from core.lens import positional as pv
from core.lens.extrapolation.scoring import LengthScore, VariantExtrapolation
from core.model.positional import POSITIONAL
from core.text import markdown_escape
from tests.conftest import save_tiny_checkpoint, tiny_model

# --------------------------------------------------------------------------- sinusoidal (Vaswani et al.)


def test_sinusoidal_values_are_sin_and_cos_of_position_over_10000_to_the_2i_over_d():
    length, d = 50, 16
    table = pv.sinusoidal_values(length, d)
    assert table.shape == (length, d)
    for pos in (0, 1, 7, 49):
        for i in range(d // 2):
            angle = pos / 10000 ** (2 * i / d)
            assert table[pos, 2 * i] == pytest.approx(math.sin(angle), abs=1e-6)
            assert table[pos, 2 * i + 1] == pytest.approx(math.cos(angle), abs=1e-6)


def test_sinusoidal_cosine_similarity_is_the_mean_cosine_of_the_distance():
    """PE(p).PE(q) = sum_i cos((p-q) w_i) and |PE(p)|^2 = d/2, so similarity = (2/d) sum_i cos((p-q) w_i)."""
    length, d = 40, 32
    sim = pv.cosine_similarity(pv.sinusoidal_values(length, d))
    omega = 10000.0 ** (-np.arange(0, d, 2) / d)
    for p, q in [(0, 0), (3, 10), (39, 0), (20, 25)]:
        expected = np.cos((p - q) * omega).sum() * 2 / d
        assert sim[p, q] == pytest.approx(expected, abs=1e-5)
    assert np.allclose(np.diag(sim), 1.0, atol=1e-6)
    assert np.allclose(sim, sim.T)


def test_cosine_similarity_of_a_zero_vector_is_nan_not_a_number_we_made_up():
    sim = pv.cosine_similarity(np.array([[1.0, 0.0], [0.0, 0.0], [1.0, 1.0]]))
    assert np.isnan(sim[1]).all() and sim[0, 2] == pytest.approx(1 / math.sqrt(2))


def test_learned_table_is_the_models_own_parameter():
    model = tiny_model(30, positional="learned")
    with torch.no_grad():
        model.pos.table.normal_()
    table = pv.learned_table(model)
    assert np.array_equal(table, model.pos.table.detach().double().numpy())
    assert table.shape == (32, 32)
    assert pv.learned_table(tiny_model(30, positional="alibi")) is None


# --------------------------------------------------------------------------- ALiBi (Press et al.)


@pytest.mark.parametrize("n_head,exponents", [
    (1, [-8]),
    (2, [-4, -8]),
    (4, [-2, -4, -6, -8]),
    (8, [-1, -2, -3, -4, -5, -6, -7, -8]),
    (6, [-2, -4, -6, -8, -1, -3]),  # the official code's interleaving for non-powers of two
    (12, [-1, -2, -3, -4, -5, -6, -7, -8, -0.5, -1.5, -2.5, -3.5]),
])
def test_alibi_slopes_follow_press_et_al(n_head, exponents):
    view = pv.alibi_view(n_head, 5)
    assert view.slopes == pytest.approx([2.0 ** e for e in exponents])
    assert [row["as a power of 2"] for row in view.slope_rows()] == [f"2^{e:g}" for e in exponents]


def test_alibi_bias_is_minus_slope_times_distance_unscaled():
    view = pv.alibi_view(6, 9, causal=True)
    assert view.bias.shape == (6, 9, 9)
    for h, slope in enumerate(view.slopes):
        for i in range(9):
            for j in range(9):
                expected = -slope * (i - j) if j <= i else 0.0  # keys after i never exist for a decoder
                assert view.bias[h, i, j] == pytest.approx(expected)
    encoder = pv.alibi_view(4, 5, causal=False)
    assert encoder.bias[1, 0, 4] == pytest.approx(-encoder.slopes[1] * 4)  # |i - j|


def test_alibi_figure_shows_each_heads_bias_and_its_slope():
    view = pv.alibi_view(3, 6)
    fig = viz.alibi_bias_figure(view.bias, view.slopes)
    assert len(fig.data) == 3
    for h in range(3):
        z = np.array(fig.data[h].z, dtype=float)
        lower = np.tril(np.ones((6, 6), dtype=bool))
        assert np.allclose(z[lower], view.bias[h][lower])
        assert np.isnan(z[~lower]).all()  # no key there, drawn as a gap rather than 0
    titles = [a.text for a in fig.layout.annotations]
    assert titles[2] == f"head 2: slope 2<sup>{math.log2(view.slopes[2]):.3g}</sup>"  # exact and short


# --------------------------------------------------------------------------- RoPE (Su et al.)


def test_rope_score_for_all_ones_is_twice_the_sum_of_cosines():
    """q = k = 1: each rotated pair contributes 2 cos((m-n) theta_i)."""
    d = 64
    distances, scores = pv.rope_distance_scores(d, 300)
    theta = 10000.0 ** (-np.arange(0, d, 2) / d)
    expected = 2 * np.cos(distances[:, None] * theta[None, :]).sum(axis=1)
    assert np.allclose(scores, expected, atol=1e-9)
    assert scores[0] == pytest.approx(d)


def test_rope_score_for_a_random_vector_weights_each_cosine_by_the_pairs_norm():
    d = 16
    q = pv.fixed_random_vector(d).numpy()
    distances, scores = pv.rope_distance_scores(d, 50, vector="random")
    theta = 10000.0 ** (-np.arange(0, d, 2) / d)
    pair_norms = q[0::2] ** 2 + q[1::2] ** 2
    assert np.allclose(scores, (pair_norms * np.cos(distances[:, None] * theta)).sum(1), atol=1e-9)
    _, again = pv.rope_distance_scores(d, 50, vector="random")
    assert np.array_equal(scores, again)  # fixed seed: the same curve every time


def test_rope_scores_depend_on_relative_distance_only():
    q, k = pv.fixed_random_vector(8, 1), pv.fixed_random_vector(8, 2)
    near = pv.rope_query_key_scores(q, k, torch.arange(0, 10), torch.arange(0, 10))
    far = pv.rope_query_key_scores(q, k, torch.arange(500, 510), torch.arange(500, 510))
    assert np.allclose(near, far, atol=1e-9)
    matrix = pv.rope_relative_matrix(12, 8)
    for m in range(12):
        for n in range(12):
            assert matrix[m, n] == pytest.approx(matrix[abs(m - n), 0], abs=1e-9)


def test_su_et_al_decay_bound_is_the_mean_of_partial_sum_magnitudes():
    d = 128
    distances, bound = pv.rope_decay_bound(d, 250)
    theta = 10000.0 ** (-np.arange(0, d, 2) / d)
    assert bound[0] == pytest.approx((d / 2 + 1) / 2)  # S_j = j at distance 0
    for dist in (1, 17, 250):
        partial = [abs(sum(complex(math.cos(dist * t), math.sin(dist * t)) for t in theta[:j]))
                   for j in range(1, d // 2 + 1)]
        assert bound[dist] == pytest.approx(sum(partial) / (d / 2))
    assert bound[250] < bound[10] < bound[0]  # the long-term decay


def test_rope_figure_draws_exactly_these_curves():
    d, far = 32, 40
    distances, ones = pv.rope_distance_scores(d, far)
    _, rand = pv.rope_distance_scores(d, far, vector="random")
    bd, bound = pv.rope_decay_bound(d, far)
    fig = viz.rope_distance_figure(distances, ones, rand, bd, bound, d)
    assert np.allclose(np.array(fig.data[0].y), ones) and np.allclose(np.array(fig.data[1].y), rand)
    assert np.allclose(np.array(fig.data[2].y), bound)


def hover_text(values) -> list[str]:
    return [f"{v:.5g}" for v in np.asarray(values, dtype=float).ravel()]  # the heatmaps' %{z:.5g}


def test_table_and_matrix_heatmaps_carry_the_values():
    """The values to the 5 significant digits the hover shows (sent shorter: issue 45), the same hover text."""
    table = pv.sinusoidal_values(10, 8)
    z = np.array(viz.position_table_heatmap(table).data[0].z)
    assert np.allclose(z, table, rtol=5e-5, atol=0) and hover_text(z) == hover_text(table)
    sim = pv.cosine_similarity(table)
    z = np.array(viz.position_matrix_heatmap(sim, "<b>x</b>").data[0].z)
    assert np.allclose(z, sim, rtol=5e-5, atol=0) and hover_text(z) == hover_text(sim)
    assert viz.position_matrix_heatmap(sim, "<b>x</b>").layout.title.text == "&lt;b&gt;x&lt;/b&gt;"


# --------------------------------------------------------------------------- families, attention by distance


def test_shown_values_round_to_significant_digits_and_keep_gaps():
    values = np.array([[0.123456789, -98765.4321, 0.0], [np.nan, 1.00005e-7, np.inf]])
    shown = viz.shown_values(values)
    assert shown[0, 0] == 0.12346 and shown[0, 1] == -98765.0 and shown[0, 2] == 0.0
    assert np.isnan(shown[1, 0]) and np.isinf(shown[1, 2]) and np.isclose(shown[1, 1], 1.0001e-7, rtol=1e-12)
    assert len(json.dumps(viz.shown_values(pv.sinusoidal_values(64, 128)).tolist())) < 0.5 * len(
        json.dumps(pv.sinusoidal_values(64, 128).tolist()))  # what it is for: less than half the JSON
    assert values[0, 0] == 0.123456789  # the caller's array is left as it was


def test_families_are_found_by_config_not_by_name(tmp_path):
    named = [("zebra", "rope"), ("apple", "learned"), ("kiwi", "alibi"), ("mango", "sinusoidal")]
    for name, positional in named:
        save_tiny_checkpoint(tmp_path / f"{name}.safetensors", "lm", positional=positional)
    save_tiny_checkpoint(tmp_path / "lm-other-depth.safetensors", "lm", positional="alibi", n_layer=1)
    save_tiny_checkpoint(tmp_path / "birth.safetensors", "birthplace", positional="learned")
    save_tiny_checkpoint(tmp_path / "names.safetensors", "classify")
    families = pv.positional_families(checkpoint.list_checkpoints(tmp_path))
    assert len(families) == 1
    family = families[0]
    assert family.names == ["mango", "apple", "kiwi", "zebra"]  # sinusoidal, learned, ALiBi, RoPE
    assert family.positionals == ["sinusoidal", "learned", "alibi", "rope"]
    assert "4 lm checkpoints" in family.describe() and "2 layers" in family.describe()
    assert pv.family_for(families, "kiwi") == 0


def test_no_family_when_only_one_scheme(tiny_checkpoints):
    assert pv.positional_families(checkpoint.list_checkpoints(tiny_checkpoints)) == []


def test_attention_by_distance_equals_a_naive_average():
    rng = np.random.default_rng(0)
    L, H, T = 2, 3, 7
    attention = rng.random((L, H, T, T))
    allowed = np.tril(np.ones((T, T), dtype=bool))
    distances, means = pv.attention_by_distance(attention, allowed)
    assert list(distances) == list(range(T))
    for d in range(T):
        pairs = [(i, i - d) for i in range(d, T)]
        expected = np.mean([attention[:, :, i, j] for i, j in pairs], axis=0)
        assert np.allclose(means[:, :, d], expected)
    uniform = np.tril(np.ones((T, T))) / np.arange(1, T + 1)[:, None]
    _, m = pv.attention_by_distance(uniform[None, None], allowed)
    assert m[0, 0, T - 1] == pytest.approx(1 / T)  # only the last query has a key T-1 back


def test_attention_by_distance_for_an_encoder_has_negative_distances():
    T = 4
    distances, means = pv.attention_by_distance(np.full((1, 1, T, T), 0.25), np.ones((T, T), dtype=bool))
    assert list(distances) == [-3, -2, -1, 0, 1, 2, 3]
    assert np.allclose(means, 0.25)


def test_sentence_attention_is_the_models_own_and_never_past_its_length():
    from core.model.tokenizer import CharTokenizer

    tokenizer = CharTokenizer.from_corpus("abc d")
    model = tiny_model(tokenizer.vocab_size, positional="learned", block_size=8)
    run = pv.sentence_attention(model, tokenizer, "abc dab cab", max_tokens=64)
    assert len(run.tokens) == 8 and run.cut == 3 and run.tokens[3] == "\u2423"
    _, attention = model.run_with_attention(torch.tensor([tokenizer.encode("abc dab ")]))
    assert np.allclose(run.attention, attention[:, 0].detach().double().numpy())
    assert np.allclose(run.attention.sum(-1), 1.0)
    with pytest.raises(pv.SentenceError):
        pv.sentence_attention(model, tokenizer, "", 8)


# --------------------------------------------------------------------------- training


def test_training_table_reads_final_numbers_from_the_history(tmp_path):
    path = save_tiny_checkpoint(tmp_path / "a.safetensors", "lm", positional="alibi")
    info = checkpoint.list_checkpoints(tmp_path)[0]
    frame, notes = pv.training_frame([info])
    assert notes == [] and path.exists()
    table = pv.training_table(frame, [info])
    row = table.iloc[0]
    assert row["positional"] == "ALiBi"
    assert row["final train loss"] == pytest.approx(2.0)  # 3.0 - 0.2 * 5, the last logged batch
    assert row["final dev loss"] == pytest.approx(2.5)
    assert row["train perplexity"] == pytest.approx(math.exp(2.0))
    assert row["dev perplexity"] == pytest.approx(math.exp(2.5))
    train_ppl = frame[(frame["split"] == "train") & (frame["metric"] == "perplexity")]["value"]
    assert np.allclose(train_ppl, np.exp(3.0 - 0.2 * np.arange(1, 6)))
    fig = viz.positional_training_figure(frame, ["a"], ["alibi"], "loss", ("val", "train"))
    assert [t.meta["split"] for t in fig.data] == ["val", "train"]
    assert list(fig.data[0].y) == [2.5] and fig.data[0].line.color == POSITIONAL["alibi"].color


# --------------------------------------------------------------------------- extrapolation figures


def _variant(name, positional, losses, max_length=None):
    scores = []
    for factor, loss in losses.items():
        length = int(32 * factor)
        na = max_length is not None and length > max_length
        scores.append(LengthScore("windows", factor, length, math.nan if na else loss, 0 if na else 100, 3,
                                  f"no positions past {max_length}" if na else None,
                                  None if na else [loss] * length))
    return VariantExtrapolation(name, positional, 32, max_length, scores)


def test_extrapolation_figure_ends_the_learned_curve_with_a_marked_x():
    learned = _variant("lm-learned", "learned", {0.5: 2.0, 1.0: 1.9, 2.0: 0.0, 4.0: 0.0}, max_length=32)
    alibi = _variant("lm-alibi", "alibi", {0.5: 2.1, 1.0: 1.8, 2.0: 1.7, 4.0: 1.75})
    fig = viz.extrapolation_figure([learned, alibi], ["learned", "ALiBi"], ["windows"])
    measured = [t for t in fig.data if t.meta["kind"] == "measured"]
    assert list(measured[0].x) == [16, 32, 64, 128]
    assert list(measured[0].y)[2:] == [None, None]  # never a clamped number past the table
    assert list(measured[1].y) == pytest.approx([math.exp(v) for v in (2.1, 1.8, 1.7, 1.75)])
    ends = [t for t in fig.data if t.meta["kind"] == "end"]
    assert len(ends) == 1 and ends[0].marker.symbol == "x" and list(ends[0].x) == [32]
    assert any(a.text == "no positions past 32" for a in fig.layout.annotations)
    # at 1024 px two panels' long x titles overlapped; the training length is a label on its line
    for v in (learned, alibi):
        v.scores += [dataclasses.replace(score, protocol="sliding") for score in v.scores]
    both = viz.extrapolation_figure([learned, alibi], ["learned", "ALiBi"], ["windows", "sliding"])
    assert both.layout.xaxis.title.text == both.layout.xaxis2.title.text == "window length (tokens)"
    assert [a.text for a in both.layout.annotations].count("trained") == 2
    assert list(both.layout.yaxis.tickvals) == [6, 7, 8]  # perplexities e^1.7 .. e^2.1, labelled whole


def test_position_loss_figure_leaves_out_what_was_not_measured():
    learned = _variant("lm-learned", "learned", {1.0: 1.9, 2.0: 0.0}, max_length=32)
    alibi = _variant("lm-alibi", "alibi", {1.0: 1.8, 2.0: 1.7})
    fig = viz.position_loss_figure([learned, alibi], ["learned", "ALiBi"], 64)
    assert [t.meta["variant"] for t in fig.data] == ["lm-alibi"]
    assert list(fig.data[0].y) == [1.7] * 64


def test_markdown_escape_leaves_nothing_to_interpret():
    assert markdown_escape("a_b *c* [x](y) :smile: $1$") == \
        "a\\_b \\*c\\* \\[x\\]\\(y\\) \\:smile\\: \\$1\\$"


def test_similarity_panels_say_what_each_scheme_has_instead_of_vectors():
    sinusoid = pv.sinusoidal_values(12, 8)
    alibi = pv.alibi_view(4, 12)
    panels = pv.similarity_panels(sinusoid, None, None, alibi, 12, 8)
    assert [p.key for p in panels] == ["sin", "learned", "alibi", "rope"]
    assert np.allclose(panels[0].matrix, pv.cosine_similarity(sinusoid)) and panels[1].matrix is None
    assert np.array_equal(panels[2].matrix, alibi.bias[0]) and "no per-position vector" in panels[2].note
    theta = 10000.0 ** (-np.arange(0, 8, 2) / 8)
    m, n = 9, 2
    assert panels[3].matrix[m, n] == pytest.approx(2 * np.cos((m - n) * theta).sum())
    distances, ones, rand, bound_d, bound = pv.rope_curves(8, 20)
    assert len(distances) == len(ones) == len(rand) == len(bound_d) == len(bound) == 21
