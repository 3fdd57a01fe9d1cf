"""Training histories as one tidy table, and the numbers the curves page draws from it.

Histories come from two places, both without loading a single tensor:
- a checkpoint's metadata (`read_metadata`: the safetensors header only), key "history";
- a trainer's live `<checkpoint>.log.jsonl` (one record per line), followed as it grows.

Every record becomes one row of `COLUMNS`. Bad input is normal input: malformed records, a
truncated last line (a job mid-write), NaN/inf values and runs that log different metrics are
counted and described in `notes` (sentences for the user), never raised.

Smoothing (`smooth_ema`) and spike-preserving downsampling (`bucket_minmax`) are pure numpy.
No streamlit here.
"""

from __future__ import annotations

import fnmatch
import json
import math
import os
import re
import tempfile
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from core.io.checkpoint import CheckpointError, read_metadata

COLUMNS = ["run", "step", "epoch", "tokens", "wall_time", "split", "metric", "value"]
NUMERIC_COLUMNS = ("step", "epoch", "tokens", "wall_time", "value")
SPLITS = ("train", "val")  # drawing order; other split names (if a trainer logs them) come after
METRIC_ORDER = ("loss", "accuracy", "perplexity", "lr")
# Which direction is "best" on the validation curve; metrics not listed (lr) have no best.
METRIC_GOAL = {"loss": "min", "perplexity": "min", "accuracy": "max"}
X_AXES = {"step": "Step", "epoch": "Epoch", "tokens": "Tokens seen", "wall_time": "Wall time (s)"}
DEFAULT_SMOOTHING = 0.6  # TensorBoard's default
MAX_SMOOTHING = 0.999
N_BUCKETS = 2000  # per curve: at most ~4002 drawn points, finer than a chart is wide in pixels
WEBGL_MIN_POINTS = 10_000  # below this SVG traces are crisper and export as true vectors
LOG_SUFFIX = ".log.jsonl"
LIVE_WINDOW_S = 600  # a log untouched this long is a finished (or stalled) job: no auto-refresh
MAX_NAME_CHARS = 80  # run/split/metric strings longer than this are not what a trainer writes
MAX_READ_BYTES = 256 * 1024 * 1024  # one poll of a log never reads more than this


# --------------------------------------------------------------------------- smoothing, bucketing


def smooth_ema(y: Sequence[float] | np.ndarray, weight: float) -> np.ndarray:
    """TensorBoard's debiased exponential moving average, vectorised.

    Equivalent to: last = 0; n = 0; for each finite y: last = last*w + (1-w)*y; n += 1;
    out = last / (1 - w**n); non-finite y -> NaN without touching the state. So the first point
    equals y0 (no pull towards 0) and a gap never disturbs what follows. Feed points in x order.
    """
    y = np.asarray(y, dtype=float)
    if y.ndim != 1:
        raise ValueError("smooth_ema expects a 1-D series.")
    if not (0.0 <= weight < 1.0) or not math.isfinite(weight):
        raise ValueError(f"Smoothing weight must be in [0, 1); got {weight!r}.")
    out = np.full(y.shape, np.nan)
    finite = np.isfinite(y)
    values = y[finite]
    if values.size == 0:
        return out
    if weight == 0.0:
        out[finite] = values
        return out
    out[finite] = _ema_state(values, weight) / -np.expm1(np.arange(1, values.size + 1) * math.log(weight))
    return out


def _ema_state(values: np.ndarray, weight: float) -> np.ndarray:
    """`last` after each value of last = last*w + (1-w)*v, in chunks of closed form.

    Within a chunk, last_k = w^k * (last_0 + (1-w) * sum_{j<=k} v_j w^-j). The chunk length
    keeps w^-j below e^300 and the cumulative sum short enough to stay accurate (~1e-12).
    """
    log_w = math.log(weight)
    chunk = int(max(1, min(4096, 300.0 / -log_w)))
    j = np.arange(1, chunk + 1)
    grow, decay = np.exp(-j * log_w), np.exp(j * log_w)  # w^-j, w^j
    out = np.empty_like(values)
    last = 0.0
    for start in range(0, values.size, chunk):
        part = values[start:start + chunk]
        k = part.size
        scale = float(np.max(np.abs(part))) or 1.0  # keeps v * w^-j far from overflow
        acc = np.cumsum(part / scale * grow[:k])
        out[start:start + k] = decay[:k] * last + (1.0 - weight) * scale * (decay[:k] * acc)
        last = float(out[start + k - 1])
    return out


