"""Whole histories without loading a tensor: a checkpoint's header, a .jsonl file, an upload; problems become notes."""

from __future__ import annotations

import re
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from core.io.checkpoint import CheckpointError, read_metadata
from core.lens.history.records import (
    LoadedHistory,
    empty_frame,
    label_runs,
    malformed_note,
    parse_lines,
    records_frame,
)


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
