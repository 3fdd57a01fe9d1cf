"""Anatomy of Hugging Face folders: every family the lab reads gets named parts (attention q/k/v/o with grouped
key/value heads, gated or plain MLP, RMSNorm, embeddings, a tied or untied head), each formula's value equals the
counted parameters, the rows add up to transformers' own count, and nothing is left as "other"."""

from __future__ import annotations

from pathlib import Path

import pytest

from core.io.checkpoint import load
from core.io.hf_families import path_get
from core.lens.anatomy import table
from tests.conftest import require_hf_extra

DECODERS = ("llama", "mistral", "qwen2", "qwen3", "gemma", "gemma2", "gemma3_text", "phi3", "gpt_neox", "phi", "opt",
            "bloom")


def _folder(tmp_path: Path, family: str) -> Path:
    require_hf_extra()
    from bench.hf_folders import decoder_folder
    from tests import hf_models

    if family in ("gpt2", "distilbert", "roberta"):
        return getattr(hf_models, f"{family}_folder")(tmp_path / family)
    if family.startswith("bert"):
        architecture = "BertForSequenceClassification" if family == "bert-classifier" else "BertForMaskedLM"
        return hf_models.bert_folder(tmp_path / family, architecture)
    return decoder_folder(tmp_path / family, family)


def _expected_attention(config, attention) -> int:
    """2·C·h·d + 2·C·g·d weights from the config alone, plus the bias vectors the projections hold."""
    C = config.hidden_size
    h = config.num_attention_heads
    g = getattr(config, "num_key_value_heads", None) or h
    d = getattr(config, "head_dim", None) or C // h
    biases = sum(m.bias.numel() for m in attention.modules() if getattr(m, "bias", None) is not None
                 and type(m).__name__ in ("Linear", "Conv1D") and m.bias.dim() == 1)
    return 2 * C * h * d + 2 * C * g * d + biases


@pytest.mark.parametrize("family", DECODERS + ("gpt2", "bert", "bert-classifier", "distilbert", "roberta"))
def test_every_family_has_named_parts_whose_formulas_equal_the_counts(tmp_path, family):
    loaded = load(_folder(tmp_path, family))
    model = loaded.model
    rows = table.parameter_table(model)
    total = model.inner.num_parameters()  # transformers' own count: a tied tensor once
    assert table.totals(model).total == total == sum(r.parameters for r in rows)
    assert all(r.matches for r in rows), [(r.module, r.formula, r.where, r.parameters) for r in rows if not r.matches]
    roles = table.role_totals(rows)
    assert "other" not in roles, [r.module for r in rows if r.role == "other"]
    assert not any("I·O" in r.formula for r in rows)
    assert {"embeddings", "attention", "feed-forward", "norm"} <= set(roles)
    if not model.config.causal:  # encoders: the names and sums above
        return
    family_entry = model.family
    layers = path_get(model.base, family_entry.layers)
    config = model.inner.config
    attention_rows = [r for r in rows if r.role == "attention"]
    assert len(attention_rows) == len(layers)
    for row, layer in zip(attention_rows, layers, strict=True):
        attention = path_get(layer, family_entry.attention)
        assert row.parameters == row.formula_value == _expected_attention(config, attention)
        if getattr(config, "num_key_value_heads", None) not in (None, config.num_attention_heads):
            assert "g" in row.formula and f"g={config.num_key_value_heads}" in row.where
    mlp = [r for r in rows if r.role == "feed-forward"]
    F = getattr(config, "intermediate_size", None) or getattr(config, "ffn_dim", None) or 4 * config.hidden_size
    C = config.hidden_size
    gated = family not in ("gpt_neox", "phi", "opt", "bloom", "gpt2")
    for row in mlp:
        assert row.formula.startswith("3·C·F" if gated else "2·C·F") and f"C={C}" in row.where
        if gated:
            assert row.parameters == 3 * C * F
    if family_entry.norm.startswith("rms"):
        norms = [r for r in rows if r.role == "norm"]
        assert norms and all(r.formula in ("C", "d") and "RMSNorm" in r.note for r in norms)
    head = next(r for r in rows if r.role == "head")
    output = model.inner.get_output_embeddings()
    bias = 0 if output.bias is None else output.bias.numel()
    if output.weight is model.inner.get_input_embeddings().weight:  # tied: the head counts nothing of it
        assert head.tied_to and head.parameters == bias
    else:
        assert head.parameters == output.weight.numel() + bias and not head.tied_to


def test_a_llama_folder_that_ties_its_head_counts_it_once(tmp_path):
    require_hf_extra()
    from bench.hf_folders import decoder_folder

    model = load(decoder_folder(tmp_path / "tied", "llama", tie_word_embeddings=True)).model
    assert model.head.unembed.weight is model.tok_emb.weight
    rows = table.parameter_table(model)
    head = next(r for r in rows if r.role == "head")
    assert (head.parameters, head.tied_to) == (0, "model.embed_tokens")
    assert sum(r.parameters for r in rows) == table.totals(model).total == model.inner.num_parameters()
