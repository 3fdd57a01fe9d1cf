"""Runs other tools wrote (core/lens/history/sources.py), each made in the test by the real writer where one is
installable here: torch's SummaryWriter, transformers' TrainerState.save_to_json; the other layouts as those
tools write them. Values read equal values written, step for step; bad input gives one sentence each."""

from __future__ import annotations

import io
import json
import math
import zipfile
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from core.lens.history import bands, curves
from core.lens.history.__main__ import main as history_cli
from core.lens.history.metric_names import map_metric
from core.lens.history.records import COLUMNS
from core.lens.history.sources import ZipRefused, read_paths, unpack_zip

TB_EXTRA = "requirements-tensorboard.txt"


def summary_writer():
    pytest.importorskip("tensorboard", reason=f"the optional TensorBoard extra is not installed (pip install -r "
                                              f"{TB_EXTRA})")
    from torch.utils.tensorboard import SummaryWriter

    return SummaryWriter


def series(frame: pd.DataFrame, run: str, split: str, metric: str, x: str = "step") -> pd.Series:
    part = frame[(frame["run"] == run) & (frame["split"] == split) & (frame["metric"] == metric)]
    return part.set_index(x)["value"].sort_index()


# --- names ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name, split, metric", [
    ("train/loss", "train", "loss"), ("train_loss", "train", "loss"), ("loss", "train", "loss"),
    ("eval_loss", "val", "loss"), ("val_loss", "val", "loss"), ("val/loss", "val", "loss"),
    ("loss/validation", "val", "loss"), ("val loss", "val", "loss"), ("train_loss_step", "train", "loss"),
    ("accuracy", "train", "accuracy"), ("val_accuracy", "val", "accuracy"), ("eval_accuracy", "val", "accuracy"),
    ("train/acc", "train", "accuracy"), ("val_ppl", "val", "perplexity"), ("eval/perplexity", "val", "perplexity"),
    ("learning_rate", "train", "lr"), ("train/learning_rate", "train", "lr"), ("lr", "train", "lr"),
])
def test_names_map_by_each_tools_conventions(name, split, metric):
    mapped = map_metric(name)
    assert (mapped.split, mapped.metric, mapped.mapped) == (split, metric, True)


@pytest.mark.parametrize("name, split", [("grad_norm", "train"), ("mfu", "train"), ("train/grad_norm", "train"),
                                         ("eval_runtime", "val"), ("train_loss_epoch", "train"),
                                         ("lr-AdamW", "train")])
def test_other_names_keep_their_own_name(name, split):
    mapped = map_metric(name)
    assert (mapped.split, mapped.metric, mapped.mapped) == (split, name, False)


# --- TensorBoard ------------------------------------------------------------------------------------------

def write_tensorboard(folder: Path, values: dict[str, list[tuple[int, float]]]) -> None:
    writer = summary_writer()(str(folder))
    for tag, points in values.items():
        for step, value in points:
            writer.add_scalar(tag, value, step)
    writer.close()


def test_tensorboard_values_read_equal_values_written(tmp_path):
    rng = np.random.default_rng(0)
    train = [(s, float(v)) for s, v in zip(range(0, 300, 3), rng.normal(2, 0.5, 100))]
    val = [(s, float(v)) for s, v in zip(range(0, 300, 30), rng.normal(2.5, 0.1, 10))]
    grad = [(s, float(v)) for s, v in zip(range(0, 300, 3), rng.random(100))]
    write_tensorboard(tmp_path / "runs" / "a", {"train/loss": train, "val/loss": val, "train/grad_norm": grad})
    write_tensorboard(tmp_path / "runs" / "b", {"train/loss": train[:5]})
    found = read_paths([tmp_path / "runs"], labels=["runs"])
    assert found.runs == ["runs/a", "runs/b"]  # a folder of event files is a run, as in TensorBoard
    assert found.kinds["runs/a"] == "TensorBoard"
    got = series(found.frame, "runs/a", "train", "loss")
    assert list(got.index) == [s for s, _ in train]
    np.testing.assert_allclose(got.to_numpy(), [v for _, v in train], rtol=1e-6)  # float32 on disk
    np.testing.assert_allclose(series(found.frame, "runs/a", "val", "loss").to_numpy(), [v for _, v in val],
                               rtol=1e-6)
    assert found.unmapped == {"train/grad_norm": ["runs/a"]}  # kept under its own name, and listed
    assert len(series(found.frame, "runs/a", "train", "train/grad_norm")) == 100
    assert (found.frame["wall_time"] > 1e9).all()  # the writer's clock


