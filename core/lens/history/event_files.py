"""TensorBoard event files read with the `tensorboard` package's own record reader (no hand-written parser).

`RawEventFileLoader` checks each record's framing and CRCs; each record is parsed as its `Event` proto and its
scalars kept (a `simple_value`, or a one-number tensor of the scalars plugin, as torch's SummaryWriter and
TensorFlow 2 write them). `EventFileFollower` keeps its place, so a file a job is still writing is read on from where
the last poll stopped; `read_scalars` gives one run's files as a table (tag, step, wall, value) and a sentence per
file that stops being readable (cut off or damaged), saying where. The package is an optional extra
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

    def poll(self) -> EventScalars:
        from tensorboard.compat.proto.event_pb2 import Event
        from tensorboard.util.tensor_util import make_ndarray

        s = self.scalars
        for record in self._loader.Load():
            s.read_bytes += len(record) + 16  # length (8) + its CRC (4) + data + data CRC (4)
            try:
                event = Event.FromString(record)
            except Exception:  # a record whose CRC passed but is not an Event: skip it, keep reading  # noqa: BLE001
                continue
            if not event.HasField("summary"):
                continue
            for value in event.summary.value:
                kind = value.WhichOneof("value")
                if kind == "simple_value":
                    number = value.simple_value
                elif kind == "tensor" and value.metadata.plugin_data.plugin_name in ("scalars", ""):
                    try:
                        array = make_ndarray(value.tensor)
                    except Exception:  # noqa: BLE001 - not a number tensor (text, an image)
                        continue
                    if array.size != 1 or array.dtype.kind not in "fiub":
                        continue
                    number = float(array.reshape(-1)[0])
                else:
                    continue
                s.tags.append(value.tag)
                s.steps.append(event.step)
                s.wall_times.append(event.wall_time)
                s.values.append(number)
        try:
            s.size = self.path.stat().st_size
        except OSError:
            pass
        return s


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