def bucket_minmax(x: Sequence[float] | np.ndarray, y: Sequence[float] | np.ndarray,
                  n_buckets: int) -> tuple[np.ndarray, np.ndarray]:
    """Downsample for drawing without hiding spikes: per equal-width x-bucket keep the points with
    the smallest and the largest y, plus the first and last point overall; order by x (stable).

    Output size <= 2*n_buckets + 2 for finite y. Where a bucket holds non-finite y, its first such
    point is kept too (as NaN), so a gap stays a gap. Points with non-finite x cannot be placed and
    are dropped. Series already small enough come back sorted and otherwise untouched.
    """
    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    if x.shape != y.shape or x.ndim != 1:
        raise ValueError("bucket_minmax expects two 1-D arrays of the same length.")
    if n_buckets < 1:
        raise ValueError("n_buckets must be at least 1.")
    placeable = np.isfinite(x)
    x, y = x[placeable], y[placeable]
    if x.size > 1 and not np.all(x[1:] >= x[:-1]):  # callers usually pass sorted x: skip the sort
        order = np.argsort(x, kind="stable")
        x, y = x[order], y[order]
    n = x.size
    if n <= 2 * n_buckets + 2:
        return x, y
    lo, hi = x[0], x[-1]
    span = hi - lo
    bucket = np.zeros(n, dtype=np.int64) if span <= 0 else np.minimum(
        ((x - lo) / span * n_buckets).astype(np.int64), n_buckets - 1)
    # x is sorted, so each bucket is one contiguous segment: per-segment extremes in O(n)
    new_segment = np.r_[True, bucket[1:] != bucket[:-1]]
    starts = np.flatnonzero(new_segment)
    segment = np.cumsum(new_segment) - 1
    finite = np.isfinite(y)
    low = np.minimum.reduceat(np.where(finite, y, np.inf), starts)
    high = np.maximum.reduceat(np.where(finite, y, -np.inf), starts)
    keep = [np.array([0, n - 1]),
            _first_per_segment(finite & (y == low[segment]), segment),
            _first_per_segment(finite & (y == high[segment]), segment),
            _first_per_segment(~finite, segment)]  # one NaN per bucket with a gap keeps the gap
    kept = np.unique(np.concatenate(keep))
    return x[kept], y[kept]


def _first_per_segment(mask: np.ndarray, segment: np.ndarray) -> np.ndarray:
    """Index of the first True of each segment that has one (segment ids are non-decreasing)."""
    idx = np.flatnonzero(mask)
    if idx.size == 0:
        return idx
    ids = segment[idx]
    return idx[np.r_[True, ids[1:] != ids[:-1]]]


# --------------------------------------------------------------------------- reading histories


@dataclass
class LoadedHistory:
    """A tidy frame (COLUMNS) plus sentences about what could not be used."""

    frame: pd.DataFrame
    notes: list[str] = field(default_factory=list)


def empty_frame() -> pd.DataFrame:
    frame = pd.DataFrame({c: pd.Series(dtype=float) for c in COLUMNS})
    for c in ("run", "split", "metric"):
        frame[c] = frame[c].astype(object)
    return frame


def _number(value: Any, required: bool) -> float | None:
    """A finite-or-not float from a JSON number; None means the record is malformed."""
    if value is None:
        return None if required else math.nan
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def _name(value: Any) -> str | None:
    if isinstance(value, str) and 0 < len(value) <= MAX_NAME_CHARS:
        return value
    return None


