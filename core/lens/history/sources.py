"""Runs other tools wrote, read into the curves page's tidy table (`records.COLUMNS`).

One reader per source, each with the ecosystem's own conventions:
- TensorBoard event files (`events.out.tfevents.*`: torch's SummaryWriter, Lightning's default logger), through
  TensorBoard's data server where it runs (data_server.py, `fast_event_tables`), else the `tensorboard` package's
  own record reader (event_files.py); every folder holding event files is one run, as in TensorBoard; tags
  filtered by a regular expression, as its tag filter does;
- a Hugging Face Trainer folder: `trainer_state.json`'s `log_history`, its `checkpoint-N/` folders as saved steps,
  and the TensorBoard log under its `runs/` as the same run (wall times, and the points after the state was saved);
- Lightning's `CSVLogger` (`metrics.csv`, sparse rows), Keras's `CSVLogger`, a W&B panel's CSV export, a plain
  CSV/TSV with a step or epoch column;
- nanoGPT's `train.py` printout saved to a file;
- an MLflow `mlruns/` folder (one file per metric: `timestamp value step` per line);
- this lab's own checkpoints and `.log.jsonl` logs (records.py).

`read_paths` walks files and folders and returns one `RunsRead`: the table, a sentence per problem, the names
not mapped onto the page's metrics (metric_names.py) and the saved steps. Bad input is told, never raised.
Wall times are seconds since 1970 where the source wrote a clock (TensorBoard, MLflow), as in TensorBoard.
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import math
import os
import re
import struct
import zipfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from core.lens.history.event_files import NO_TENSORBOARD, read_scalars, tensorboard_available
from core.lens.history.metric_names import is_axis, map_metric
from core.lens.history.records import COLUMNS, empty_frame, parse_jsonl, read_checkpoint_history

EVENT_FILE = "events.out.tfevents."  # TensorBoard's file name prefix: event_files.py reads them
TRAINER_STATE = "trainer_state.json"
CHECKPOINT_DIR = re.compile(r"^checkpoint-(\d+)$")
TEXT_SUFFIXES = (".log", ".txt", ".out")
TABLE_SUFFIXES = (".csv", ".tsv")
MAX_RUNS = 500  # runs read from one folder; more are counted and named in a sentence
MAX_FILES_WALKED = 50_000
MAX_TEXT_BYTES = 512 * 1024 * 1024
MAX_ZIP_BYTES = 1024 * 1024 * 1024  # uncompressed, all members together
MAX_ZIP_MEMBERS = 20_000
STEP_COLUMNS = ("step", "steps", "global_step", "trainer/global_step", "iteration", "iter", "_step")
EPOCH_COLUMNS = ("epoch", "epochs")
TIME_COLUMNS = ("wall_time", "time", "timestamp", "_timestamp", "created_at")
WANDB_COLUMN = re.compile(r"^(?P<run>.+?) - (?P<metric>.+?)(?P<band>__MIN|__MAX)?$")
NANO_ITER = re.compile(r"^iter (\d+): loss ([-+\w.]+), time ([-+\w.]+)ms(?:, mfu ([-+\w.]+)%)?")
NANO_EVAL = re.compile(r"^step (\d+): train loss ([-+\w.]+), val loss ([-+\w.]+)")
TRAINER_SUMMARY_KEYS = ("train_runtime", "total_flos")  # the Trainer's last entry: averages over the whole run


@dataclass(frozen=True)
class SavedStep:
    """A step whose weights were saved: a Trainer's `checkpoint-N/` or one of a series of nanoGPT checkpoints."""

    run: str
    step: int
    path: Path
    kind: str  # "huggingface" | "nanogpt"
    log: Path | None = None  # the printout that named it (nanoGPT)


@dataclass
class RunsRead:
    """What the readers found: the tidy table (records.COLUMNS), sentences for the user, names kept unmapped
    (name -> the runs that logged it), saved steps, and each run's kind of source."""

    frame: pd.DataFrame
    notes: list[str] = field(default_factory=list)
    unmapped: dict[str, list[str]] = field(default_factory=dict)
    saved: list[SavedStep] = field(default_factory=list)
    kinds: dict[str, str] = field(default_factory=dict)  # run -> "TensorBoard", "Hugging Face Trainer", ...

    @property
    def runs(self) -> list[str]:
        return list(pd.unique(self.frame["run"])) if not self.frame.empty else []

    def summary(self) -> list[str]:
        """What was found, one line each: runs and their sources, points, metrics mapped and not mapped."""
        lines = []
        for run in self.runs:
            part = self.frame[self.frame["run"] == run]
            shown = sorted(set(part["split"] + " " + part["metric"]))
            lines.append(f"{run} ({self.kinds.get(run, 'file')}): {len(part):,} points; "
                         + ", ".join(shown[:12]) + (f" and {len(shown) - 12} more" if len(shown) > 12 else ""))
        if self.unmapped:
            lines.append("Kept under their own names (not mapped to loss, accuracy, perplexity or learning rate): "
                         + ", ".join(sorted(self.unmapped)) + ".")
        saved = {}
        for s in self.saved:
            saved.setdefault(s.run, []).append(s.step)
        for run, steps in saved.items():
            lines.append(f"{run}: saved steps {', '.join(f'{s:,}' for s in sorted(steps))}.")
        return lines


