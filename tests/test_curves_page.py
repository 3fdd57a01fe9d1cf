"""The Training curves page through Streamlit's AppTest, with tiny fixture checkpoints and live logs."""

from __future__ import annotations

import base64
import json

import numpy as np
import pandas as pd
from streamlit.testing.v1 import AppTest

from tests.conftest import ROOT, save_tiny_checkpoint

APP = str(ROOT / "app.py")


def open_page(monkeypatch, folder, query: dict[str, str] | None = None) -> AppTest:
    monkeypatch.setenv("ATTENTION_LAB_CHECKPOINTS", str(folder))
    at = AppTest.from_file(APP, default_timeout=60)
    for key, value in (query or {}).items():
        at.query_params[key] = value
    at.run()
    at.switch_page("pages/curves.py")
    at.run()
    assert not at.exception, [e.message for e in at.exception]
    return at


def array(value) -> np.ndarray:
    """Plotly 7 ships numeric arrays as {'dtype', 'bdata'}; small ones may be plain lists."""
    if isinstance(value, dict):
        return np.frombuffer(base64.b64decode(value["bdata"]), dtype=np.dtype(value["dtype"]))
    return np.asarray(value, dtype=float)


def chart(at: AppTest) -> dict:
    charts = at.get("plotly_chart")
    assert len(charts) == 1
    return json.loads(charts[0].proto.spec)


def meta(trace: dict) -> dict:
    """A trace's tags; the browser spec wraps them in a one-item list (core/figures/browser.py)."""
    return (trace.get("meta") or [{}])[0]


def traces(spec: dict, kind: str = "raw") -> dict[tuple[str, str], dict]:
    return {(meta(t)["run"], meta(t)["split"]): t for t in spec["data"] if meta(t).get("kind") == kind}


def warnings(at: AppTest) -> str:
    return " ".join(w.value for w in at.warning).replace("\\", "")


def log_line(step: int, value: float, metric: str = "loss", split: str = "train") -> str:
    return json.dumps({"run": "job", "step": step, "epoch": step // 4, "tokens": 32 * step,
                       "wall_time": 0.2 * step, "split": split, "metric": metric, "value": value}) + "\n"


def test_page_draws_the_sidebar_model_with_train_val_summary_and_csv(monkeypatch, tiny_checkpoints):
    at = open_page(monkeypatch, tiny_checkpoints)
    picked = at.sidebar.selectbox(key="picker_model").value
    assert at.multiselect(key="curves_runs").value == [picked]
    spec = chart(at)
    raw = traces(spec)
    assert set(raw) == {(picked, "train"), (picked, "val")}
    assert array(raw[(picked, "train")]["x"]).tolist() == [1, 2, 3, 4, 5]
    np.testing.assert_allclose(array(raw[(picked, "train")]["y"]), [2.8, 2.6, 2.4, 2.2, 2.0])
    assert raw[(picked, "val")]["line"]["dash"] == "dash"
    best = [t for t in spec["data"] if meta(t).get("kind") == "best"]
    assert best and array(best[0]["y"]).tolist() == [2.5]
    summary = at.dataframe[0].value.set_index("run")
    assert summary.loc[picked, "best val"] == 2.5 and summary.loc[picked, "best at epoch"] == 2
    assert at.query_params["runs"] in (picked, [picked])
    assert len(at.get("download_button")) == 1


def test_url_settings_choose_runs_axis_smoothing_and_log_scale(monkeypatch, tiny_checkpoints):
    at = open_page(monkeypatch, tiny_checkpoints,
                   {"runs": "tiny-lm,tiny-classifier", "x": "tokens", "smoothing": "0", "logy": "1"})
    assert at.multiselect(key="curves_runs").value == ["tiny-lm", "tiny-classifier"]
    spec = chart(at)
    assert {run for run, _ in traces(spec)} == {"tiny-lm", "tiny-classifier"}
    assert array(traces(spec)[("tiny-lm", "train")]["x"]).tolist() == [64, 128, 192, 256, 320]
    assert spec["layout"]["yaxis"]["type"] == "log"
    assert not traces(spec, "smoothed")  # smoothing 0: only raw lines
    colours = {t["line"]["color"] for key, t in traces(spec).items() if key[1] == "train"}
    assert len(colours) == 2
    at.slider(key="curves_smoothing").set_value(0.9).run()
    assert not at.exception
    smoothed = traces(chart(at), "smoothed")
    assert ("tiny-lm", "train") in smoothed
    assert at.query_params["smoothing"] in ("0.9", ["0.9"])
    assert chart(at)["layout"]["uirevision"] == spec["layout"]["uirevision"]  # zoom kept