def clean_record(record: Any) -> dict[str, Any] | None:
    """One history record as a row, or None when it is malformed.

    Required: split, metric (short strings), step (a number), value (a number; JSON NaN/Infinity
    and null are kept as a gap). epoch, tokens, wall_time are optional numbers. run is optional.
    """
    if not isinstance(record, dict):
        return None
    split, metric = _name(record.get("split")), _name(record.get("metric"))
    step = _number(record.get("step"), required=True)
    value = _number(record.get("value"), required=False)
    if split is None or metric is None or step is None or value is None or not math.isfinite(step):
        return None
    row = {"run": _name(record.get("run")) or "", "step": step, "split": split, "metric": metric,
           "value": value}
    for key in ("epoch", "tokens", "wall_time"):
        number = _number(record.get(key), required=False)
        if number is None:
            return None
        row[key] = number
    return row


def records_frame(records: Iterable[Any]) -> tuple[pd.DataFrame, int]:
    """(tidy frame, number of malformed records skipped). The run column holds the records' own run."""
    rows, malformed = [], 0
    for record in records:
        row = clean_record(record)
        if row is None:
            malformed += 1
        else:
            rows.append(row)
    if not rows:
        return empty_frame(), malformed
    frame = pd.DataFrame.from_records(rows, columns=COLUMNS)
    for c in NUMERIC_COLUMNS:
        frame[c] = frame[c].astype(float)
    return frame, malformed


def label_runs(frame: pd.DataFrame, source: str) -> pd.DataFrame:
    """Name rows after their source (checkpoint or log name), so names are unique and match the picker.

    A source that holds several runs (a merged log) keeps them apart as "source: run".
    """
    frame = frame.copy()
    runs = frame["run"].unique()
    if len(runs) <= 1:
        frame["run"] = source
    else:
        frame["run"] = [f"{source}: {r}" if r else source for r in frame["run"]]
    frame["run"] = frame["run"].astype(object)
    return frame


def _malformed_note(source: str, count: int) -> list[str]:
    if not count:
        return []
    return [f"{source}: skipped {count} malformed history record{'s' if count != 1 else ''} "
            "(each needs split, metric, step and a numeric value)."]


def history_from_metadata(metadata: Mapping[str, Any], source: str) -> LoadedHistory:
    history = metadata.get("history")
    if not isinstance(history, list):
        return LoadedHistory(empty_frame(), [f"{source} carries no training history."])
    frame, malformed = records_frame(history)
    notes = _malformed_note(source, malformed)
    if frame.empty and not malformed:
        notes.append(f"{source} carries no training history.")
    return LoadedHistory(label_runs(frame, source), notes)


def read_checkpoint_history(path: str | Path, source: str | None = None) -> LoadedHistory:
    """History from a checkpoint's header only; a file that cannot be read becomes a note."""
    path = Path(path)
    source = source or path.stem
    try:
        metadata = read_metadata(path)
    except (CheckpointError, OSError) as exc:
        return LoadedHistory(empty_frame(), [f"{source}: {exc}"])
    return history_from_metadata(metadata, source)


def parse_jsonl(data: bytes, source: str) -> LoadedHistory:
    """A whole .jsonl (an upload, or a finished log): one record per line."""
    frame, malformed, partial = _parse_lines(data)
    notes = _malformed_note(source, malformed)
    if partial:
        notes.append(f"{source}: the last line is cut off (a job still writing it?) and was skipped.")
    if frame.empty and not malformed and not partial:
        notes.append(f"{source} holds no history records.")
    return LoadedHistory(label_runs(frame, source), notes)


def read_uploaded_history(upload: Any, source: str, max_bytes: int) -> LoadedHistory:
    """An upload (`.name`, `.size`, `.getvalue()`: what st.file_uploader returns): a .safetensors
    (metadata read from a temporary copy) or a .jsonl history. The size is checked before reading."""
    filename, size = str(upload.name), int(upload.size)
    if size > max_bytes:
        return LoadedHistory(empty_frame(), [f"{source} is {size / 1e6:.0f} MB, over the "
                                             f"{max_bytes / 1e6:.0f} MB limit for uploads."])
    suffix = Path(filename).suffix.lower()
    if suffix not in (".jsonl", ".safetensors"):
        return LoadedHistory(empty_frame(), [f"{source}: only .safetensors checkpoints and .jsonl "
                                             "histories can be read."])
    data = upload.getvalue()
    if suffix == ".jsonl":
        return parse_jsonl(data, source)
    safe_name = re.sub(r"[^\w.-]", "_", Path(filename).stem)[:100] + ".safetensors"
    with tempfile.TemporaryDirectory(prefix="attention-lab-upload-") as tmp:
        path = Path(tmp) / safe_name
        path.write_bytes(data)
        return read_checkpoint_history(path, source)