class _Builder:
    """Rows for one run, mapped by name; the unmapped names remembered."""

    def __init__(self, run: str, kind: str, out: RunsRead) -> None:
        self.run, self.kind, self.out = run, kind, out
        self.parts: list[pd.DataFrame] = []

    def add(self, name: str, step, value, epoch=None, wall_time=None, tokens=None) -> None:
        """One logged name's points (arrays or scalars, broadcast), mapped onto (split, metric)."""
        mapped = map_metric(name)
        if not mapped.mapped:
            self.out.unmapped.setdefault(mapped.metric, [])
            if self.run not in self.out.unmapped[mapped.metric]:
                self.out.unmapped[mapped.metric].append(self.run)
        value = np.atleast_1d(np.asarray(value, dtype=float))
        n = value.size

        def column(v) -> np.ndarray:
            return np.full(n, np.nan) if v is None else np.broadcast_to(np.asarray(v, dtype=float), (n,))

        self.parts.append(pd.DataFrame({"run": self.run, "step": column(step), "epoch": column(epoch),
                                        "tokens": column(tokens), "wall_time": column(wall_time),
                                        "split": mapped.split, "metric": mapped.metric, "value": value}))

    def finish(self) -> None:
        if not self.parts:
            return
        frame = pd.concat(self.parts, ignore_index=True)[COLUMNS]
        frame["run"] = frame["run"].astype(object)
        self.out.kinds[self.run] = self.kind
        self.out.frame = frame if self.out.frame.empty else pd.concat([self.out.frame, frame], ignore_index=True)


# --- TensorBoard -----------------------------------------------------------------------------------------

def read_event_files(run: str, files: Sequence[Path], out: RunsRead, tag_filter: re.Pattern | None = None,
                     followers: dict | None = None, table: pd.DataFrame | None = None) -> None:
    """One TensorBoard run: every event file of one folder, merged (a restarted job writes a second file).
    `table` (tag, step, wall, value): the run's scalars as the data server read them; without it, the Python
    reader reads the files."""
    if not tensorboard_available():
        if NO_TENSORBOARD not in out.notes:
            out.notes.append(NO_TENSORBOARD)
        return
    builder = _Builder(run, "TensorBoard", out)
    if table is None:
        table, notes = read_scalars(run, files, followers)
        out.notes += notes
    if table.empty:
        out.notes.append(f"{run}: the event files hold no scalars.")
        return
    groups = table.groupby("tag", sort=False).indices
    epoch_tag = next((t for t in groups if is_axis(t) and "epoch" in t.lower()), None)
    epoch_at = None
    if epoch_tag is not None:  # the Trainer logs `train/epoch`: an x axis for every curve of the run
        e = table.iloc[groups[epoch_tag]].sort_values("step")
        epoch_at = (e["step"].to_numpy(), e["value"].to_numpy())
    hidden = 0
    for tag, rows in groups.items():
        if is_axis(tag):
            continue
        if tag_filter is not None and not tag_filter.search(tag):
            hidden += 1
            continue
        part = table.iloc[rows]
        step = part["step"].to_numpy()
        epoch = None if epoch_at is None else np.interp(step, *epoch_at, left=np.nan, right=np.nan)
        builder.add(tag, step, part["value"].to_numpy(), epoch=epoch, wall_time=part["wall"].to_numpy())
    if hidden:
        out.notes.append(f"{run}: {hidden} tag(s) hidden by the tag filter.")
    builder.finish()


def fast_event_tables(root: Path, runs: Sequence[_Found], out: RunsRead) -> dict[Path, pd.DataFrame]:
    """The scalars of a folder's TensorBoard runs as TensorBoard's data server reads them (data_server.py), by run
    folder: (tag, step, wall, value), tags in the order first written, each tag's points in step order (the file's
    order: a run's steps rise). A run is left to the Python reader (absent here) where the two could differ or the
    server did not read it whole: more than one event file (a restarted job: the server keeps only the last value
    written at a step, TensorBoard's preemption, and the Python reader keeps both), another `*tfevents*` file or a
    link beside them (the server would read it), a file whose last record is cut off (the server stops there
    silently; the Python reader says at which byte), a file the server logged it could not open or read whole, a
    tag the server kept no value of (64-bit tensors: it keeps 32-bit ones only), a run it did not find, a run whose
    file changed since the folder's server loaded it (a job still writing: the Python reader follows it). Where the
    server cannot run, one sentence says so.

    Not told apart (known to differ): within one file, a step written again or going back (`add_scalar(tag, v)`
    with no step, a step that counts epochs). The server keeps TensorBoard's meaning, the last value written from
    that step on (its reservoir's preemption: what TensorBoard draws); the Python reader keeps every record. The
    server says nothing of it, and telling would mean parsing every record in Python, which is what it replaces."""
    if not runs or not tensorboard_available():
        return {}
    from core.lens.history import data_server

    root = Path(os.path.abspath(root))
    candidates: dict[str, _Found] = {}
    for item in runs:
        folder = Path(os.path.abspath(item.path))
        try:
            beside = [e for e in os.scandir(folder) if "tfevents" in e.name and not e.is_dir(follow_symlinks=False)]
        except OSError:
            continue
        names = {Path(f).name for f in item.files}
        if len(item.files) != 1 or any(e.is_symlink() or e.name not in names for e in beside):
            continue
        candidates[Path(os.path.relpath(folder, root)).as_posix()] = item
    if not candidates:
        return {}
    files = {key: Path(os.path.abspath(item.files[0])) for key, item in candidates.items()}
    signature: dict[str, tuple[int, int]] = {}  # run -> its file's (size, modification ns) before the server loads
    for key, path in files.items():
        with contextlib.suppress(OSError):
            stat = path.stat()
            signature[key] = (stat.st_size, stat.st_mtime_ns)

    def unchanged(loaded: dict) -> set[str]:
        return {k for k, v in signature.items() if loaded.get(k) == v}

    whole = {key: _frames_whole(path) for key, path in files.items()}
    try:
        # the folder's server is kept while any run's file is as it loaded it: runs changed since (a job still
        # writing) and new ones are the Python reader's, which reads a growing file on from where it stopped
        with data_server.reading(root, signature, keep=lambda loaded: bool(unchanged(loaded))) as server:
            current = unchanged(server.signature)
            listed = server.runs()
            got = server.read([k for k in candidates if k in listed and k in current])
            warnings = list(server.warnings)
    except data_server.Unavailable as exc:
        if str(exc) not in out.notes:
            out.notes.append(str(exc))
        return {}
    tables = {}
    for key, item in candidates.items():
        file = str(files[key])
        named = [w for w in warnings if file in w]
        unplaced = [w for w in warnings if str(root) not in w]  # a warning naming no file here: it may be any run
        scalars = got.get(key)
        if (not whole[key] or named or unplaced or key not in listed or key not in current
                or (scalars is not None and any(len(v[0]) == 0 for v in scalars.tags.values()))):
            continue
        parts = sorted((scalars.tags if scalars else {}).items(),
                       key=lambda kv: (kv[1][1][0] if len(kv[1][1]) else math.inf, kv[0]))
        tables[item.path] = pd.DataFrame({
            "tag": np.repeat(np.asarray([t for t, _ in parts], dtype=object), [len(v[0]) for _, v in parts]),
            "step": np.concatenate([v[0] for _, v in parts]).astype(float) if parts else np.empty(0),
            "wall": np.concatenate([v[1] for _, v in parts]) if parts else np.empty(0),
            "value": np.concatenate([v[2] for _, v in parts]) if parts else np.empty(0)})
    return tables


