"""CS224N minGPT params -> checkpoint: same logits as an independent minGPT forward, clear refusals."""

from __future__ import annotations

import math
import pickle
import random
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from core.io import uploads
from core.io.checkpoint import load, read_metadata
from core.io.convert import ConversionError, convert_cs224n, load_params, main
from core.model.tokenizer import CharTokenizer
from tests.conftest import ROOT, TINY_CORPUS

CORPUS = TINY_CORPUS + "Where was Grace Hopper born?\n"
VOCAB = CharTokenizer.from_corpus(CORPUS).vocab_size
BLOCK, N_EMBD, N_LAYER = 12, 32, 2


def mingpt_state_dict(attention: str, n_head: int = 8, vocab: int = VOCAB, seed: int = 0,
                      prefix: str = "") -> dict[str, torch.Tensor]:
    """Random weights under the assignment's minGPT names and shapes (large enough to matter)."""
    g = torch.Generator().manual_seed(seed)

    def rnd(*shape: int, scale: float = 0.3) -> torch.Tensor:
        return torch.randn(*shape, generator=g) * scale

    C = N_EMBD
    sd = {"tok_emb.weight": rnd(vocab, C), "pos_emb": rnd(1, BLOCK, C)}
    for i in range(N_LAYER):
        p = f"blocks.{i}."
        for ln in ("ln1", "ln2"):
            sd[p + ln + ".weight"], sd[p + ln + ".bias"] = 1 + rnd(C, scale=0.1), rnd(C, scale=0.1)
        names = ("key", "query", "value", "proj") if attention == "vanilla" else ("w1", "value", "proj")
        for name in names:
            sd[f"{p}attn.{name}.weight"], sd[f"{p}attn.{name}.bias"] = rnd(C, C), rnd(C, scale=0.1)
        if attention == "synthesizer":
            sd[p + "attn.w2"], sd[p + "attn.b2"] = rnd(C // n_head, BLOCK - 1), rnd(BLOCK - 1)
        sd[p + "attn.mask"] = torch.tril(torch.ones(BLOCK, BLOCK)).view(1, 1, BLOCK, BLOCK)
        sd[p + "mlp.0.weight"], sd[p + "mlp.0.bias"] = rnd(4 * C, C), rnd(4 * C, scale=0.1)
        sd[p + "mlp.2.weight"], sd[p + "mlp.2.bias"] = rnd(C, 4 * C, scale=0.15), rnd(C, scale=0.1)
    sd["ln_f.weight"], sd["ln_f.bias"] = 1 + rnd(C, scale=0.1), rnd(C, scale=0.1)
    sd["head.weight"] = rnd(vocab, C)
    return {prefix + k: v for k, v in sd.items()}


def reference_logits(sd: dict[str, torch.Tensor], idx: torch.Tensor, n_head: int = 8) -> torch.Tensor:
    """minGPT's forward written from the assignment, over the raw state dict (not our Transformer)."""
    B, T = idx.shape
    C = sd["tok_emb.weight"].size(1)
    hs = C // n_head

    def ln(x, name):
        return F.layer_norm(x, (C,), sd[name + ".weight"], sd[name + ".bias"])

    def linear(x, name):
        return F.linear(x, sd[name + ".weight"], sd[name + ".bias"])

    def heads(t):
        return t.view(B, T, n_head, hs).transpose(1, 2)  # (B, nh, T, hs)

    x = sd["tok_emb.weight"][idx] + sd["pos_emb"][:, :T, :]
    for i in range(1 + max(int(k.split(".")[1]) for k in sd if k.startswith("blocks."))):
        p = f"blocks.{i}."
        h = ln(x, p + "ln1")
        mask = sd[p + "attn.mask"][:, :, :T, :T]
        if p + "attn.query.weight" in sd:
            q, k = heads(linear(h, p + "attn.query")), heads(linear(h, p + "attn.key"))
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hs))
            att = att.masked_fill(mask == 0, float("-inf"))
        else:
            att = heads(F.relu(linear(h, p + "attn.w1"))) @ sd[p + "attn.w2"][:, :T] + sd[p + "attn.b2"][:T]
            att = att.masked_fill(mask == 0, -1e10)
        y = F.softmax(att, dim=-1) @ heads(linear(h, p + "attn.value"))
        x = x + linear(y.transpose(1, 2).contiguous().view(B, T, C), p + "attn.proj")
        x = x + linear(F.gelu(linear(ln(x, p + "ln2"), p + "mlp.0")), p + "mlp.2")
    return ln(x, "ln_f") @ sd["head.weight"].T


def write_inputs(folder: Path, sd: dict, corpus: str = CORPUS) -> tuple[Path, Path]:
    params, wiki = folder / "vanilla.finetune.params", folder / "wiki.txt"
    torch.save(sd, params)
    wiki.write_text(corpus, encoding="utf-8")
    return params, wiki


