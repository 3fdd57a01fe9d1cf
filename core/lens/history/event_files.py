"""TensorBoard event files read with the `tensorboard` package's own record reader (no hand-written parser).

`RawEventFileLoader` checks each record's framing and CRCs; each record is parsed as its `Event` proto and its
scalars kept (a `simple_value`, or a one-number tensor of the scalars plugin, as torch's SummaryWriter and
TensorFlow 2 write them). The reader is TensorBoard's; what it reads from is a plain binary file (its stub GFile's
read is pure Python) and its CRC-32C is google-crc32c's C function. `EventFileFollower` keeps its place, so a
file a job is still writing is read on from where the last poll stopped; `read_scalars` gives one run's files as a
table (tag, step, wall, value) and a sentence per file that stops being readable (cut off or damaged), saying
where. The package is an optional extra
(requirements-tensorboard.txt); without it, `NO_TENSORBOARD` says how to install it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd


def tensorboard_available() -> bool:
    try:
        import tensorboard  # noqa: F401
    except ImportError:
        return False
    return True


NO_TENSORBOARD = ("Reading TensorBoard event files needs the tensorboard package: "
                  ".venv/bin/python -m pip install -r requirements-tensorboard.txt")


def checksums_in_c() -> bool:
    """TensorBoard's reader without TensorFlow checks each record's CRC32C in pure Python, byte by byte: ~85% of
    opening a 100,000-point run (bench.curves_sources). With google-crc32c installed (the extra pins it) its C
    function computes the same checksum for that reader; the reader, its framing and its errors are TensorBoard's.
    Returns whether the C checksum is in use."""
    try:
        import google_crc32c
        from tensorboard.compat.tensorflow_stub import pywrap_tensorflow as stub
    except ImportError:
        return False
    if google_crc32c.implementation != "c":  # its own pure-Python fallback is no faster
        return False
    if stub.crc32c is not google_crc32c.value:
        probe = b"attention-lab"  # the same algorithm (Castagnoli), or keep TensorBoard's own
        if google_crc32c.value(probe) != stub.crc32c(probe):
            return False
        stub.crc32c = google_crc32c.value
    return True


@dataclass
class EventScalars:
    """The scalars of one event file: parallel lists, and where reading stopped when the file is cut off."""

    tags: list[str] = field(default_factory=list)
    steps: list[int] = field(default_factory=list)
    wall_times: list[float] = field(default_factory=list)
    values: list[float] = field(default_factory=list)
    read_bytes: int = 0
    size: int = 0


class EventFileFollower:
    """One event file read with TensorBoard's own record reader (`RawEventFileLoader`: framing and CRCs),
    each record parsed as its `Event` proto. The loader keeps its place, so a file a job is still writing is
    read on from where the last poll stopped; a cut-off last record is left for the next poll, as TensorBoard
    does, and reported when the file stops growing."""

    def __init__(self, path: str | Path) -> None:
        from tensorboard.backend.event_processing.event_file_loader import RawEventFileLoader

        checksums_in_c()
        self.path = Path(path)
        self.scalars = EventScalars()
        self._loader = RawEventFileLoader(str(self.path))
        # TensorBoard's stub reader (PyRecordReader without TensorFlow) reads each record in four small reads
        # (length, its CRC, data, data CRC) through the stub's GFile, whose read is pure Python: ~40% of opening
        # a 100,000-point run. The reader reads from its `file_handle`; a plain binary file gives it the same
        # bytes through C, and is opened only for the length of a poll, at the offset the last poll stopped.
        reader = getattr(getattr(self._loader, "_iterator", None), "_reader", None)
        self._reader = reader if hasattr(reader, "file_handle") and hasattr(reader, "GetNext") else None
        self._offset = 0

    def poll(self) -> EventScalars:
        if self._reader is None:  # TensorFlow's own reader (C++), or a stub whose shape changed: as it comes
            return self._poll()
        try:
            handle = open(self.path, "rb")  # noqa: SIM115 - closed below, after the reader has read from it
        except OSError:  # gone since the last poll: what was read stays
            return self.scalars
        with handle:
            handle.seek(self._offset)
            self._reader.file_handle = handle
            try:
                return self._poll()
            finally:
                self._offset = handle.tell()

    def _poll(self) -> EventScalars:
        from tensorboard.compat.proto.event_pb2 import Event

        s = self.scalars
        parse = Event.FromString
        tags, steps, walls, values = s.tags.append, s.steps.append, s.wall_times.append, s.values.append
        for record in self._loader.Load():
            s.read_bytes += len(record) + 16  # length (8) + its CRC (4) + data + data CRC (4)
            try:
                event = parse(record)
            except Exception:  # a record whose CRC passed but is not an Event: skip it, keep reading  # noqa: BLE001
                continue
            for value in event.summary.value:  # empty when the event holds no summary
                kind = value.WhichOneof("value")
                if kind == "simple_value":
                    number = value.simple_value
                elif kind == "tensor":
                    number = _tensor_scalar(value)
                    if number is None:
                        continue
                else:
                    continue
                tags(value.tag)
                steps(event.step)
                walls(event.wall_time)
                values(number)
        try:
            s.size = self.path.stat().st_size
        except OSError:
            pass
        return s


def _tensor_scalar(value) -> float | None:
    """A one-number tensor of the scalars plugin (torch's new-style scalars, TensorFlow 2), else None."""
    from tensorboard.util.tensor_util import make_ndarray

    if value.metadata.plugin_data.plugin_name not in ("scalars", ""):
        return None
    try:
        array = make_ndarray(value.tensor)
    except Exception:  # noqa: BLE001 - not a number tensor (text, an image)
        return None
    if array.size != 1 or array.dtype.kind not in "fiub":
        return None
    return float(array.reshape(-1)[0])


def _event_note(run: str, path: Path, s: EventScalars) -> str | None:
    if s.read_bytes >= s.size:
        return None
    return (f"{run}: {path.name} stops being readable at byte {s.read_bytes:,} of {s.size:,} (cut off or "
            f"damaged); the {len(s.values):,} values before it are shown.")


def read_scalars(run: str, files: Sequence[Path], followers: dict | None = None) -> tuple[pd.DataFrame, list[str]]:
    """(tag, step, wall, value) of every scalar in one run's event files, in file order, and a sentence per file
    that could not be opened or stops being readable. `followers` (path -> EventFileFollower) is kept between
    calls so growing files are read on; without it each call reads the files afresh."""
    notes: list[str] = []
    tags: list[str] = []
    steps: list[int] = []
    walls: list[float] = []
    values: list[float] = []
    for path in sorted(files):
        key = str(path)
        follower = (followers or {}).get(key)
        if follower is None:
            try:
                follower = EventFileFollower(path)
            except Exception as exc:  # noqa: BLE001 - the reader refuses a file it cannot open
                notes.append(f"{run}: {path.name} could not be opened ({exc}).")
                continue
            if followers is not None:
                followers[key] = follower
        s = follower.poll()
        note = _event_note(run, path, s)
        if note:
            notes.append(note)
        tags += s.tags
        steps += s.steps
        walls += s.wall_times
        values += s.values
    table = pd.DataFrame({"tag": tags, "step": np.asarray(steps, float), "wall": np.asarray(walls, float),
                          "value": np.asarray(values, float)})
    return table, notes