def test_tensorboard_tag_filter_is_a_regular_expression(tmp_path):
    write_tensorboard(tmp_path / "r", {"train/loss": [(0, 1.0)], "val/loss": [(0, 2.0)], "lr": [(0, 0.1)]})
    found = read_paths([tmp_path / "r"], tag_filter="loss$")
    assert sorted(found.frame["metric"] + found.frame["split"]) == ["losstrain", "lossval"]
    assert any("1 tag(s) hidden by the tag filter" in n for n in found.notes)
    bad = read_paths([tmp_path / "r"], tag_filter="(")
    assert len(bad.frame) == 3 and any("not a regular expression" in n for n in bad.notes)


def test_a_cut_off_event_file_keeps_its_readable_prefix_and_says_where_it_stopped(tmp_path):
    write_tensorboard(tmp_path / "r", {"train/loss": [(s, float(s)) for s in range(50)]})
    path = next((tmp_path / "r").glob("events.out.tfevents.*"))
    data = path.read_bytes()
    path.write_bytes(data[:-10])  # the last record cut in the middle
    found = read_paths([path], labels=["cut"])
    got = series(found.frame, "cut", "train", "loss")
    assert list(got.index) == list(range(49))
    (note,) = [n for n in found.notes if "stops being readable" in n]
    assert f"of {len(data) - 10:,}" in note and "49 values" in note


def test_a_damaged_record_in_the_middle_stops_reading_there_and_says_so(tmp_path):
    write_tensorboard(tmp_path / "r", {"train/loss": [(s, float(s)) for s in range(50)]})
    path = next((tmp_path / "r").glob("events.out.tfevents.*"))
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF  # one flipped byte: that record's CRC fails
    path.write_bytes(bytes(data))
    found = read_paths([path], labels=["hurt"])
    steps = list(series(found.frame, "hurt", "train", "loss").index)
    assert 0 < len(steps) < 50 and steps == list(range(len(steps)))  # the readable prefix, in order
    (note,) = [n for n in found.notes if "stops being readable" in n]
    assert f"the {len(steps)} values before it are shown" in note


def test_a_growing_event_file_is_read_on_from_where_it_stopped(tmp_path):
    SummaryWriter = summary_writer()
    writer = SummaryWriter(str(tmp_path / "live"))
    for s in range(5):
        writer.add_scalar("loss", 1.0 / (s + 1), s)
    writer.flush()
    followers: dict = {}
    first = read_paths([tmp_path / "live"], followers=followers)
    assert len(first.frame) == 5
    for s in range(5, 9):
        writer.add_scalar("loss", 1.0 / (s + 1), s)
    writer.flush()
    again = read_paths([tmp_path / "live"], followers=followers)
    writer.close()
    assert list(series(again.frame, "live", "train", "loss").index) == list(range(9))



def test_a_record_cut_mid_write_is_read_whole_on_the_next_poll(tmp_path):
    """The reader reads through a plain file opened per poll at the offset the last poll stopped; a record the
    writer had only half written is kept in TensorBoard's reader and completed from the file's new bytes."""
    from core.lens.history.event_files import EventFileFollower

    write_tensorboard(tmp_path / "r", {"train/loss": [(s, float(s)) for s in range(50)]})
    path = next((tmp_path / "r").glob("events.out.tfevents.*"))
    data = path.read_bytes()
    path.write_bytes(data[:-10])
    follower = EventFileFollower(path)
    assert follower._reader is not None  # TensorBoard's stub reader, given a plain file
    assert follower.poll().steps == list(range(49))
    with path.open("ab") as handle:
        handle.write(data[-10:])
    got = follower.poll()
    assert got.steps == list(range(50)) and got.values == [float(s) for s in range(50)]
    assert got.read_bytes == got.size == len(data)

# --- Hugging Face Trainer -----------------------------------------------------------------------------------

