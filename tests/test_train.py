import json
import subprocess
import sys
import time
from dataclasses import replace

import pytest
import torch

from core.data.datasets import CharCorruptionDataset, NameDataset
from core.data.world import generate_world, write_world
from core.io import checkpoint as ckpt
from core.model.tokenizer import CharTokenizer
from core.train.callbacks import Checkpointing, CheckpointPlan, log_path, resume_run, standard
from core.train.recipes import ModelShape
from core.train.trainer import Trainer, TrainerConfig
from tests.conftest import ROOT, tiny_model

TINY = ModelShape(n_layer=1, n_head=2, n_embd=32, block_size=64, dropout=0.1)


@pytest.fixture(scope="module")
def tiny_world(tmp_path_factory):
    folder = tmp_path_factory.mktemp("world")
    write_world(generate_world(seed=1, n_people=160, n_dev=30, n_test=10), folder)
    return folder


def _name_data():
    pairs = [(f"Where was {n} born?", p) for n, p in
             [("Ada", "London"), ("Bo", "Paris"), ("Cy", "Rome"), ("Di", "Oslo")] * 8]
    tok = CharTokenizer.from_corpus("".join(q + a for q, a in pairs))
    return tok, NameDataset(pairs, tok, 32)


def test_a_few_trainer_steps_lower_the_loss():
    tok, data = _name_data()
    model = tiny_model(tok.vocab_size, dropout=0.0)
    x, y = next(iter(torch.utils.data.DataLoader(data, batch_size=32)))
    before = model(x, y)[1].item()
    # on the CPU, where x and y are (a GPU box would otherwise move the model away from them)
    Trainer(model, data, TrainerConfig(max_epochs=15, batch_size=8, learning_rate=3e-3, device="cpu")).train()
    assert model(x, y)[1].item() < 0.5 * before


def test_schedule_warms_up_decays_to_a_floor_and_rises_again_after_final_tokens():
    tok, data = _name_data()
    trainer = Trainer(tiny_model(tok.vocab_size), data, TrainerConfig(learning_rate=1.0, warmup_tokens=100,
                                                                      final_tokens=1100))
    trainer.step = 1  # the very first step runs at the base rate, as in the assignment's trainer
    rates = []
    for tokens in (0, 50, 100, 600, 1100, 1600, 2100):
        trainer.tokens = tokens
        rates.append(trainer.learning_rate())
    # the assignment does not clamp progress at 1: after final_tokens the cosine comes back up
    assert rates == pytest.approx([0.0, 0.5, 1.0, 0.5, 0.1, 0.5, 1.0])
    trainer.config.schedule = "cosine-clamped"
    assert trainer.learning_rate() == pytest.approx(0.1)
    trainer.step = 0
    assert trainer.learning_rate() == 1.0


def test_default_decay_groups_are_the_assignments_every_parameter_but_biases():
    tok, data = _name_data()
    trainer = Trainer(tiny_model(tok.vocab_size), data, TrainerConfig())
    decayed, plain = trainer.optimizer.param_groups
    assert decayed["weight_decay"] > 0 and plain["weight_decay"] == 0
    names = {id(p): n for n, p in trainer.model.named_parameters()}
    assert {names[id(p)] for p in plain["params"]} == {n for n in names.values() if n.endswith(".bias")}
    assert {"tok_emb.weight", "pos.table", "ln_f.weight"} <= {names[id(p)] for p in decayed["params"]}


def test_mingpt_decay_groups_exempt_embeddings_and_norm_gains():
    tok, data = _name_data()
    trainer = Trainer(tiny_model(tok.vocab_size), data, TrainerConfig(decay="mingpt"))
    decayed, plain = trainer.optimizer.param_groups
    assert all(p.dim() == 2 for p in decayed["params"])
    names = {id(p): n for n, p in trainer.model.named_parameters()}
    assert {"tok_emb.weight", "pos.table", "ln_f.weight"} <= {names[id(p)] for p in plain["params"]}


def test_saving_every_n_epochs_still_saves_the_last_and_resumes(tmp_path):
    tok, data = _name_data()
    config = TrainerConfig(max_epochs=5, batch_size=8, learning_rate=3e-3, save_every=2)
    saved = []

    class Counting(Checkpointing):
        def save(self, trainer):
            saved.append(trainer.epoch)
            super().save(trainer)

    Trainer(tiny_model(tok.vocab_size), data, config,
            [Counting(CheckpointPlan(tmp_path / "m.safetensors", tok, "birthplace"))]).train()
    assert saved == [2, 4, 5]
    assert ckpt.load(tmp_path / "m.safetensors").metadata["progress"]


