"""Model anatomy: counts equal formulas, course presets counted on built modules, masks as the model."""

import json

import numpy as np
import pytest
import torch

from core.figures import teaching as viz
from core.figures.common import ZERO_WIDTH
from core.io import checkpoint
from core.lens.anatomy import formulas, masks, references, table
from core.model.config import PRESETS, ModelConfig
from core.model.tokenizer import PAD_CHAR, CharTokenizer, WordTokenizer
from core.model.transformer import Transformer
from tests.conftest import TINY_CORPUS, save_tiny_checkpoint, tiny_model


@pytest.mark.parametrize("name,expected", [
    ("cs224n-mingpt", 3_323_392),
    ("pytorch-tutorial-lm", 21_018_401),
    ("pytorch-tutorial-2class", 10_968_602),
])
def test_course_presets_are_counted_exactly_on_built_modules(name, expected):
    model = references.build_preset(name)
    assert next(model.parameters()).device.type == "meta"  # nothing allocated
    assert sum(p.numel() for p in model.parameters()) == expected
    assert table.totals(model).total == expected
    rows = table.parameter_table(model)
    assert sum(r.parameters for r in rows) == expected
    assert all(r.matches for r in rows), [(r.module, r.formula, r.formula_value, r.parameters)
                                          for r in rows if not r.matches]
    assert references.COURSE_PRESETS[name].stated_parameters == expected


def test_mingpt_preset_is_our_model_with_the_course_config():
    model = references.build_preset("cs224n-mingpt")
    assert isinstance(model, Transformer)
    assert model.config == ModelConfig(**PRESETS["cs224n-mingpt"])
    assert model.num_parameters() == 3_323_392


def test_tutorial_model_is_a_real_post_norm_relu_encoder_with_a_buffer_table():
    torch.manual_seed(0)
    model = references.TutorialTransformer(ntoken=50, d_model=16, nhead=2, d_hid=24, nlayers=2, dropout=0.0)
    layer = model.transformer_encoder.layers[0]
    assert isinstance(layer, torch.nn.TransformerEncoderLayer) and not layer.norm_first
    assert layer.activation is torch.nn.functional.relu
    out = model.eval()(torch.randint(0, 50, (7, 3)))  # (T, B) as in the tutorial
    assert out.shape == (7, 3, 50)
    assert "pos_encoder.pe" in model.state_dict()  # saved with the model...
    assert "pos_encoder.pe" not in dict(model.named_parameters())  # ...but not a parameter
    V, C, F, L = 50, 16, 24, 2
    closed_form = V * C + L * (4 * (C * C + C) + 2 * C * F + F + C + 4 * C) + C * V + V
    assert table.totals(model).total == closed_form
    rows = {r.module: r for r in table.parameter_table(model)}
    assert rows["pos_encoder"].parameters == 0 and rows["pos_encoder"].buffer_values == 5000 * C
    assert rows["linear"].formula == "C·V + V" and rows["linear"].role == "head"
    assert rows["transformer_encoder.layers.1.self_attn"].formula == "4·(C² + C)"
    two_class = references.TutorialTransformer(50, 16, 2, 24, 2, n_out=2)
    assert {r.module: r for r in table.parameter_table(two_class)}["linear"].formula == "C·K + K"


def test_formulas_read_as_the_course_writes_them():
    rows = {r.module: r for r in table.parameter_table(references.build_preset("cs224n-synthesizer"))}
    assert rows["blocks.0.attn"].formula == "C² + C + (C/h)·(T-1) + (T-1) + 2·(C² + C)"
    assert rows["blocks.0.attn"].where == "C=256, h=8, T=128"
    assert rows["blocks.0.attn"].parameters == 256**2 + 256 + 32 * 127 + 127 + 2 * (256**2 + 256)
    mingpt = {r.module: r for r in table.parameter_table(references.build_preset("cs224n-mingpt"))}
    assert mingpt["blocks.3.attn"].formula == "4·(C² + C)"
    assert mingpt["blocks.3.ln2"].formula == "2·C"
    assert mingpt["head"].formula == "V·C"
    assert mingpt["pos"].formula == "T·C"
    assert mingpt["blocks.0.mlp"].formula == "8·C² + 5·C"


def test_evaluator_is_exact_and_refuses_anything_but_arithmetic():
    assert formulas.evaluate("C**2 + C + (C/h)*(T-1)", {"C": 256, "h": 8, "T": 128}) == 65792 + 32 * 127
    with pytest.raises(ValueError):
        formulas.evaluate("__import__('os').getcwd()", {})
    with pytest.raises(ValueError):
        _ = formulas.Formula("C/h", {"C": 10, "h": 3}).value


TINY_VARIANTS = [
    ("lm", {}),
    ("lm", {"attention": "synthesizer"}),
    ("lm", {"positional": "sinusoidal"}),
    ("lm", {"positional": "alibi"}),
    ("lm", {"positional": "rope"}),
    ("lm", {"positional": "none", "attention": "synthesizer"}),
    ("birthplace", {}),
    ("classify", {}),
]