def _parse_lines(data: bytes) -> tuple[pd.DataFrame, int, bool]:
    """(frame, malformed count, whether a last line without newline failed to parse: cut off)."""
    lines = data.split(b"\n")
    tail = lines.pop()  # bytes after the last newline: b"" when the file ends with one
    records: list[Any] = []
    malformed = 0
    for line in lines:
        if line.strip():
            record = _json_line(line)
            if record is None:
                malformed += 1
            else:
                records.append(record)
    partial = False
    if tail.strip():
        record = _json_line(tail)
        if record is not None:
            records.append(record)
        else:
            partial = True
    frame, bad = records_frame(records)
    return frame, malformed + bad, partial


def _json_line(line: bytes) -> Any | None:
    try:
        return json.loads(line)
    except (ValueError, RecursionError):  # UnicodeDecodeError is a ValueError
        return None


class LogFollower:
    """Reads a growing `<checkpoint>.log.jsonl` incrementally: each poll parses only new complete lines.

    An unfinished last line is not consumed, so the next poll reads it whole once the trainer has
    finished writing it. A file that shrank or was replaced is read again from the start.
    """

    def __init__(self, path: str | Path, source: str) -> None:
        self.path = Path(path)
        self.source = source
        self._reset()

    FINGERPRINT_BYTES = 256

    def _reset(self) -> None:
        self.offset = 0
        self.identity: tuple[int, int] | None = None
        self.fingerprint = b""  # the last bytes read: if they changed, the file was rewritten
        self.malformed = 0
        self.partial = False
        self._frame = empty_frame()

    def poll(self) -> LoadedHistory:
        try:
            stat = self.path.stat()
        except OSError:
            return LoadedHistory(self._labelled(), [f"{self.source}: the log file is gone."])
        identity = (stat.st_dev, stat.st_ino)
        if identity != self.identity or stat.st_size < self.offset:
            self._reset()
            self.identity = identity
        if stat.st_size > self.offset:
            try:
                data = self._read_new()
            except OSError as exc:
                return LoadedHistory(self._labelled(), [f"{self.source}: could not read the log ({exc})."])
            frame, malformed, partial = _parse_lines(data)
            # An unfinished last line stays unread: the next poll sees it whole.
            cut = data.rfind(b"\n") + 1 if partial else len(data)
            self.partial = partial
            self.malformed += malformed
            self.offset += cut
            self.fingerprint = (self.fingerprint + data[:cut])[-self.FINGERPRINT_BYTES:]
            if not frame.empty:
                self._frame = frame if self._frame.empty else pd.concat([self._frame, frame],
                                                                        ignore_index=True)
        notes = _malformed_note(self.source, self.malformed)
        if self.partial:
            notes.append(f"{self.source}: the last line is still being written; it is skipped for now.")
        return LoadedHistory(self._labelled(), notes)

    def _read_new(self) -> bytes:
        """Bytes after the offset; starts over when the bytes before it changed (a resumed trainer
        rewrites its log in place: same file, and it may already be longer than before)."""
        with open(self.path, "rb") as fh:
            if self.fingerprint:
                fh.seek(self.offset - len(self.fingerprint))
                if fh.read(len(self.fingerprint)) != self.fingerprint:
                    identity = self.identity
                    self._reset()
                    self.identity = identity
            fh.seek(self.offset)
            return fh.read(MAX_READ_BYTES)

    def _labelled(self) -> pd.DataFrame:
        return label_runs(self._frame, self.source)


def combine(histories: Iterable[LoadedHistory]) -> LoadedHistory:
    frames, notes = [], []
    for h in histories:
        notes += h.notes
        if not h.frame.empty:
            frames.append(h.frame)
    if not frames:
        return LoadedHistory(empty_frame(), notes)
    frame = pd.concat(frames, ignore_index=True)[COLUMNS]
    return LoadedHistory(frame, notes)


def to_csv(frame: pd.DataFrame) -> bytes:
    return frame[COLUMNS].to_csv(index=False).encode("utf-8")