TAIL_WINDOW = 1 << 16  # bytes searched from a file's end for its last record (a scalar's record is ~50 bytes)


def _frames_whole(path: Path) -> bool:
    """Whether an event file ends with a whole record, which the server's silence does not tell (it skips a cut-off
    last record without a word; a damaged one it logs). A record is its length (8 bytes, little-endian), that
    length's masked CRC-32C (4), the data and the data's CRC (4): the file is whole where, within its last
    TAIL_WINDOW bytes, a length ends a record exactly at the last byte and its CRC checks; a file whose last record
    is longer than that is walked record by record from its start."""
    try:
        with open(path, "rb") as handle:
            size = os.fstat(handle.fileno()).st_size
            start = max(0, size - TAIL_WINDOW)
            handle.seek(start)
            tail = handle.read()
    except OSError:
        return False
    if size == 0:
        return True
    if len(tail) != size - start:  # written to meanwhile: the next read (a new signature) looks again
        return False
    if _ends_on_a_record(tail, size - start):
        return True
    return start > 0 and _walk_records(path)


def _ends_on_a_record(tail: bytes, size: int) -> bool:
    from tensorboard.compat.tensorflow_stub.pywrap_tensorflow import masked_crc32c

    from core.lens.history.event_files import checksums_in_c

    checksums_in_c()
    for align in range(8):  # each offset's 8 bytes as one number, vectorised over offsets with the same alignment
        count = (len(tail) - align) // 8
        if count <= 0:
            continue
        offsets = align + 8 * np.arange(count, dtype=np.int64)
        fits = offsets + 16 <= size
        lengths = np.frombuffer(tail, dtype="<u8", count=count, offset=align)[fits]
        offsets = offsets[fits]
        for offset in offsets[lengths == (size - 16 - offsets).astype(np.uint64)]:
            o = int(offset)
            if masked_crc32c(tail[o:o + 8]) == struct.unpack_from("<I", tail, o + 8)[0]:
                return True
    return False


def _walk_records(path: Path) -> bool:
    try:
        data = path.read_bytes()
    except OSError:
        return False
    size, offset = len(data), 0
    length_at = struct.Struct("<Q").unpack_from
    while offset + 12 <= size:
        offset += length_at(data, offset)[0] + 16
    return offset == size


# --- Hugging Face Trainer ---------------------------------------------------------------------------------

def _trainer_state(data: bytes, where: str) -> tuple[list[dict], str | None]:
    """(log_history entries, None) or ([], one sentence)."""
    try:
        state = json.loads(data.decode("utf-8"))
    except UnicodeDecodeError:
        return [], f"{where} is not UTF-8 text, so it is not a trainer state."
    except (ValueError, RecursionError):
        return [], f"{where} is not valid JSON, so it is not a trainer state."
    if not isinstance(state, dict) or not isinstance(state.get("log_history"), list):
        return [], (f"{where} is JSON but not a Hugging Face trainer state (it has no log_history list).")
    return [e for e in state["log_history"] if isinstance(e, dict)], None


def trainer_key(tag: str) -> str:
    """The log_history key a Trainer's TensorBoard tag was written from (transformers' `rewrite_logs`, undone):
    `eval/X` <- `eval_X`, `test/X` <- `test_X`, `train/X` <- `X`."""
    for prefix in ("eval", "test"):
        if tag.startswith(prefix + "/"):
            return f"{prefix}_{tag[len(prefix) + 1:]}"
    return tag.removeprefix("train/")