@pytest.mark.parametrize("task,overrides", TINY_VARIANTS)
def test_table_of_a_tiny_checkpoint_sums_to_its_parameter_count(tmp_path, task, overrides):
    path = save_tiny_checkpoint(tmp_path / "tiny.safetensors", task, **overrides)
    model = checkpoint.load(path).model
    rows = table.parameter_table(model)
    assert sum(r.parameters for r in rows) == model.num_parameters()
    assert all(r.matches for r in rows)
    assert {r.role for r in rows} >= {"embeddings", "positional", "attention", "feed-forward", "norm", "head"}
    totals = table.totals(model)
    assert (totals.total, totals.trainable, totals.non_trainable) == (model.num_parameters(),) * 2 + (0,)
    pos = next(r for r in rows if r.module == "pos")
    if model.config.positional == "learned":
        assert pos.parameters == model.config.block_size * model.config.n_embd
    else:
        assert (pos.parameters, pos.formula) == (0, "0")  # computed, nothing learned
    head = next(r for r in rows if r.module == "head")
    assert head.formula == ("C² + C + C·K + K" if task == "classify" else "V·C")


def test_frozen_parameters_are_non_trainable():
    model = tiny_model()
    model.tok_emb.weight.requires_grad_(False)
    totals = table.totals(model)
    assert totals.non_trainable == model.tok_emb.weight.numel()
    row = next(r for r in table.parameter_table(model) if r.module == "tok_emb")
    assert row.trainable == 0 and row.parameters == row.formula_value


def test_role_totals_add_up():
    rows = table.parameter_table(references.build_preset("cs224n-mingpt"))
    roles = table.role_totals(rows)
    assert list(roles) == ["embeddings", "positional", "attention", "feed-forward", "norm", "head"]
    assert roles["attention"] == 4 * 263_168 and sum(roles.values()) == 3_323_392


# --- masks -------------------------------------------------------------------------------------------

def test_causal_mask_is_what_the_model_uses():
    model = tiny_model(causal=True)
    allowed = model.attention_mask(torch.zeros(1, 6, dtype=torch.long), 0, 6)[0, 0].numpy()
    np.testing.assert_array_equal(masks.causal_mask(6), allowed)
    assert masks.causal_mask(3).tolist() == [[True, False, False], [True, True, False], [True, True, True]]


def test_padding_mask_is_what_the_model_uses():
    model = tiny_model(causal=False)
    idx = torch.tensor([[5, 7, 0, 9, 0, 0]])  # an unknown character mid-sentence is also PAD (0)
    allowed = model.attention_mask(idx, 0, 6)[0, 0].numpy()
    np.testing.assert_array_equal(masks.padding_mask((idx[0] != 0).tolist()), allowed)
    all_pad = model.attention_mask(torch.zeros(1, 3, dtype=torch.long), 0, 3)[0, 0].numpy()
    np.testing.assert_array_equal(masks.padding_mask([False] * 3), all_pad)  # attends everything


def test_mask_input_without_a_tokenizer_splits_characters_and_pads():
    masked = masks.mask_input("abc", None, 5)
    assert masked.tokens == ["a", "b", "c", PAD_CHAR, PAD_CHAR]
    assert masked.is_real == [True, True, True, False, False]
    cut = masks.mask_input("abcdef", None, 4)
    assert cut.tokens == list("abcd") and cut.truncated == 2 and all(cut.is_real)
    empty = masks.mask_input("", None, 3)
    assert empty.is_real == [False] * 3


def test_mask_input_uses_the_tokenizer_ids():
    chars = CharTokenizer.from_corpus(TINY_CORPUS)
    masked = masks.mask_input("Ada€", chars, 6)
    assert masked.tokens == ["A", "d", "a", "€", PAD_CHAR, PAD_CHAR]
    assert masked.is_real == [True, True, True, False, False, False]  # € is read as PAD (id 0)
    assert masked.unknown == ["€"] and masked.read_as_padding == 1
    words = WordTokenizer.from_corpus(TINY_CORPUS)
    masked = masks.mask_input("Ada zzz", words, 4)
    assert masked.tokens == ["ada", "zzz", "<pad>", "<pad>"]
    assert masked.is_real == [True, True, False, False]  # unknown words are <unk>, not padding
    assert masked.unknown == ["zzz"] and masked.read_as_padding == 0


def test_mask_heatmap_escapes_tokens_and_shows_whitespace():
    fig = viz.mask_heatmap(masks.causal_mask(3), ["<b>", " ", "<b>"])
    heat = fig.data[0]
    np.testing.assert_array_equal(heat.z, [[1, 0, 0], [1, 1, 0], [1, 1, 1]])
    assert [x.replace(ZERO_WIDTH, "") for x in heat.x] == ["&lt;b&gt;", "␣", "&lt;b&gt;"]
    assert len(set(heat.x)) == 3 and list(heat.y) == list(heat.x)  # duplicates kept apart
    assert fig.layout.yaxis.scaleanchor is None  # a forced square left bands of white in narrow columns
    assert [t.name for t in fig.data[1:]] == ["may attend", "masked"]  # a legend for blue and grey
    assert fig.data[1].marker.color == heat.colorscale[-1][1] and fig.data[2].marker.color == heat.colorscale[0][1]
    assert "masked" in heat.text[0][1] and "allowed" in heat.text[1][0]