# --------------------------------------------------------------------------- where runs come from


@dataclass(frozen=True)
class RunSource:
    """One choosable run: a checkpoint (history in its header) or a trainer's live log."""

    name: str  # unique; also the value in the run column and in the URL
    kind: str  # "checkpoint" | "log"
    path: Path


def log_stem(path: str | Path) -> str:
    """`lm-rope.log.jsonl` and `lm-rope.safetensors.log.jsonl` both name the run `lm-rope`."""
    name = Path(path).name
    stem = name[: -len(LOG_SUFFIX)] if name.endswith(LOG_SUFFIX) else Path(name).stem
    return stem[: -len(".safetensors")] if stem.endswith(".safetensors") else stem


def find_logs(folder: str | Path) -> list[Path]:
    folder = Path(folder)
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.glob(f"*{LOG_SUFFIX}") if p.is_file())


def catalog(checkpoints: Iterable[tuple[str, Path]], log_folders: Iterable[Path]) -> dict[str, RunSource]:
    """Every choosable run by unique name. Logs are "<run> (log)" (a stable name, whether or not the
    job is still running, so links and selections survive its end); clashes get the folder name."""
    sources: dict[str, RunSource] = {}
    seen_paths: set[Path] = set()

    def add(name: str, kind: str, path: Path) -> None:
        resolved = path.resolve()
        if resolved in seen_paths:
            return
        seen_paths.add(resolved)
        unique, n = name, 1
        while unique in sources:
            n += 1
            unique = f"{name} ({path.parent.name})" if n == 2 else f"{name} ({path.parent.name} {n})"
        sources[unique] = RunSource(unique, kind, path)

    for name, path in checkpoints:
        add(name, "checkpoint", Path(path))
    for folder in dict.fromkeys(Path(f) for f in log_folders):
        for path in find_logs(folder):
            add(f"{log_stem(path)} (log)", "log", path)
    return sources


def is_running(path: str | Path, now: float | None = None, window_s: float = LIVE_WINDOW_S) -> bool:
    """A log written to within the window belongs to a job that is (probably) still training."""
    try:
        modified = os.stat(path).st_mtime
    except OSError:
        return False
    return (time.time() if now is None else now) - modified <= window_s


def file_signature(path: str | Path) -> tuple[int, int]:
    """(mtime in ns, size): a cache key that changes whenever the file does; (0, 0) if it is gone."""
    try:
        stat = os.stat(path)
    except OSError:
        return 0, 0
    return stat.st_mtime_ns, stat.st_size


# --------------------------------------------------------------------------- ready-made comparisons


@dataclass(frozen=True)
class ComparisonPreset:
    patterns: tuple[str, ...]  # fnmatch patterns against checkpoint names
    metric: str  # the metric that tells the story
    story: str  # what is compared: a description, never a result (results come from `comparison_verdicts`)
    pairs: tuple[tuple[str, str], ...] = ()  # (with, without) runs whose final values the caption compares


COMPARISONS: dict[str, ComparisonPreset] = {
    "pretrained vs from scratch": ComparisonPreset(
        ("names-pretrained", "names-scratch", "birth-vanilla-pretrained", "birth-vanilla-scratch"),
        "accuracy", "The same finetuning from a pretrained model and from scratch.",
        pairs=(("names-pretrained", "names-scratch"), ("birth-vanilla-pretrained", "birth-vanilla-scratch"))),
    "positional encodings": ComparisonPreset(
        ("lm-learned", "lm-sinusoidal", "lm-alibi", "lm-rope"),
        "loss", "Same model and data; only the positional scheme differs."),
    "vanilla vs synthesizer": ComparisonPreset(
        ("birth-vanilla-pretrained", "birth-synthesizer-pretrained"),
        "accuracy", "Synthesizer attention learns weights without query-key dot products."),
}


def preset_runs(preset: ComparisonPreset, names: Iterable[str]) -> list[str]:
    """Names matching the preset's patterns, in the preset's order."""
    names = list(names)
    out: list[str] = []
    for pattern in preset.patterns:
        out += [n for n in names if fnmatch.fnmatchcase(n, pattern) and n not in out]
    return out