def read_trainer_state(run: str, data: bytes, out: RunsRead, where: str, events: pd.DataFrame | None = None) -> None:
    """A Trainer's log_history as one run. `events` (tag, step, wall, value): the TensorBoard log the same run wrote
    under its `runs/` (its TensorBoardCallback logs the same entries): the same points, so not a run of their own;
    they give each point its wall time, and the points logged after the state was saved (a checkpoint's state is
    written at the save; the TensorBoard log goes on to the last step) are added from them."""
    entries, problem = _trainer_state(data, where)
    if problem:
        out.notes.append(problem)
        return
    builder = _Builder(run, "Hugging Face Trainer", out)
    columns: dict[str, list[tuple[float, float, float, float]]] = {}
    clock: dict[tuple[str, float], float] = {}
    if events is not None and not events.empty:
        keys = [trainer_key(t) for t in events["tag"]]
        clock = dict(zip(zip(keys, events["step"].to_numpy(float)), events["wall"].to_numpy(float)))
    skipped = 0
    last_step = -math.inf
    for entry in entries:
        step, epoch = entry.get("step"), entry.get("epoch")
        if not isinstance(step, (int, float)) or isinstance(step, bool):
            skipped += 1
            continue
        last_step = max(last_step, float(step))
        summary = any(k in entry for k in TRAINER_SUMMARY_KEYS)
        for key, value in entry.items():
            if key in ("step", "epoch") or isinstance(value, bool) or not isinstance(value, (int, float)):
                continue
            # the last entry's train_loss is the run's average, not a point of the curve: its own name
            name = f"{key} (whole run)" if summary and key == "train_loss" else key
            columns.setdefault(name, []).append(
                (float(step), float(epoch) if isinstance(epoch, (int, float)) else math.nan, float(value),
                 clock.get((key, float(step)), math.nan)))
    added = _trainer_events_after(events, last_step, columns) if events is not None else 0
    for name, points in columns.items():
        array = np.asarray(points, dtype=float)
        wall = None if np.isnan(array[:, 3]).all() else array[:, 3]
        builder.add(name, array[:, 0], array[:, 2], epoch=array[:, 1], wall_time=wall)
    if skipped:
        out.notes.append(f"{where}: {skipped} log_history entr{'ies' if skipped != 1 else 'y'} without a step "
                         "skipped.")
    if added:
        out.notes.append(f"{run}: {added:,} point(s) logged after {where} was saved, from the run's TensorBoard log.")
    if not columns:
        out.notes.append(f"{where} has an empty log_history: nothing logged yet.")
    builder.finish()


def _trainer_events_after(events: pd.DataFrame, last_step: float, columns: dict) -> int:
    """The Trainer's TensorBoard points after the state's last step, into `columns` under log_history's names."""
    later = events[events["step"].to_numpy(float) > last_step]
    if later.empty:
        return 0
    keys = [trainer_key(t) for t in later["tag"]]
    steps, values, walls = later["step"].to_numpy(float), later["value"].to_numpy(float), later["wall"].to_numpy(float)
    epochs: dict[float, float] = {}
    for key, step, value in zip(keys, steps, values):
        if key == "epoch":  # the first at a step (the Trainer logs the same epoch with every entry of a step)
            epochs.setdefault(step, value)
    summary_steps = {s for k, s in zip(keys, steps) if k in TRAINER_SUMMARY_KEYS}
    added = 0
    for key, step, value, wall in zip(keys, steps, values, walls):
        if key == "epoch":
            continue
        name = f"{key} (whole run)" if key == "train_loss" and step in summary_steps else key
        columns.setdefault(name, []).append((step, epochs.get(step, math.nan), value, wall))
        added += 1
    return added


def trainer_saved_steps(run: str, folder: Path) -> list[SavedStep]:
    """The `checkpoint-N/` folders that hold weights (a config and a weights file)."""
    saved = []
    for child in sorted(folder.iterdir()) if folder.is_dir() else []:
        match = CHECKPOINT_DIR.match(child.name)
        if match and child.is_dir() and (child / "config.json").is_file() and any(
                (child / f).is_file() for f in ("model.safetensors", "model.safetensors.index.json")):
            saved.append(SavedStep(run, int(match.group(1)), child, "huggingface"))
    return sorted(saved, key=lambda s: s.step)


def trainer_state_file(folder: Path) -> Path | None:
    """The output folder's trainer_state.json, else the newest checkpoint's (it holds the log up to there)."""
    if (folder / TRAINER_STATE).is_file():
        return folder / TRAINER_STATE
    steps = [(int(m.group(1)), c) for c in folder.iterdir() if (m := CHECKPOINT_DIR.match(c.name))
             and (c / TRAINER_STATE).is_file()] if folder.is_dir() else []
    return max(steps)[1] / TRAINER_STATE if steps else None


# --- text: CSV / TSV tables and nanoGPT printouts -------------------------------------------------------------

def _decode(data: bytes, where: str, out: RunsRead) -> str:
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        out.notes.append(f"{where} is not UTF-8 text (first bad byte at {exc.start:,}); unreadable characters "
                         "were replaced.")
        return data.decode("utf-8", errors="replace")


def _table(text: str, where: str, out: RunsRead, tsv: bool) -> pd.DataFrame | None:
    first = text.split("\n", 1)[0]
    sep = "\t" if tsv or ("\t" in first and "," not in first) else ","
    try:
        # only an empty cell is missing (Lightning's sparse rows); a written "nan" is a value, drawn as a gap
        table = pd.read_csv(io.StringIO(text), sep=sep, low_memory=False, keep_default_na=False, na_values=[""])
    except (pd.errors.ParserError, pd.errors.EmptyDataError, csv.Error, ValueError) as exc:
        out.notes.append(f"{where} is not a readable table ({str(exc).splitlines()[0][:120]}).")
        return None
    if table.empty:
        out.notes.append(f"{where} has a header but no rows.")
        return None
    return table


def _numeric(series: pd.Series) -> np.ndarray:
    return pd.to_numeric(series, errors="coerce").to_numpy(dtype=float)


def _find(columns: Iterable[str], names: Sequence[str]) -> str | None:
    lower = {str(c).strip().lower(): c for c in columns}
    return next((lower[n] for n in names if n in lower), None)