def write_trainer_folder(folder: Path, steps=(10, 20, 30, 40), save_every: int = 20) -> list[dict]:
    transformers = pytest.importorskip("transformers", reason="the optional Hugging Face extra is not installed "
                                                              "(pip install -r requirements-hf.txt)")
    log = []
    for step in steps:
        log.append({"loss": 3.0 - step / 20, "grad_norm": 1.5, "learning_rate": 5e-5 * (1 - step / 50),
                    "epoch": step / 20, "step": step})
        if step % save_every == 0:
            log.append({"eval_loss": 3.2 - step / 25, "eval_accuracy": step / 50, "eval_runtime": 0.5,
                        "epoch": step / 20, "step": step})
    log.append({"train_runtime": 12.0, "train_loss": 2.1, "total_flos": 1e9, "epoch": 2.0, "step": steps[-1]})
    folder.mkdir(parents=True)
    for step in steps:
        if step % save_every == 0:  # what Trainer._save_checkpoint leaves: weights, config, its state so far
            ckpt = folder / f"checkpoint-{step}"
            ckpt.mkdir()
            (ckpt / "config.json").write_text("{}")
            (ckpt / "model.safetensors").write_bytes(b"")
            transformers.TrainerState(global_step=step, log_history=[e for e in log if e["step"] <= step]
                                      ).save_to_json(str(ckpt / "trainer_state.json"))
    transformers.TrainerState(global_step=steps[-1], log_history=log).save_to_json(str(folder / "trainer_state.json"))
    return log


def test_trainer_folder_values_and_saved_steps(tmp_path):
    log = write_trainer_folder(tmp_path / "out")
    found = read_paths([tmp_path / "out"], labels=["out"])
    assert found.runs == ["out"] and found.kinds["out"] == "Hugging Face Trainer"
    train = series(found.frame, "out", "train", "loss")
    assert train.to_dict() == {e["step"]: e["loss"] for e in log if "loss" in e}
    assert series(found.frame, "out", "val", "loss").to_dict() == {e["step"]: e["eval_loss"] for e in log
                                                                  if "eval_loss" in e}
    assert series(found.frame, "out", "val", "accuracy").to_dict() == {20: 0.4, 40: 0.8}
    assert series(found.frame, "out", "train", "lr", x="epoch").to_dict() == {
        e["epoch"]: e["learning_rate"] for e in log if "learning_rate" in e}
    # the run's average training loss is not a point of the curve: kept, under its own name
    assert series(found.frame, "out", "train", "train_loss (whole run)").to_dict() == {40: 2.1}
    assert {"grad_norm", "eval_runtime", "train_runtime", "total_flos"} <= set(found.unmapped)
    assert [(s.run, s.step, s.path.name) for s in found.saved] == [("out", 20, "checkpoint-20"),
                                                                   ("out", 40, "checkpoint-40")]


def write_trainer_tensorboard(folder: Path, log: list[dict]) -> None:
    """What the Trainer's TensorBoardCallback writes for these log entries under `folder/runs/<date_host>/`: each
    entry as the Trainer hands it to on_log (without its step, which is the state's global_step)."""
    summary_writer()
    import transformers
    from transformers.integrations import TensorBoardCallback

    args = SimpleNamespace(output_dir=str(folder), to_json_string=lambda: "{}")  # TrainingArguments needs accelerate
    state, control = transformers.TrainerState(), transformers.TrainerControl()
    callback = TensorBoardCallback()
    callback.on_train_begin(args, state, control)
    for entry in log:
        state.global_step = entry["step"]
        callback.on_log(args, state, control, logs={k: v for k, v in entry.items() if k != "step"})
    callback.on_train_end(args, state, control)


def test_a_trainer_folder_and_the_tensorboard_log_it_wrote_are_one_run(tmp_path, capsys):
    log = write_trainer_folder(tmp_path / "out")
    alone = read_paths([tmp_path / "out"], labels=["out"])
    write_trainer_tensorboard(tmp_path / "out", log)
    assert len(list((tmp_path / "out" / "runs").glob("*/events.out.tfevents.*"))) == 1
    found = read_paths([tmp_path / "out"], labels=["out"])
    assert found.runs == ["out"] and found.kinds == {"out": "Hugging Face Trainer"}  # not a second, TensorBoard run
    assert found.frame.drop(columns="wall_time").equals(alone.frame.drop(columns="wall_time"))  # the same points
    assert np.isfinite(found.frame["wall_time"]).all()  # each at the time its TensorBoard record says
    assert series(found.frame, "out", "train", "loss").to_dict() == {e["step"]: e["loss"] for e in log if "loss" in e}
    assert "train/grad_norm" not in found.unmapped and "grad_norm" in found.unmapped  # the state's names
    assert history_cli([str(tmp_path / "out")]) == 0
    assert "1 run(s)" in capsys.readouterr().out


