"""The tidy history table and whole histories read into it, without loading a tensor.

`COLUMNS` (one row per well-formed record, dicts or .jsonl lines, runs named by source), and the readers:
a checkpoint's header, a .jsonl file, an upload. Problems become notes, never exceptions.
"""

from __future__ import annotations

import json
import math
import re
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from core.io.checkpoint import CheckpointError, read_metadata
from core.io.formats import refusal

COLUMNS = ["run", "step", "epoch", "tokens", "wall_time", "split", "metric", "value"]
NUMERIC_COLUMNS = ("step", "epoch", "tokens", "wall_time", "value")
MAX_NAME_CHARS = 80  # run/split/metric strings longer than this are not what a trainer writes


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


def parse_lines(data: bytes) -> tuple[pd.DataFrame, int, bool]:
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


def malformed_note(source: str, count: int) -> list[str]:
    if not count:
        return []
    return [f"{source}: skipped {count} malformed history record{'s' if count != 1 else ''} "
            "(each needs split, metric, step and a numeric value)."]


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


def history_from_metadata(metadata: Mapping[str, Any], source: str) -> LoadedHistory:
    history = metadata.get("history")
    if not isinstance(history, list):
        return LoadedHistory(empty_frame(), [f"{source} carries no training history."])
    frame, malformed = records_frame(history)
    notes = malformed_note(source, malformed)
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
    frame, malformed, partial = parse_lines(data)
    notes = malformed_note(source, malformed)
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
    data = upload.getvalue()
    if suffix not in (".jsonl", ".safetensors"):
        return LoadedHistory(empty_frame(), [refusal(data, set(), "a checkpoint (.safetensors) or a training "
                                                     "history (.jsonl)", Path(filename).name)])
    wanted = {".jsonl": ({"jsonl", "json"}, "a training history (JSON lines)"),
              ".safetensors": ({"safetensors"}, "a checkpoint (.safetensors)")}[suffix]
    wrong = refusal(data, wanted[0], wanted[1], Path(filename).name)
    if wrong:  # by its content, not its name: a renamed table or pickle is told, not half read
        return LoadedHistory(empty_frame(), [wrong])
    if suffix == ".jsonl":
        return parse_jsonl(data, source)
    safe_name = re.sub(r"[^\w.-]", "_", Path(filename).stem)[:100] + ".safetensors"
    with tempfile.TemporaryDirectory(prefix="attention-lab-upload-") as tmp:
        path = Path(tmp) / safe_name
        path.write_bytes(data)
        return read_checkpoint_history(path, source)


# --- the bundled recipes' seeds ------------------------------------------------------------------------------
# A bundled recipe measured at several seeds (core.train.bundle: induction-seed0..2) keeps each seed's history,
# not its weights (checkpoints/ has an 80 MB budget): `<recipe>.seed-histories.json` in the checkpoints folder, one
# line per run, `{"<recipe>-seed<N>": {"step": [...], "epoch": [...], ..., "value": [...]}}` (COLUMNS but run).
# The curves page lists each as a run; runs named so are drawn as one band (bands.seed_groups).
SEED_HISTORIES_SUFFIX = ".seed-histories.json"
HISTORY_FIELDS = [c for c in COLUMNS if c != "run"]


def seed_histories_file(folder: str | Path, recipe: str) -> Path:
    return Path(folder) / f"{recipe}{SEED_HISTORIES_SUFFIX}"


def _read_seed_file(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def write_seed_history(path: str | Path, run: str, history: Iterable[Mapping[str, Any]]) -> None:
    """Add (or replace) one run's history in a seed-histories file, by columns, one line per run."""
    path = Path(path)
    runs = _read_seed_file(path)
    rows = list(history)
    runs[run] = {c: [r.get(c) for r in rows] for c in HISTORY_FIELDS}
    lines = [f"{json.dumps(name)}: {json.dumps(runs[name], separators=(',', ':'), allow_nan=True)}"
             for name in sorted(runs)]
    path.write_text("{\n" + ",\n".join(lines) + "\n}\n", encoding="utf-8")


def seed_history_runs(folder: str | Path) -> list[tuple[str, Path]]:
    """(run, its file) for every run of every seed-histories file in `folder`, in name order."""
    folder = Path(folder)
    if not folder.is_dir():
        return []
    out = []
    for path in sorted(folder.glob(f"*{SEED_HISTORIES_SUFFIX}")):
        if path.is_file() and not path.is_symlink():
            out += [(run, path) for run in sorted(_read_seed_file(path)) if _name(run)]
    return out


def read_seed_history(path: str | Path, run: str, source: str | None = None) -> LoadedHistory:
    """One run of a seed-histories file as the tidy table, named `source` (default: the run)."""
    source = source or run
    columns = _read_seed_file(Path(path)).get(run)
    if not isinstance(columns, dict) or not all(isinstance(columns.get(c), list) for c in ("step", "value")):
        return LoadedHistory(empty_frame(), [f"{source}: no history in {Path(path).name}."])
    length = len(columns["step"])
    records = [{c: (columns[c][i] if isinstance(columns.get(c), list) and i < len(columns[c]) else None)
                for c in HISTORY_FIELDS} for i in range(length)]
    frame, malformed = records_frame(records)
    return LoadedHistory(label_runs(frame, source), malformed_note(source, malformed))