def read_table(run: str, data: bytes, out: RunsRead, where: str, kind: str | None = None, tsv: bool = False) -> None:
    """A CSV/TSV of metrics: a W&B panel export (`Step`, `RUN - metric`), Lightning's or Keras's CSVLogger, or
    any table with a step or epoch column and one column per metric (sparse rows allowed: empty cells skipped)."""
    text = _decode(data, where, out)
    table = _table(text, where, out, tsv)
    if table is None:
        return
    columns = [str(c) for c in table.columns]
    table.columns = columns
    step_col, epoch_col = _find(columns, STEP_COLUMNS), _find(columns, EPOCH_COLUMNS)
    time_col = _find(columns, TIME_COLUMNS)
    if step_col is None and epoch_col is None:
        out.notes.append(f"{where} has no step or epoch column (its columns: {', '.join(columns[:8])}"
                         f"{'…' if len(columns) > 8 else ''}), so its rows cannot be placed on a curve.")
        return
    wandb = [c for c in columns if WANDB_COLUMN.match(c) and c not in (step_col, epoch_col)]
    if wandb and len(wandb) == len([c for c in columns if c not in (step_col, epoch_col, time_col)]):
        _read_wandb(table, step_col, epoch_col, wandb, out, where)
        return
    if kind is None:
        kind = ("Keras CSVLogger" if step_col is None and columns[0] == "epoch" else "CSV")
    builder = _Builder(run, kind, out)
    step = _numeric(table[step_col]) if step_col else None
    epoch = _numeric(table[epoch_col]) if epoch_col else None
    wall = _numeric(table[time_col]) if time_col else None
    dropped = []
    for name in columns:
        if name in (step_col, epoch_col, time_col):
            continue
        values = _numeric(table[name])
        present = table[name].notna().to_numpy()
        if not present.any():
            continue
        text_cells = present & ~np.isfinite(values) & ~table[name].astype(str).str.strip().str.lower().isin(
            ["nan", "inf", "-inf", "+inf", "infinity", "-infinity"]).to_numpy()
        if text_cells.all():
            dropped.append(name)
            continue
        keep = present & ~text_cells
        builder.add(name, step[keep] if step is not None else None, values[keep],
                    epoch=epoch[keep] if epoch is not None else None, wall_time=wall[keep] if wall is not None
                    else None)
    if dropped:
        out.notes.append(f"{where}: column(s) {', '.join(dropped[:6])} hold text, not numbers, and are not drawn.")
    builder.finish()


def _read_wandb(table: pd.DataFrame, step_col: str | None, epoch_col: str | None, columns: list[str],
                out: RunsRead, where: str) -> None:
    """A W&B panel's export: one `RUN - metric` column per run; its `__MIN`/`__MAX` columns are W&B's band over
    the points it sampled, not logged values: counted in a note, not drawn."""
    x = _numeric(table[step_col or epoch_col])
    builders: dict[str, _Builder] = {}
    bands = 0
    for name in columns:
        match = WANDB_COLUMN.match(name)
        if match.group("band"):
            bands += 1
            continue
        run = match.group("run").strip()
        builder = builders.setdefault(run, _Builder(run, "W&B export", out))
        values = _numeric(table[name])
        keep = table[name].notna().to_numpy()
        if step_col:
            builder.add(match.group("metric"), x[keep], values[keep])
        else:
            builder.add(match.group("metric"), None, values[keep], epoch=x[keep])
    for builder in builders.values():
        builder.finish()
    if bands:
        out.notes.append(f"{where}: {bands} __MIN/__MAX column(s) (W&B's band over its sampled points) are not "
                         "drawn; the seed band here is computed from the runs themselves.")


def looks_like_nanogpt(text: str) -> bool:
    return any(NANO_ITER.match(line) or NANO_EVAL.match(line) for line in text.splitlines()[:5000])


def read_nanogpt_log(run: str, data: bytes, out: RunsRead, where: str) -> None:
    """nanoGPT's printout: `iter N: loss X, time T ms, mfu M%` (one batch's loss: the training curve, plus
    `time_ms` and `mfu` under their own names) and `step N: train loss X, val loss Y` (estimates over
    eval_iters batches: validation loss, and `train loss (eval)` beside the per-batch curve)."""
    text = _decode(data, where, out)
    iters: list[tuple[float, ...]] = []
    evals: list[tuple[float, ...]] = []
    for line in text.splitlines():
        line = line.strip()
        if match := NANO_ITER.match(line):
            iters.append(tuple(_float(g) for g in match.groups()))
        elif match := NANO_EVAL.match(line):
            evals.append(tuple(_float(g) for g in match.groups()))
    if not iters and not evals:
        out.notes.append(f"{where} has no nanoGPT lines (`iter N: loss X, ...` or `step N: train loss X, val "
                         "loss Y`).")
        return
    builder = _Builder(run, "nanoGPT log", out)
    if iters:
        a = np.asarray(iters, dtype=float)
        builder.add("loss", a[:, 0], a[:, 1])
        builder.add("time_ms", a[:, 0], a[:, 2])
        if np.isfinite(a[:, 3]).any():
            keep = np.isfinite(a[:, 3])
            builder.add("mfu", a[keep, 0], a[keep, 3])
    if evals:
        a = np.asarray(evals, dtype=float)
        builder.add("val loss", a[:, 0], a[:, 2])
        builder.add("train loss (eval)" if iters else "train loss", a[:, 0], a[:, 1])
    builder.finish()


NANO_SAVE = re.compile(r"^saving checkpoint to (.+?)\s*$")
NUMBERED_CKPT = re.compile(r"(\d+)\.pt$")


