"""The Training curves page on runs other tools wrote (ui/run_sources.py): a typed folder inside the allowed
ones, uploads, seeds as bands, the names not mapped, a Trainer folder's saved steps and the click that opens one
on the Attention page; bad input as one sentence with the rest of the page intact."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from tests.conftest import require_hf_extra
from tests.test_curves_page import APP, array, chart, meta, traces, warnings
from tests.test_history_sources import summary_writer, write_tensorboard, zipped


def open_on_folder(monkeypatch, checkpoints: Path, allowed: Path) -> AppTest:
    monkeypatch.setenv("ATTENTION_LAB_CHECKPOINTS", str(checkpoints))
    monkeypatch.setenv("ATTENTION_LAB_ALLOWED_DIRS", str(allowed))
    at = AppTest.from_file(APP, default_timeout=120)
    at.run()
    at.switch_page("pages/curves.py")
    at.run()
    assert not at.exception, [e.message for e in at.exception]
    at.text_input(key="curves_folder").input(str(allowed)).run()
    assert not at.exception, [e.message for e in at.exception]
    return at


def seeds_folder(root: Path) -> list[list[float]]:
    rng = np.random.default_rng(0)
    values = [list(2 + rng.normal(0, 0.1, 20)) for _ in range(3)]
    for seed, ys in enumerate(values):
        write_tensorboard(root / "tb" / f"lm-seed{seed}", {"train/loss": list(enumerate(ys)),
                                                           "train/grad_norm": [(0, 1.0)]})
    return values


def test_a_typed_folder_gives_tensorboard_runs_seed_bands_and_the_unmapped_names(monkeypatch, tiny_checkpoints,
                                                                                 tmp_path):
    summary_writer()
    allowed, secret = tmp_path / "class", tmp_path / "secret"
    values = seeds_folder(allowed)
    write_tensorboard(secret / "private", {"loss": [(0, 1.0)]})
    (allowed / "tb" / "leak").mkdir()
    (allowed / "tb" / "leak" / "events.out.tfevents.1.x").symlink_to(next((secret / "private").iterdir()))
    at = open_on_folder(monkeypatch, tiny_checkpoints, allowed)
    options = at.multiselect(key="curves_runs").options
    runs = [f"class/tb/lm-seed{s}" for s in range(3)]
    assert set(runs) <= set(options) and not [o for o in options if "leak" in o or "private" in o]
    at.multiselect(key="curves_runs").set_value(runs).run()
    assert not at.exception, [e.message for e in at.exception]
    spec = chart(at)
    group = "class/tb/lm (seeds)"
    (band,) = [t for t in spec["data"] if meta(t).get("kind") == "band"]
    mean = array(traces(spec)[(group, "train")]["y"])
    np.testing.assert_allclose(mean, np.mean(np.asarray(values, dtype=np.float32), axis=0), rtol=1e-6)
    assert meta(band)["runs"] == 3
    captions = " ".join(c.value for c in at.caption).replace("\\", "")
    assert "the mean over 3 runs" in captions and "train/grad_norm" in captions
    at.toggle(key="curves_seed_bands").set_value(False).run()  # each seed on its own again
    assert set(traces(chart(at))) == {(r, "train") for r in runs}


def test_uploads_of_other_tools_files_and_bad_ones_each_get_one_sentence(monkeypatch, tiny_checkpoints, tmp_path):
    monkeypatch.setenv("ATTENTION_LAB_CHECKPOINTS", str(tiny_checkpoints))
    at = AppTest.from_file(APP, default_timeout=120)
    at.run()
    at.switch_page("pages/curves.py")
    at.query_params["runs"] = "tiny-lm"
    at.run()
    lightning = b"epoch,step,train_loss,val_loss\n0,9,0.9,\n0,9,,1.1\n1,19,0.7,\n1,19,,0.95\n"
    at.get("file_uploader")[0].set_value([
        ("keras.csv", b"epoch,loss,val_loss\n0,1.0,1.2\n1,0.8,1.0\n", "text/csv"),
        ("logs.zip", zipped({"lightning_logs/version_0/metrics.csv": lightning,
                             "lightning_logs/version_0/hparams.yaml": b"lr: 0.1\n"}), "application/zip"),
        ("nostep.csv", b"a,b\n1,2\n", "text/csv"),
        ("evil.zip", zipped({"../../etc/x.csv": b"step,loss\n1,1\n"}), "application/zip"),
        ("config.json", b'{"hidden_size": 8}', "application/json"),
        ("latin.log", "iter 1: loss 2.5, time 3.0ms, mfu 1.0%\ncaf\xe9\n".encode("latin-1"), "text/plain"),
    ]).run()
    assert not at.exception, [e.message for e in at.exception]
    errors = " ".join(e.value for e in at.sidebar.error).replace("\\", "")
    assert "nostep.csv has no step or epoch column" in errors
    assert "evil.zip has a path outside itself" in errors
    assert "config.json is JSON but not a Hugging Face trainer state" in errors
    options = at.multiselect(key="curves_runs").options
    assert {"keras (uploaded)", "logs/lightning_logs/version_0/metrics (uploaded)", "latin (uploaded)"} <= \
        set(options)
    at.multiselect(key="curves_runs").set_value(["tiny-lm", "logs/lightning_logs/version_0/metrics (uploaded)",
                                                 "latin (uploaded)"]).run()
    assert not at.exception, [e.message for e in at.exception]
    raw = traces(chart(at))
    assert array(raw[("logs/lightning_logs/version_0/metrics (uploaded)", "val")]["y"]).tolist() == [1.1, 0.95]
    assert ("tiny-lm", "train") in raw  # the rest of the page is intact
    assert "not UTF-8 text" in warnings(at)


def trainer_folder(out: Path) -> None:
    """A Trainer output folder as Trainer leaves it: trainer_state.json and checkpoint-N/ folders with weights."""
    transformers = require_hf_extra()
    from tests.hf_models import gpt2_folder

    log = [{"loss": 3.0 - s / 10, "learning_rate": 1e-4, "epoch": s / 10, "step": s} for s in range(1, 11)]
    log += [{"eval_loss": 2.6, "epoch": 0.5, "step": 5}, {"eval_loss": 2.3, "epoch": 1.0, "step": 10}]
    out.mkdir(parents=True)
    for step in (5, 10):
        gpt2_folder(out / f"checkpoint-{step}")
        transformers.TrainerState(global_step=step, log_history=[e for e in log if e["step"] <= step]).save_to_json(
            str(out / f"checkpoint-{step}" / "trainer_state.json"))
    transformers.TrainerState(global_step=10, log_history=log).save_to_json(str(out / "trainer_state.json"))


def test_a_trainer_folders_saved_steps_are_marked_and_a_click_opens_that_checkpoint(monkeypatch, tiny_checkpoints,
                                                                                    tmp_path):
    allowed = tmp_path / "class"
    trainer_folder(allowed / "out")
    at = open_on_folder(monkeypatch, tiny_checkpoints, allowed)
    at.multiselect(key="curves_runs").set_value(["class/out"]).run()
    assert not at.exception, [e.message for e in at.exception]
    data = chart(at)["data"]
    number = next(i for i, d in enumerate(data) if meta(d).get("kind") == "saved")
    assert [int(c[1]) for c in data[number]["customdata"]] == [5, 10]
    assert array(data[number]["y"]).tolist() == pytest.approx([2.5, 2.0])  # the training loss logged there
    assert any("2 saved checkpoints" in c.value for c in at.caption)
    at.session_state["curves_chart"] = {"selection": {"points": [
        {"curve_number": number, "point_index": 0, "customdata": ["class/out", 5]}], "point_indices": [0],
        "box": [], "lasso": []}}
    at.run()
    assert not at.exception, [e.message for e in at.exception]
    assert at.query_params["model"] == "class/out @ step 5"
    assert at.session_state["checkpoint"].path == allowed / "out" / "checkpoint-5"


def test_a_tensorboard_run_still_being_written_refreshes(monkeypatch, tiny_checkpoints, tmp_path):
    SummaryWriter = summary_writer()
    allowed = tmp_path / "class"
    writer = SummaryWriter(str(allowed / "job"))
    for step in range(5):
        writer.add_scalar("train/loss", 5.0 - step, step)
    writer.flush()
    at = open_on_folder(monkeypatch, tiny_checkpoints, allowed)
    at.multiselect(key="curves_runs").set_value(["class/job"]).run()
    assert len(array(traces(chart(at))[("class/job", "train")]["y"])) == 5
    assert at.toggle(key="curves_live").value  # written just now: followed
    for step in range(5, 8):
        writer.add_scalar("train/loss", 5.0 - step, step)
    writer.flush()
    at.run()
    writer.close()
    assert array(traces(chart(at))[("class/job", "train")]["y"]).tolist() == [5.0 - s for s in range(8)]


def test_runs_picked_as_a_group_are_drawn_as_their_mean_with_a_band(monkeypatch, tiny_checkpoints):
    monkeypatch.setenv("ATTENTION_LAB_CHECKPOINTS", str(tiny_checkpoints))
    at = AppTest.from_file(APP, default_timeout=120)
    at.run()
    at.switch_page("pages/curves.py")
    at.query_params["runs"] = "tiny-lm"
    at.query_params["smoothing"] = "0"
    at.run()
    at.get("file_uploader")[0].set_value([("baseline-a.csv", b"step,loss\n1,4.0\n2,3.0\n3,2.0\n", "text/csv"),
                                          ("baseline-b.csv", b"step,loss\n1,2.0\n2,2.0\n3,1.0\n", "text/csv")]).run()
    runs = ["baseline-a (uploaded)", "baseline-b (uploaded)"]
    at.multiselect(key="curves_runs").set_value(["tiny-lm", *runs]).run()
    assert not [t for t in at.toggle if t.key == "curves_seed_bands"]  # no group until one is picked
    at.multiselect(key="curves_group").set_value(runs).run()
    assert not at.exception, [e.message for e in at.exception]
    spec = chart(at)
    group = "baseline (group of 2)"
    assert array(traces(spec)[(group, "train")]["y"]).tolist() == [3.0, 2.5, 1.5]
    (band,) = [t for t in spec["data"] if meta(t).get("kind") == "band"]
    assert sorted(array(band["y"]).tolist()) == sorted([4.0, 3.0, 2.0, 1.0, 2.0, 2.0])  # max forward, min back
    assert ("tiny-lm", "train") in traces(spec)


NANO_LOG = """step 0: train loss 4.2874, val loss 4.2823
iter 0: loss 4.2654, time 2943.88ms, mfu -100.00%
iter 100: loss 2.5000, time 21.58ms, mfu 17.34%
step 250: train loss 1.9694, val loss 2.0651
saving checkpoint to out-shakespeare-char
iter 250: loss 2.0415, time 3358.86ms, mfu 15.61%
iter 400: loss 1.8000, time 20.00ms, mfu 15.00%
"""


def test_a_nanogpt_series_marks_its_checkpoints_and_a_click_converts_one(monkeypatch, tiny_checkpoints, tmp_path):
    from tests.test_nanogpt import CHARS, meta_pkl, nanogpt_ckpt, write_ckpt

    allowed = tmp_path / "class"
    run = allowed / "shakespeare"
    (run / "out-shakespeare-char").mkdir(parents=True)
    (run / "train.log").write_text(NANO_LOG)
    write_ckpt(run / "out-shakespeare-char" / "ckpt.pt", nanogpt_ckpt(bias=False))  # the last save: step 250
    write_ckpt(run / "ckpt_100.pt", nanogpt_ckpt(bias=False, seed=1))  # one the student kept by hand
    (run / "meta.pkl").write_bytes(meta_pkl(CHARS))
    at = open_on_folder(monkeypatch, tiny_checkpoints, allowed)
    at.multiselect(key="curves_runs").set_value(["class/shakespeare/train"]).run()
    assert not at.exception, [e.message for e in at.exception]
    data = chart(at)["data"]
    number = next(i for i, d in enumerate(data) if meta(d).get("kind") == "saved")
    assert [int(c[1]) for c in data[number]["customdata"]] == [100, 250]
    assert array(data[number]["y"]).tolist() == [2.5, 2.0415]  # the training loss logged at or before each
    at.session_state["curves_chart"] = {"selection": {"points": [
        {"curve_number": number, "point_index": 1, "customdata": ["class/shakespeare/train", 250]}],
        "point_indices": [1], "box": [], "lasso": []}}
    at.run()
    assert not at.exception, [e.message for e in at.exception]
    assert at.query_params["model"] == "class/shakespeare/train @ step 250"
    assert at.session_state["checkpoint"].metadata["format"].startswith("attention-lab")


def test_a_data_server_killed_while_loading_is_one_sentence_and_the_page_draws_the_run(monkeypatch, tiny_checkpoints,
                                                                                      tmp_path):
    """TensorBoard's data server (core.lens.history.data_server) killed mid-load: the Python reader reads the folder,
    the run is drawn, and one sentence says the fast loader stopped."""
    summary_writer()
    data_server = pytest.importorskip("core.lens.history.data_server")
    try:
        data_server.binary()
    except data_server.Unavailable:
        pytest.skip("tensorboard-data-server has no binary here")
    allowed = tmp_path / "class"
    ys = [2.0 - s / 100 for s in range(200)]
    write_tensorboard(allowed / "tb" / "job", {"train/loss": list(enumerate(ys))})
    real = data_server.DataServer.wait_loaded

    def killed_first(self, *args, **kwargs):
        self.process.kill()
        self.process.wait(5)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(data_server.DataServer, "wait_loaded", killed_first)
    try:
        at = open_on_folder(monkeypatch, tiny_checkpoints, allowed)
        at.multiselect(key="curves_runs").set_value(["class/tb/job"]).run()
        assert not at.exception, [e.message for e in at.exception]
        np.testing.assert_allclose(array(traces(chart(at))[("class/tb/job", "train")]["y"]),
                                   np.asarray(ys, dtype=np.float32), rtol=1e-6)
        assert warnings(at).count("fast loader") == 1 and "killed by signal 9" in warnings(at)
    finally:
        data_server.shutdown_all()