def test_bad_url_values_fall_back_with_a_sentence(monkeypatch, tiny_checkpoints):
    at = open_page(monkeypatch, tiny_checkpoints, {"runs": "ghost", "x": "banana", "smoothing": "oops"})
    assert "not available" in warnings(at) and "x axis" in warnings(at)
    assert at.selectbox(key="curves_x").value == "step"
    assert len(at.get("plotly_chart")) == 1


def test_growing_log_shows_new_points_on_rerun(monkeypatch, tiny_checkpoints):
    log = tiny_checkpoints / "tiny-lm.log.jsonl"
    log.write_text(log_line(1, 3.0) + log_line(2, 2.5) + log_line(3, 2.0) + log_line(4, 1.8)[:25])
    at = open_page(monkeypatch, tiny_checkpoints, {"runs": "tiny-lm (log)", "smoothing": "0"})
    raw = traces(chart(at))
    assert array(raw[("tiny-lm (log)", "train")]["x"]).tolist() == [1, 2, 3]
    assert "still being written" in warnings(at)
    assert at.toggle(key="curves_live").value is True
    # on a line of its own: in the settings' last column it was cut to "Follo…" at 1024 px (issue 63)
    assert not any(t.key == "curves_live" for column in at.columns for t in column.toggle)
    with open(log, "a") as fh:
        fh.write(log_line(4, 1.8)[25:] + log_line(5, 1.7) + log_line(5, 2.1, split="val"))
    at.run()
    assert not at.exception
    raw = traces(chart(at))
    assert array(raw[("tiny-lm (log)", "train")]["x"]).tolist() == [1, 2, 3, 4, 5]
    np.testing.assert_allclose(array(raw[("tiny-lm (log)", "train")]["y"]), [3.0, 2.5, 2.0, 1.8, 1.7])
    assert ("tiny-lm (log)", "val") in raw
    assert "still being written" not in warnings(at)


def test_folder_with_odd_logs_gives_notes_not_errors(monkeypatch, tiny_checkpoints, tmp_path):
    other = tmp_path / "elsewhere"
    other.mkdir()
    (other / "odd.log.jsonl").write_text(
        log_line(1, float("nan")) + log_line(2, float("inf")) + "junk\n"
        + log_line(3, 0.7, metric="accuracy", split="val") + log_line(4, 2.0))
    monkeypatch.setenv("ATTENTION_LAB_ALLOWED_DIRS", str(tmp_path))
    at = open_page(monkeypatch, tiny_checkpoints, {"runs": "tiny-lm"})
    at.text_input(key="curves_folder").input(str(other)).run()
    at.multiselect(key="curves_runs").select("odd (log)").run()
    assert not at.exception
    text = warnings(at)
    assert "1 malformed" in text and "2 NaN/inf" in text
    at.selectbox(key="curves_metric").select("accuracy").run()
    assert not at.exception
    assert "tiny-lm has no 'accuracy' records" in warnings(at)
    at.text_input(key="curves_folder").input(str(tmp_path / "missing")).run()
    assert not at.exception and "does not exist" in warnings(at)


def test_comparison_presets_select_runs_or_say_they_are_missing(monkeypatch, tmp_path):
    folder = tmp_path / "bundled"
    save_tiny_checkpoint(folder / "lm-learned.safetensors", "lm")
    save_tiny_checkpoint(folder / "lm-rope.safetensors", "lm", positional="rope")
    at = open_page(monkeypatch, folder)
    at.selectbox(key="curves_preset").select("positional encodings").run()
    assert not at.exception
    assert at.multiselect(key="curves_runs").value == ["lm-learned", "lm-rope"]
    assert {run for run, _ in traces(chart(at))} == {"lm-learned", "lm-rope"}
    at.selectbox(key="curves_preset").select("vanilla vs synthesizer").run()
    assert not at.exception
    assert any("None of the checkpoints" in i.value for i in at.info)


