"""Training-step snapshots: which steps, what the file holds, --resume, damage, no unpickling."""

import json
import pickle
import struct

import pytest
import torch

from core.data.datasets import NameDataset
from core.io import checkpoint as ckpt
from core.io import snapshots as snap_files
from core.model.tokenizer import CharTokenizer
from core.train.callbacks import CheckpointPlan, resume_run, standard
from core.train.snapshots import log_spaced_steps
from core.train.trainer import Trainer, TrainerConfig
from tests.conftest import tiny_model


def _data():
    pairs = [(f"Where was {n} born?", p) for n, p in
             [("Ada", "London"), ("Bo", "Paris"), ("Cy", "Rome"), ("Di", "Oslo")] * 8]
    tok = CharTokenizer.from_corpus("".join(q + a for q, a in pairs))
    return tok, NameDataset(pairs, tok, 32)


def _train(path, config, evaluate=None):
    tok, data = _data()
    trainer = Trainer(tiny_model(tok.vocab_size, dropout=0.2), data, config,
                      standard(CheckpointPlan(path, tok, "birthplace"), evaluate))
    return trainer


CONFIG = TrainerConfig(max_epochs=4, batch_size=8, learning_rate=3e-3, log_every=1, snapshots=6)  # 16 steps


@pytest.mark.parametrize("count,total", [(10, 640), (10, 10), (12, 5), (8, 20000), (2, 7), (1, 3)])
def test_steps_are_log_spaced_distinct_dense_early_and_end_at_the_last(count, total):
    steps = log_spaced_steps(count, total)
    assert steps == sorted(set(steps)) and steps[-1] == total
    assert len(steps) == min(count, total + 1)
    if count > 1:
        assert steps[0] == 0
    gaps = [b - a for a, b in zip(steps[1:], steps[2:])]
    assert gaps == sorted(gaps) or total < 2 * count  # first steps dense
    assert log_spaced_steps(10, 640) == [0, 1, 2, 5, 11, 25, 57, 127, 285, 640]
    assert log_spaced_steps(0, 640) == []


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_the_final_snapshot_is_the_final_checkpoints_weights(tmp_path, dtype):
    path = tmp_path / "m.safetensors"
    trainer = _train(path, TrainerConfig(**{**CONFIG.__dict__, "snapshot_dtype": dtype}))
    trainer.train()
    loaded = ckpt.load(path)
    found = snap_files.snapshots_of(loaded)
    assert found is not None and not found.note
    assert found.steps == log_spaced_steps(6, 16) == [0, 1, 2, 4, 8, 16]
    assert found.dtype == dtype
    n_params = sum(t.numel() for t in loaded.model.state_dict().values())
    assert found.bytes_per_snapshot == n_params * (2 if dtype == "float16" else 4)
    final = snap_files.model_at(loaded, found, 16).state_dict()
    for name, tensor in loaded.model.state_dict().items():
        expected = tensor if dtype == "float32" else tensor.half().float()
        assert torch.equal(final[name], expected), name
    # each row: the step, tokens seen and the loss of the kept weights: the history's next step (whose batch
    # ran on these weights), the last step's on a forward of its own
    history = {r["step"]: r["value"] for r in loaded.history if r["metric"] == "loss"}
    assert found.snapshots[0].loss == pytest.approx(history[1])
    for s in found.snapshots[1:-1]:
        assert s.loss == pytest.approx(history[s.step + 1]) and s.tokens == s.step * 8 * 31
    assert found.snapshots[-1].tokens == 16 * 8 * 31
    assert found.snapshots[0].tokens == 0 and found.snapshots[0].loss > found.snapshots[-1].loss
    # an early snapshot is another model: step 0 is the initial weights
    first = snap_files.model_at(loaded, found, 0).state_dict()
    torch.manual_seed(0)
    init = tiny_model(loaded.tokenizer.vocab_size, dropout=0.2).state_dict()
    assert all(torch.equal(first[k], init[k].half().float() if dtype == "float16" else init[k]) for k in init)
    assert found.at(7).step == 8 and found.at(6).step == 4 and found.at(10**6).step == 16


