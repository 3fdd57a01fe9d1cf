"""core.lens.history: smoothing, bucketing, reading histories (metadata only), summaries, URL settings."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from core.figures.curves import SPLIT_DASH, training_curves_figure
from core.lens.history.curves import (
    DEFAULT_SMOOTHING,
    bucket_minmax,
    build_curves,
    default_smoothing,
    smooth_ema,
    summarize_runs,
)
from core.lens.history.logs import LIVE_WINDOW_S, LogFollower, catalog, is_running, log_stem
from core.lens.history.presets import COMPARISONS, ComparisonPreset, comparison_verdicts, first_epoch_gaps, preset_runs
from core.lens.history.records import (
    COLUMNS,
    parse_jsonl,
    read_checkpoint_history,
    read_uploaded_history,
    records_frame,
    to_csv,
)
from tests.conftest import save_tiny_checkpoint
from ui.page_state import CurvesState, from_url, show_names, to_url


def reference_ema(y, weight):
    """TensorBoard's loop, verbatim."""
    last, num_accum, out = 0.0, 0, []
    for value in y:
        if not math.isfinite(value):
            out.append(math.nan)
            continue
        last = last * weight + (1 - weight) * value
        num_accum += 1
        out.append(last / (1 - weight ** num_accum))
    return np.array(out)


def record(step, value, split="train", metric="loss", run="r", **extra):
    return {"run": run, "step": step, "epoch": step // 10, "tokens": 100 * step, "wall_time": 0.5 * step,
            "split": split, "metric": metric, "value": value, **extra}


def frame_of(records):
    frame, malformed = records_frame(records)
    assert malformed == 0
    return frame


# --- smoothing -----------------------------------------------------------------------------------


@pytest.mark.parametrize("weight", [0.0, 0.25, 0.6, 0.9, 0.999])
def test_smoothing_matches_tensorboard_on_hand_made_series(weight):
    y = [3.0, 1.0, 4.0, 1.0, 5.0, 9.0, 2.0, 6.0]
    np.testing.assert_allclose(smooth_ema(y, weight), reference_ema(y, weight), rtol=1e-12)


@pytest.mark.parametrize("weight", [0.01, 0.5, 0.95, 0.999])
def test_smoothing_matches_reference_across_chunk_boundaries(weight):
    rng = np.random.default_rng(1)
    y = rng.normal(size=9000) * 5 + 50
    y[rng.integers(0, y.size, 40)] = np.nan
    y[[7, 4100]] = [np.inf, -np.inf]
    ours, ref = smooth_ema(y, weight), reference_ema(y, weight)
    assert np.array_equal(np.isnan(ours), np.isnan(ref))
    np.testing.assert_allclose(ours[~np.isnan(ref)], ref[~np.isnan(ref)], rtol=1e-10)


def test_constant_series_is_unchanged_and_first_point_is_unbiased():
    np.testing.assert_allclose(smooth_ema(np.full(50, 2.5), 0.99), 2.5, rtol=1e-12)
    smoothed = smooth_ema([10.0, 0.0, 0.0], 0.9)
    assert smoothed[0] == pytest.approx(10.0)  # not pulled towards 0 as a plain EMA would be
    assert smoothed[1] == pytest.approx(0.9 * 10 * 0.1 / (1 - 0.81))


def test_nan_is_a_gap_that_does_not_disturb_later_points():
    y = np.array([1.0, 2.0, np.nan, 3.0, np.inf, 4.0])
    smoothed = smooth_ema(y, 0.7)
    assert np.isnan(smoothed[2]) and np.isnan(smoothed[4])
    np.testing.assert_allclose(smoothed[[0, 1, 3, 5]], smooth_ema([1.0, 2.0, 3.0, 4.0], 0.7))
    assert np.isnan(smooth_ema([np.nan, np.nan], 0.5)).all()
    assert smooth_ema([], 0.5).size == 0


@pytest.mark.parametrize("weight", [-0.1, 1.0, float("nan")])
def test_smoothing_weight_outside_range_is_refused(weight):
    with pytest.raises(ValueError):
        smooth_ema([1.0, 2.0], weight)


# --- bucketing -----------------------------------------------------------------------------------