def test_parameter_bars_show_counts_and_shares():
    fig = viz.parameter_share_bars({"embeddings": 300, "head": 100})
    bar = fig.data[0]
    assert list(bar.y) == ["embeddings", "head"] and list(bar.x) == [300, 100]
    assert list(bar.text) == ["300 (75.0%)", "100 (25.0%)"]


# --- weight tying ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("bias", [False, True])
def test_a_converted_nanogpt_models_tied_head_is_counted_once_as_nanogpt_counts(tmp_path, bias):
    """nanoGPT ties lm_head to wte; the converter stores the tensor twice (equal values). The total is nanoGPT's own
    get_num_params(non_embedding=False): every parameter once, the position table included."""
    from core.io.convert import main
    from tests.test_nanogpt import BLOCK, CHARS, N_EMBD, N_LAYER, meta_pkl, nanogpt_ckpt, write_ckpt

    ckpt_path = write_ckpt(tmp_path / "ckpt.pt", nanogpt_ckpt(bias))
    (tmp_path / "meta.pkl").write_bytes(meta_pkl(CHARS))
    out = tmp_path / "sh.safetensors"
    assert main(["nanogpt", str(ckpt_path), "--meta", str(tmp_path / "meta.pkl"), "-o", str(out)]) == 0
    model = checkpoint.load(out).model
    V, C, T, L, b = len(CHARS), N_EMBD, BLOCK, N_LAYER, int(bias)
    layer_norm = C + b * C
    attention = 3 * C * C + b * 3 * C + C * C + b * C  # c_attn, c_proj
    mlp = 4 * C * C + b * 4 * C + 4 * C * C + b * C  # c_fc, c_proj
    nanogpt_count = V * C + T * C + L * (2 * layer_norm + attention + mlp) + layer_norm  # wte (= lm_head), wpe, h, ln_f
    totals = table.totals(model)
    assert (totals.total, totals.trainable) == (nanogpt_count, nanogpt_count)
    rows = table.parameter_table(model)
    assert sum(r.parameters for r in rows) == nanogpt_count
    assert all(r.matches for r in rows)
    head = next(r for r in rows if r.module == "head")
    assert (head.parameters, head.tied_to, head.role) == (0, "tok_emb", "head")
    assert "tied" in head.note
    roles = table.role_totals(rows)
    assert roles["head"] == 0 and roles["embeddings"] == V * C and sum(roles.values()) == nanogpt_count
    from core.lens.describe import model_card  # the sidebar's card gives the same count

    (info,) = checkpoint.list_checkpoints(tmp_path)
    assert model_card(info)["Parameters"] == (f"{nanogpt_count:,} (the output head shares the embedding's "
                                              "weights: counted once)")


def test_a_head_that_only_looks_like_the_embedding_is_counted(tmp_path):
    model = tiny_model()
    with torch.no_grad():
        model.head.unembed.weight.copy_(model.tok_emb.weight)
        model.head.unembed.weight[0, 0] += 1.0  # one value apart: not tied
    rows = table.parameter_table(model)
    head = next(r for r in rows if r.module == "head")
    assert head.parameters == model.head.unembed.weight.numel() and head.tied_to == ""
    assert table.totals(model).total == model.num_parameters() == sum(r.parameters for r in rows)
    from core.lens.describe import tied_head_values

    assert tied_head_values(save_tiny_checkpoint(tmp_path / "untied.safetensors", "lm")) == 0


def test_the_same_parameter_in_two_rows_is_counted_once():
    model = tiny_model()
    model.head.unembed.weight = model.tok_emb.weight  # tied as Hugging Face ties: one Parameter
    rows = table.parameter_table(model)
    assert sum(r.parameters for r in rows) == table.totals(model).total == model.num_parameters()
    head = next(r for r in rows if r.module == "head")
    assert (head.parameters, head.formula, head.tied_to) == (0, "0", "tok_emb")


def test_every_column_is_a_second_table_that_fits_the_page(monkeypatch):
    """The walk-through: "Every column" put the new columns off-screen in one table whose scrollbar was hidden."""
    from streamlit.testing.v1 import AppTest

    from tests.conftest import ROOT
    from ui.display import MAIN_WIDTH

    monkeypatch.setenv("ATTENTION_LAB_CHECKPOINTS", str(ROOT / "checkpoints"))
    at = AppTest.from_file(str(ROOT / "pages" / "anatomy.py"), default_timeout=60)
    at.run()
    assert len(at.dataframe) == 1
    at.toggle(key="anatomy_columns").set_value(True).run()
    assert not at.exception and len(at.dataframe) == 2
    first, second = at.dataframe
    assert list(first.proto.column_order) == ["module", "parameters", "formula = count", "formula"]
    assert list(second.proto.column_order) == ["module", "part", "formula value", "where", "buffers", "note"]
    widths = json.loads(second.proto.columns)
    assert sum(widths[c]["width"] for c in second.proto.column_order) <= MAIN_WIDTH