def nanogpt_saved_steps(run: str, log: Path, text: str) -> list[SavedStep]:
    """The checkpoints a nanoGPT run kept, found beside its printout and in the out_dir it names (`saving
    checkpoint to out-shakespeare-char`): a file named with its iteration (`ckpt_2000.pt`, `ckpt-2000.pt`) at that
    step, and `ckpt.pt` (nanoGPT overwrites it at every save) at the step the last save line follows. Nothing is
    loaded; links are not followed."""
    last_eval, saved_at, out_dirs = None, None, []
    for line in text.splitlines():
        line = line.strip()
        if match := NANO_EVAL.match(line):
            last_eval = int(match.group(1))
        elif match := NANO_SAVE.match(line):
            saved_at = last_eval
            out_dirs.append(match.group(1))
    folders = [log.parent]
    for name in dict.fromkeys(out_dirs):
        candidate = log.parent / name
        if ".." not in Path(name).parts and not Path(name).is_absolute() and candidate.is_dir() \
                and not candidate.is_symlink():
            folders.append(candidate)
    found: dict[int, SavedStep] = {}
    for folder in folders:
        for path in sorted(folder.glob("*.pt")):
            if path.is_symlink() or not path.is_file():
                continue
            if match := NUMBERED_CKPT.search(path.name):
                found.setdefault(int(match.group(1)), SavedStep(run, int(match.group(1)), path, "nanogpt", log))
            elif path.name == "ckpt.pt" and saved_at is not None:
                found.setdefault(saved_at, SavedStep(run, saved_at, path, "nanogpt", log))
    return [found[step] for step in sorted(found)]


def _float(text: str | None) -> float:
    try:
        return float(text) if text is not None else math.nan
    except ValueError:
        return math.nan


# --- MLflow -----------------------------------------------------------------------------------------------

def mlflow_run_name(folder: Path) -> str:
    try:
        name = (folder / "tags" / "mlflow.runName").read_text("utf-8").strip()
    except (OSError, UnicodeDecodeError):
        name = ""
    return name[:80] or folder.name


def read_mlflow_run(run: str, folder: Path, out: RunsRead) -> None:
    """`metrics/<name>` files (names may hold `/`, as nested folders): `timestamp_ms value step` per line."""
    builder = _Builder(run, "MLflow", out)
    metrics = folder / "metrics"
    bad = 0
    for path in sorted(p for p in metrics.rglob("*") if p.is_file() and not p.is_symlink()):
        name = path.relative_to(metrics).as_posix()
        rows = []
        for line in _decode(_read_bytes(path, out), f"{run}/{name}", out).splitlines():
            parts = line.split()
            if len(parts) < 2:
                bad += bool(line.strip())
                continue
            stamp, value = _float(parts[0]), _float(parts[1])
            step = _float(parts[2]) if len(parts) > 2 else 0.0
            if not math.isfinite(stamp) or not math.isfinite(step):
                bad += 1
                continue
            rows.append((step, value, stamp / 1000.0))
        if rows:
            a = np.asarray(rows, dtype=float)
            builder.add(name, a[:, 0], a[:, 1], wall_time=a[:, 2])
    if bad:
        out.notes.append(f"{run}: skipped {bad} MLflow metric line(s) that are not `timestamp value step`.")
    builder.finish()


def _read_bytes(path: Path, out: RunsRead, limit: int = MAX_TEXT_BYTES) -> bytes:
    try:
        size = path.stat().st_size
        with path.open("rb") as handle:
            data = handle.read(limit)
    except OSError as exc:
        out.notes.append(f"{path.name} could not be read ({exc.strerror or exc}).")
        return b""
    if size > limit:
        out.notes.append(f"{path.name} is {size / 1e6:,.0f} MB; only its first {limit / 1e6:,.0f} MB were read.")
    return data


# --- finding runs in a folder ---------------------------------------------------------------------------------

@dataclass
class _Found:
    kind: str  # "tensorboard" | "trainer" | "mlflow" | "table" | "lightning" | "nanogpt" | "jsonl" | "checkpoint"
    path: Path  # the run's folder (tensorboard, trainer, mlflow) or file
    files: list[Path] = field(default_factory=list)


def find_runs(root: Path) -> tuple[list[_Found], int]:
    """Every run under `root` (a folder) in path order, and how many files were left unlooked-at (0 unless the
    folder holds over MAX_FILES_WALKED files). Trainer checkpoint folders belong to their output folder, and so do
    the event files under its `runs/` (the same run's TensorBoard log); an MLflow run's files to the run; any other
    folder with event files is one TensorBoard run."""
    found: list[_Found] = []
    events: dict[Path, list[Path]] = {}
    walked = skipped = 0
    claimed: set[Path] = set()
    for folder, dirs, files in os.walk(root):
        here = Path(folder)
        dirs.sort()
        if any(c in here.parents or c == here for c in claimed):
            dirs[:] = []
            continue
        if walked > MAX_FILES_WALKED:
            skipped += len(files)
            continue
        walked += len(files)
        names = set(files)
        if "meta.yaml" in names and (here / "metrics").is_dir():  # an MLflow run
            found.append(_Found("mlflow", here))
            claimed.add(here)
            dirs[:] = []
            continue
        checkpoints = [d for d in dirs if CHECKPOINT_DIR.match(d)]
        if TRAINER_STATE in names and not CHECKPOINT_DIR.match(here.name) or (
                checkpoints and any((here / d / TRAINER_STATE).is_file() for d in checkpoints)):
            found.append(_Found("trainer", here))
            dirs[:] = [d for d in dirs if not CHECKPOINT_DIR.match(d)]
            names.discard(TRAINER_STATE)
        for name in sorted(names):
            path = here / name
            lower = name.lower()
            if path.is_symlink():  # a link could lead out of the folder someone allowed: not followed
                continue
            if name.startswith(EVENT_FILE):
                events.setdefault(here, []).append(path)
            elif lower.endswith(TABLE_SUFFIXES):
                kind = "lightning" if name == "metrics.csv" and (here / "hparams.yaml").is_file() else "table"
                found.append(_Found(kind, path))
            elif lower.endswith(".jsonl"):
                found.append(_Found("jsonl", path))
            elif lower.endswith(".safetensors") and not lower.endswith(".snapshots.safetensors") and \
                    not (here / "config.json").is_file():
                found.append(_Found("checkpoint", path))
            elif lower.endswith(TEXT_SUFFIXES):
                found.append(_Found("nanogpt", path))
    trainers = [f for f in found if f.kind == "trainer"]
    for folder, files in events.items():
        owner = next((t for t in trainers if t.path / "runs" == folder or t.path / "runs" in folder.parents), None)
        if owner is not None:  # the Trainer's own TensorBoard log (TensorBoardCallback's `runs/`): the same run
            owner.files += files
            continue
        found.append(_Found("tensorboard", folder, files))
    found.sort(key=lambda f: str(f.path))
    return found, skipped