# --------------------------------------------------------------------------- what the chart shows


@dataclass
class Curve:
    run: str
    split: str
    x: np.ndarray  # drawn raw points (bucketed when the series is long), sorted by x
    y: np.ndarray  # non-finite values are NaN: plotly draws them as gaps
    smooth_x: np.ndarray | None  # None when smoothing is off
    smooth_y: np.ndarray | None
    n_points: int  # before bucketing
    reduced: bool


@dataclass
class BestPoint:
    run: str
    x: float
    y: float
    step: float
    epoch: float


@dataclass
class CurvePlot:
    curves: list[Curve]
    best: list[BestPoint]
    runs: list[str]  # the colour order
    metric: str
    x: str
    smoothing: float
    logy: bool
    webgl: bool
    uirevision: str
    notes: list[str] = field(default_factory=list)  # problems worth a warning
    info: list[str] = field(default_factory=list)  # how the data was drawn


def ordered_metrics(metrics: Iterable[str]) -> list[str]:
    metrics = set(metrics)
    return [m for m in METRIC_ORDER if m in metrics] + sorted(metrics - set(METRIC_ORDER))


def _ordered_splits(splits: Iterable[str]) -> list[str]:
    splits = set(splits)
    return [s for s in SPLITS if s in splits] + sorted(splits - set(SPLITS))


def _best_index(values: np.ndarray, goal: str | None) -> int | None:
    finite = np.isfinite(values)
    if goal is None or not finite.any():
        return None
    masked = np.where(finite, values, np.inf if goal == "min" else -np.inf)
    return int(np.argmin(masked) if goal == "min" else np.argmax(masked))


def build_curves(frame: pd.DataFrame, runs: Sequence[str], metric: str, x: str = "step",
                 smoothing: float = 0.0, logy: bool = False, n_buckets: int = N_BUCKETS) -> CurvePlot:
    """Per run and split: points sorted by x, smoothed (on all points), then bucketed for drawing."""
    if x not in X_AXES:
        raise ValueError(f"Unknown x axis {x!r}; choose one of {', '.join(X_AXES)}.")
    goal = METRIC_GOAL.get(metric)
    plot = CurvePlot([], [], list(runs), metric, x, smoothing, logy, webgl=False,
                     uirevision=f"curves|{metric}|{x}|{'log' if logy else 'linear'}")
    subset = frame[frame["metric"] == metric]
    groups = subset.groupby(["run", "split"], sort=False).indices if not subset.empty else {}
    columns = {c: subset[c].to_numpy(float) for c in dict.fromkeys((x, "value", "step", "epoch"))}
    total = 0
    single: list[str] = []
    for run in runs:
        splits = [s for (r, s) in groups if r == run]
        if not splits:
            plot.notes.append(f"{run} has no '{metric}' records.")
            continue
        for split in _ordered_splits(splits):
            rows = groups[(run, split)]
            xs = columns[x][rows]
            placeable = np.isfinite(xs)
            if not placeable.all():
                plot.notes.append(f"{run} {split}: {int((~placeable).sum())} point(s) have no "
                                  f"{X_AXES[x].lower()} and are left out.")
            rows = rows[placeable]
            xs = xs[placeable]
            if xs.size > 1 and not np.all(xs[1:] >= xs[:-1]):  # smoothing needs x order; logs usually have it
                order = np.argsort(xs, kind="stable")
                rows, xs = rows[order], xs[order]
            ys, steps, epochs = columns["value"][rows], columns["step"][rows], columns["epoch"][rows]
            bad = int((~np.isfinite(ys)).sum())
            if bad:
                plot.notes.append(f"{run} {split}: {bad} NaN/inf value(s), drawn as gaps.")
            if logy and (np.isfinite(ys) & (ys <= 0)).any():
                plot.notes.append(f"{run} {split}: values at or below 0 cannot be drawn on a log scale.")
            ys = np.where(np.isfinite(ys), ys, np.nan)
            smooth = smooth_ema(ys, smoothing) if smoothing > 0 else None
            n = xs.size
            total += n
            reduced = n > 2 * n_buckets + 2
            if reduced:
                dx, dy = bucket_minmax(xs, ys, n_buckets)
                sx, sy = bucket_minmax(xs, smooth, n_buckets) if smooth is not None else (None, None)
            else:
                dx, dy, sx, sy = xs, ys, (xs if smooth is not None else None), smooth
            plot.curves.append(Curve(run, split, dx, dy, sx, sy, n, reduced))
            if split == "val":
                best = _best_index(ys, goal)
                if best is not None:
                    plot.best.append(BestPoint(run, float(xs[best]), float(ys[best]), float(steps[best]),
                                               float(epochs[best])))
            if n == 1:
                single.append(f"{run} {split}")
    plot.webgl = total >= WEBGL_MIN_POINTS
    if single:
        plot.info.append(f"A single point each, drawn as a marker: {', '.join(single)}.")
    if any(c.reduced for c in plot.curves):
        plot.info.append(f"Long curves are drawn with the lowest and highest value of each of {n_buckets:,} "
                         "x-slices, so every spike stays visible; zoomed in, slices are coarser than "
                         "the data. The CSV has every point.")
    return plot


