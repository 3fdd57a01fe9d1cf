"""Live training logs (`<run>.log.jsonl`) and every choosable run.

A log's run name, finding logs, whether a job is still writing, following one as it grows; the catalogue of
checkpoints and logs by unique name (`catalog`) and a cache key for a file's version.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from core.lens.history.records import LoadedHistory, empty_frame, label_runs, malformed_note, parse_lines

LOG_SUFFIX = ".log.jsonl"
LIVE_WINDOW_S = 600  # a log untouched this long is a finished (or stalled) job: no auto-refresh
MAX_READ_BYTES = 256 * 1024 * 1024  # one poll of a log never reads more than this


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


def is_running(path: str | Path, now: float | None = None, window_s: float = LIVE_WINDOW_S) -> bool:
    """A log written to within the window belongs to a job that is (probably) still training."""
    try:
        modified = os.stat(path).st_mtime
    except OSError:
        return False
    return (time.time() if now is None else now) - modified <= window_s


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
            frame, malformed, partial = parse_lines(data)
            # An unfinished last line stays unread: the next poll sees it whole.
            cut = data.rfind(b"\n") + 1 if partial else len(data)
            self.partial = partial
            self.malformed += malformed
            self.offset += cut
            self.fingerprint = (self.fingerprint + data[:cut])[-self.FINGERPRINT_BYTES:]
            if not frame.empty:
                self._frame = frame if self._frame.empty else pd.concat([self._frame, frame],
                                                                        ignore_index=True)
        notes = malformed_note(self.source, self.malformed)
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


@dataclass(frozen=True)
class RunSource:
    """One choosable run: a checkpoint (history in its header) or a trainer's live log."""

    name: str  # unique; also the value in the run column and in the URL
    kind: str  # "checkpoint" | "log"
    path: Path


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


def file_signature(path: str | Path) -> tuple[int, int]:
    """(mtime in ns, size): a cache key that changes whenever the file does; (0, 0) if it is gone."""
    try:
        stat = os.stat(path)
    except OSError:
        return 0, 0
    return stat.st_mtime_ns, stat.st_size
