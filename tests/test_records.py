"""Attention records (core.lens.records): the shapes people's code returns become one file the lab opens, the
lab's own export opens again identically, and bad files are one sentence each."""

from __future__ import annotations

import io
import pickle
import zipfile
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

from core.lens import records as rec
from core.lens.export import export
from tests.conftest import require_hf_extra, save_tiny_checkpoint


def softmax_maps(*shape: int, causal: bool = False, seed: int = 0) -> torch.Tensor:
    """Random attention probabilities (..., T, T): rows sum to 1 (0 above the diagonal when causal)."""
    scores = torch.randn(*shape, generator=torch.Generator().manual_seed(seed))
    if causal:
        T = shape[-1]
        scores = scores.masked_fill(~torch.tril(torch.ones(T, T, dtype=torch.bool)), float("-inf"))
    return torch.softmax(scores, dim=-1)


def read(path: Path) -> rec.AttentionRecords:
    return rec.read_records(path.read_bytes(), path.name)


@pytest.mark.parametrize("suffix", [".npz", ".safetensors"])
def test_pa2_maps_grouped_into_layers_round_trip(tmp_path, suffix):
    """CSE 256 PA2: `_, attn_maps = model(x)`, a flat list of (1, T, T) maps, n_head per layer."""
    tokens = ["the", "cat", "sat", "on", "the", "mat"]
    maps = [softmax_maps(1, 6, 6, causal=True, seed=i) for i in range(4)]  # 2 layers x 2 heads
    path = rec.save_attention(tmp_path / f"pa2{suffix}", tokens, maps, heads_per_layer=2, labels=["1"],
                              predictions=["0"], model_name="PA2 decoder")
    opened = read(path)
    (record,) = opened.records
    assert (opened.n_layer, opened.n_head, opened.model_name) == (2, 2, "PA2 decoder")
    assert record.tokens == tokens and (record.label, record.prediction) == ("1", "0")
    for i, m in enumerate(maps):
        np.testing.assert_array_equal(record.attention[i // 2, i % 2], m[0].numpy())
    run = rec.as_run(record)
    assert run.causal and run.allowed.sum() == 21  # inferred from the zeros above the diagonal


def test_multihead_attention_weights_per_head(tmp_path):
    """nn.MultiheadAttention(need_weights=True, average_attn_weights=False): (B, H, T, T), checked against an
    explicit softmax(q k^T / sqrt(d)) from the module's own projection weights."""
    torch.manual_seed(0)
    mha = nn.MultiheadAttention(16, 4, batch_first=True)
    x = torch.randn(2, 5, 16)
    _, weights = mha(x, x, x, need_weights=True, average_attn_weights=False)
    path = rec.save_attention(tmp_path / "mha.npz", [list("abcde"), list("vwxyz")], [weights])
    opened = read(path)
    q, k, _ = torch.nn.functional.linear(x, mha.in_proj_weight, mha.in_proj_bias).chunk(3, dim=-1)
    q, k = (t.view(2, 5, 4, 4).transpose(1, 2) for t in (q, k))  # (B, H, T, hs)
    expected = torch.softmax(q @ k.transpose(-2, -1) / 2.0, dim=-1).detach().numpy()
    for b in range(2):
        np.testing.assert_allclose(opened.records[b].attention[0], expected[b], atol=1e-6)
    assert opened.records[1].tokens == list("vwxyz") and not rec.as_run(opened.records[0]).causal


def test_a_transformers_tuple_with_padding_is_cut_per_sentence(tmp_path):
    transformers = require_hf_extra()
    config = transformers.BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                                     intermediate_size=32, max_position_embeddings=16)
    model = transformers.BertModel(config, add_pooling_layer=False).eval()
    model.set_attn_implementation("eager")
    ids = torch.tensor([[2, 5, 6, 7, 3], [2, 8, 3, 0, 0]])
    mask = (ids != 0).long()
    with torch.no_grad():
        out = model(input_ids=ids, attention_mask=mask, output_attentions=True)
    tokens = [["[CLS]", "a", "b", "c", "[SEP]"], ["[CLS]", "d", "[SEP]"]]
    with pytest.raises(rec.RecordsError, match="fits 2 readings"):  # 2 sentences, 2 heads: which is which?
        rec.save_attention(tmp_path / "bert.safetensors", tokens, out.attentions)
    path = rec.save_attention(tmp_path / "bert.safetensors", tokens, out.attentions, model_name="tiny-bert",
                              layout="layer batch head")
    opened = read(path)
    assert [r.attention.shape for r in opened.records] == [(2, 2, 5, 5), (2, 2, 3, 3)]
    np.testing.assert_array_equal(opened.records[1].attention, torch.stack(out.attentions)[:, 1, :, :3, :3].numpy())
    with pytest.raises(rec.RecordsError, match="rows do not sum to 1"):  # padding the sentence attended
        rec.save_attention(tmp_path / "x.npz", [tokens[0], ["[CLS]", "d"]], out.attentions, layout="layer batch head")


def test_the_labs_export_opens_again_identically(tmp_path):
    from core.io.checkpoint import load
    from core.lens.attention import run_attention

    path = save_tiny_checkpoint(tmp_path / "tiny-lm.safetensors", "lm")
    text = "Ada was born in London."
    export(path, text, tmp_path / "ada.npz")
    opened = read(tmp_path / "ada.npz")
    loaded = load(path)
    run = run_attention(loaded.model, loaded.tokenizer, loaded.task, text, loaded.labels)
    again = rec.as_run(opened.records[0])
    np.testing.assert_array_equal(again.attention, run.attention)
    assert again.tokens == run.tokens and again.ids == run.ids and again.causal == run.causal
    np.testing.assert_array_equal(again.allowed, run.allowed)


def _npz(**arrays) -> bytes:
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    return buffer.getvalue()


def _bad_rows() -> np.ndarray:
    attention = softmax_maps(1, 2, 3, 3).numpy()
    attention[0, 1, 2] *= 0.5
    return attention


def _with_nan() -> np.ndarray:
    attention = softmax_maps(1, 2, 3, 3).numpy()
    attention[0, 0, 1, 1] = np.nan
    return attention


BAD_FILES = {
    "rows": (lambda: _npz(attention=_bad_rows(), tokens=np.array(list("abc"))), "rows do not sum to 1"),
    "nan": (lambda: _npz(attention=_with_nan(), tokens=np.array(list("abc"))), "NaN"),
    "count": (lambda: _npz(attention=softmax_maps(1, 2, 3, 3).numpy(), tokens=np.array(list("abcd"))),
              "has 4 tokens but its maps are 3 x 3"),
    "huge": (lambda: _npz(attention=softmax_maps(1, 1, 2, 2).numpy(), tokens=np.array(["t"] * 20_000)),
             "20,000 tokens"),
    "pickle": (lambda: pickle.dumps({"attention": softmax_maps(1, 1, 2, 2).numpy(), "tokens": ["a", "b"]}),
               "is a Python pickle"),
    "objects": (lambda: _npz(attention=softmax_maps(1, 1, 2, 2).numpy(), tokens=np.array(["a", 1], dtype=object)),
                "pickled Python objects"),
    "negative": (lambda: _npz(attention=-softmax_maps(1, 1, 2, 2).numpy(), tokens=np.array(["a", "b"])),
                 "negative weights"),
    "text": (lambda: b"layer,head,weight\n0,0,1\n", "not a .npz or .safetensors file"),
    "damaged": (lambda: _npz(attention=softmax_maps(1, 1, 2, 2).numpy(), tokens=np.array(["a", "b"]))[:60],
                "damaged"),
    "other": (lambda: _npz(weights=softmax_maps(1, 1, 2, 2).numpy()), "neither 'attention' and 'tokens'"),
    "empty": (lambda: b"", "is empty"),
}


@pytest.mark.parametrize("case", BAD_FILES)
def test_bad_files_are_one_sentence(case):
    make, message = BAD_FILES[case]
    with pytest.raises(rec.RecordsError, match=message) as err:
        rec.read_records(make(), "bad.npz")
    said = str(err.value)
    assert said.endswith(".") and said.count(". ") == 0 and "\n" not in said, said


def test_a_huge_file_is_refused_before_its_arrays_are_read(monkeypatch):
    """The 20,000-token check reads the arrays' headers only: np.load is never reached."""
    data = _npz(attention=softmax_maps(1, 1, 2, 2).numpy(), tokens=np.array(["t"] * 20_000))
    monkeypatch.setattr(np, "load", lambda *a, **k: pytest.fail("np.load ran"))
    with pytest.raises(rec.RecordsError, match="20,000 tokens"):
        rec.read_records(data, "huge.npz")


def test_a_pickle_inside_an_npz_never_runs(tmp_path):
    marker = tmp_path / "ran"

    class RunsCode:
        def __reduce__(self):
            import os

            return (os.mkdir, (str(marker),))
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("attention.npy", pickle.dumps(RunsCode()))
        archive.writestr("tokens.npy", pickle.dumps(["a"]))
    with pytest.raises(rec.RecordsError):
        rec.read_records(buffer.getvalue(), "evil.npz")
    assert not marker.exists()


@pytest.mark.parametrize("attentions, tokens, message", [
    ([], ["a"], "empty"),
    ([np.ones((2, 2)) / 2, np.ones((3, 3)) / 3], ["a", "b"], "different shapes"),
    (np.ones((2, 2, 2, 2, 2, 2)) / 2, ["a", "b"], "6 dimensions"),
    (softmax_maps(2, 2, 2).numpy(), ["a", "b"], "fits 2 readings .*'head' \\(2 heads\\) and 'layer' \\(2 layers\\)"),
    ([np.ones((1, 2, 2)) / 2] * 3, ["a", "b"], "cannot be grouped 2 heads per layer"),
    ([np.ones((3, 2, 2)) / 2], [["a", "b"]] * 2, "fits no reading with 2 token list"),
    ([np.array([["x", "y"], ["z", "w"]])], ["a", "b"], "not attention weights"),
])
def test_save_attention_refuses_what_it_cannot_read(tmp_path, attentions, tokens, message):
    heads = 2 if "grouped" in message else None
    with pytest.raises(rec.RecordsError, match=message) as err:
        rec.save_attention(tmp_path / "x.npz", tokens, attentions, heads_per_layer=heads)
    assert not (tmp_path / "x.npz").exists()
    assert str(err.value).endswith(".") and "\n" not in str(err.value)


class PA2Head(nn.Module):
    """One head of a public CSE 256 PA2 solution's encoder: returns its output and its (B, T, T) weights."""

    def __init__(self, width: int, head_size: int) -> None:
        super().__init__()
        self.key, self.query, self.value = (nn.Linear(width, head_size, bias=False) for _ in range(3))

    def forward(self, x):
        k, q, v = self.key(x), self.query(x), self.value(x)  # (B, T, hs)
        weights = torch.softmax(q @ k.transpose(-2, -1) * k.size(-1) ** -0.5, dim=-1)  # (B, T, T)
        return weights @ v, weights


class PA2MultiHead(nn.Module):
    def __init__(self, width: int, n_head: int) -> None:
        super().__init__()
        self.heads = nn.ModuleList([PA2Head(width, width // n_head) for _ in range(n_head)])
        self.proj = nn.Linear(width, width)

    def forward(self, x):
        outs, maps = zip(*(head(x) for head in self.heads), strict=True)
        return self.proj(torch.cat(outs, dim=-1)), torch.stack(maps)  # (n_head, B, T, T): heads first


class PA2Encoder(nn.Module):
    """That solution's module layout: Encoder.forward(x, y) -> (logits, loss, attn_maps), attn_maps one tensor
    torch.stack-ed over layers of each layer's torch.stack over heads: (n_layer, n_head, B, T, T)."""

    def __init__(self, vocab: int = 20, width: int = 16, n_layer: int = 3, n_head: int = 2) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, width)
        self.layers = nn.ModuleList([PA2MultiHead(width, n_head) for _ in range(n_layer)])
        self.classifier = nn.Linear(width, 3)

    def forward(self, x, y=None):
        h, maps = self.embed(x), []
        for layer in self.layers:
            out, layer_maps = layer(h)
            h = h + out
            maps.append(layer_maps)
        logits = self.classifier(h.mean(1))
        loss = None if y is None else nn.functional.cross_entropy(logits, y)
        return logits, loss, torch.stack(maps)  # (n_layer, n_head, B, T, T)


def test_a_pa2_solutions_stacked_maps_keep_heads_and_sentences_apart(tmp_path):
    """The walk-through's case: (n_layer, n_head, B, T, T). One sentence is read the only way it fits; two
    sentences of equal length with two heads fit two readings and are refused naming both, never guessed;
    layout= then picks the reading, and sentence 1's head 0 is the model's sentence 1, head 0."""
    torch.manual_seed(0)
    encoder = PA2Encoder().eval()
    one = ["the", "cat", "sat", "on", "a", "mat"]
    with torch.no_grad():
        _, _, maps = encoder(torch.tensor([[1, 2, 3, 4, 5, 6]]))
    assert maps.shape == (3, 2, 1, 6, 6)
    (record,) = read(rec.save_attention(tmp_path / "one.npz", one, maps)).records
    assert record.attention.shape == (3, 2, 6, 6)
    np.testing.assert_array_equal(record.attention[2, 1], maps[2, 1, 0].numpy())
    two = [one, ["we", "the", "people", "of", "this", "nation"]]
    with torch.no_grad():
        _, _, maps = encoder(torch.tensor([[1, 2, 3, 4, 5, 6], [7, 8, 9, 10, 11, 12]]))
    with pytest.raises(rec.RecordsError) as err:
        rec.save_attention(tmp_path / "two.npz", two, maps)
    said = str(err.value)
    assert "'layer batch head'" in said and "'layer head batch'" in said and "layout=" in said, said
    assert not (tmp_path / "two.npz").exists()
    records = read(rec.save_attention(tmp_path / "two.npz", two, maps, layout="layer head batch")).records
    assert [r.tokens for r in records] == two
    for b in range(2):
        for h in range(2):
            np.testing.assert_array_equal(records[b].attention[:, h], maps[:, h, b].numpy())
    assert not np.array_equal(records[0].attention[:, 1], maps[:, 0, 1].numpy())  # the transposed reading differs


def test_heads_per_layer_is_read_for_an_array_too(tmp_path):
    """heads_per_layer names the heads axis of an array: a shape whose readings disagree on it is settled."""
    maps = softmax_maps(3, 2, 2, 5, 5)  # (n_layer, n_head=2, B=2, T, T) or (n_layer, B=2, n_head=2, T, T)
    tokens = [list("abcde"), list("vwxyz")]
    with pytest.raises(rec.RecordsError, match="heads per layer, not heads_per_layer=3"):
        rec.save_attention(tmp_path / "x.npz", tokens, maps, heads_per_layer=3)
    with pytest.raises(rec.RecordsError, match="layout='head layer' does not fit"):
        rec.save_attention(tmp_path / "x.npz", tokens, maps, layout="head layer")
    with pytest.raises(rec.RecordsError, match="holds 3 sentence"):
        rec.save_attention(tmp_path / "x.npz", tokens, maps, layout="batch layer head")


class PA2Like(nn.Module):
    """What a CSE 256 PA2 solution looks like from outside: forward(x) -> (logits, attn_maps), one (1, T, T) map
    per head and layer (2 x 2 here), computed by an explicit softmax."""

    def __init__(self, vocab: int = 20, width: int = 16, n_layer: int = 2, n_head: int = 2) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, width)
        self.qk = nn.ModuleList([nn.Linear(width, 2 * width) for _ in range(n_layer)])
        self.n_head, self.out = n_head, nn.Linear(width, 2)

    def forward(self, x):
        h = self.embed(x)  # (1, T, C)
        maps = []
        for qk in self.qk:
            q, k = qk(h).chunk(2, dim=-1)
            for head_q, head_k in zip(q.chunk(self.n_head, -1), k.chunk(self.n_head, -1), strict=True):
                weights = torch.softmax(head_q @ head_k.transpose(-2, -1) / head_q.size(-1) ** 0.5, dim=-1)
                maps.append(weights)  # (1, T, T)
                h = h + weights @ h
        return self.out(h.mean(1)), maps


def readme_block(heading: str) -> str:
    from tests.conftest import ROOT

    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme[readme.index(heading):]
    return section[section.index("```python\n") + 10:section.index("\n```", section.index("```python"))]


def test_the_readmes_lines_run_as_written(tmp_path, monkeypatch):
    """The README's "Attention from your own code" block, run on a PA2-like model, an nn.MultiheadAttention
    and a tiny BERT built here; each file it writes opens with the shapes its model has."""
    transformers = require_hf_extra()
    from tests.hf_models import bert_folder

    folder = bert_folder(tmp_path / "tiny-bert")
    torch.manual_seed(0)
    class PerLayer(PA2Encoder):  # a solution returning one (B, n_head, T, T) tensor per layer
        def forward(self, x, y=None):
            _, _, maps = super().forward(x, y)
            return None, [layer.transpose(0, 1) for layer in maps]

    encoder, per_layer = PA2Encoder().eval(), PerLayer().eval()
    per_layer.load_state_dict(encoder.state_dict())  # the same weights: both files must hold the same maps
    names = {
        "pa2_model": PA2Like().eval(), "x": torch.tensor([[1, 2, 3, 4, 5, 6]]),
        "pa2_per_layer": per_layer, "pa2_encoder": encoder,
        "tokens": ["the", "cat", "sat", "on", "the", "mat"],
        "mha": nn.MultiheadAttention(16, 4, batch_first=True), "h": torch.randn(1, 6, 16),
        "hf_tokenizer": transformers.AutoTokenizer.from_pretrained(folder),
        "hf_model": transformers.AutoModel.from_pretrained(folder, attn_implementation="eager").eval(),
    }
    monkeypatch.chdir(tmp_path)
    exec(compile(readme_block("### Attention from your own code"), "README.md", "exec"), names)
    shapes = {name: [r.attention.shape for r in read(tmp_path / name).records]
              for name in ("pa2.npz", "pa2-layers.npz", "pa2-stacked.npz", "mha.npz", "bert.npz")}
    config = names["hf_model"].config
    bert_tokens = read(tmp_path / "bert.npz").records[0].tokens
    assert shapes["pa2.npz"] == [(2, 2, 6, 6)] and shapes["mha.npz"] == [(1, 4, 6, 6)]
    assert shapes["pa2-layers.npz"] == shapes["pa2-stacked.npz"] == [(3, 2, 6, 6)]
    np.testing.assert_array_equal(read(tmp_path / "pa2-layers.npz").records[0].attention,
                                  read(tmp_path / "pa2-stacked.npz").records[0].attention)
    assert shapes["bert.npz"] == [(config.num_hidden_layers, config.num_attention_heads, len(bert_tokens),
                                   len(bert_tokens))]
    assert bert_tokens[0] == "[CLS]" and read(tmp_path / "bert.npz").model_name == "bert-base-uncased"
    special = rec.as_run(read(tmp_path / "bert.npz").records[0]).special  # what "hide special tokens" hides
    assert special[0] and special[-1] and not special[1:-1].any()


def test_a_model_checkpoint_is_not_taken_for_records(tmp_path):
    path = save_tiny_checkpoint(tmp_path / "tiny-lm.safetensors", "lm")
    with pytest.raises(rec.RecordsError, match="looks like a model checkpoint"):
        rec.read_records(path.read_bytes(), path.name)
    data = bytearray(rec.save_attention(tmp_path / "ok.safetensors", ["a", "b"], [np.eye(2)]).read_bytes())
    with pytest.raises(rec.RecordsError, match="damaged"):
        rec.read_records(bytes(data[:-4]), "cut.safetensors")


def test_a_compressed_npz_that_unpacks_too_far_is_refused_from_its_headers(monkeypatch):
    monkeypatch.setattr(rec, "MAX_UNPACKED_BYTES", 16 * 1024 * 1024)  # the same check at a test's scale
    buffer = io.BytesIO()
    np.savez_compressed(buffer, attention=softmax_maps(1, 1, 2, 2).numpy(), tokens=np.array(["a", "b"]),
                        padding=np.zeros((32, 1024, 1024), dtype=np.uint8))  # 33.5 MB of zeros
    assert len(buffer.getvalue()) < 100_000  # packed: a small upload
    monkeypatch.setattr(np, "load", lambda *a, **k: pytest.fail("np.load ran"))
    with pytest.raises(rec.RecordsError, match="unpacks to 34 MB"):
        rec.read_records(buffer.getvalue(), "bomb.npz")