def test_no_checkpoints_says_so(monkeypatch, tmp_path):
    at = open_page(monkeypatch, tmp_path / "nothing")
    assert any("No runs to show" in i.value for i in at.info)
    assert not at.get("plotly_chart")


def test_uploaded_checkpoint_and_jsonl_join_the_runs(monkeypatch, tiny_checkpoints, tmp_path):
    data = save_tiny_checkpoint(tmp_path / "mine.safetensors", "lm").read_bytes()
    at = open_page(monkeypatch, tiny_checkpoints, {"runs": "tiny-lm", "smoothing": "0"})
    uploader = at.get("file_uploader")[0]
    uploader.set_value([("mine.safetensors", data, "application/octet-stream"),
                        ("<b>notes&co.jsonl", (log_line(1, 4.0) + log_line(2, 3.0) + '{"cut').encode(),
                         "application/json"),
                        ("broken.safetensors", b"\x00" * 40, "application/octet-stream")]).run()
    assert not at.exception
    options = at.multiselect(key="curves_runs").options
    assert {"mine (uploaded)", "<b>notes&co (uploaded)"} <= set(options) and "broken (uploaded)" not in options
    # the broken file is told under the box (what it expected, what it found), not made a run of nothing
    assert any("broken.safetensors is not a checkpoint" in e.value.replace("\\", "") for e in at.sidebar.error)
    at.multiselect(key="curves_runs").set_value(["mine (uploaded)", "<b>notes&co (uploaded)"]).run()
    assert not at.exception
    spec = chart(at)
    raw = traces(spec)
    assert array(raw[("<b>notes&co (uploaded)", "train")]["y"]).tolist() == [4.0, 3.0]
    assert len(array(raw[("mine (uploaded)", "train")]["y"])) == 5
    assert all("<b>" not in t.get("name", "") for t in spec["data"])  # escaped for plotly
    text = warnings(at)
    assert "cut off" in text


def test_a_finished_log_is_drawn_without_auto_refresh(monkeypatch, tiny_checkpoints):
    import os

    log = tiny_checkpoints / "tiny-lm.log.jsonl"
    log.write_text(log_line(1, 3.0) + log_line(2, 2.0))
    old = log.stat().st_mtime - 3600
    os.utime(log, (old, old))
    at = open_page(monkeypatch, tiny_checkpoints, {"runs": "tiny-lm (log)"})
    assert not at.get("toggle")
    assert ("tiny-lm (log)", "train") in traces(chart(at))


def test_run_locally_any_typed_folder_opens(monkeypatch, tiny_checkpoints, tmp_path):
    """Issue 53: run locally (the switch unset, the browser on this machine), any folder typed, with or without
    ATTENTION_LAB_ALLOWED_DIRS."""
    monkeypatch.delenv("ATTENTION_LAB_ANY_FOLDER", raising=False)
    monkeypatch.delenv("ATTENTION_LAB_ALLOWED_DIRS", raising=False)
    anywhere = tmp_path / "anywhere"
    anywhere.mkdir()
    (anywhere / "mine.log.jsonl").write_text(log_line(1, 2.0))
    at = open_page(monkeypatch, tiny_checkpoints)
    at.text_input(key="curves_folder").input(str(anywhere)).run()
    assert not at.exception and "mine (log)" in at.multiselect(key="curves_runs").options
    monkeypatch.setenv("ATTENTION_LAB_ALLOWED_DIRS", str(tiny_checkpoints))  # outside it, still opened
    at = open_page(monkeypatch, tiny_checkpoints)
    at.text_input(key="curves_folder").input(str(anywhere)).run()
    assert not at.exception and "mine (log)" in at.multiselect(key="curves_runs").options