def run_name(root: Path, path: Path, label: str) -> str:
    """`label` for the root itself, else `label/relative path` (a file's suffix dropped)."""
    try:
        relative = path.relative_to(root)
    except ValueError:
        return path.name
    if relative == Path("."):
        return label
    text = relative.as_posix()
    for suffix in (".log.jsonl", ".csv", ".tsv", ".log", ".txt", ".out", ".jsonl", ".safetensors"):
        if text.lower().endswith(suffix):
            text = text[: -len(suffix)]
            break
    return f"{label}/{text}"


def read_found(found: _Found, run: str, out: RunsRead, tag_filter: re.Pattern | None = None,
               followers: dict | None = None, table: pd.DataFrame | None = None) -> None:
    kind, path = found.kind, found.path
    if kind == "tensorboard":
        read_event_files(run, found.files, out, tag_filter, followers, table)
    elif kind == "trainer":
        state = trainer_state_file(path)
        if state is not None and state.is_symlink():
            state = None  # a link could lead out of the folder someone allowed
        if state is None and found.files:  # no state to read: its TensorBoard log is the run
            read_event_files(run, found.files, out, tag_filter, followers)
        elif state is None:
            out.notes.append(f"{run}: a Trainer folder without a trainer_state.json yet.")
        else:
            events = None
            if found.files and tensorboard_available():
                events, notes = read_scalars(run, found.files)
                out.notes += notes
            read_trainer_state(run, _read_bytes(state, out), out, f"{run}/{state.relative_to(path).as_posix()}",
                               events)
        out.saved += trainer_saved_steps(run, path)
    elif kind == "mlflow":
        read_mlflow_run(run, path, out)
    elif kind in ("table", "lightning"):
        read_table(run, _read_bytes(path, out), out, path.name, "Lightning CSVLogger" if kind == "lightning" else None,
                   tsv=path.suffix.lower() == ".tsv")
    elif kind == "nanogpt":
        data = _read_bytes(path, out)
        text = data[:1_000_000].decode("utf-8", errors="replace")
        if looks_like_nanogpt(text):
            read_nanogpt_log(run, data, out, path.name)
            out.saved += nanogpt_saved_steps(run, path, data.decode("utf-8", errors="replace"))
        elif found.files:  # named by the user (not found while walking a folder): say what it is not
            out.notes.append(f"{path.name} is text but not a training printout this lab reads (nanoGPT's "
                             "`iter N: loss X` lines).")
    elif kind == "jsonl":
        _add_loaded(parse_jsonl(_read_bytes(path, out), run), run, "training log", out)
    elif kind == "checkpoint":
        _add_loaded(read_checkpoint_history(path, run), run, "checkpoint", out)


def _add_loaded(loaded, run: str, kind: str, out: RunsRead) -> None:
    out.notes += loaded.notes
    if not loaded.frame.empty:
        frame = loaded.frame.copy()
        frame["run"] = run
        out.kinds[run] = kind
        out.frame = frame if out.frame.empty else pd.concat([out.frame, frame], ignore_index=True)


def _file_kind(path: Path) -> _Found | None:
    name, lower = path.name, path.name.lower()
    if name.startswith(EVENT_FILE):
        return _Found("tensorboard", path.parent, [path])
    if lower.endswith(".json"):
        return _Found("trainer_file", path)
    if lower.endswith(TABLE_SUFFIXES):
        return _Found("table", path)
    if lower.endswith(".jsonl"):
        return _Found("jsonl", path)
    if lower.endswith(".safetensors"):
        return _Found("checkpoint", path)
    if lower.endswith(".zip"):
        return _Found("zip", path)
    return _Found("nanogpt", path, [path])


