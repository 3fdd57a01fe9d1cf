import json
import os
import pickle
import struct
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

from core.io import checkpoint
from core.io.checkpoint import CheckpointError, list_checkpoints, load, read_metadata
from tests.conftest import save_tiny_checkpoint


@pytest.mark.parametrize("task", ["lm", "birthplace", "classify"])
def test_round_trip_is_bit_exact(tmp_path, task):
    path = save_tiny_checkpoint(tmp_path / "m.safetensors", task, positional="alibi")
    loaded = load(path)
    again = checkpoint.save(tmp_path / "again.safetensors", loaded.model, loaded.tokenizer, task,
                            labels=loaded.labels, history=loaded.history)
    first, second = load(path).model.state_dict(), load(again).model.state_dict()
    assert first.keys() == second.keys()
    for key in first:
        assert torch.equal(first[key], second[key])
    assert loaded.metadata["format"] == "attention-lab/1"
    assert loaded.history[0]["metric"] == "loss"
    assert set(loaded.metadata["versions"]) >= {"torch", "python"}
    assert not loaded.model.training


def test_save_is_atomic_and_leaves_no_temporary_files(tmp_path, monkeypatch):
    path = save_tiny_checkpoint(tmp_path / "m.safetensors")
    before = path.read_bytes()

    def crash(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(checkpoint, "save_file", crash)
    loaded = load(path)
    with pytest.raises(OSError):
        checkpoint.save(path, loaded.model, loaded.tokenizer, "lm")
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.safetensors"]


def _write_header(path: Path, header: dict, payload: bytes = b"") -> Path:
    raw = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + payload)
    return path


def _rewrite_metadata(src: Path, dst: Path, **changes) -> Path:
    data = src.read_bytes()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    header["__metadata__"].update(changes)
    return _write_header(dst, header, data[8 + n:])


@pytest.fixture
def good(tmp_path):
    return save_tiny_checkpoint(tmp_path / "good.safetensors")


def test_refuses_a_file_that_is_not_safetensors(tmp_path):
    path = tmp_path / "x.safetensors"
    path.write_bytes(os.urandom(4096))
    with pytest.raises(CheckpointError, match="not a safetensors file"):
        load(path)


def test_refuses_an_empty_file(tmp_path):
    path = tmp_path / "empty.safetensors"
    path.write_bytes(b"")
    with pytest.raises(CheckpointError, match="empty"):
        load(path)


def test_refuses_a_truncated_file(tmp_path, good):
    path = tmp_path / "cut.safetensors"
    path.write_bytes(good.read_bytes()[:-100])
    with pytest.raises(CheckpointError, match="truncated"):
        load(path)


def test_refuses_an_unknown_format_version(tmp_path, good):
    path = _rewrite_metadata(good, tmp_path / "v9.safetensors", format="attention-lab/9")
    with pytest.raises(CheckpointError, match="attention-lab/9"):
        load(path)


def test_refuses_a_config_whose_shapes_disagree_and_names_the_tensor(tmp_path, good):
    config = dict(read_metadata(good)["config"])
    config["n_embd"] = 64
    path = _rewrite_metadata(good, tmp_path / "shape.safetensors", config=json.dumps(config))
    with pytest.raises(CheckpointError, match="tensor 'tok_emb.weight' has shape"):
        load(path)


def test_refuses_a_file_over_the_size_limit(good):
    with pytest.raises(CheckpointError, match="over the"):
        load(good, max_bytes=1000)


def test_refuses_plain_safetensors_without_our_metadata(tmp_path):
    path = tmp_path / "plain.safetensors"
    save_file({"w": torch.zeros(2)}, str(path))
    with pytest.raises(CheckpointError, match="no Attention Lab metadata"):
        load(path)


@pytest.mark.parametrize("field,value,match", [
    ("config", "[" * 100000 + "]" * 100000, "unreadable 'config'"),
    ("history", json.dumps({"not": "a list"}), "wrong type"),
    ("task", "x" * 1_000_000, "unknown task"),
    ("tokenizer", json.dumps({"kind": "sentencepiece"}), "Unknown tokenizer"),
    ("tokenizer", json.dumps({"kind": "bpe"}), "tokenizer description is incomplete"),
    ("tokenizer", json.dumps({"kind": "bpe", "spec": "{" * 100000}), "subword tokenizer description cannot be read"),
    ("tokenizer", json.dumps({"kind": "bpe", "spec": json.dumps({"model": {"type": "BPE"}})}), "cannot be read"),
])
def test_refuses_hostile_metadata(tmp_path, good, field, value, match):
    path = _rewrite_metadata(good, tmp_path / "hostile.safetensors", **{field: value})
    with pytest.raises(CheckpointError, match=match):
        load(path)


def test_refuses_metadata_that_is_not_strings(tmp_path):
    path = _write_header(tmp_path / "types.safetensors", {"__metadata__": {"format": 1}})
    with pytest.raises(CheckpointError, match="map of strings"):
        load(path)


class _Canary:
    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (open, (self.path, "w"))


def test_a_pickle_payload_is_refused_and_never_runs(tmp_path):
    canary = tmp_path / "canary"
    path = tmp_path / "evil.safetensors"
    path.write_bytes(pickle.dumps(_Canary(str(canary))))
    with pytest.raises(CheckpointError):
        load(path)
    torch_style = tmp_path / "evil.pt"
    torch_style.write_bytes(pickle.dumps({"x": _Canary(str(canary))}))
    with pytest.raises(CheckpointError):
        load(torch_style)
    assert not canary.exists()


def test_list_checkpoints_reads_metadata_and_flags_bad_files(tmp_path, monkeypatch):
    save_tiny_checkpoint(tmp_path / "b.safetensors", "birthplace")
    save_tiny_checkpoint(tmp_path / "a.safetensors", "lm")
    (tmp_path / "broken.safetensors").write_bytes(b"junk")
    infos = list_checkpoints(tmp_path)
    assert [i.name for i in infos] == ["a", "b", "broken"]
    assert infos[0].task == "lm" and infos[1].task == "birthplace"
    assert infos[2].error and "safetensors" in infos[2].error
    monkeypatch.setenv("ATTENTION_LAB_CHECKPOINTS", str(tmp_path))
    assert [i.name for i in list_checkpoints()] == ["a", "b", "broken"]
    assert list_checkpoints(tmp_path / "missing") == []