def test_folder_box_is_off_by_default_and_refuses_escapes(monkeypatch, tiny_checkpoints, tmp_path):
    """Hosted (make serve sets ATTENTION_LAB_ANY_FOLDER=0): no box unless the operator allows folders, and none
    outside them."""
    monkeypatch.setenv("ATTENTION_LAB_ANY_FOLDER", "0")
    monkeypatch.delenv("ATTENTION_LAB_ALLOWED_DIRS", raising=False)
    at = open_page(monkeypatch, tiny_checkpoints)
    assert not [t for t in at.text_input if t.key == "curves_folder"]
    allowed, secret = tmp_path / "class", tmp_path / "secret"
    allowed.mkdir()
    secret.mkdir()
    (secret / "private.log.jsonl").write_text(log_line(1, 1.0))
    (allowed / "out").symlink_to(secret, target_is_directory=True)
    (allowed / "leak.log.jsonl").symlink_to(secret / "private.log.jsonl")
    (allowed / "own.log.jsonl").write_text(log_line(1, 2.0))
    monkeypatch.setenv("ATTENTION_LAB_ALLOWED_DIRS", str(allowed))
    at = open_page(monkeypatch, tiny_checkpoints)
    for escape, words in ((f"{allowed}/../secret", "'..'"), (f"{allowed}/out", "outside the folders"),
                          (str(secret), "outside the folders"), ("/", "outside the folders")):
        at.text_input(key="curves_folder").input(escape).run()
        assert not at.exception and words in warnings(at), warnings(at)
        assert "private (log)" not in at.multiselect(key="curves_runs").options
    at.text_input(key="curves_folder").input(str(allowed)).run()
    options = at.multiselect(key="curves_runs").options
    assert "own (log)" in options and "leak (log)" not in options and "private (log)" not in options


def test_pretrained_vs_scratch_caption_is_computed_from_the_bundled_runs(monkeypatch):
    from core.io import checkpoint as ckpt

    at = open_page(monkeypatch, ROOT / "checkpoints")
    at.selectbox(key="curves_preset").select("pretrained vs from scratch").run()
    assert not at.exception
    finals = {n: ckpt.read_metadata(ROOT / "checkpoints" / f"{n}.safetensors")["metrics"]["val_accuracy"]
              for n in ("names-pretrained", "names-scratch")}
    expected = (f"names-pretrained ends at {100 * finals['names-pretrained']:.1f}% validation accuracy, "
                f"names-scratch at {100 * finals['names-scratch']:.1f}%")
    captions = " ".join(c.value for c in at.caption).replace("\\", "")  # drop the Markdown escapes
    assert expected in captions


def test_the_summary_table_never_shows_none_in_a_cell(monkeypatch):
    from ui.display import shown_table

    # the bundled positional runs log validation perplexity only: no train column of blanks
    at = open_page(monkeypatch, ROOT / "checkpoints",
                   {"runs": "lm-learned,lm-sinusoidal,lm-alibi,lm-rope", "metric": "perplexity"})
    summary = at.dataframe[0].value
    assert len(summary) == 4 and not summary.isna().any().any()
    assert "final train" not in summary and "final val" in summary
    mixed = shown_table(pd.DataFrame({"run": ["a", "b"], "final train": [1.23456, np.nan],
                                      "empty": [np.nan, np.nan]}))
    assert list(mixed.columns) == ["run", "final train"] and mixed["final train"].tolist() == ["1.235", ""]
    steps = shown_table(pd.DataFrame({"best at step": [12000.0, np.nan, 4.0], "val": [1234.56, 0.5, np.nan]}))
    assert steps["best at step"].tolist() == ["12,000", "", "4"]  # not "1.2e+04"
    assert steps["val"].tolist() == ["1,234.6", "0.5", ""]


def test_the_opening_preset_shows_the_same_runs_when_picked_again(monkeypatch):
    # issue 41: the page opened on "pretrained vs from scratch" with 2 runs and picking it again gave 4
    monkeypatch.setenv("ATTENTION_LAB_CHECKPOINTS", str(ROOT / "checkpoints"))
    at = AppTest.from_file(str(ROOT / "pages" / "curves.py"), default_timeout=60).run()  # a first visit
    assert not at.exception, [e.message for e in at.exception]
    assert at.selectbox(key="curves_preset").value == "pretrained vs from scratch"
    first = list(at.multiselect(key="curves_runs").value)
    assert first == ["names-pretrained", "names-scratch"]
    at.selectbox(key="curves_preset").select("positional encodings").run()
    at.selectbox(key="curves_preset").select("pretrained vs from scratch").run()
    assert not at.exception
    assert list(at.multiselect(key="curves_runs").value) == first
    assert {run for run, _ in traces(chart(at))} == set(first)