def read_paths(paths: Sequence[str | Path], tag_filter: str | None = None, labels: Sequence[str] | None = None,
               followers: dict | None = None, max_runs: int = MAX_RUNS, own: bool = True,
               fast: bool = True) -> RunsRead:
    """Every run in the given files and folders, as one table. `labels`: a name per path (default: its name);
    `tag_filter`: a regular expression names must match (TensorBoard's tag filter); `followers`: a dict kept
    between calls, so growing event files are read on from where they stopped (by the Python reader); `own=False`:
    folders' own checkpoints and .log.jsonl files are left to the page's catalogue (core.lens.history.logs), which
    lists them; `fast=False`: TensorBoard folders through the Python reader only, never the data server."""
    out = RunsRead(empty_frame())
    pattern = None
    if tag_filter:
        try:
            pattern = re.compile(tag_filter)
        except re.error as exc:
            out.notes.append(f"The tag filter {tag_filter[:80]!r} is not a regular expression ({exc}); all tags "
                             "are shown.")
    for i, raw in enumerate(paths):
        path = Path(raw)
        label = (labels[i] if labels else None) or path.name or str(path)
        if not path.exists():
            out.notes.append(f"{label}: no such file or folder.")
            continue
        if path.is_dir():
            found, skipped = find_runs(path)
            if skipped:
                out.notes.append(f"{label} holds over {MAX_FILES_WALKED:,} files; {skipped:,} were not looked at.")
            if not found:
                out.notes.append(f"{label} holds no runs this lab reads (TensorBoard event files, trainer_state.json, "
                                 "metrics CSVs, nanoGPT printouts, mlruns, .log.jsonl).")
            if not own:
                found = [f for f in found if f.kind not in ("jsonl", "checkpoint")]
            if len(found) > max_runs:
                out.notes.append(f"{label} holds {len(found):,} runs; the first {max_runs:,} are read "
                                 f"({found[0].path.name} to {found[max_runs - 1].path.name}).")
                found = found[:max_runs]
            tables = fast_event_tables(path, [f for f in found if f.kind == "tensorboard"], out) if fast else {}
            for item in found:
                read_found(item, run_name(path, item.path, label), out, pattern, followers, tables.get(item.path))
            continue
        item = _file_kind(path)
        if item.kind == "zip":
            out.notes.append(f"{label}: a .zip is read as an upload (unpacked first), not in place.")
        elif item.kind == "trainer_file":
            read_trainer_state(label.removesuffix(".json"), _read_bytes(path, out), out, label)
        else:
            stem = label
            for suffix in (".log.jsonl", ".jsonl", ".csv", ".tsv", ".log", ".txt", ".safetensors"):
                if stem.lower().endswith(suffix):
                    stem = stem[: -len(suffix)]
                    break
            read_found(item, stem, out, pattern, followers)
    out.frame = out.frame.reset_index(drop=True)
    nonfinite = int((~np.isfinite(out.frame["value"].to_numpy(float))).sum()) if not out.frame.empty else 0
    if nonfinite:
        out.notes.append(f"{nonfinite:,} NaN or infinite value(s) in these runs are drawn as gaps.")
    return out


# --- uploads ---------------------------------------------------------------------------------------------

class ZipRefused(ValueError):
    """A zip that is not unpacked; str() is one sentence."""


def unpack_zip(data: bytes, into: Path, name: str, max_bytes: int = MAX_ZIP_BYTES,
               max_members: int = MAX_ZIP_MEMBERS) -> Path:
    """Unpack an uploaded zip into the empty folder `into` after checking every member: no absolute path, no
    `..`, no link, no more than `max_members` members or `max_bytes` uncompressed. Refusals raise ZipRefused."""
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
        members = archive.infolist()
    except (zipfile.BadZipFile, zipfile.LargeZipFile, ValueError, OSError):
        raise ZipRefused(f"{name} is not a readable zip file.") from None
    if len(members) > max_members:
        raise ZipRefused(f"{name} holds {len(members):,} files, over the {max_members:,} this page unpacks.")
    total = sum(m.file_size for m in members)
    if total > max_bytes:
        raise ZipRefused(f"{name} unpacks to {total / 1e6:,.0f} MB, over the {max_bytes / 1e6:,.0f} MB limit.")
    for member in members:
        parts = Path(member.filename.replace("\\", "/")).parts
        if member.filename.startswith(("/", "\\")) or ".." in parts or (parts and ":" in parts[0]):
            raise ZipRefused(f"{name} has a path outside itself ({member.filename[:80]!r}); nothing was unpacked.")
        if (member.external_attr >> 16) & 0o170000 == 0o120000:
            raise ZipRefused(f"{name} holds a link ({member.filename[:80]!r}); nothing was unpacked.")
    written = 0
    for member in members:
        target = into / member.filename
        if member.is_dir():
            target.mkdir(parents=True, exist_ok=True)
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        with archive.open(member) as source, target.open("wb") as sink:
            while chunk := source.read(1 << 20):
                written += len(chunk)
                if written > max_bytes:  # a header that lied about its size
                    raise ZipRefused(f"{name} unpacks to over the {max_bytes / 1e6:,.0f} MB limit.")
                sink.write(chunk)
    return into


# --- saved steps on the loss curve ---------------------------------------------------------------------------

def saved_step_marks(frame: pd.DataFrame, saved: Sequence[SavedStep], x: str) -> list:
    """A mark per saved step on its run's training-loss curve (core.lens.training_steps.StepMark): y is the
    training loss logged last at or before that step, x that step in the curve's unit (epoch, time: read from the
    run's own rows at the step). Steps with no loss logged before them, or no such x, get no mark."""
    from core.lens.training_steps import StepMark

    marks = []
    for run in dict.fromkeys(s.run for s in saved):
        rows = frame[(frame["run"] == run) & (frame["split"] == "train") & (frame["metric"] == "loss")]
        rows = rows[np.isfinite(rows["step"].to_numpy(float)) & np.isfinite(rows["value"].to_numpy(float))]
        rows = rows.sort_values("step", kind="stable")
        steps = rows["step"].to_numpy(float)
        if x == "relative" and not rows.empty:
            start = frame.loc[frame["run"] == run, "wall_time"].min()
            along = rows["wall_time"].to_numpy(float) - start
        else:
            along = rows[x].to_numpy(float) if x in rows else np.full(len(rows), np.nan)
        for s in (s for s in saved if s.run == run):
            at = int(np.searchsorted(steps, s.step, side="right")) - 1
            if at < 0:
                continue
            place = float(s.step) if x == "step" else float(along[at])
            if math.isfinite(place):
                marks.append(StepMark(run, s.step, place, float(rows["value"].iloc[at])))
    return marks