class Interrupted(Exception):
    pass


def test_snapshots_survive_resume(tmp_path):
    whole = _train(tmp_path / "whole.safetensors", CONFIG, lambda m: {})
    whole.train()
    calls = []

    def crash_in_epoch_three(m):
        calls.append(1)
        if len(calls) == 3:
            raise Interrupted  # epoch 2 saved (steps 0 to 8), epoch 3 taken in memory but not saved
        return {}

    with pytest.raises(Interrupted):
        _train(tmp_path / "part.safetensors", CONFIG, crash_in_epoch_three).train()
    part = snap_files.snapshots_of(ckpt.load(tmp_path / "part.safetensors"))
    # step 8 ends epoch 2: its loss is that of the first batch of epoch 3, so the resumed run takes it
    assert part.steps == [0, 1, 2, 4]
    resumed = _train(tmp_path / "part.safetensors", TrainerConfig(**{**CONFIG.__dict__, "snapshots": 0}),
                     lambda m: {})
    resume_run(resumed)  # the file's plan wins over a command line that forgot --snapshots
    resumed.train()
    a = snap_files.snapshots_of(ckpt.load(tmp_path / "whole.safetensors"))
    b = snap_files.snapshots_of(ckpt.load(tmp_path / "part.safetensors"))
    assert b.steps == a.steps == [0, 1, 2, 4, 8, 16] and not b.note
    assert [(s.tokens, s.loss, s.sha256) for s in a.snapshots] == [(s.tokens, s.loss, s.sha256) for s in b.snapshots]


def test_a_fresh_run_without_snapshots_removes_a_stale_file(tmp_path):
    path = tmp_path / "m.safetensors"
    _train(path, CONFIG).train()
    assert snap_files.snapshots_path(path).exists()
    _train(path, TrainerConfig(**{**CONFIG.__dict__, "snapshots": 0})).train()
    assert not snap_files.snapshots_path(path).exists()
    assert snap_files.snapshots_of(ckpt.load(path)) is None


@pytest.fixture
def trained(tmp_path):
    path = tmp_path / "m.safetensors"
    _train(path, CONFIG).train()
    return path


def _header(path):
    raw = path.read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    return raw, n, json.loads(raw[8:8 + n])