def test_a_running_trainer_adds_what_its_tensorboard_log_has_after_the_last_saved_state(tmp_path):
    log = write_trainer_folder(tmp_path / "out", steps=(10, 20, 30, 40, 50))
    (tmp_path / "out" / "trainer_state.json").unlink()  # still running: the newest state is checkpoint-40's
    write_trainer_tensorboard(tmp_path / "out", log)
    found = read_paths([tmp_path / "out"], labels=["out"])
    assert found.runs == ["out"]
    train = series(found.frame, "out", "train", "loss")
    assert train.to_dict() == {e["step"]: e["loss"] for e in log if "loss" in e}  # 50 from the TensorBoard log
    assert series(found.frame, "out", "train", "loss", x="epoch").index.tolist() == [0.5, 1.0, 1.5, 2.0, 2.5]
    # from the TensorBoard log: as it holds them, 32-bit floats
    assert series(found.frame, "out", "train", "train_loss (whole run)").to_dict() == {50: float(np.float32(2.1))}
    assert any("logged after out/checkpoint-40/trainer_state.json was saved" in n for n in found.notes)


def test_trainer_folder_mid_run_reads_the_newest_checkpoints_state(tmp_path):
    write_trainer_folder(tmp_path / "out")
    (tmp_path / "out" / "trainer_state.json").unlink()  # the job is still running: no final state yet
    found = read_paths([tmp_path / "out"], labels=["out"])
    assert series(found.frame, "out", "train", "loss").index.max() == 40


def test_json_that_is_not_a_trainer_state_is_one_sentence(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"hidden_size": 8}))
    (tmp_path / "broken.json").write_text("{not json")
    found = read_paths([tmp_path / "config.json", tmp_path / "broken.json"])
    assert found.frame.empty
    assert found.notes == ["config.json is JSON but not a Hugging Face trainer state (it has no log_history list).",
                           "broken.json is not valid JSON, so it is not a trainer state."]


# --- CSV layouts ------------------------------------------------------------------------------------------

def test_lightning_csvlogger_sparse_rows(tmp_path):
    version = tmp_path / "lightning_logs" / "version_0"
    version.mkdir(parents=True)
    (version / "hparams.yaml").write_text("lr: 0.001\n")
    (version / "metrics.csv").write_text(  # as Lightning's CSVLogger writes it: one row per log call
        "epoch,step,train_loss,val_loss,val_acc\n"
        "0,49,0.9,,\n0,99,0.7,,\n0,99,,0.8,0.6\n1,149,0.5,,\n1,199,0.4,,\n1,199,,0.6,0.7\n")
    found = read_paths([tmp_path / "lightning_logs"], labels=["lightning_logs"])
    run = "lightning_logs/version_0/metrics"
    assert found.kinds[run] == "Lightning CSVLogger"
    assert series(found.frame, run, "train", "loss").to_dict() == {49: 0.9, 99: 0.7, 149: 0.5, 199: 0.4}
    assert series(found.frame, run, "val", "loss").to_dict() == {99: 0.8, 199: 0.6}
    assert series(found.frame, run, "val", "accuracy", x="epoch").to_dict() == {0: 0.6, 1: 0.7}


def test_keras_csvlogger_has_epochs_and_no_steps(tmp_path):
    (tmp_path / "training.log.csv").write_text(
        "epoch,accuracy,loss,val_accuracy,val_loss\n0,0.5,1.2,0.55,1.1\n1,0.7,0.8,0.65,0.9\n")
    found = read_paths([tmp_path / "training.log.csv"])
    run = found.runs[0]
    assert found.kinds[run] == "Keras CSVLogger"
    assert series(found.frame, run, "val", "accuracy", x="epoch").to_dict() == {0: 0.55, 1: 0.65}
    assert found.frame["step"].isna().all()  # the source wrote epochs only: no step is made up