def test_max_steps_stops_mid_epoch():
    tok, data = _name_data()
    trainer = Trainer(tiny_model(tok.vocab_size), data, TrainerConfig(max_epochs=50, batch_size=8, max_steps=6))
    trainer.train()
    assert trainer.step == 6 and trainer.epoch == 2


def _strip_time(history):
    return [{k: v for k, v in row.items() if k not in ("wall_time", "run")} for row in history]


class Interrupted(Exception):
    pass


@pytest.mark.parametrize("corrupted", [False, True], ids=["names", "span-corruption"])
def test_resume_gives_the_same_history_as_an_uninterrupted_run(tmp_path, corrupted):
    """Every random state comes back: torch's (dropout), the order's seed and an epoch-seeded dataset's seed,
    even when the resuming trainer was built with other seeds (and torch reseeded since)."""
    tok, names = _name_data()
    # the CPU: bitwise repeatable, and where `probe` is (CUDA's own state: test_resume_restores_the_cuda_generator)
    config = TrainerConfig(max_epochs=4, batch_size=8, learning_rate=3e-3, log_every=1, warmup_tokens=50, seed=3,
                           device="cpu")
    probe = next(iter(torch.utils.data.DataLoader(names, batch_size=4)))

    def data(seed):
        if not corrupted:
            return names
        corpus = "\n".join(f"{n} was born in {p} ." for n, p in [("Ada", "London"), ("Bo", "Paris"),
                                                                 ("Cy", "Rome"), ("Di", "Oslo")] * 8)
        return CharCorruptionDataset(corpus, 32, tok, seed=seed)

    def make(name, evaluate, seed=11):
        model = tiny_model(tok.vocab_size, dropout=0.2)  # dropout: the RNG state must resume too
        return Trainer(model, data(seed), replace(config, seed=config.seed + seed - 11),
                       standard(CheckpointPlan(tmp_path / name, tok, "birthplace"), evaluate))

    whole = make("whole.safetensors", lambda m: {"val_loss": m(*probe)[1].item()})
    whole.train()

    calls = []

    def crash_in_epoch_three(m):
        calls.append(1)
        if len(calls) == 3:
            raise Interrupted  # after epoch 2 was saved, before epoch 3 was
        return {"val_loss": m(*probe)[1].item()}

    with pytest.raises(Interrupted):
        make("part.safetensors", crash_in_epoch_three).train()
    assert ckpt.load(tmp_path / "part.safetensors").history[-1]["epoch"] == 2
    torch.manual_seed(1234)  # the resuming process's own draws are not the run's
    resumed = make("part.safetensors", lambda m: {"val_loss": m(*probe)[1].item()}, seed=99)
    resume_run(resumed)
    assert resumed.config.seed == config.seed
    resumed.train()
    assert _strip_time(resumed.history) == _strip_time(whole.history)
    a = ckpt.load(tmp_path / "whole.safetensors").model.state_dict()
    b = ckpt.load(tmp_path / "part.safetensors").model.state_dict()
    assert all(torch.equal(a[k], b[k]) for k in a)
    live = [json.loads(line) for line in log_path(tmp_path / "part.safetensors").read_text().splitlines()]
    assert _strip_time(live) == _strip_time(whole.history)  # the live log has no duplicated or lost rows


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_resume_restores_the_cuda_generator(tmp_path):
    tok, data = _name_data()
    trainer = Trainer(tiny_model(tok.vocab_size, dropout=0.2), data, TrainerConfig(max_epochs=1, device="cuda"),
                      standard(CheckpointPlan(tmp_path / "m.safetensors", tok, "birthplace")))
    trainer.train()
    expected = torch.rand(4, device="cuda")
    torch.cuda.manual_seed_all(5)
    fresh = Trainer(tiny_model(tok.vocab_size, dropout=0.2), data, TrainerConfig(max_epochs=1, device="cuda"),
                    standard(CheckpointPlan(tmp_path / "m.safetensors", tok, "birthplace")))
    resume_run(fresh)
    assert torch.equal(torch.rand(4, device="cuda"), expected)


def _cli(*args, cwd):
    return subprocess.run([sys.executable, "-m", "core.train", *args], cwd=cwd, capture_output=True, text=True,
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}, timeout=120)