def test_the_summary_tables_columns_fit_the_page_with_their_headers_whole(monkeypatch):
    """At 1024 px the table's fixed 78 px columns cut "best at epoch" and "train - val gap" (issue 52, item 3):
    the widths now come from the cells and headers, adding up to the page's width."""
    import json

    from ui.display import MAIN_WIDTH

    at = open_page(monkeypatch, ROOT / "checkpoints", {"model": "names-pretrained"})
    table = at.dataframe[0]
    widths = {name: c["width"] for name, c in json.loads(table.proto.columns).items() if "width" in c}
    assert set(widths) == set(table.value.columns), widths
    assert sum(widths.values()) <= MAIN_WIDTH
    assert all(width >= 6 * len(name) for name, width in widths.items()), widths


def test_a_bundled_recipes_seeds_are_one_band_over_its_runs(monkeypatch, tiny_checkpoints):
    """Issue 53: "Our own bundled recipes were run at three seeds: show them so." Each seed's history (no weights)
    in <recipe>.seed-histories.json is a run; the preset picks them and they are drawn as their mean with a band,
    the summary saying over how many runs."""
    from core.lens.history.records import seed_histories_file, write_seed_history

    rng = np.random.default_rng(0)
    values = [list(3 - np.arange(10) * 0.2 + rng.normal(0, 0.05, 10)) for _ in range(3)]
    path = seed_histories_file(tiny_checkpoints, "induction")
    for seed, ys in enumerate(values):
        write_seed_history(path, f"induction-seed{seed}", [
            {"step": 25 * (i + 1), "epoch": i // 5, "tokens": 800 * (i + 1), "wall_time": 0.5 * i, "split": "train",
             "metric": "loss", "value": float(y)} for i, y in enumerate(ys)])
    at = open_page(monkeypatch, tiny_checkpoints)
    at.selectbox(key="curves_preset").select("induction over 3 seeds").run()
    assert not at.exception, [e.message for e in at.exception]
    assert at.multiselect(key="curves_runs").value == [f"induction-seed{s}" for s in range(3)]
    spec = chart(at)
    (band,) = [t for t in spec["data"] if meta(t).get("kind") == "band"]
    assert meta(band)["runs"] == 3
    mean = array(traces(spec)[("induction (seeds)", "train")]["y"])
    np.testing.assert_allclose(mean, np.mean(np.asarray(values), axis=0))
    captions = " ".join(c.value for c in at.caption).replace("\\", "")
    assert "induction (seeds): the mean over 3 runs" in captions


def test_the_bundled_induction_seeds_open_as_one_band(monkeypatch):
    at = open_page(monkeypatch, ROOT / "checkpoints")
    at.selectbox(key="curves_preset").select("induction over 3 seeds").run()
    assert not at.exception, [e.message for e in at.exception]
    assert {run for run, _ in traces(chart(at))} == {"induction (seeds)"}
    captions = " ".join(c.value for c in at.caption).replace("\\", "")
    assert "induction (seeds): the mean over 3 runs (induction-seed0, induction-seed1, induction-seed2)" in captions


def test_the_names_pair_over_three_seeds_is_two_bands(monkeypatch):
    """The names pair's seeds (checkpoints/names-*.seed-histories.json): the preset draws each as one band over its
    three runs, on validation accuracy, and says so."""
    at = open_page(monkeypatch, ROOT / "checkpoints")
    at.selectbox(key="curves_preset").select("pretrained vs from scratch over 3 seeds").run()
    assert not at.exception, [e.message for e in at.exception]
    assert {run for run, _ in traces(chart(at))} == {"names-pretrained (seeds)", "names-scratch (seeds)"}
    bands = [meta(t) for t in chart(at)["data"] if meta(t).get("kind") == "band"]
    assert sorted(b["runs"] for b in bands) == [3, 3, 3, 3]  # train and val of each pair member
    captions = " ".join(c.value for c in at.caption).replace("\\", "")
    assert "names-pretrained (seeds): the mean over 3 runs" in captions


