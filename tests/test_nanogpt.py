"""nanoGPT ckpt.pt -> checkpoint: the same attention and logits as an independent nanoGPT forward (explicit
softmax over nanoGPT's own parameter names, written here), bias on and off, with and without `_orig_mod.`;
meta.pkl read without running code; the vocabulary sources; one-sentence refusals."""

from __future__ import annotations

import io
import json
import math
import os
import pickle
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from core.io import nanogpt
from core.io.checkpoint import load, read_metadata
from core.io.convert import ConversionError, main

TEXT = "First Citizen:\nBefore we proceed any further, hear me speak.\n\nAll:\nSpeak, speak.\n"
CHARS = sorted(set(TEXT))
BLOCK, N_EMBD, N_LAYER, N_HEAD = 32, 32, 2, 4


def nanogpt_ckpt(bias: bool, prefix: str = "", vocab: int = len(CHARS), seed: int = 0,
                 causal_buffer: bool = False) -> dict:
    """A ckpt.pt dict as nanoGPT's train.py saves it: random weights (large enough to matter) under its names,
    lm_head the same tensor as wte (tied), an AdamW state, model_args and the run's config."""
    g = torch.Generator().manual_seed(seed)

    def rnd(*shape: int, scale: float = 0.3) -> torch.Tensor:
        return torch.randn(*shape, generator=g) * scale

    C = N_EMBD
    sd = {"transformer.wte.weight": rnd(vocab, C), "transformer.wpe.weight": rnd(BLOCK, C)}
    for i in range(N_LAYER):
        p = f"transformer.h.{i}."
        for ln in ("ln_1", "ln_2"):
            sd[p + ln + ".weight"] = 1 + rnd(C, scale=0.1)
            if bias:
                sd[p + ln + ".bias"] = rnd(C, scale=0.1)
        for name, rows, cols in (("attn.c_attn", 3 * C, C), ("attn.c_proj", C, C), ("mlp.c_fc", 4 * C, C),
                                 ("mlp.c_proj", C, 4 * C)):
            sd[f"{p}{name}.weight"] = rnd(rows, cols, scale=0.3 if cols == C else 0.15)
            if bias:
                sd[f"{p}{name}.bias"] = rnd(rows, scale=0.1)
        if causal_buffer:  # nanoGPT without flash attention registers its mask as `attn.bias`
            sd[p + "attn.bias"] = torch.tril(torch.ones(BLOCK, BLOCK)).view(1, 1, BLOCK, BLOCK)
    sd["transformer.ln_f.weight"] = 1 + rnd(C, scale=0.1)
    if bias:
        sd["transformer.ln_f.bias"] = rnd(C, scale=0.1)
    sd["lm_head.weight"] = sd["transformer.wte.weight"]  # weight tying: one tensor under two names
    params = [torch.nn.Parameter(t.clone()) for t in list(sd.values())[:2]]
    optimizer = torch.optim.AdamW(params, lr=1e-3)
    sum(p.sum() for p in params).backward()
    optimizer.step()
    model_args = dict(n_layer=N_LAYER, n_head=N_HEAD, n_embd=C, block_size=BLOCK, bias=bias, vocab_size=vocab,
                      dropout=0.0)
    return {"model": {prefix + k: v for k, v in sd.items()}, "optimizer": optimizer.state_dict(),
            "model_args": model_args, "iter_num": 250, "best_val_loss": torch.tensor(1.4697),
            "config": {"dataset": "shakespeare_char", "compile": bool(prefix), "learning_rate": 1e-3,
                       "out_dir": "out-shakespeare-char"}}