def test_cli_pretrain_finetune_evaluate_end_to_end(tiny_world, tmp_path):
    started = time.perf_counter()
    size = ["--n-layer", "1", "--n-head", "2", "--n-embd", "32", "--epochs", "1", "--batch-size", "64"]
    wiki = str(tiny_world / "wiki.txt")
    pre = _cli("pretrain", "vanilla", wiki, "--writing_params_path", "pre.safetensors", *size, cwd=tmp_path)
    assert pre.returncode == 0, pre.stderr
    fine = _cli("finetune", "vanilla", wiki, "--reading_params_path", "pre.safetensors", "--finetune_corpus_path",
                str(tiny_world / "birth_places_train.tsv"), "--writing_params_path", "fine.safetensors", *size,
                cwd=tmp_path)
    assert fine.returncode == 0, fine.stderr
    evaluation = _cli("evaluate", "vanilla", wiki, "--reading_params_path", "fine.safetensors",
                      "--eval_corpus_path", str(tiny_world / "birth_dev.tsv"), "--outputs_path", "preds.txt",
                      cwd=tmp_path)
    assert evaluation.returncode == 0, evaluation.stderr
    assert "Correct: " in evaluation.stdout and " out of 30: " in evaluation.stdout
    assert "baseline" in evaluation.stdout
    assert len((tmp_path / "preds.txt").read_text().splitlines()) == 30
    assert time.perf_counter() - started < 60
    meta = ckpt.read_metadata(tmp_path / "fine.safetensors")
    assert meta["task"] == "birthplace" and meta["command"].startswith("python -m core.train finetune")
    assert {d["path"].rsplit("/", 1)[-1] for d in meta["data"]} == {"wiki.txt", "birth_places_train.tsv"}


@pytest.mark.parametrize("setup,args,message", [
    (None, ["pretrain", "vanilla", "missing.txt", "--writing_params_path", "o.safetensors"], "does not exist"),
    ("empty.txt", ["pretrain", "vanilla", "empty.txt", "--writing_params_path", "o.safetensors"], "is empty"),
    ("notab.tsv", ["finetune", "vanilla", "wiki.txt", "--finetune_corpus_path", "notab.tsv",
                   "--writing_params_path", "o.safetensors"], "Line 1 of notab.tsv has no tab"),
    ("masked.txt", ["pretrain", "vanilla", "masked.txt", "--writing_params_path", "o.safetensors"],
     "MASK character"),
])
def test_cli_errors_are_one_line(tmp_path, setup, args, message):
    (tmp_path / "wiki.txt").write_text("Ada. Ada was born in London .\n")
    contents = {"empty.txt": "", "notab.tsv": "Where was Ada born? London\n", "masked.txt": "a \u2047 b\n"}
    if setup:
        (tmp_path / setup).write_text(contents[setup])
    result = _cli(*args, cwd=tmp_path)
    assert result.returncode == 2
    assert message in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert "Traceback" not in result.stderr


def test_classifier_label_set_mismatch_is_refused(tmp_path):
    from core.data.datasets import DataError
    from core.train.recipes import train_classifier

    (tmp_path / "train.tsv").write_text("France\tJean Dupont\nItaly\tGiulia Rossi\n")
    (tmp_path / "test.tsv").write_text("Spain\tAna Lopez\n")
    with pytest.raises(DataError, match="Spain"):
        train_classifier(str(tmp_path / "train.tsv"), str(tmp_path / "test.tsv"), str(tmp_path / "o.safetensors"),
                         TINY, TrainerConfig(max_epochs=1))


def test_trainer_records_the_documented_history_rows(tmp_path):
    tok, data = _name_data()
    plan = CheckpointPlan(tmp_path / "m.safetensors", tok, "birthplace")
    trainer = Trainer(tiny_model(tok.vocab_size), data, TrainerConfig(max_epochs=2, batch_size=8, log_every=1),
                      standard(plan, evaluate=lambda m: {"val_loss": 1.0}))
    trainer.train()
    row = trainer.history[0]
    assert set(row) == {"run", "step", "epoch", "tokens", "wall_time", "split", "metric", "value"}
    assert {(r["split"], r["metric"]) for r in trainer.history} == {("train", "loss"), ("train", "lr"), ("val", "loss")}
    assert ckpt.load(plan.path).history == trainer.history
