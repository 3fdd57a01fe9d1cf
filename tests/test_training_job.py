"""The Train button's job (core.train.job): its own process, progress from the live log, Stop within 2 s with the
log whole, one job per server, the switch, and never a write into checkpoints/."""

from __future__ import annotations

import json
import time

import pytest

from core.train import job as jobs


def test_the_switch_is_on_locally_and_off_when_set_off():
    assert jobs.training_allowed({})
    assert jobs.training_allowed({jobs.TRAINING_ENV: "1"})
    assert not jobs.training_allowed({jobs.TRAINING_ENV: "0"})
    assert not jobs.training_allowed({jobs.TRAINING_ENV: "off"})


def test_only_small_recipes_are_trained_from_the_page():
    with pytest.raises(jobs.JobError, match="not one of the recipes"):
        jobs.total_steps("wiki-vanilla-pretrained")
    assert jobs.total_steps("induction") == 1500
    assert jobs.total_steps("lm-char-300") == 300  # a bundled language model's shape, cut to 300 steps
    from core.train.bundle import RECIPES

    lm_char = next(r for r in RECIPES if r.name == "lm-char")
    assert jobs._recipe("lm-char-300").shape == lm_char.shape


def started_then_stopped(slot: jobs.JobSlot, job, at_least: int) -> tuple[int, int, list[dict]]:
    """Wait for `at_least` steps (2 minutes at most), press Stop (within 2 s the process is gone): the step reached,
    the run's total, and the log's rows (each line whole JSON)."""
    deadline = time.monotonic() + 120
    while jobs.progress(job)[0] < at_least and time.monotonic() < deadline and job.running():
        time.sleep(0.2)
    step, total = jobs.progress(job)
    assert at_least <= step < total
    asked = time.monotonic()
    assert slot.stop()
    assert time.monotonic() - asked < 2.0 and not job.running()
    return step, total, [json.loads(line) for line in job.log.read_text().splitlines()]


def test_the_character_lm_trains_from_the_page_and_stops(tmp_path):
    slot = jobs.JobSlot()
    job = slot.start("lm-char-300", tmp_path)
    _, total, rows = started_then_stopped(slot, job, 10)
    assert total == 300
    assert rows and {r["metric"] for r in rows} >= {"loss"}


def test_a_run_is_never_written_into_checkpoints(capsys):
    assert jobs.main(["induction", str(jobs.ROOT / "checkpoints" / "induction-again.safetensors")]) == 2
    assert "never written into checkpoints/" in capsys.readouterr().err
    assert not (jobs.ROOT / "checkpoints" / "induction-again.safetensors").exists()


def test_train_shows_progress_and_stop_ends_the_process_with_a_whole_log(tmp_path):
    slot = jobs.JobSlot()
    job = slot.start("induction", tmp_path)
    assert job.path.parent == tmp_path and job.running()
    with pytest.raises(jobs.JobError, match="already running"):
        slot.start("induction", tmp_path)
    step, total, rows = started_then_stopped(slot, job, 50)
    assert total == 1500
    assert rows and rows[-1]["step"] >= step
    from core.io import checkpoint as ckpt
    from core.io import snapshots

    saved = ckpt.load(job.path)  # the run ended as at its last step: its checkpoint and snapshots are saved
    stopped_at = snapshots.final_step(saved)
    assert step <= stopped_at < total and max(r["step"] for r in saved.history) <= stopped_at
    assert snapshots.snapshots_of(saved).steps[0] == 0
    assert not slot.stop(), "nothing left to stop"
    again = slot.start("induction", tmp_path)  # the slot is free again
    slot.stop()
    assert again.path != job.path


def test_make_serve_turns_training_off_unless_the_operator_set_it():
    import serve.__main__ as serve_main

    assert serve_main.TRAINING_ENV == jobs.TRAINING_ENV
    source = (jobs.ROOT / "serve" / "__main__.py").read_text()
    assert 'env.setdefault(TRAINING_ENV, "0")' in source


def test_the_snapshot_steps_written_are_read_from_the_header(tmp_path):
    from core.io.snapshots import written_steps

    assert written_steps(tmp_path / "none.safetensors") == []
    assert written_steps(jobs.ROOT / "checkpoints" / "induction.safetensors")[0] == 0
    (tmp_path / "bad.snapshots.safetensors").write_bytes(b"not safetensors")
    assert written_steps(tmp_path / "bad.safetensors") == []


class _Running:
    """A process that runs until told otherwise (no child is started)."""

    returncode = None

    def poll(self):
        return None


def test_another_session_sees_the_job_running_and_that_it_is_not_its_own(monkeypatch, tmp_path, tiny_checkpoints):
    """Issue 63 item 8: one job per server, seen by every session; another session must see that a job runs and that
    it is not its own (no Stop of its own), and the slot refuses it a stop."""
    from streamlit.testing.v1 import AppTest

    from tests.conftest import ROOT

    path = tmp_path / "induction-20261207-120000.safetensors"
    path.with_name(path.stem + ".log.jsonl").write_text(json.dumps({"step": 40, "split": "train", "metric": "loss",
                                                                   "value": 3.0}) + "\n")
    job = jobs.TrainingJob("induction", path, _Running(), 1500, owner="first-session")
    monkeypatch.setattr(jobs.JobSlot, "current", lambda self: job)
    monkeypatch.setenv("ATTENTION_LAB_CHECKPOINTS", str(tiny_checkpoints))
    monkeypatch.setenv(jobs.RUNS_ENV, str(tmp_path))

    def curves(token: str) -> AppTest:
        at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
        at.session_state["train_owner"] = token
        at.run()
        at.switch_page("pages/curves.py")
        at.run()
        assert not at.exception, [e.message for e in at.exception]
        return at

    other = curves("second-session")
    said = " ".join(c.value for c in other.caption).replace("\\", "")
    progress = [p.proto.text for p in other.get("progress")]
    assert any("(started in another browser session): step 40 of 1,500" in t.replace("\\", "") for t in progress)
    assert "this one is another session's, so it has no Stop here" in said
    assert not [b for b in other.button if b.key == "train_stop"] and other.button(key="train_start").disabled
    owner = curves("first-session")
    assert owner.button(key="train_stop") and not any("another" in p.proto.text for p in owner.get("progress"))
    assert not jobs.JobSlot().stop(owner="second-session")  # refused: not the asker's job (nothing is killed)
    slot = jobs.JobSlot()
    slot.job = job
    assert not slot.stop(owner="second-session") and job.running()