def test_wandb_panel_export_gives_one_run_per_column(tmp_path):
    (tmp_path / "panel.csv").write_text(
        '"Step","lm-seed0 - train/loss","lm-seed0 - train/loss__MIN","lm-seed0 - train/loss__MAX",'
        '"lm-seed1 - train/loss","lm-seed1 - train/loss__MIN","lm-seed1 - train/loss__MAX"\n'
        '0,2.0,1.9,2.1,2.2,2.1,2.3\n10,1.5,1.4,1.6,,,\n')
    found = read_paths([tmp_path / "panel.csv"])
    assert found.runs == ["lm-seed0", "lm-seed1"]
    assert series(found.frame, "lm-seed0", "train", "loss").to_dict() == {0: 2.0, 10: 1.5}
    assert series(found.frame, "lm-seed1", "train", "loss").to_dict() == {0: 2.2}
    assert any("4 __MIN/__MAX column(s)" in n for n in found.notes)


def test_plain_tsv_with_nan_and_inf_keeps_them_as_gaps(tmp_path):
    (tmp_path / "m.tsv").write_text("step\tloss\tval_loss\n1\t1.0\tnan\n2\tinf\t0.5\n3\t0.5\t0.4\n")
    found = read_paths([tmp_path / "m.tsv"])
    got = series(found.frame, "m", "train", "loss")
    assert got[1] == 1.0 and math.isinf(got[2]) and got[3] == 0.5
    assert any("2 NaN or infinite value(s)" in n for n in found.notes)


def test_table_without_step_or_epoch_and_non_utf8_text(tmp_path):
    (tmp_path / "x.csv").write_text("a,b\n1,2\n")
    (tmp_path / "latin.csv").write_bytes("step,loss,notes\n1,0.5,caf\xe9\n".encode("latin-1"))
    found = read_paths([tmp_path / "x.csv", tmp_path / "latin.csv"])
    assert found.notes[0] == ("x.csv has no step or epoch column (its columns: a, b), so its rows cannot be "
                              "placed on a curve.")
    assert any(n.startswith("latin.csv is not UTF-8 text (first bad byte at 25)") for n in found.notes)
    assert series(found.frame, "latin", "train", "loss").to_dict() == {1: 0.5}


# --- nanoGPT and MLflow -----------------------------------------------------------------------------------

def test_nanogpt_printout(tmp_path):
    lines = ["Overriding config with config/train_shakespeare_char.py", "tokens per iteration will be: 16,384",
             "step 0: train loss 4.2874, val loss 4.2823",
             "iter 0: loss 4.2654, time 29435.88ms, mfu -100.00%",
             "iter 10: loss 3.2457, time 21.58ms, mfu 17.34%",
             "step 250: train loss 1.9694, val loss 2.0651",
             "saving checkpoint to out-shakespeare-char",
             "iter 250: loss 2.0415, time 3358.86ms, mfu 15.61%"]
    (tmp_path / "train.log").write_text("\n".join(lines) + "\n")
    found = read_paths([tmp_path / "train.log"])
    assert series(found.frame, "train", "train", "loss").to_dict() == {0: 4.2654, 10: 3.2457, 250: 2.0415}
    assert series(found.frame, "train", "val", "loss").to_dict() == {0: 4.2823, 250: 2.0651}
    assert series(found.frame, "train", "train", "mfu").to_dict() == {0: -100.0, 10: 17.34, 250: 15.61}
    assert series(found.frame, "train", "train", "train loss (eval)").to_dict() == {0: 4.2874, 250: 1.9694}


def test_text_that_is_not_a_printout_says_so(tmp_path):
    (tmp_path / "notes.txt").write_text("hello\n")
    found = read_paths([tmp_path / "notes.txt"])
    assert found.frame.empty and "not a training printout" in found.notes[0]