def test_damaged_snapshots_are_left_out_with_one_sentence_and_the_model_opens(trained):
    file = snap_files.snapshots_path(trained)
    raw, n, header = _header(file)
    start, end = header["4/tok_emb.weight"]["data_offsets"]
    flipped = bytearray(raw)
    flipped[8 + n + start + 3] ^= 0xFF  # one byte of step 4's weights
    file.write_bytes(bytes(flipped))
    loaded = ckpt.load(trained)
    found = snap_files.snapshots_of(loaded)
    assert found.steps == [0, 1, 2, 8, 16]
    assert found.note == "1 of 6 snapshots in m.snapshots.safetensors are damaged and left out (step 4)."
    file.write_bytes(raw[: len(raw) // 2])  # truncated: none readable, the checkpoint still opens
    found = snap_files.snapshots_of(ckpt.load(trained))
    assert found.snapshots == [] and ". " not in found.note and "truncated" in found.note
    assert found.note.endswith("; the model is shown without its training steps.")
    file.write_bytes(b"\x80\x04junk")
    assert snap_files.snapshots_of(ckpt.load(trained)).snapshots == []


def test_snapshots_of_another_model_are_not_shown(trained, tmp_path):
    other = tmp_path / "other.safetensors"
    tok, _ = _data()
    ckpt.save(other, tiny_model(tok.vocab_size, n_layer=1), tok, "birthplace")
    snap_files.snapshots_path(other).write_bytes(snap_files.snapshots_path(trained).read_bytes())
    found = snap_files.snapshots_of(ckpt.load(other))
    assert found.snapshots == [] and "another model" in found.note


def test_reading_snapshots_never_unpickles(trained, monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("unpickling")

    monkeypatch.setattr(pickle, "loads", refuse)
    monkeypatch.setattr(pickle, "load", refuse)
    monkeypatch.setattr(torch, "load", refuse)
    loaded = ckpt.load(trained)
    found = snap_files.snapshots_of(loaded)
    snap_files.model_at(loaded, found, 2)
    assert len(found.snapshots) == 6


def test_the_snapshot_file_is_not_listed_as_a_model(trained):
    assert [i.name for i in ckpt.list_checkpoints(trained.parent)] == ["m"]


def test_the_cli_keeps_snapshots_and_states_their_size(tmp_path, capsys):
    from core.train.cli import main

    corpus = tmp_path / "text.txt"
    corpus.write_text("Ada Lovelace was born in London. Alan Turing was born in Maida Vale. " * 20, encoding="utf-8")
    out = tmp_path / "lm.safetensors"
    assert main(["lm", str(corpus), "--n-layer", "1", "--n-head", "2", "--n-embd", "16", "--block-size", "16",
                 "--max-iters", "6", "--batch-size", "8", "--device", "cpu", "--snapshots", "4",
                 "--writing_params_path", str(out)]) == 0
    printed = capsys.readouterr().out
    line = next(line for line in printed.splitlines() if line.startswith("snapshots:"))
    found = snap_files.snapshots_of(ckpt.load(out))
    assert found.steps == [0, 1, 2, 6]
    each = found.bytes_per_snapshot / 1e6
    assert line == (f"snapshots: 4 at steps 0, 1, 2, 6; {each:.2f} MB each (float16), "
                    f"{found.path.stat().st_size / 1e6:.1f} MB in lm.snapshots.safetensors")
    assert main(["lm", str(corpus), "--snapshots", "-1", "--writing_params_path", str(tmp_path / "x")]) == 2


def test_the_bundled_language_model_keeps_its_training_steps():
    from tests.conftest import ROOT

    loaded = ckpt.load(ROOT / "checkpoints" / "lm-learned.safetensors")
    found = snap_files.snapshots_of(loaded)
    assert found is not None and not found.note and 4 <= len(found.snapshots) <= 12
    assert found.steps[0] == 0 and found.steps[-1] == json.loads(loaded.metadata["progress"])["step"]
    assert found.dtype == "float16" and found.bytes_per_snapshot == 2 * loaded.model.num_parameters()
    final = snap_files.model_at(loaded, found, found.steps[-1]).state_dict()
    assert all(torch.equal(final[k], v.half().float()) for k, v in loaded.model.state_dict().items())
    losses = [s.loss for s in found.snapshots]
    assert losses[-1] < losses[0] - 2  # the curve the slider walks along goes down
    assert len(set(losses)) == len(losses)  # each step shows its own weights' loss (steps 0 and 1 once shared one)


def test_each_snapshots_loss_is_its_own_weights_loss(tmp_path):
    """A kept step's loss is measured on the weights kept at that step: step 1's loss once was step 0's
    (the loss of the batch that made step 1, computed before it), so a slider showed the same number twice."""
    from core.data.loader import epoch_batches

    path = tmp_path / "m.safetensors"
    tok, data = _data()
    config = TrainerConfig(max_epochs=2, batch_size=8, learning_rate=3e-2, log_every=1, snapshots=4)  # 8 steps
    trainer = Trainer(tiny_model(tok.vocab_size), data, config, standard(CheckpointPlan(path, tok, "birthplace")))
    trainer.train()
    loaded = ckpt.load(path)
    found = snap_files.snapshots_of(loaded)
    assert found.steps == [0, 1, 3, 8]
    batches = [b for epoch in range(2) for b in epoch_batches(data, 8, epoch, epoch)]  # seed 0 * 1000 + epoch
    for snap in found.snapshots:
        x, y = batches[min(snap.step, len(batches) - 1)]  # the batch after the step; the last step: the last one
        with torch.no_grad():
            _, loss = snap_files.model_at(loaded, found, snap.step).float()(x, y)
        assert snap.loss == pytest.approx(loss.item(), abs=2e-3)  # float16 weights
    losses = [s.loss for s in found.snapshots]
    assert len(set(losses)) == len(losses) and losses[-1] < losses[0]