def test_a_link_to_the_page_it_is_on_is_followed(monkeypatch):
    """A lesson's next slide on the same page: the URL brings settings the page did not write, and they win over the
    widgets' (before, the URL counted only on a page's first visit)."""
    monkeypatch.setenv("ATTENTION_LAB_CHECKPOINTS", str(ROOT / "checkpoints"))
    at = AppTest.from_file(str(ROOT / "pages" / "curves.py"), default_timeout=60)
    at.query_params.update({"runs": "names-pretrained,names-scratch", "metric": "accuracy", "x": "epoch"})
    at.run()
    assert at.multiselect(key="curves_runs").value == ["names-pretrained", "names-scratch"]
    assert at.selectbox(key="curves_preset").value == "pretrained vs from scratch"  # its verdict sentence drawn
    at.query_params.clear()
    at.query_params.update({"runs": "induction", "metric": "loss", "x": "step"})
    at.run()
    assert not at.exception
    assert at.multiselect(key="curves_runs").value == ["induction"]
    assert at.selectbox(key="curves_metric").value == "loss"
    assert at.selectbox(key="curves_preset").value == "(choose runs yourself)"
    at.run()  # its own rerun keeps what it shows
    assert at.multiselect(key="curves_runs").value == ["induction"]


def test_accuracy_by_epoch_is_a_table_of_the_history(monkeypatch):
    """x = epoch: the metric at the end of each epoch, per run and split, equal to the history's records."""
    from core.lens.history.records import read_checkpoint_history

    monkeypatch.setenv("ATTENTION_LAB_CHECKPOINTS", str(ROOT / "checkpoints"))
    at = AppTest.from_file(str(ROOT / "pages" / "curves.py"), default_timeout=60)
    at.query_params.update({"runs": "names-pretrained,names-scratch", "metric": "accuracy", "x": "epoch"})
    at.run()
    table = next(d.value for d in at.dataframe if "epoch" in d.value.columns)
    history = read_checkpoint_history(ROOT / "checkpoints" / "names-scratch.safetensors").frame
    val = history[(history["metric"] == "accuracy") & (history["split"] == "val")]
    assert list(table["epoch"]) == sorted(int(e) for e in val["epoch"])
    assert np.allclose(table["names-scratch val"].astype(float), val.sort_values("epoch")["value"].to_numpy())
    assert {"names-pretrained train", "names-pretrained val", "names-scratch train"} <= set(table.columns)


def test_a_run_without_the_charts_metric_moves_the_chart_to_one_every_run_has(monkeypatch, tmp_path):
    """Issue 63: the page opens on the classifiers' accuracy; the induction run added to it (or retrained with the
    Train button) was drawn as "induction has no 'accuracy' records" instead of its loss."""
    at = open_page(monkeypatch, ROOT / "checkpoints", {"runs": "names-pretrained,names-scratch", "metric": "accuracy"})
    assert at.selectbox(key="curves_metric").value == "accuracy"
    at.multiselect(key="curves_runs").set_value(["names-pretrained", "names-scratch", "induction"]).run()
    assert not at.exception, [e.message for e in at.exception]
    assert at.selectbox(key="curves_metric").value == "loss"
    said = " ".join(c.value for c in at.caption).replace("\\", "")
    assert "Showing loss: induction has no 'accuracy' records" in said
    drawn = json.loads(at.get("plotly_chart")[0].proto.spec)["data"]  # the curves (the roles panel follows)
    assert {meta(t).get("run") for t in drawn} >= {"names-pretrained", "names-scratch", "induction"}
    at.selectbox(key="curves_metric").set_value("accuracy").run()  # chosen afterwards: the user's choice holds
    assert at.selectbox(key="curves_metric").value == "accuracy"
    # the Train button's run: its log, added to the runs shown, on its loss
    runs = tmp_path / "runs"
    runs.mkdir()
    (runs / "induction.log.jsonl").write_text(log_line(1, 4.0) + log_line(2, 3.5))
    monkeypatch.setenv("ATTENTION_LAB_RUNS", str(runs))
    at = open_page(monkeypatch, ROOT / "checkpoints", {"runs": "names-pretrained,names-scratch", "metric": "accuracy"})
    at.session_state["train_follow"] = "induction (log)"
    at.run()
    assert at.multiselect(key="curves_runs").value[-1] == "induction (log)"
    assert at.selectbox(key="curves_metric").value == "loss"
