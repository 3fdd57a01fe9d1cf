"""Every choosable run (checkpoints and live logs) by unique name, and a cache key for a file's version."""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from core.lens.history.logs import find_logs, log_stem


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