def batch(T: int) -> torch.Tensor:
    return torch.randint(0, VOCAB, (3, T), generator=torch.Generator().manual_seed(1))


@pytest.mark.parametrize("attention", ["vanilla", "synthesizer"])
@pytest.mark.parametrize("prefix", ["", "_orig_mod.", "module.", "module._orig_mod."])
def test_converted_model_matches_reference_mingpt(tmp_path, attention, prefix):
    sd = mingpt_state_dict(attention, prefix=prefix)
    params, wiki = write_inputs(tmp_path, sd)
    out, conversion = convert_cs224n(params, wiki, tmp_path / "out.safetensors")
    assert conversion.warnings == [] and conversion.stripped_prefix == prefix
    loaded = load(out)
    cfg = loaded.config
    assert (cfg.attention, cfg.n_layer, cfg.n_head, cfg.n_embd, cfg.block_size, cfg.vocab_size) == (
        attention, N_LAYER, 8, N_EMBD, BLOCK, VOCAB)
    assert cfg.dropout == 0.0 and loaded.task == "birthplace"
    plain_sd = mingpt_state_dict(attention)
    T = BLOCK - 1  # the synthesizer's w2 has block_size - 1 columns, the longest it can read
    idx = batch(T)
    expected = reference_logits(plain_sd, idx)
    with torch.no_grad():
        fast, _ = loaded.model(idx)
        explicit, attn = loaded.model.run_with_attention(idx)
        short, _ = loaded.model(idx[:, :5])
    assert expected.abs().max() > 1.0  # weights large enough that a wrong mapping would show
    torch.testing.assert_close(fast, expected, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(explicit, expected, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(short, reference_logits(plain_sd, idx[:, :5]), atol=1e-5, rtol=1e-5)
    assert attn.shape == (N_LAYER, 3, 8, T, T)
    assert loaded.tokenizer.chars == CharTokenizer.from_corpus(CORPUS).chars


def test_n_head_other_than_eight_and_metadata_records_sources(tmp_path):
    sd = mingpt_state_dict("synthesizer", n_head=4)
    params, wiki = write_inputs(tmp_path, sd)
    out, _ = convert_cs224n(params, wiki, tmp_path / "out.safetensors", n_head=4)
    idx = batch(7)
    with torch.no_grad():
        torch.testing.assert_close(load(out).model(idx)[0], reference_logits(sd, idx, 4), atol=1e-5, rtol=1e-5)
    meta = read_metadata(out)
    assert [d["path"] for d in meta["data"]] == [str(wiki), str(params)]
    assert all(len(d["sha256"]) == 64 for d in meta["data"])
    assert "--n-head 4" in meta["command"]


def test_wrapped_state_dict_and_half_precision_are_accepted(tmp_path):
    sd = mingpt_state_dict("vanilla")
    params, wiki = write_inputs(tmp_path, {"model": {k: v.half() for k, v in sd.items()}, "epoch": 3})
    out, conversion = convert_cs224n(params, wiki, tmp_path / "out.safetensors")
    assert any("float16" in w for w in conversion.warnings)
    idx = batch(6)
    half_sd = {k: v.half().float() for k, v in sd.items()}
    with torch.no_grad():
        torch.testing.assert_close(load(out).model(idx)[0], reference_logits(half_sd, idx), atol=1e-5,
                                   rtol=1e-5)


def test_a_mask_that_is_not_causal_is_warned_about(tmp_path):
    sd = mingpt_state_dict("vanilla")
    sd["blocks.1.attn.mask"] = torch.ones(1, 1, BLOCK, BLOCK)
    params, wiki = write_inputs(tmp_path, sd)
    _, conversion = convert_cs224n(params, wiki, tmp_path / "out.safetensors")
    assert len(conversion.warnings) == 1 and "blocks.1.attn.mask" in conversion.warnings[0]


def _one_sentence(message: str) -> None:
    assert "\n" not in message and message.endswith(".") and "Traceback" not in message
    assert len(message) < 300


def _refusal(tmp_path, sd=None, corpus=CORPUS, raw: bytes | None = None, n_head=8) -> str:
    params, wiki = write_inputs(tmp_path, sd if sd is not None else mingpt_state_dict("vanilla"), corpus)
    if raw is not None:
        params.write_bytes(raw)
    with pytest.raises(ConversionError) as err:
        convert_cs224n(params, wiki, tmp_path / "out.safetensors", n_head=n_head)
    assert not (tmp_path / "out.safetensors").exists()
    _one_sentence(str(err.value))
    return str(err.value)


def test_vocabulary_size_mismatch_is_one_sentence(tmp_path):
    message = _refusal(tmp_path, mingpt_state_dict("vanilla", vocab=VOCAB + 3))
    assert message.startswith(f"wiki.txt gives a vocabulary of {VOCAB} entries")
    assert f"{VOCAB + 3} embedding rows" in message


def test_missing_key_is_named(tmp_path):
    sd = mingpt_state_dict("vanilla")
    del sd["blocks.1.mlp.2.bias"]
    assert "'blocks.1.mlp.2.bias'" in _refusal(tmp_path, sd)
    sd = mingpt_state_dict("vanilla")
    del sd["head.weight"]
    assert "'head.weight'" in _refusal(tmp_path, sd)


def test_a_stray_block_index_is_refused_before_building_anything(tmp_path):
    sd = mingpt_state_dict("vanilla")
    sd["blocks.99999999.ln1.weight"] = torch.ones(N_EMBD)
    assert "none for block 2" in _refusal(tmp_path, sd)


def test_unexpected_key_is_named(tmp_path):
    sd = mingpt_state_dict("vanilla")
    sd["blocks.0.attn.rope_cache"] = torch.zeros(BLOCK, 4)
    message = _refusal(tmp_path, sd)
    assert "'blocks.0.attn.rope_cache'" in message and "does not have" in message


def test_synthesizer_with_wrong_n_head_says_which_fits(tmp_path):
    message = _refusal(tmp_path, mingpt_state_dict("synthesizer", n_head=4), n_head=8)
    assert "set n_head to 4" in message


class CreatesCanary:
    def __init__(self, path: Path) -> None:
        self.path = path

    def __reduce__(self):
        return (open, (str(self.path), "w"))


def test_pickle_that_would_run_code_is_refused_without_running_it(tmp_path):
    demo = tmp_path / "demo-canary"
    pickle.loads(pickle.dumps(CreatesCanary(demo))).close()  # the payload does act when unpickled
    assert demo.exists()
    canary = tmp_path / "canary"
    sd = mingpt_state_dict("vanilla")
    sd["tok_emb.weight"] = CreatesCanary(canary)
    message = _refusal(tmp_path, sd)
    assert "refused without running" in message
    assert not canary.exists()


@pytest.mark.parametrize(("raw", "expected"), [
    (b"", "is empty"),
    # seeded: unseeded random bytes start like a pickle (0x80) one time in 256 and read as "damaged"
    (b"\x01" + random.Random(0).randbytes(4095), "not a file written by torch.save"),
    (b"\x80\x02" + random.Random(1).randbytes(4096), "damaged"),
])
def test_empty_random_and_damaged_files_are_one_sentence(tmp_path, raw, expected):
    assert expected in _refusal(tmp_path, raw=raw)


def test_truncated_file_is_one_sentence(tmp_path):
    data = _save_bytes(tmp_path, mingpt_state_dict("vanilla"))
    assert "truncated or damaged" in _refusal(tmp_path, raw=data[: len(data) // 2])


def _save_bytes(tmp_path: Path, obj) -> bytes:
    path = tmp_path / "obj.pt"
    torch.save(obj, path)
    return path.read_bytes()


def test_non_tensor_contents_are_refused(tmp_path):
    assert "not a tensor" in str(_raises(lambda: load_params(_save_bytes(tmp_path, {"a": 3}), "x.params")))
    assert "holds a list" in str(_raises(lambda: load_params(_save_bytes(tmp_path, [torch.ones(1)]), "x")))


def _raises(fn) -> ConversionError:
    with pytest.raises(ConversionError) as err:
        fn()
    _one_sentence(str(err.value))
    return err.value


def test_corpus_problems_are_one_sentence(tmp_path):
    assert "U+2047" in _refusal(tmp_path, corpus=CORPUS + "\u2047")
    params, wiki = write_inputs(tmp_path, mingpt_state_dict("vanilla"))
    wiki.write_bytes(CORPUS.encode("latin-1") + b"\xe9t\xe9")
    message = str(_raises(lambda: convert_cs224n(params, wiki, tmp_path / "o.safetensors")))
    assert "not UTF-8" in message


def test_crlf_corpus_gives_the_same_vocabulary_as_python_text_mode(tmp_path):
    sd = mingpt_state_dict("vanilla")
    params, wiki = write_inputs(tmp_path, sd)
    wiki.write_bytes(CORPUS.replace("\n", "\r\n").encode())
    out, _ = convert_cs224n(params, wiki, tmp_path / "out.safetensors")
    assert "\r" not in load(out).tokenizer.chars


def test_refuses_to_overwrite_unless_forced(tmp_path):
    params, wiki = write_inputs(tmp_path, mingpt_state_dict("vanilla"))
    out = tmp_path / "out.safetensors"
    out.write_bytes(b"keep me")
    assert "--force" in str(_raises(lambda: convert_cs224n(params, wiki, out)))
    assert out.read_bytes() == b"keep me"
    convert_cs224n(params, wiki, out, force=True)
    assert load(out).config.n_layer == N_LAYER


def test_main_reports_errors_in_one_line(tmp_path, capsys):
    params, wiki = write_inputs(tmp_path, mingpt_state_dict("vanilla", vocab=VOCAB + 1))
    assert main(["cs224n", str(params), "--corpus", str(wiki), "-o", str(tmp_path / "o.safetensors")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: ")
    with pytest.raises(SystemExit) as exit_info:
        main(["cs224n", str(params)])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--corpus" in err


def test_cli_end_to_end(tmp_path):
    params, wiki = write_inputs(tmp_path, mingpt_state_dict("synthesizer", prefix="_orig_mod."))
    out = tmp_path / "synth.safetensors"
    command = [sys.executable, "-m", "core.io.convert", "cs224n", str(params), "--corpus", str(wiki),
               "-o", str(out)]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "synthesizer attention, 2 layers x 8 heads" in done.stdout
    assert load(out).config.attention == "synthesizer"
    again = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert again.returncode == 2
    assert again.stdout == "" and again.stderr.count("\n") == 1
    assert "already exists" in again.stderr and "Traceback" not in again.stderr


# --- core.io.uploads (what the page calls) -----------------------------------------------------------


class FakeUpload:
    def __init__(self, name: str, data: bytes, size: int | None = None) -> None:
        self.name, self.data = name, data
        self.size = len(data) if size is None else size
        self.read = False

    def getvalue(self) -> bytes:
        self.read = True
        return self.data


def test_upload_size_is_checked_before_reading(tmp_path):
    huge = FakeUpload("wiki.txt", b"x", size=uploads.CORPUS_LIMIT_MB * uploads.MB + 1)
    params = FakeUpload("m.params", _save_bytes(tmp_path, mingpt_state_dict("vanilla")))
    with pytest.raises(uploads.UploadError, match="over the 100 MB limit"):
        uploads.add_cs224n(params, huge, tmp_path)
    assert not huge.read
    with pytest.raises(uploads.UploadError, match="is empty"):
        uploads.add_checkpoint(FakeUpload("m.safetensors", b""), tmp_path)


def test_upload_conversion_refuses_to_overwrite_and_leaves_nothing_on_refusal(tmp_path):
    folder = tmp_path / "models"
    folder.mkdir()
    params = FakeUpload("vanilla.finetune.params", _save_bytes(tmp_path, mingpt_state_dict("vanilla")))
    added = uploads.add_cs224n(params, FakeUpload("wiki.txt", CORPUS.encode()), folder,
                               taken_names=["vanilla.finetune"])
    assert added.info.path == folder / "vanilla.finetune.safetensors"
    assert added.info.name == "vanilla.finetune (upload 2)" and added.info.error is None
    assert added.info.task == "birthplace" and added.info.config["attention"] == "vanilla"
    with pytest.raises(uploads.UploadError, match="already exists"):
        uploads.add_cs224n(params, FakeUpload("wiki.txt", CORPUS.encode()), folder)
    with pytest.raises(uploads.UploadError, match="embedding rows"):
        uploads.add_cs224n(FakeUpload("other.params", params.data), FakeUpload("w.txt", b"abc"), folder)
    assert sorted(p.name for p in folder.iterdir()) == ["vanilla.finetune.safetensors"]


def test_destination_folder_rules(tmp_path, monkeypatch):
    monkeypatch.setenv("ATTENTION_LAB_CHECKPOINTS", str(tmp_path / "listed"))
    (tmp_path / "listed" / "sub").mkdir(parents=True)
    made = []

    def session():
        made.append(tmp_path / "session")
        return made[-1]

    allowed = [tmp_path.resolve(), ROOT.resolve()]
    assert uploads.destination_folder("  ", session, allowed) == tmp_path / "session" and made
    assert uploads.destination_folder(str(tmp_path), session, allowed) == tmp_path.resolve()
    for bad, words in [(str(tmp_path / "nope"), "does not exist"), ("~/x", "full path"),
                       (str(ROOT / "checkpoints"), "bundled checkpoints folder"),
                       (str(ROOT / "checkpoints" / "."), "bundled checkpoints folder"),
                       (str(tmp_path), "ATTENTION_LAB_ALLOWED_DIRS")]:
        with pytest.raises(uploads.UploadError, match=words):
            uploads.destination_folder(bad, session, allowed if "ALLOWED" not in words else [])
    with pytest.raises(uploads.UploadError, match="bundled checkpoints folder"):
        uploads.destination_folder(str(tmp_path / "listed" / "sub"), session, allowed)