# --------------------------------------------------------------------------- per-run summary


def _last_finite(part: pd.DataFrame) -> float:
    values = part.sort_values("step", kind="stable")["value"].to_numpy(float)
    values = values[np.isfinite(values)]
    return float(values[-1]) if values.size else math.nan


def summarize_runs(frame: pd.DataFrame, runs: Sequence[str], metric: str) -> pd.DataFrame:
    """Final train/val, best val (min or max by metric) with its epoch and step, train - val gap."""
    goal = METRIC_GOAL.get(metric)
    rows = []
    subset = frame[frame["metric"] == metric]
    for run in runs:
        rows_run = subset[subset["run"] == run]
        train, val = rows_run[rows_run["split"] == "train"], rows_run[rows_run["split"] == "val"]
        final_train, final_val = _last_finite(train), _last_finite(val)
        row = {"run": run, "points": len(rows_run), "final train": final_train, "final val": final_val,
               "best val": math.nan, "best at epoch": math.nan, "best at step": math.nan,
               "train - val gap": final_train - final_val}
        best = _best_index(val["value"].to_numpy(float), goal) if not val.empty else None
        if best is not None:
            record = val.iloc[best]
            row.update({"best val": float(record["value"]), "best at epoch": float(record["epoch"]),
                        "best at step": float(record["step"])})
        rows.append(row)
    return pd.DataFrame(rows, columns=["run", "points", "final train", "final val", "best val",
                                       "best at epoch", "best at step", "train - val gap"])


def comparison_verdicts(preset: ComparisonPreset | None, frame: pd.DataFrame, min_points: float = 2.0
                        ) -> list[str]:
    """One sentence per (with, without) pair whose final validation values are in `frame`: both values,
    the difference, and whether it reaches `min_points` percentage points (accuracy; 2 points is about one
    standard error of an accuracy near 50% on 600 questions) or 1% (other metrics)."""
    if preset is None:
        return []
    subset = frame[(frame["metric"] == preset.metric) & (frame["split"] == "val")]
    lines = []
    for with_, without in preset.pairs:
        a, b = (_last_finite(subset[subset["run"] == run]) for run in (with_, without))
        if not (math.isfinite(a) and math.isfinite(b)):
            continue
        if preset.metric == "accuracy":
            # the difference of the numbers as shown, so the sentence adds up for a reader
            diff, shown = round(100 * a, 1) - round(100 * b, 1), (f"{100 * a:.1f}%", f"{100 * b:.1f}%")
            size, unit, clear = f"{diff:+.1f}", " points", abs(diff) >= min_points
        else:
            diff, shown = a - b, (f"{a:.4g}", f"{b:.4g}")
            size, unit, clear = f"{diff:+.3g}", "", abs(diff) >= 0.01 * abs(b)
        goal = METRIC_GOAL.get(preset.metric)
        better = (diff > 0) == (goal == "max")
        verdict = ("better with it" if better else "worse with it") if clear else \
            f"under {min_points:g}{unit or '%'}: no clear difference in these runs"
        lines.append(f"{with_} ends at {shown[0]} validation {preset.metric}, {without} at {shown[1]}: "
                     f"{size}{unit} ({verdict}).")
    return lines