def test_mlflow_file_layout(tmp_path):
    run = tmp_path / "mlruns" / "0" / "0123abcd"
    (run / "metrics" / "val").mkdir(parents=True)
    (run / "tags").mkdir()
    (tmp_path / "mlruns" / "0" / "meta.yaml").write_text("name: Default\n")
    (run / "meta.yaml").write_text("run_id: 0123abcd\n")
    (run / "tags" / "mlflow.runName").write_text("bright-owl-7")
    (run / "metrics" / "train_loss").write_text("1700000000000 0.9 0\n1700000001000 0.7 1\n1700000002500 0.6 2\n")
    (run / "metrics" / "val" / "loss").write_text("1700000002500 0.8 2\n")
    found = read_paths([tmp_path / "mlruns"], labels=["mlruns"])
    name = "mlruns/0/0123abcd"
    assert found.kinds[name] == "MLflow"
    assert series(found.frame, name, "train", "loss").to_dict() == {0: 0.9, 1: 0.7, 2: 0.6}
    assert series(found.frame, name, "val", "loss").to_dict() == {2: 0.8}
    wall = series(found.frame, name, "train", "loss", x="wall_time")
    assert list(wall.index) == [1700000000.0, 1700000001.0, 1700000002.5]


# --- folders, zips, the command ---------------------------------------------------------------------------

def test_a_folder_of_many_runs_lists_the_first_ones_and_says_how_many(tmp_path):
    for i in range(30):
        (tmp_path / f"run{i:02d}.csv").write_text("step,loss\n0,1.0\n")
    found = read_paths([tmp_path], labels=["all"], max_runs=10)
    assert len(found.runs) == 10
    assert "all holds 30 runs; the first 10 are read (run00.csv to run09.csv)." in found.notes