def reference_forward(sd: dict[str, torch.Tensor], idx: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """nanoGPT's GPT forward written from its description over the raw state dict (not our Transformer):
    explicit softmax attention, so the weights can be compared. -> (logits (B, T, V), attention
    (n_layer, B, nh, T, T))."""
    sd = {k.removeprefix("_orig_mod."): v for k, v in sd.items()}
    B, T = idx.shape
    C = sd["transformer.wte.weight"].size(1)
    hs = C // N_HEAD

    def linear(x, name):
        return F.linear(x, sd[name + ".weight"], sd.get(name + ".bias"))

    def layer_norm(x, name):
        return F.layer_norm(x, (C,), sd[name + ".weight"], sd.get(name + ".bias"), 1e-5)

    x = sd["transformer.wte.weight"][idx] + sd["transformer.wpe.weight"][:T]
    maps = []
    causal = torch.tril(torch.ones(T, T, dtype=torch.bool))
    for i in range(N_LAYER):
        p = f"transformer.h.{i}."
        q, k, v = linear(layer_norm(x, p + "ln_1"), p + "attn.c_attn").split(C, dim=2)
        q, k, v = (t.view(B, T, N_HEAD, hs).transpose(1, 2) for t in (q, k, v))  # (B, nh, T, hs)
        scores = (q @ k.transpose(-2, -1)) / math.sqrt(hs)
        weights = torch.softmax(scores.masked_fill(~causal, float("-inf")), dim=-1)
        maps.append(weights)
        y = (weights @ v).transpose(1, 2).reshape(B, T, C)
        x = x + linear(y, p + "attn.c_proj")
        h = F.gelu(linear(layer_norm(x, p + "ln_2"), p + "mlp.c_fc"))  # exact GELU
        x = x + linear(h, p + "mlp.c_proj")
    x = layer_norm(x, "transformer.ln_f")
    return x @ sd["lm_head.weight"].T, torch.stack(maps)


def write_ckpt(path: Path, ckpt: dict) -> Path:
    torch.save(ckpt, path)
    return path


def meta_pkl(chars: list[str]) -> bytes:
    return pickle.dumps({"vocab_size": len(chars), "itos": dict(enumerate(chars)),
                         "stoi": {c: i for i, c in enumerate(chars)}})


@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("prefix", ["", "_orig_mod."])
def test_converted_model_matches_an_independent_nanogpt_forward(tmp_path, capsys, bias, prefix):
    ckpt = nanogpt_ckpt(bias, prefix)
    ckpt_path = write_ckpt(tmp_path / "ckpt.pt", ckpt)
    (tmp_path / "meta.pkl").write_bytes(meta_pkl(CHARS))
    out = tmp_path / "sh.safetensors"
    assert main(["nanogpt", str(ckpt_path), "--meta", str(tmp_path / "meta.pkl"), "-o", str(out)]) == 0
    assert f"{N_LAYER} layers x {N_HEAD} heads" in capsys.readouterr().out
    loaded = load(out)
    assert loaded.config.bias is bias and loaded.task == "lm"
    assert not any(k.endswith(".bias") for k in loaded.model.state_dict()) if not bias else True
    text = "Before we proceed, speak"
    idx = torch.tensor([loaded.tokenizer.encode(text)])
    assert loaded.tokenizer.decode(idx[0].tolist()) == text
    assert idx[0].tolist() == [CHARS.index(c) for c in text]  # nanoGPT's own ids
    expected_logits, expected_attention = reference_forward(ckpt["model"], idx)
    with torch.no_grad():
        logits, attention = loaded.model.run_with_attention(idx)
        fused, _ = loaded.model(idx)
    torch.testing.assert_close(attention, expected_attention, atol=1e-5, rtol=0)
    torch.testing.assert_close(logits, expected_logits, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(fused, expected_logits, atol=1e-5, rtol=1e-5)  # the fused path too
    meta = read_metadata(out)
    source = json.loads(meta["source"])
    assert source["iter_num"] == 250 and source["dataset"] == "shakespeare_char"
    assert source["stripped_prefix"] == prefix and source["best_val_loss"] == pytest.approx(1.4697)
    assert meta["command"].startswith("python -m core.io.convert nanogpt")


def test_the_slow_paths_causal_buffer_is_dropped_and_generation_runs(tmp_path):
    ckpt = nanogpt_ckpt(True, causal_buffer=True)
    read = nanogpt.read_ckpt(io_bytes(ckpt), "ckpt.pt")
    conversion = nanogpt.convert_nanogpt(read, nanogpt.text_vocabulary(TEXT.encode(), "input.txt"))
    assert conversion.warnings == []
    idx = torch.tensor([conversion.tokenizer.encode("All:\n")])
    out = conversion.model.generate(idx, 8)
    with torch.no_grad():
        expected, _ = reference_forward(ckpt["model"], idx)
    assert out[0, idx.size(1)].item() == expected[0, -1].argmax().item()  # greedy's first step


def io_bytes(obj) -> bytes:
    buffer = io.BytesIO()
    torch.save(obj, buffer)
    return buffer.getvalue()


def test_text_vocabulary_is_the_sorted_set_of_characters():
    tokenizer = nanogpt.text_vocabulary(TEXT.replace("\n", "\r\n").encode(), "input.txt")
    assert tokenizer.chars == CHARS  # universal newlines, as open() reads it
    tokenized = tokenizer.tokenize("speak 😀")
    assert tokenized.unknown == ["😀"] and tokenized.ids[-1] == CHARS.index(" ")


class RunsCode:
    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (os.mkdir, (str(self.marker),))


def test_a_meta_pkl_that_would_run_code_is_refused_and_nothing_runs(tmp_path):
    marker = tmp_path / "ran"
    hostile = pickle.dumps({"vocab_size": 2, "itos": {0: "a", 1: "b"}, "stoi": RunsCode(marker)})
    pickle.loads(pickle.dumps(RunsCode(tmp_path / "control")))  # the payload does run when unpickled
    assert (tmp_path / "control").is_dir()
    with pytest.raises(ConversionError, match="refused without running it") as err:
        nanogpt.read_meta(hostile, "meta.pkl")
    assert "posix.mkdir" in str(err.value) or "os.mkdir" in str(err.value) or "mkdir" in str(err.value)
    assert not marker.exists()
    assert str(err.value).count(". ") == 0  # one sentence


@pytest.mark.parametrize("meta, message", [
    ({"vocab_size": 2, "itos": {0: "a", 1: 1.5}, "stoi": {}}, "other than dicts"),
    ({"vocab_size": 3, "itos": {0: "a", 1: "b"}, "stoi": {"a": 0, "b": 1}}, "says vocab_size 3"),
    ({"vocab_size": 2, "itos": {0: "a", 2: "b"}}, "not 0..1"),
    ({"vocab_size": 2, "itos": {0: "ab", 1: "b"}}, "not single characters"),
    ({"vocab_size": 2, "itos": {0: "a", 1: "b"}, "stoi": {"a": 1, "b": 0}}, "disagree"),
    (["a", "b"], "other than dicts"),
])
def test_meta_pkl_refusals(meta, message):
    with pytest.raises(ConversionError, match=message):
        nanogpt.read_meta(pickle.dumps(meta), "meta.pkl")


def test_damaged_meta_and_ckpt_are_one_sentence():
    with pytest.raises(ConversionError, match="not a readable pickle"):
        nanogpt.read_meta(meta_pkl(CHARS)[:20], "meta.pkl")
    with pytest.raises(ConversionError, match="lacks the 'model' and 'model_args'"):
        nanogpt.read_ckpt(io_bytes({"state_dict": {"w": torch.zeros(1)}}), "ckpt.pt")
    evil = io_bytes(nanogpt_ckpt(False)).replace(b"", b"")
    with pytest.raises(ConversionError, match="truncated or damaged"):
        nanogpt.read_ckpt(evil[: len(evil) // 2], "ckpt.pt")


def test_a_checkpoint_holding_python_objects_is_refused_without_running(tmp_path):
    marker = tmp_path / "ran"
    ckpt = nanogpt_ckpt(False)
    ckpt["config"]["hook"] = RunsCode(marker)
    with pytest.raises(ConversionError, match="refused without running"):
        nanogpt.read_ckpt(io_bytes(ckpt), "ckpt.pt")
    assert not marker.exists()


def test_wrong_vocabulary_and_no_vocabulary_say_what_to_give(tmp_path, capsys):
    ckpt_path = write_ckpt(tmp_path / "ckpt.pt", nanogpt_ckpt(False))
    out = tmp_path / "x.safetensors"
    (tmp_path / "other.txt").write_text("abc")
    assert main(["nanogpt", str(ckpt_path), "--text", str(tmp_path / "other.txt"), "-o", str(out)]) == 2
    said = capsys.readouterr().err
    assert "has 3 characters but ckpt.pt has" in said and said.count("\n") == 1
    assert main(["nanogpt", str(ckpt_path), "-o", str(out)]) == 2
    assert "--meta" in capsys.readouterr().err and not out.exists()
    gpt2_path = write_ckpt(tmp_path / "gpt2.pt", nanogpt_ckpt(False, vocab=50304))
    assert main(["nanogpt", str(gpt2_path), "-o", str(out)]) == 2
    assert "GPT-2 tokenizer folder" in capsys.readouterr().err and not out.exists()


def test_missing_or_misshapen_tensors_name_nanogpts_tensor():
    ckpt = nanogpt_ckpt(True)
    del ckpt["model"]["transformer.h.1.mlp.c_fc.bias"]
    read = nanogpt.read_ckpt(io_bytes(ckpt), "ckpt.pt")
    with pytest.raises(ConversionError, match=r"lacks tensor 'transformer\.h\.1\.mlp\.c_fc\.bias'"):
        nanogpt.convert_nanogpt(read, nanogpt.text_vocabulary(TEXT.encode(), "input.txt"))
    ckpt = nanogpt_ckpt(False)
    ckpt["model_args"]["n_layer"] = 3
    read = nanogpt.read_ckpt(io_bytes(ckpt), "ckpt.pt")
    with pytest.raises(ConversionError, match="says 3 layers"):
        nanogpt.convert_nanogpt(read, nanogpt.text_vocabulary(TEXT.encode(), "input.txt"))


def gpt2_like_tokenizer_files(folder: Path, kind: str) -> int:
    """A small byte-level BPE laid out as GPT-2's files are (trained here: nothing downloaded)."""
    from tokenizers import ByteLevelBPETokenizer

    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator([TEXT] * 4, vocab_size=300, min_frequency=1, show_progress=False,
                            special_tokens=["<|endoftext|>"])
    folder.mkdir()
    if kind == "tokenizer.json":
        (folder / "tokenizer.json").write_text(bpe._tokenizer.to_str())
    else:
        bpe.save_model(str(folder))  # vocab.json + merges.txt
        if kind == "encoder.json":  # OpenAI's names for the same two files
            (folder / "vocab.json").rename(folder / "encoder.json")
            (folder / "merges.txt").rename(folder / "vocab.bpe")
    return bpe.get_vocab_size()


@pytest.mark.parametrize("kind", ["tokenizer.json", "vocab.json", "encoder.json"])
def test_a_model_on_gpt2_pieces_takes_a_tokenizer_folder(tmp_path, kind):
    pieces = gpt2_like_tokenizer_files(tmp_path / "gpt2", kind)
    rows = pieces + 20  # nanoGPT pads its vocabulary (50257 -> 50304)
    ckpt = nanogpt_ckpt(False, vocab=rows)
    ckpt_path = write_ckpt(tmp_path / "ckpt.pt", ckpt)
    out, conversion = nanogpt.convert_nanogpt_files(ckpt_path, tmp_path / "p.safetensors",
                                                    tokenizer=tmp_path / "gpt2")
    loaded = load(out)
    assert loaded.tokenizer.kind == "pieces" and loaded.tokenizer.vocab_size == rows
    tokenized = loaded.tokenizer.tokenize("Before we speak")
    assert "".join(tokenized.tokens) == "Before we speak" and len(tokenized.ids) < 15
    assert loaded.tokenizer.decode(tokenized.ids + [rows - 1]) == "Before we speak"  # a padding row: nothing
    idx = torch.tensor([tokenized.ids])
    expected_logits, expected_attention = reference_forward(ckpt["model"], idx)
    with torch.no_grad():
        logits, attention = loaded.model.run_with_attention(idx)
    torch.testing.assert_close(attention, expected_attention, atol=1e-5, rtol=0)
    torch.testing.assert_close(logits, expected_logits, atol=1e-5, rtol=1e-5)


def test_a_tokenizer_larger_than_the_model_is_refused(tmp_path):
    pieces = gpt2_like_tokenizer_files(tmp_path / "gpt2", "tokenizer.json")
    ckpt_path = write_ckpt(tmp_path / "ckpt.pt", nanogpt_ckpt(False, vocab=pieces - 10))
    with pytest.raises(ConversionError, match=f"has {pieces} pieces but the model has only {pieces - 10}"):
        nanogpt.convert_nanogpt_files(ckpt_path, tmp_path / "p.safetensors", tokenizer=tmp_path / "gpt2")
    with pytest.raises(ConversionError, match="no GPT-2 tokenizer files"):
        nanogpt.convert_nanogpt_files(ckpt_path, tmp_path / "p.safetensors", tokenizer=tmp_path)
    assert not (tmp_path / "p.safetensors").exists()


def test_existing_checkpoints_keep_their_biases():
    """The new config field defaults to the models every existing checkpoint holds."""
    from core.model.config import ModelConfig

    config = ModelConfig.from_dict(json.loads(json.dumps({"vocab_size": 5, "block_size": 4})))
    assert config.bias is True


def test_the_cs224n_converter_points_a_nanogpt_checkpoint_to_the_nanogpt_one(tmp_path, capsys):
    """The issue's first complaint: `convert cs224n ckpt.pt` said the file lacked 'tok_emb.weight'."""
    ckpt_path = write_ckpt(tmp_path / "ckpt.pt", nanogpt_ckpt(False, "_orig_mod."))
    (tmp_path / "input.txt").write_text(TEXT)
    out = tmp_path / "x.safetensors"
    assert main(["cs224n", str(ckpt_path), "--corpus", str(tmp_path / "input.txt"), "-o", str(out)]) == 2
    said = capsys.readouterr().err
    assert "is a nanoGPT checkpoint" in said and "core.io.convert nanogpt" in said and not out.exists()


def test_uploaded_vocabulary_files_are_one_source():
    assert set(nanogpt.vocabulary_source({"meta.pkl": b"x"})) == {"meta"}
    assert set(nanogpt.vocabulary_source({"input.txt": b"x"})) == {"text"}
    assert set(nanogpt.vocabulary_source({"vocab.json": b"{}", "merges.txt": b""})) == {"tokenizer_files"}
    with pytest.raises(ConversionError, match="meta.pkl cannot go with GPT-2's tokenizer files"):
        nanogpt.vocabulary_source({"tokenizer.json": b"{}", "meta.pkl": b"x"})
    with pytest.raises(ConversionError, match="Give one vocabulary, not 2 files"):
        nanogpt.vocabulary_source({"a.txt": b"x", "meta.pkl": b"y"})


def test_a_meta_pkl_that_repeats_one_list_by_reference_is_refused_quickly():
    """4,000 references to one list of 4,000: 16 million values from a 20 kB pickle (without the budget it
    would be read, slowly, as plain data)."""
    inner = list(range(4000))
    hostile = pickle.dumps({"vocab_size": 1, "itos": {0: "a"}, "stoi": {"a": 0}, "junk": [inner] * 4000})
    assert len(hostile) < 50_000
    with pytest.raises(ConversionError, match="other than dicts"):
        nanogpt.read_meta(hostile, "meta.pkl")