def test_bucketing_keeps_extremes_endpoints_and_is_bounded():
    rng = np.random.default_rng(0)
    n, buckets = 100_000, 300
    x = rng.permutation(np.arange(n, dtype=float))  # unsorted input
    y = np.sin(x / 500) + rng.normal(scale=0.01, size=n)
    y[x == 31_337] = 40.0  # a spike that plain decimation would drop
    y[x == 77_777] = -40.0
    bx, by = bucket_minmax(x, y, buckets)
    assert bx.size <= 2 * buckets + 2
    assert np.all(np.diff(bx) >= 0)
    assert by.max() == 40.0 and by.min() == -40.0
    assert bx[0] == 0 and bx[-1] == n - 1
    assert by[0] == y[x == 0][0] and by[-1] == y[x == n - 1][0]
    # every bucket's own min and max survive, not only the global ones
    edges = np.minimum((np.sort(x) / (n - 1) * buckets).astype(int), buckets - 1)
    ys = y[np.argsort(x)]
    kept = set(zip(bx.tolist(), by.tolist(), strict=True))
    for b in (0, 17, 150, buckets - 1):
        in_bucket = np.flatnonzero(edges == b)
        lo, hi = in_bucket[np.argmin(ys[in_bucket])], in_bucket[np.argmax(ys[in_bucket])]
        assert (float(lo), ys[lo]) in kept and (float(hi), ys[hi]) in kept


def test_bucketing_leaves_short_series_alone_but_sorted():
    bx, by = bucket_minmax([3.0, 1.0, 2.0], [30.0, 10.0, 20.0], 10)
    assert bx.tolist() == [1.0, 2.0, 3.0] and by.tolist() == [10.0, 20.0, 30.0]


def test_bucketing_keeps_gaps_and_drops_unplaceable_x():
    x = np.arange(10_000, dtype=float)
    y = np.ones_like(x)
    y[5000:5010] = np.nan
    x[9000] = np.nan
    bx, by = bucket_minmax(x, y, 100)
    assert np.isnan(by).sum() == 1 and 5000 <= bx[np.isnan(by)][0] < 5010
    assert not np.isnan(bx).any() and bx.size <= 2 * 100 + 2 + 1
    same_x = bucket_minmax(np.zeros(1000), np.arange(1000.0), 5)
    assert same_x[1].min() == 0 and same_x[1].max() == 999


# --- reading histories ---------------------------------------------------------------------------


def test_checkpoint_history_reads_metadata_only(tmp_path, monkeypatch):
    path = save_tiny_checkpoint(tmp_path / "tiny-lm.safetensors", "lm")
    import core.io.checkpoint

    def no_tensors(*args, **kwargs):
        raise AssertionError("history reading must not open tensors")

    monkeypatch.setattr(core.io.checkpoint, "safe_open", no_tensors)
    monkeypatch.setattr(core.io.checkpoint, "load", no_tensors)
    loaded = read_checkpoint_history(path)
    assert list(loaded.frame.columns) == COLUMNS
    assert set(loaded.frame["run"]) == {"tiny-lm"}
    train = loaded.frame[loaded.frame["split"] == "train"]
    assert train["value"].tolist() == pytest.approx([2.8, 2.6, 2.4, 2.2, 2.0])
    assert loaded.notes == []


def test_unreadable_checkpoint_is_a_note(tmp_path):
    bad = tmp_path / "bad.safetensors"
    bad.write_bytes(b"not a checkpoint at all")
    loaded = read_checkpoint_history(bad)
    assert loaded.frame.empty and len(loaded.notes) == 1 and "bad" in loaded.notes[0]


def test_jsonl_skips_malformed_records_and_truncated_last_line():
    lines = [json.dumps(record(1, 2.0)), "not json", json.dumps({"step": 2, "value": 1.0}),
             json.dumps(record(3, "high")), "", json.dumps(record(4, 1.5)), '{"run": "r", "st']
    loaded = parse_jsonl("\n".join(lines).encode(), "upload")
    assert loaded.frame["step"].tolist() == [1.0, 4.0]
    assert set(loaded.frame["run"]) == {"upload"}
    text = " ".join(loaded.notes)
    assert "3 malformed" in text and "cut off" in text


def test_jsonl_keeps_nan_values_and_a_complete_last_line_without_newline():
    data = (json.dumps(record(1, float("nan"))) + "\n" + json.dumps(record(2, float("inf"))) + "\n"
            + json.dumps(record(3, 1.0))).encode()
    loaded = parse_jsonl(data, "s")
    assert loaded.notes == []
    values = loaded.frame["value"].to_numpy()
    assert np.isnan(values[0]) and np.isinf(values[1]) and values[2] == 1.0


