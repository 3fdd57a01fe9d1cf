"""core.lens.sae: a TopK SAE recovers known sparse directions; steering by a known feature moves the planted piece;
the saved file round-trips and refuses other weights; bad input is one sentence each."""

from __future__ import annotations

import json

import pytest
import torch
import torch.nn.functional as F

from core.io.checkpoint import load
from core.lens import sae as S
from tests.conftest import TINY_CORPUS, save_tiny_checkpoint

TEXT = TINY_CORPUS * 30


def tiny_settings(**overrides) -> S.SAESettings:
    fields = dict(layer=1, expansion=2, k=4, steps=40, batch_size=64, lr=3e-3, buffer_rows=1024)
    fields.update(overrides)
    return S.SAESettings(**fields)


@pytest.fixture
def tiny_lm(tmp_path):
    return load(save_tiny_checkpoint(tmp_path / "tiny-lm.safetensors"))


def test_recovers_known_sparse_directions():
    gen = torch.Generator().manual_seed(0)
    truth = F.normalize(torch.randn(32, 16, generator=gen), dim=1)  # 32 unit directions in 16-d

    def batch(n: int) -> torch.Tensor:
        count = torch.randint(2, 4, (n, 1), generator=gen)  # 2 or 3 directions per sample
        ranks = torch.rand(n, 32, generator=gen).argsort(dim=1).argsort(dim=1)
        chosen = ranks < count
        coefficients = (0.5 + torch.rand(n, 32, generator=gen)) * chosen  # positive
        return coefficients @ truth

    torch.manual_seed(0)
    sae = S.new_sae(batch(4096), expansion=4, k=3)
    S.fit(sae, batch, steps=1500, batch_size=256, lr=3e-3)
    cosines = truth @ F.normalize(sae.W_dec.detach(), dim=1).T  # (32, 64)
    best = cosines.max(dim=1).values
    assert (best >= 0.9).all(), best


def test_steering_by_the_unembedding_row_of_a_piece_raises_that_piece(tiny_lm):
    model = tiny_lm.model
    with torch.no_grad():
        model.head.unembed.weight.mul_(20)  # logits of a random init are all near 0; these say what the stream holds
    piece = tiny_lm.tokenizer.encode("V")[0]
    layer = model.config.n_layer - 1  # the residual stream the final LayerNorm reads
    sae = S.SparseAutoencoder(model.config.n_embd, 2 * model.config.n_embd, 4, scale=1.0)
    with torch.no_grad():
        sae.W_dec[0] = F.normalize(model.head.unembed.weight[piece], dim=0)
    tables = S.feature_tables(model, sae, S.model_text(tiny_lm, TEXT).train, layer, "resid")
    tables.pop("final_scale")
    sae_file = S.LoadedSAE(sae, {"layer": layer, "site": "resid", "final_scale": 1.0}, tables, tiny_lm.path)
    prompt = "Ada was born in"
    plain = S.steer(tiny_lm, sae_file, 0, 0.0, prompt, new=4)
    steered = S.steer(tiny_lm, sae_file, 0, 40.0, prompt, new=4)
    label = S.feature(tiny_lm, sae_file, 0).raised[0][0]
    from core.lens.attention import piece_label

    assert label == piece_label(tiny_lm.tokenizer, piece)  # the logit effect names the planted piece first
    p_plain = dict(zip(plain.pieces, plain.plain_probs, strict=True))
    p_steered = dict(zip(steered.pieces, steered.steered_probs, strict=True))
    assert p_plain.get(label, 0.0) < 0.3 and p_steered[label] > 0.9
    assert steered.steered_text.startswith(tiny_lm.tokenizer.decode([piece]))
    assert plain.plain_text == plain.steered_text  # scale 0 changes nothing
    assert steered.plain_text == plain.plain_text


