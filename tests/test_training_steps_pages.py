"""Training steps on the pages (AppTest): the attention page's step slider and its URL, the curves page's
snapshot marks and their click, the probe's answers per step, a damaged snapshot file, the cache key of a model
at a kept step; the lens and figure functions behind them."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
import torch
from streamlit.testing.v1 import AppTest

from core.figures.curves import training_curves_figure
from core.figures.training_steps import candidate_steps_figure
from core.io import checkpoint as ckpt
from core.io import snapshots as snap_files
from core.lens import training_steps as ts
from core.lens.history.curves import build_curves
from core.lens.history.records import records_frame
from tests.conftest import ROOT
from tests.test_attention_page import array, charts, drawn
from tests.test_probe_page import small_world  # noqa: F401 - a fixture
from ui import probe_views
from ui.page_state import AttentionState, from_url, to_url
from ui.shared_caches import model_version

APP = str(ROOT / "app.py")
STEPS = (0, 3, 10, 30)


def add_snapshots(path: Path, steps=STEPS, kept_steps=STEPS) -> Path:
    """Snapshots of made-up earlier weights (the checkpoint's, shifted) and the checkpoint's own at the last
    step; the checkpoint's progress says it is that step. `kept_steps`: the ones written to the file."""
    loaded = ckpt.load(path)
    kept = []
    for i, step in enumerate(s for s in steps if s in kept_steps):
        torch.manual_seed(100 + i)
        shift = 0.0 if step == steps[-1] else 0.5 * (len(steps) - 1 - i)
        weights = {k: (v + shift * torch.randn_like(v)).half() for k, v in loaded.model.state_dict().items()}
        kept.append((snap_files.Snapshot(step, i, 64 * step, 3.0 - 0.5 * i, 0.1 * step), weights))
    snap_files.write(snap_files.snapshots_path(path), kept, loaded.model.config.to_json())
    ckpt.update_metadata(path, {"progress": json.dumps({"epoch": 3, "step": steps[-1], "tokens": 64 * steps[-1],
                                                        "wall_time": 3.0})})
    return path


@pytest.fixture
def folder(tiny_checkpoints: Path) -> Path:
    add_snapshots(tiny_checkpoints / "tiny-lm.safetensors")
    return tiny_checkpoints


def attention_page(monkeypatch, folder: Path, **params) -> AppTest:
    monkeypatch.setenv("ATTENTION_LAB_CHECKPOINTS", str(folder))
    at = AppTest.from_file(str(ROOT / "pages" / "attention.py"), default_timeout=120)
    for key, value in params.items():
        at.query_params[key] = value
    at.run()
    assert not at.exception, [e.message for e in at.exception]
    return at


def heatmap(at: AppTest) -> np.ndarray:
    return np.nan_to_num(array(charts(at)[0]["data"][0]["z"]))  # masked cells are drawn as gaps


def in_view(at: AppTest, full: np.ndarray) -> np.ndarray:
    """The part of a whole attention map that the page's map draws (a window past av.WHOLE_UP_TO tokens)."""
    p = drawn(charts(at)[0])
    return full[np.ix_(p, p)]


def attention_at(path: Path, step: int | None, text: str, layer: int = 0, head: int = 0) -> np.ndarray:
    loaded = ckpt.load(path)
    model = loaded.model if step is None else snap_files.model_at(loaded, snap_files.snapshots_of(loaded), step)
    with torch.no_grad():
        _, attention = model.run_with_attention(torch.tensor([loaded.tokenizer.encode(text)]))
    return attention[layer, 0, head].numpy()


def test_the_slider_walks_the_same_view_through_the_kept_steps(monkeypatch, folder):
    at = attention_page(monkeypatch, folder, model="tiny-lm", layer="1", head="2")
    slider = at.select_slider(key="attn_step")
    assert [int(o) for o in slider.options] == list(STEPS) and slider.value == 30
    text = at.text_area(key="attn_text").value
    path = folder / "tiny-lm.safetensors"
    # the last position is the checkpoint itself (float32), not its float16 snapshot
    np.testing.assert_allclose(heatmap(at), in_view(at, attention_at(path, None, text, 1, 2)), atol=1e-6)
    assert "of 30 · loss 1.500" in [c.value for c in at.caption]
    assert slider.help.startswith("step 30 of 30: 1,920 tokens seen, training loss 1.500. The weights after each of")
    slider.set_value(3).run()
    assert not at.exception
    np.testing.assert_allclose(heatmap(at), in_view(at, attention_at(path, 3, text, 1, 2)), atol=1e-6)
    assert not np.allclose(heatmap(at), in_view(at, attention_at(path, None, text, 1, 2)), atol=1e-3)
    assert at.query_params["step"] == "3" and at.query_params["layer"] == "1" and at.query_params["head"] == "2"
    assert at.text_area(key="attn_text").value == text


def test_a_link_opens_its_step_and_a_model_without_snapshots_has_no_slider(monkeypatch, folder):
    at = attention_page(monkeypatch, folder, model="tiny-lm", step="10")
    assert at.select_slider(key="attn_step").value == 10
    at = attention_page(monkeypatch, folder, model="tiny-lm", step="12")  # not kept: the nearest kept step
    assert at.select_slider(key="attn_step").value == 10
    at = attention_page(monkeypatch, folder, model="tiny-birthplace", step="10")
    assert not at.select_slider and "step" not in at.query_params and charts(at)


def test_the_last_position_is_the_checkpoint_when_no_snapshot_has_its_step(monkeypatch, tiny_checkpoints):
    path = add_snapshots(tiny_checkpoints / "tiny-lm.safetensors", kept_steps=STEPS[:-1])
    at = attention_page(monkeypatch, tiny_checkpoints, model="tiny-lm")
    slider = at.select_slider(key="attn_step")
    assert [int(o) for o in slider.options] == list(STEPS) and slider.value == 30
    assert "of 30 · the checkpoint" in [c.value for c in at.caption]
    # the slider's help counts its positions as the curve's marks do (issue 63: it said 3 of the slider's 4)
    assert "each of the 4 training steps kept (this run: 3 snapshots and the checkpoint itself at step 30)" in \
        slider.help
    np.testing.assert_allclose(heatmap(at), in_view(at, attention_at(path, None, at.text_area(key="attn_text").value)),
                               atol=1e-6)


def test_a_damaged_snapshot_file_is_one_sentence_and_the_model_still_shows(monkeypatch, folder):
    file = snap_files.snapshots_path(folder / "tiny-lm.safetensors")
    file.write_bytes(file.read_bytes()[:-100])
    at = attention_page(monkeypatch, folder, model="tiny-lm")
    notes = [i.value.replace("\\", "") for i in at.info]
    assert len(notes) == 1 and "truncated" in notes[0] and notes[0].endswith("shown without its training steps.")
    assert not at.select_slider and charts(at)


def test_the_url_carries_any_whole_step():
    def step(params):
        return from_url(AttentionState, params)[0].step

    assert step({"step": "20000"}) == 20000 and step({"step": "-1"}) is None and step({"step": "1e3"}) is None
    assert to_url(AttentionState(step=640))["step"] == "640"
    assert "step" not in to_url(AttentionState())


def test_the_curves_page_marks_kept_steps_and_a_click_opens_attention_there(monkeypatch, folder):
    monkeypatch.setenv("ATTENTION_LAB_CHECKPOINTS", str(folder))
    at = AppTest.from_file(APP, default_timeout=120)
    at.run()
    at.switch_page("pages/curves.py")
    at.query_params["runs"] = "tiny-lm"
    at.run()
    assert not at.exception, [e.message for e in at.exception]
    data = charts(at)[0]["data"]
    number = next(i for i, d in enumerate(data) if d["name"] == "snapshots")
    assert [int(c[1]) for c in data[number]["customdata"]] == list(STEPS)
    assert array(data[number]["y"]).tolist() == [3.0, 2.5, 2.0, 1.5]
    assert any("the 4 training steps kept (tiny-lm: 4 snapshots)" in c.value.replace("\\", "") for c in at.caption)
    at.session_state["curves_chart"] = {"selection": {"points": [
        {"curve_number": number, "point_index": 1, "customdata": ["tiny-lm", 3]}], "point_indices": [1],
        "box": [], "lasso": []}}
    at.run()
    assert not at.exception, [e.message for e in at.exception]
    assert at.query_params["step"] == "3" and at.query_params["model"] == "tiny-lm"
    assert at.select_slider(key="attn_step").value == 3


def open_probe(monkeypatch, folder, world) -> AppTest:
    """The probe page on `folder`'s tiny-birthplace model and the small world, run once without an error."""
    from core.lens.probe import corpus

    monkeypatch.setenv("ATTENTION_LAB_CHECKPOINTS", str(folder))
    monkeypatch.setenv(corpus.WORLD_ENV, str(world))
    at = AppTest.from_file(APP, default_timeout=120)
    at.run()
    at.switch_page("pages/probe.py")
    at.session_state["probe_models"] = ["tiny-birthplace"]
    at.run()
    assert not at.exception, [e.message for e in at.exception]
    return at


def test_probe_answers_at_every_kept_step(monkeypatch, tiny_checkpoints, small_world):  # noqa: F811
    add_snapshots(tiny_checkpoints / "tiny-birthplace.safetensors")
    at = open_probe(monkeypatch, tiny_checkpoints, small_world)
    box = next(e for e in at.expander if "across training" in e.label)
    assert "4 kept steps" in box.label and not [d for d in at.dataframe if "step" in d.value.columns]
    at.session_state["probe_steps"] = True
    at.run()
    assert not at.exception, [e.message for e in at.exception]
    table = next(d.value for d in at.dataframe if "step" in d.value.columns)
    assert list(table["step"]) == list(STEPS) and {"greedy answer", "top candidates"} <= set(table.columns)
    assert any(t.value.startswith("It answers ") for t in at.text)


def test_a_kept_step_and_the_final_weights_never_share_a_cache_key(tiny_checkpoints):
    path = add_snapshots(tiny_checkpoints / "tiny-birthplace.safetensors")
    loaded = ckpt.load(path)
    found = snap_files.snapshots_of(loaded)
    kept, last = snap_files.at_step(loaded, found, 3), snap_files.at_step(loaded, found, STEPS[-1])
    weights = zip(kept.model.state_dict().values(), loaded.model.state_dict().values())
    assert kept.step == 3 and not all(torch.equal(a, b) for a, b in weights)  # another model, one file
    modified = path.stat().st_mtime
    assert [model_version(m) for m in (loaded, kept, last)] == [
        (str(path), modified), (f"{path}@3", modified), (f"{path}@{STEPS[-1]}", modified)]
    # a plain object with a path (no step) and a file gone since it was loaded
    assert model_version(SimpleNamespace(path=path)) == model_version(loaded)
    gone = tiny_checkpoints / "gone.safetensors"
    assert model_version(SimpleNamespace(path=gone, step=3)) == (f"{gone}@3", 0.0)


def test_the_probe_page_keys_its_models_by_model_version(monkeypatch, tiny_checkpoints, small_world):  # noqa: F811
    asked = []

    def spy(loaded):
        asked.append(Path(loaded.path).name)
        return model_version(loaded)

    monkeypatch.setattr(probe_views, "model_version", spy)
    open_probe(monkeypatch, tiny_checkpoints, small_world)
    assert asked and set(asked) == {"tiny-birthplace.safetensors"}  # the answers, attention and candidates


def test_answer_story_and_first_step():
    frame = pd.DataFrame({"step": [0, 5, 50, 500], "greedy answer": ["London", "London", "Paris", "Paris"]})
    assert ts.first_step_answering(frame, "Paris") == 50
    assert ts.answer_story(frame) == ("It answers 'Paris' from step 50 on (2 of 4 kept steps); at step 5 it said "
                                      "'London'.")
    same = frame.assign(**{"greedy answer": ["Rome"] * 4})
    assert ts.answer_story(same) == "It answers 'Rome' at every kept step, from step 0 to 500."


def test_step_marks_sit_on_the_chosen_x_axis_and_the_figure_draws_them():
    snaps = [snap_files.Snapshot(s, s // 10, 100 * s, 3.0 / (s + 1), 0.5 * s) for s in (0, 10, 40)]
    assert [m.x for m in ts.step_marks("run", snaps, "tokens")] == [0, 1000, 4000]
    assert [m.x for m in ts.step_marks("run", snaps, "epoch")] == [0, 1, 4]
    frame, _ = records_frame([{"run": "run", "step": s, "epoch": 0, "tokens": 100 * s, "wall_time": 0.0,
                               "split": "train", "metric": "loss", "value": 3.0 / (s + 1)} for s in range(41)])
    plot = build_curves(frame, ["run"], "loss", "step")
    fig = training_curves_figure(plot, marks=ts.step_marks("run", snaps, "step"))
    marks = [t for t in fig.data if t.meta and t.meta.get("kind") == "snapshots"]
    assert len(marks) == 1 and list(marks[0].x) == [0, 10, 40] and [c[1] for c in marks[0].customdata] == [0, 10, 40]
    assert marks[0].marker.symbol == "diamond" and marks[0].marker.line.color == fig.data[0].line.color


def test_candidate_steps_figure_follows_each_place_with_the_truth_marked():
    probs = pd.DataFrame({"Paris": [0.1, 0.3, 0.8], "London": [0.6, 0.4, 0.1]}, index=pd.Index([0, 10, 1000]))
    fig = candidate_steps_figure(probs, truth="Paris", title="x")
    assert [t.name for t in fig.data] == ["Paris (true)", "London"]
    assert list(fig.data[0].x) == ["0", "10", "1,000"] and list(fig.data[0].y) == [0.1, 0.3, 0.8]
    assert fig.data[0].line.width > fig.data[1].line.width and fig.layout.xaxis.type == "category"
    assert fig.data[0].line.color == "#1CA71C" and fig.data[1].line.color != fig.data[0].line.color


def test_the_checkpoints_own_step_is_a_mark_when_no_snapshot_has_it():
    """Issue 63: the bundled induction run keeps snapshots at 0, 262 and 338 and its checkpoint is step 1,500; the
    curve marked 3 steps where the slider and the head roles panel offer 4."""
    snaps = [snap_files.Snapshot(s, s // 100, 1000 * s, 4.0 - s / 100, 0.1 * s) for s in (0, 262, 338)]
    history = [{"step": s, "epoch": s // 100, "tokens": 1000 * s, "wall_time": 0.1 * s, "split": "train",
                "metric": "loss", "value": 0.1 + 1 / (s + 1)} for s in range(0, 1501, 25)]
    progress = {"step": 1500, "epoch": 14, "tokens": 1_536_000, "wall_time": 90.8}
    marks = ts.step_marks("induction", snaps, "tokens", progress, history)
    assert [m.step for m in marks] == [0, 262, 338, 1500] and [m.snapshot for m in marks] == [True] * 3 + [False]
    assert marks[-1].x == 1_536_000 and marks[-1].y == history[-1]["value"]
    assert ts.kept_steps_line(marks) == ("the 4 training steps kept (induction: 3 snapshots and the checkpoint "
                                         "itself at step 1,500)")
    snaps_all = snaps + [snap_files.Snapshot(1500, 14, 1_536_000, 0.2, 90.8)]  # the last kept: no extra mark
    assert [m.step for m in ts.step_marks("induction", snaps_all, "step", progress | {"step": 1500}, history)] == \
        [0, 262, 338, 1500]


def curves_with_roles(monkeypatch, folder: Path, runs: str, runs_dir: Path | None = None) -> AppTest:
    monkeypatch.setenv("ATTENTION_LAB_CHECKPOINTS", str(folder))
    if runs_dir is not None:
        monkeypatch.setenv("ATTENTION_LAB_RUNS", str(runs_dir))
    at = AppTest.from_file(APP, default_timeout=180)
    at.run()
    at.switch_page("pages/curves.py")
    at.query_params["runs"] = runs
    at.session_state["curves_roles_on"] = True
    at.run()
    assert not at.exception, [e.message for e in at.exception]
    return at


def test_the_curve_and_the_roles_panel_count_the_same_kept_steps(monkeypatch, tiny_checkpoints):
    add_snapshots(tiny_checkpoints / "tiny-lm.safetensors", kept_steps=STEPS[:-1])  # the checkpoint is step 30
    at = curves_with_roles(monkeypatch, tiny_checkpoints, "tiny-lm")
    data = charts(at)[0]["data"]
    marks = next(d for d in data if d["name"] == "snapshots")
    assert [int(c[1]) for c in marks["customdata"]] == list(STEPS)
    said = " ".join(c.value.replace("\\", "") for c in at.caption)
    line = "the 4 training steps kept (tiny-lm: 3 snapshots and the checkpoint itself at step 30)"
    assert f"◇ marks {line}" in said and f"Each point is one of {line}" in said


def test_a_run_retrained_from_the_page_gets_its_marks_from_the_checkpoint_beside_its_log(monkeypatch,
                                                                                          tiny_checkpoints, tmp_path):
    """The Train button's run keeps the bundled name, so only its log is listed: its marks come from the checkpoint
    beside that log, as the head roles panel's steps do."""
    import shutil

    runs = tmp_path / "runs"
    runs.mkdir()
    add_snapshots(tiny_checkpoints / "tiny-lm.safetensors")
    for name in ("tiny-lm.safetensors", "tiny-lm.snapshots.safetensors"):
        shutil.copy(tiny_checkpoints / name, runs / name)
    (runs / "tiny-lm.log.jsonl").write_text("".join(json.dumps(
        {"run": "tiny-lm", "step": s, "epoch": s // 10, "tokens": 64 * s, "wall_time": 0.1 * s, "split": "train",
         "metric": "loss", "value": 3.0 - s / 20}) + "\n" for s in range(31)))
    at = curves_with_roles(monkeypatch, tiny_checkpoints, "tiny-lm (log)", runs)
    marks = [d for d in charts(at)[0]["data"] if d["name"] == "snapshots"]
    assert len(marks) == 1 and [int(c[1]) for c in marks[0]["customdata"]] == list(STEPS)
    assert any("the 4 training steps kept (tiny-lm (log): 4 snapshots)" in c.value.replace("\\", "")
               for c in at.caption)