def test_jsonl_with_several_runs_keeps_them_apart():
    data = "\n".join(json.dumps(record(1, 1.0, run=r)) for r in ("a", "b")).encode()
    assert sorted(parse_jsonl(data, "merged").frame["run"]) == ["merged: a", "merged: b"]


def test_log_follower_reads_only_complete_lines_as_the_file_grows(tmp_path):
    path = tmp_path / "job.log.jsonl"
    first = json.dumps(record(1, 2.0)) + "\n"
    second = json.dumps(record(2, 1.5))
    path.write_text(first + second[:10])
    follower = LogFollower(path, "job (log)")
    loaded = follower.poll()
    assert loaded.frame["step"].tolist() == [1.0]
    assert any("still being written" in n for n in loaded.notes)
    with open(path, "a") as fh:
        fh.write(second[10:] + "\n" + json.dumps(record(3, 1.2)) + "\ngarbage\n")
    loaded = follower.poll()
    assert loaded.frame["step"].tolist() == [1.0, 2.0, 3.0]
    assert set(loaded.frame["run"]) == {"job (log)"}
    assert any("1 malformed" in n for n in loaded.notes)
    assert not any("still being written" in n for n in loaded.notes)
    path.write_text(json.dumps(record(1, 9.0)) + "\n")  # a new job replaced the log
    assert follower.poll().frame["value"].tolist() == [9.0]
    path.unlink()
    assert any("gone" in n for n in follower.poll().notes)


class FakeUpload:
    """What st.file_uploader hands over: name, size, getvalue()."""

    def __init__(self, name: str, data: bytes, size: int | None = None) -> None:
        self.name, self.data, self.size, self.reads = name, data, len(data) if size is None else size, 0

    def getvalue(self) -> bytes:
        self.reads += 1
        return self.data


def test_uploads_are_read_with_a_size_limit_and_never_loaded(tmp_path):
    data = save_tiny_checkpoint(tmp_path / "x.safetensors", "lm").read_bytes()
    loaded = read_uploaded_history(FakeUpload("my run<b>.safetensors", data), "mine", max_bytes=10**8)
    assert len(loaded.frame) == 6 and set(loaded.frame["run"]) == {"mine"} and loaded.notes == []
    huge = FakeUpload("x.safetensors", b"", size=10**9)
    too_big = read_uploaded_history(huge, "big", max_bytes=10**8)
    assert too_big.frame.empty and "over the 100 MB limit" in too_big.notes[0] and huge.reads == 0
    assert read_uploaded_history(FakeUpload("x.txt", b"hi"), "t", 100).notes[0] == (
        "x.txt is not a checkpoint (.safetensors) or a training history (.jsonl): it is plain text, 1 line.")
    junk = read_uploaded_history(FakeUpload("x.safetensors", b"\x00" * 64), "junk", 100)
    assert junk.frame.empty and junk.notes[0].startswith("x.safetensors is not a checkpoint (.safetensors): it is "
                                                         "binary data")
    upload = FakeUpload("x.log.jsonl", json.dumps(record(1, 1.0)).encode())
    jsonl = read_uploaded_history(upload, "j", 10**4)
    assert jsonl.frame["value"].tolist() == [1.0]


def test_log_follower_starts_over_when_a_resumed_trainer_rewrites_the_log(tmp_path):
    path = tmp_path / "job.log.jsonl"
    path.write_text("".join(json.dumps(record(s, 5.0 - s)) + "\n" for s in (1, 2, 3)))
    follower = LogFollower(path, "job")
    assert follower.poll().frame["step"].tolist() == [1.0, 2.0, 3.0]
    # resume: rewrite in place (same file) with steps 1-2, then keep training past the old length
    with open(path, "r+") as fh:
        fh.truncate(0)
        fh.write("".join(json.dumps(record(s, 5.0 - s)) + "\n" for s in (1, 2)))
        fh.write("".join(json.dumps(record(s, 9.0 - s)) + "\n" for s in (3, 4, 5)))
    loaded = follower.poll()
    assert loaded.frame["step"].tolist() == [1.0, 2.0, 3.0, 4.0, 5.0]
    assert loaded.frame["value"].tolist() == [4.0, 3.0, 6.0, 5.0, 4.0] and loaded.notes == []


