"""The Trainer's callbacks: the events and their order, a bare run, and one part taken out."""

import pytest
import torch

from core.data.datasets import NameDataset
from core.io import checkpoint as ckpt
from core.io import snapshots as snap_files
from core.model.tokenizer import CharTokenizer
from core.train.callbacks import (
    Checkpointing,
    CheckpointPlan,
    Evaluation,
    ProgressBar,
    Snapshots,
    resume_run,
    standard,
)
from core.train.progress import EpochReport
from core.train.trainer import Callback, Trainer, TrainerConfig
from tests.conftest import tiny_model


def _data():
    pairs = [(f"Where was {n} born?", p) for n, p in
             [("Ada", "London"), ("Bo", "Paris"), ("Cy", "Rome"), ("Di", "Oslo")] * 8]  # 32 rows
    tok = CharTokenizer.from_corpus("".join(q + a for q, a in pairs))
    return tok, NameDataset(pairs, tok, 32)


class Log(Callback):
    """Writes (name, event, step) for every event it sees."""

    def __init__(self, name, seen):
        self.name, self.seen = name, seen

    def _see(self, event, trainer):
        self.seen.append((self.name, event, trainer.step))

    def on_train_start(self, trainer):
        self._see("train_start", trainer)

    def on_epoch_start(self, trainer):
        self._see("epoch_start", trainer)

    def on_batch_loss(self, trainer, batch, loss):
        assert loss.requires_grad and batch[0].size(0) == 8  # before backward, on this batch
        self._see("batch_loss", trainer)

    def on_batch_end(self, trainer, loss):
        self._see("batch_end", trainer)

    def on_epoch_end(self, trainer):
        self._see("epoch_end", trainer)

    def on_record(self, trainer, row):
        assert trainer.history[-1] is row
        self._see("record", trainer)


def test_callbacks_see_every_event_in_order():
    tok, data = _data()
    seen = []
    trainer = Trainer(tiny_model(tok.vocab_size), data, TrainerConfig(max_epochs=2, batch_size=8, log_every=2),
                      [Log("a", seen), Log("b", seen)])
    trainer.train()
    assert [name for name, _, _ in seen] == ["a", "b"] * (len(seen) // 2)  # each event: a, then b
    events = [(event, step) for name, event, step in seen if name == "a"]
    counts = {e: sum(1 for event, _ in events if event == e) for e, _ in events}
    # 4 batches an epoch, 2 epochs; a loss row and a rate row every 2 steps
    assert counts == {"train_start": 1, "epoch_start": 2, "batch_loss": 8, "batch_end": 8, "epoch_end": 2,
                      "record": 8}
    batch = [("batch_loss", 0), ("batch_end", 1), ("batch_loss", 1), ("record", 2), ("record", 2),
             ("batch_end", 2)]
    assert events[:8] == [("train_start", 0), ("epoch_start", 0), *batch]
    assert events[-3:] == [("record", 8), ("batch_end", 8), ("epoch_end", 8)]
    assert events.index(("epoch_start", 4)) == events.index(("epoch_end", 4)) + 1
    assert [r["metric"] for r in trainer.history] == ["loss", "lr"] * 4


def test_a_run_without_callbacks_writes_nothing_and_still_learns(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    tok, data = _data()
    trainer = Trainer(tiny_model(tok.vocab_size), data, TrainerConfig(max_epochs=15, batch_size=8,
                                                                      learning_rate=3e-3, log_every=1))
    trainer.train()
    assert list(tmp_path.iterdir()) == []
    losses = [r["value"] for r in trainer.history if r["metric"] == "loss"]
    assert len(losses) == trainer.step == 60 and max(losses[-4:]) < 0.5 * min(losses[:4])
    assert trainer.metrics == {} and trainer.epoch == 15
    with pytest.raises(ValueError, match="Checkpointing"):
        resume_run(trainer)


def _strip(rows):
    return [{k: v for k, v in r.items() if k != "wall_time"} for r in rows]


def test_taking_out_evaluation_takes_out_its_rows_and_nothing_else(tmp_path):
    tok, data = _data()
    probe = next(iter(torch.utils.data.DataLoader(data, batch_size=4)))
    # the CPU: bitwise repeatable, and where the evaluation's tensors are
    config = TrainerConfig(max_epochs=3, batch_size=8, learning_rate=3e-3, log_every=1, snapshots=4, seed=2,
                           device="cpu")

    def run(name, evaluate):
        torch.manual_seed(0)
        plan = CheckpointPlan(tmp_path / name, tok, "birthplace")
        trainer = Trainer(tiny_model(tok.vocab_size, dropout=0.2), data, config, standard(plan, evaluate),
                          run_name="r")
        trainer.train()
        return trainer, plan.path

    with_eval, a = run("a.safetensors", lambda m: {"val_loss": m(*probe)[1].item()})
    without, b = run("b.safetensors", None)
    assert [type(c) for c in with_eval.callbacks] == [ProgressBar, Snapshots, Evaluation, Checkpointing]
    assert [type(c) for c in without.callbacks] == [ProgressBar, Snapshots, Checkpointing]
    assert {r["split"] for r in with_eval.history} == {"train", "val"}
    assert _strip(without.history) == _strip([r for r in with_eval.history if r["split"] != "val"])
    assert set(with_eval.metrics) == {"val_loss"} and without.metrics == {}
    wa, wb = ckpt.load(a).model.state_dict(), ckpt.load(b).model.state_dict()
    assert all(torch.equal(wa[k], wb[k]) for k in wa)  # dropout draws the same numbers in both runs
    sa, sb = (snap_files.snapshots_of(ckpt.load(p)).snapshots for p in (a, b))
    assert [(s.step, s.loss, s.sha256) for s in sa] == [(s.step, s.loss, s.sha256) for s in sb]
    assert len(sa) == 4


def test_the_epoch_report_shows_the_rows_evaluation_recorded_that_epoch():
    tok, data = _data()
    lines = []
    values = iter([2.0, 1.0, 3.0])
    trainer = Trainer(tiny_model(tok.vocab_size), data, TrainerConfig(max_epochs=3, batch_size=8, log_every=1),
                      [Evaluation(lambda m: {"val_loss": next(values), "train_accuracy": 0.5}),
                       report := EpochReport("tokens", best=("val_loss", False), out=lines.append)])
    trainer.train()
    assert [line.split("  ")[2:4] for line in lines] == [["val loss 2.0000", "train accuracy 0.5000"],
                                                         ["val loss 1.0000", "train accuracy 0.5000"],
                                                         ["val loss 3.0000", "train accuracy 0.5000"]]
    assert report.summary()[1].startswith("best (epoch 2, by val loss): train loss ")