def test_trained_sae_round_trips_and_refuses_other_weights(tiny_lm, tmp_path):
    sae, meta, tables = S.train_sae(tiny_lm, tiny_settings(), TEXT)
    assert 0 <= meta["fvu"] < 2 and meta["steps"] == 40 and meta["width"] == 64
    assert meta["model_sha256"] and meta["output_head"] and meta["losses"]["pieces"] > 0
    path = S.save_sae(S.sae_path(tiny_lm.path, 1, "resid"), sae, meta, tables)
    assert path.name == "tiny-lm.sae-L1-resid.safetensors" and S.saes_beside(tiny_lm.path) == [path]
    back = S.load_sae(path, tiny_lm.path)
    x = torch.randn(5, 32)
    assert torch.equal(back.sae(x), sae(x))
    assert json.dumps(back.meta, allow_nan=True) == json.dumps({**meta, "stats_pieces": tables["stats_pieces"]},
                                                               allow_nan=True)
    for name in S.TABLES:
        assert torch.equal(back.tables[name], tables[name])
    shown = S.feature(tiny_lm, back, S.features_by_density(back)[0])
    assert shown.density > 0 and shown.contexts and len(shown.raised) == 10
    assert max(shown.contexts[0].activations) == pytest.approx(shown.contexts[0].value, rel=1e-2)

    other = save_tiny_checkpoint(tmp_path / "other.safetensors", n_embd=32, n_head=2)
    with pytest.raises(S.SAEError, match="other weights than other.safetensors \\(their sha256 differs\\)"):
        S.load_sae(path, other)


def test_the_command_trains_and_shows_a_feature(tiny_lm, tmp_path, capsys):
    text = tmp_path / "text.txt"
    text.write_text(TEXT)
    out = tmp_path / "cmd.sae.safetensors"
    assert S.main(["train", str(tiny_lm.path), "--layer", "0", "--site", "mlp", "--k", "4", "--expansion", "2",
                   "--steps", "20", "--batch-size", "32", "--text", str(text), "--out", str(out)]) == 0
    assert "leaves" in capsys.readouterr().out
    meta = S.read_sae_meta(out)
    assert meta["site"] == "mlp" and meta["layer"] == 0 and meta["command"].startswith("python -m core.lens.sae train")
    assert S.main(["show", str(out), "--feature", "3", "--checkpoint", str(tiny_lm.path), "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["number"] == 3 and set(shown) >= {"density", "contexts", "raised", "lowered"}


def test_bad_input_is_one_sentence(tiny_lm, tmp_path):
    with pytest.raises(S.SAEError, match="^This model has layers 0 to 1; there is no layer 5.$"):
        S.train_sae(tiny_lm, tiny_settings(layer=5), TEXT)
    with pytest.raises(S.SAEError, match="^The text is empty: there is nothing to train an SAE on.$"):
        S.train_sae(tiny_lm, tiny_settings(), "   \n")
    with pytest.raises(S.SAEError, match="records no training text"):
        S.train_sae(tiny_lm, tiny_settings())  # the tiny checkpoint names no data file

    classifier = load(save_tiny_checkpoint(tmp_path / "tiny-classifier.safetensors", "classify"))
    sae, meta, tables = S.train_sae(classifier, tiny_settings(steps=10), TEXT)  # still trains
    assert meta["output_head"] is False
    sae_file = S.LoadedSAE(sae, meta, tables, tmp_path / "x")
    shown = S.feature(classifier, sae_file, 0)
    assert shown.raised == [] and shown.note.startswith("This model has no output head")
    assert "no output head" in S.summary_sentence(meta)
    with pytest.raises(S.SAEError, match="does not generate text"):
        S.steer(classifier, sae_file, 0, 1.0, "Ada")
    with pytest.raises(S.SAEError, match="there is no feature 999"):
        S.feature(classifier, sae_file, 999)


def test_unsteered_continuation_is_the_models_own_greedy_generation(tiny_lm):
    ids = tiny_lm.tokenizer.encode("Ada was born in")
    new, first = S._continue(tiny_lm.model, ids, None, 8)
    own = tiny_lm.model.generate(torch.tensor([ids]), 8)[0, len(ids):].tolist()
    assert new == own
    logits, _ = tiny_lm.model(torch.tensor([ids]))
    assert torch.allclose(first, torch.softmax(logits[0, -1], -1), atol=1e-6)


def test_an_sae_beside_its_model_is_not_listed_as_a_model(tmp_path):
    """The picker lists every *.safetensors of the checkpoints folder; the SAE saved beside a model (sae_path) is not a
    model, and was listed as an unreadable one ('has format attention-lab-sae/1')."""
    from core.io.checkpoint import SAE_FILE, list_checkpoints

    model = tmp_path / "tiny-lm.safetensors"
    save_tiny_checkpoint(model, "lm")
    for layer, site in ((0, "resid"), (11, "mlp")):
        path = S.sae_path(model, layer, site)
        assert SAE_FILE.fullmatch(path.name)
        path.write_bytes(b"not a model")
    assert [(i.name, i.error) for i in list_checkpoints(tmp_path)] == [("tiny-lm", None)]