def test_catalog_names_logs_live_and_keeps_names_unique(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir(), b.mkdir()
    (a / "lm-rope.log.jsonl").write_text("")
    (b / "lm-rope.safetensors.log.jsonl").write_text("")
    sources = catalog([("lm-rope", a / "lm-rope.safetensors"), ("lm-rope", b / "lm-rope.safetensors")],
                           [a, b, a])
    assert list(sources) == ["lm-rope", "lm-rope (b)", "lm-rope (log)", "lm-rope (log) (b)"]
    assert sources["lm-rope (log)"].kind == "log"


# --- what the chart shows ------------------------------------------------------------------------


def test_build_curves_with_one_point_nan_and_mismatched_metrics_gives_notes():
    frame = frame_of([record(1, 2.0, run="one")]
                     + [record(s, v, run="gappy") for s, v in [(1, 3.0), (2, float("nan")), (3, float("inf")),
                                                               (4, 2.0)]]
                     + [record(1, 0.5, metric="accuracy", run="acc-only")])
    plot = build_curves(frame, ["one", "gappy", "acc-only"], "loss", "step", smoothing=0.5)
    notes = " ".join(plot.notes)
    assert "gappy train: 2 NaN/inf" in notes and "acc-only has no 'loss'" in notes
    assert any("single point" in i for i in plot.info)
    gappy = next(c for c in plot.curves if c.run == "gappy")
    assert np.isnan(gappy.y[1]) and np.isnan(gappy.y[2]) and np.isnan(gappy.smooth_y[2])
    fig = training_curves_figure(plot)
    one = [t for t in fig.data if t.meta and t.meta.get("run") == "one"]
    assert one and all(t.mode == "lines+markers" for t in one)


def test_build_curves_sorts_by_x_before_smoothing_and_marks_best_val():
    frame = frame_of([record(3, 1.0), record(1, 3.0), record(2, 2.0),
                      record(10, 0.9, split="val"), record(20, 0.4, split="val"),
                      record(30, 0.6, split="val")])
    plot = build_curves(frame, ["r"], "loss", "step", smoothing=0.6)
    train = next(c for c in plot.curves if c.split == "train")
    assert train.x.tolist() == [1.0, 2.0, 3.0]
    np.testing.assert_allclose(train.smooth_y, reference_ema([3.0, 2.0, 1.0], 0.6))
    assert [(b.run, b.step, b.y, b.epoch) for b in plot.best] == [("r", 20.0, 0.4, 2.0)]
    acc = frame_of([record(1, 0.2, "val", "accuracy"), record(2, 0.8, "val", "accuracy"),
                    record(3, 0.5, "val", "accuracy")])
    assert build_curves(acc, ["r"], "accuracy").best[0].y == 0.8
    lr = frame_of([record(1, 0.1, "val", "lr")])
    assert build_curves(lr, ["r"], "lr").best == []  # lr has no "best"


def test_build_curves_buckets_long_series_and_switches_to_webgl_by_points_drawn():
    n = 50_000
    y = np.ones(n)
    y[12_345] = 100.0
    frame = pd.DataFrame({"run": "big", "step": np.arange(n, dtype=float), "epoch": 0.0, "tokens": 0.0,
                          "wall_time": np.nan, "split": "train", "metric": "loss", "value": y})
    plot = build_curves(frame, ["big"], "loss", "step", smoothing=0.9, n_buckets=500)
    curve = plot.curves[0]
    assert curve.reduced and curve.n_points == n and curve.x.size <= 1002 and curve.y.max() == 100.0
    assert not plot.webgl and any("spike" in i for i in plot.info)  # ~2,000 points drawn: SVG
    every = build_curves(frame, ["big"], "loss", "step", smoothing=0.9, n_buckets=10**9)  # 100,000 drawn
    assert every.webgl
    assert {t.type for t in training_curves_figure(every).data} == {"scattergl"}
    by_wall = build_curves(frame, ["big"], "loss", "wall_time")
    assert by_wall.curves == [] or by_wall.curves[0].x.size == 0
    assert any("wall time" in n for n in by_wall.notes)


def test_figure_colours_runs_dashes_val_escapes_names_and_keeps_zoom_key():
    frame = frame_of([record(1, 2.0, run="<b>bold</b>"), record(1, 2.5, split="val", run="<b>bold</b>"),
                      record(1, 3.0, run="plain"), record(2, 2.0, run="plain")])
    plot = build_curves(frame, ["<b>bold</b>", "plain"], "loss", "step", smoothing=0.0, logy=True)
    fig = training_curves_figure(plot, title="loss <i>")
    lines = [t for t in fig.data if t.meta and t.meta.get("kind") == "raw"]
    assert {t.line.color for t in lines if t.meta["run"] == "plain"} != \
           {t.line.color for t in lines if t.meta["run"] == "<b>bold</b>"}
    assert {t.meta["split"]: t.line.dash for t in lines if t.meta["run"] == "<b>bold</b>"} == SPLIT_DASH
    assert all("<b>bold" not in (t.name or "") for t in fig.data)
    assert "<i>" not in fig.layout.title.text and fig.layout.yaxis.type == "log"
    smoother = training_curves_figure(build_curves(frame, ["plain"], "loss", smoothing=0.9))
    assert fig.layout.uirevision == smoother.layout.uirevision.replace("linear", "log")
    raw = [t for t in smoother.data if t.meta and t.meta.get("kind") == "raw"]
    assert raw[0].opacity < 1 and any(t.meta and t.meta.get("kind") == "smoothed" for t in smoother.data)


def test_summary_has_final_best_epoch_and_gap():
    frame = frame_of([record(10, 2.0), record(20, 1.0), record(30, float("nan")),
                      record(10, 2.2, split="val"), record(20, 1.4, split="val"),
                      record(30, 1.6, split="val"),
                      record(20, 1.0, run="no-val")])
    summary = summarize_runs(frame, ["r", "no-val", "absent"], "loss").set_index("run")
    row = summary.loc["r"]
    assert row["final train"] == 1.0 and row["final val"] == 1.6  # last finite value
    assert row["best val"] == 1.4 and row["best at epoch"] == 2.0 and row["best at step"] == 20.0
    assert row["train - val gap"] == pytest.approx(1.0 - 1.6)
    assert math.isnan(summary.loc["no-val", "best val"]) and summary.loc["absent", "points"] == 0


def test_csv_has_the_tidy_columns(tmp_path):
    frame = frame_of([record(1, 2.0), record(2, float("nan"))])
    back = pd.read_csv(__import__("io").BytesIO(to_csv(frame)))
    assert list(back.columns) == COLUMNS and len(back) == 2


# --- comparisons and URL settings ---------------------------------------------------------------


def test_comparisons_are_data_and_match_checkpoint_names():
    required = {"pretrained vs from scratch", "positional encodings", "vanilla vs synthesizer"}
    assert required <= set(COMPARISONS)
    names = ["lm-rope", "lm-learned", "names-scratch", "other"]
    assert preset_runs(COMPARISONS["positional encodings"], names) == ["lm-learned", "lm-rope"]
    assert preset_runs(COMPARISONS["vanilla vs synthesizer"], names) == []


def test_settings_round_trip_through_the_url_and_survive_bad_values():
    settings = CurvesState(runs=("a,b", "c"), metric="accuracy", x="tokens", smoothing=0.95, logy=True)
    query = to_url(settings)
    assert all(isinstance(v, str) for v in query.values())
    back, notes = from_url(CurvesState, query)
    assert back == settings and notes == []
    # runs the server lacks are dropped, with their note, by the page (tests/test_state_stays.py)
    bad, notes = from_url(CurvesState, {"runs": "c", "x": "banana", "smoothing": "2", "logy": "maybe",
                                        "metric": "x" * 500})
    assert bad == CurvesState(runs=("c",)) and len(notes) == 3
    assert from_url(CurvesState, {"smoothing": "nan"})[0].smoothing == DEFAULT_SMOOTHING


def test_run_names_in_a_link_are_percent_encoded_as_before():
    """urllib.parse.quote replaced a hand-written escape of ',' and '%': an ASCII name reads as it did, an
    old link decodes to the same runs, and every name (commas, percent signs, other scripts) comes back."""
    def old_escape(name):
        return name.replace("%", "%25").replace(",", "%2C")

    ascii_names = ["lm-rope", "a,b", "100%", "%2C", "50%,off", "a b/c?d=e&f#g", "".join(map(chr, range(32, 127)))]
    names = [*ascii_names, "Zürich,1", "漢字%", "tab\tname", "emoji 👩🏽‍💻"]
    for name in ascii_names:
        assert show_names([name]) == old_escape(name)
    for name in names:
        for link in ({"runs": show_names([name, "c"])}, {"runs": ",".join(map(old_escape, [name, "c"]))}):
            assert from_url(CurvesState, link)[0].runs == (name, "c")


def test_log_stem_handles_both_spellings():
    assert log_stem(Path("x/lm.log.jsonl")) == "lm"
    assert log_stem("lm.safetensors.log.jsonl") == "lm"
    assert log_stem("export.jsonl") == "export"


def test_a_log_counts_as_running_only_while_it_is_being_written(tmp_path):
    import os

    path = tmp_path / "job.log.jsonl"
    path.write_text("")
    assert is_running(path)
    old = path.stat().st_mtime - LIVE_WINDOW_S - 5
    os.utime(path, (old, old))
    assert not is_running(path)
    assert not is_running(tmp_path / "missing.log.jsonl")


def test_smoothing_never_hides_where_a_short_run_ended():
    """Issue 35: 9 points smoothed at 0.6 ended near 0.6 while the last raw value was 0.121. A short run opens
    unsmoothed, and a smoothed chart marks each curve's last raw value."""
    values = [2.0, 1.5, 1.2, 1.0, 0.8, 0.6, 0.4, 0.2, 0.121]
    frame = frame_of([record(s, v) for s, v in enumerate(values, 1)])
    assert default_smoothing(len(values)) == 0.0 and default_smoothing(500) == DEFAULT_SMOOTHING
    plot = build_curves(frame, ["r"], "loss", "step", smoothing=0.6)
    assert plot.curves[0].smooth_y[-1] > 0.3  # what the smoothed line alone showed
    fig = training_curves_figure(plot)
    (last,) = [t for t in fig.data if t.meta and t.meta.get("kind") == "last"]
    assert list(last.x) == [9.0] and list(last.y) == [0.121]
    unsmoothed = training_curves_figure(build_curves(frame, ["r"], "loss", "step", smoothing=0.0))
    assert not [t for t in unsmoothed.data if t.meta and t.meta.get("kind") == "last"]  # the line itself ends there


def test_the_first_epoch_gap_is_read_from_both_runs_histories():
    frame = frame_of([record(s, v, split="val", metric="accuracy", run=r, epoch=e)
                      for r, rows in {"a": [(10, 0.30, 1), (20, 0.60, 2)], "b": [(10, 0.35, 1), (20, 0.50, 2)]}.items()
                      for s, v, e in rows])
    preset = ComparisonPreset(("a", "b"), "accuracy", "", pairs=(("a", "b"),))
    assert first_epoch_gaps(preset, frame) == [
        "After epoch 1, a has 30.0% validation accuracy and b 35.0%: -5.0 points."]
    assert comparison_verdicts(preset, frame)[0].startswith("a ends at 60.0% validation accuracy, b at 50.0%")
    assert first_epoch_gaps(None, frame) == []


def test_seed_histories_round_trip_one_line_per_run(tmp_path):
    from core.lens.history.records import read_seed_history, seed_histories_file, seed_history_runs, write_seed_history

    rows = [{"run": "x", "step": s, "epoch": 0, "tokens": 32 * s, "wall_time": 0.1 * s, "split": "train",
             "metric": "loss", "value": 1.0 / s} for s in (1, 2, 3)] + \
        [{"run": "x", "step": 3, "epoch": 0, "tokens": 96, "wall_time": 0.3, "split": "val", "metric": "loss",
          "value": float("nan")}]
    path = seed_histories_file(tmp_path, "rec")
    write_seed_history(path, "rec-seed1", rows)
    write_seed_history(path, "rec-seed0", rows[:2])
    write_seed_history(path, "rec-seed1", rows)  # replaced, not repeated
    assert path.read_text().count("\n") == 4  # {, one line per run, }
    assert seed_history_runs(tmp_path) == [("rec-seed0", path), ("rec-seed1", path)]
    got = read_seed_history(path, "rec-seed1")
    assert not got.notes and list(got.frame["run"].unique()) == ["rec-seed1"]
    assert got.frame["step"].tolist() == [1, 2, 3, 3] and got.frame["tokens"].tolist() == [32, 64, 96, 96]
    assert got.frame["value"].iloc[:3].tolist() == [1.0, 0.5, 1 / 3] and np.isnan(got.frame["value"].iloc[3])
    assert read_seed_history(path, "rec-seed9").notes == ["rec-seed9: no history in rec.seed-histories.json."]
    (tmp_path / "bad.seed-histories.json").write_text("{not json")
    assert seed_history_runs(tmp_path) == [("rec-seed0", path), ("rec-seed1", path)]