def zipped(members: dict[str, bytes]) -> bytes:
    """A .zip in memory holding `members` (name -> bytes), as a user's upload would."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return buffer.getvalue()


def test_zip_with_paths_outside_itself_or_too_large_is_refused(tmp_path):
    for bad in ("../escape.csv", "/etc/x.csv"):
        with pytest.raises(ZipRefused, match="path outside itself"):
            unpack_zip(zipped({"ok.csv": b"step,loss\n", bad: b"x"}), tmp_path / "a", "run.zip")
    with pytest.raises(ZipRefused, match="over the 0 MB limit"):
        unpack_zip(zipped({"big.csv": b"0" * 1000}), tmp_path / "b", "run.zip", max_bytes=100)
    with pytest.raises(ZipRefused, match="not a readable zip"):
        unpack_zip(b"PK\x03\x04 nope", tmp_path / "c", "run.zip")
    assert not (tmp_path / "escape.csv").exists()
    into = tmp_path / "d"
    into.mkdir()
    unpack_zip(zipped({"run/metrics.csv": b"step,loss\n0,1.5\n"}), into, "run.zip")
    assert series(read_paths([into], labels=["run.zip"]).frame, "run.zip/run/metrics", "train", "loss").to_dict() \
        == {0: 1.5}


def test_command_prints_what_it_found_and_writes_the_tidy_table(tmp_path, capsys):
    log = write_trainer_folder(tmp_path / "out")
    out = tmp_path / "table.csv"
    assert history_cli([str(tmp_path / "out"), "-o", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "1 run(s)" in printed and "out (Hugging Face Trainer)" in printed and "grad_norm" in printed
    assert "out: saved steps 20, 40." in printed
    table = pd.read_csv(out)
    assert list(table.columns) == COLUMNS
    train = table[(table["split"] == "train") & (table["metric"] == "loss")]
    assert dict(zip(train["step"], train["value"])) == {e["step"]: e["loss"] for e in log if "loss" in e}
    assert history_cli([str(tmp_path / "out"), "-o", str(out)]) == 1  # an existing file is not overwritten
    assert history_cli([str(tmp_path / "nothing")]) == 1
    assert "no such file or folder" in capsys.readouterr().out


# --- seed bands, axes, decimation ---------------------------------------------------------------------------

def seed_frame() -> pd.DataFrame:
    rng = np.random.default_rng(1)
    rows = []
    for seed in range(3):
        for step in range(0, 100, 10):
            rows.append({"run": f"lm-seed{seed}", "step": step, "epoch": step / 50, "tokens": np.nan,
                         "wall_time": 1e9 + step + seed, "split": "train", "metric": "loss",
                         "value": float(rng.normal(2, 0.3))})
    rows.append({"run": "other", "step": 0, "epoch": 0, "tokens": np.nan, "wall_time": 5.0, "split": "train",
                 "metric": "loss", "value": 1.0})
    return pd.DataFrame(rows)[COLUMNS]


def test_seed_groups_by_name():
    assert bands.seed_groups(["lm-seed0", "lm-seed1", "lm_s2", "other", "x-seed3", "seed4"]) == {
        "lm (seeds)": ["lm-seed0", "lm-seed1", "lm_s2"]}  # a seed alone is no group; nor is a name with no base
    assert bands.seed_groups(["a/seed=1", "a/seed=2"]) == {"a (seeds)": ["a/seed=1", "a/seed=2"]}


@pytest.mark.parametrize("band", ["minmax", "std"])
def test_seed_band_equals_a_pandas_groupby_over_the_same_runs(band):
    frame = seed_frame()
    groups = bands.seed_groups(frame["run"].unique())
    plot = curves.build_curves(frame, ["lm (seeds)", "other"], "loss", "step", groups=groups, band=band)
    (curve,) = [c for c in plot.curves if c.run == "lm (seeds)"]
    members = frame[frame["run"].str.startswith("lm-seed")].groupby("step")["value"]
    np.testing.assert_allclose(curve.y, members.mean().to_numpy())
    low, high = ((members.min(), members.max()) if band == "minmax" else
                 (members.mean() - members.std(), members.mean() + members.std()))
    np.testing.assert_allclose(curve.band_low, low.to_numpy())
    np.testing.assert_allclose(curve.band_high, high.to_numpy())
    assert curve.n_runs == 3
    assert any("the mean over 3 runs" in line and "all 3 have a value at every x" in line for line in plot.info)
    assert [c.run for c in plot.curves] == ["lm (seeds)", "other"]


def test_relative_time_counts_from_each_runs_start_and_a_clock_is_drawn_as_dates():
    frame = seed_frame()
    plot = curves.build_curves(frame, ["lm-seed2"], "loss", "relative")
    assert plot.curves[0].x[0] == 0 and plot.curves[0].x[-1] == 90
    assert curves.build_curves(frame, ["lm-seed2"], "loss", "wall_time").dates
    assert not curves.build_curves(frame, ["other"], "loss", "wall_time").dates  # ours count from 0


def test_every_spike_of_a_long_series_survives_decimation():
    rng = np.random.default_rng(3)
    n = 100_000
    y = rng.normal(1.0, 0.01, n)
    spikes = rng.choice(n // 100, 40, replace=False) * 100 + 37  # one per x-slice (each 50 points wide)
    y[spikes] = 50 + rng.random(40)
    y[spikes[:5]] = -40.0  # downward ones too
    frame = pd.DataFrame({"run": "r", "step": np.arange(n, dtype=float), "epoch": np.nan, "tokens": np.nan,
                          "wall_time": np.nan, "split": "train", "metric": "loss", "value": y})
    plot = curves.build_curves(frame, ["r"], "loss", "step")
    curve = plot.curves[0]
    assert curve.reduced and curve.x.size <= 2 * curves.N_BUCKETS + 2
    kept = dict(zip(curve.x, curve.y))
    assert all(kept.get(float(s)) == y[s] for s in spikes)


def test_the_readers_checksums_run_in_c_and_agree_with_tensorboards_own(tmp_path):
    """TensorBoard's reader computes each record's CRC32C in pure Python (most of opening a long run); with the
    extra's google-crc32c it computes the same checksums in C, and a damaged record still fails (the test above)."""
    import os

    pytest.importorskip("google_crc32c", reason="the TensorBoard extra is not installed (requirements-tensorboard.txt)")
    from tensorboard.compat.tensorflow_stub import pywrap_tensorflow as stub

    from core.lens.history.event_files import checksums_in_c

    assert checksums_in_c()
    for data in (b"", b"a", os.urandom(1000), os.urandom(100_000)):
        assert stub.crc32c(data) == stub.crc_finalize(stub.crc_update(stub.CRC_INIT, data))  # TensorBoard's own
    write_tensorboard(tmp_path / "r", {"train/loss": [(s, float(s)) for s in range(50)]})
    got = series(read_paths([tmp_path / "r"], labels=["r"]).frame, "r", "train", "loss")
    assert list(got.index) == list(range(50))
