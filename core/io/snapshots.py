"""Training-step snapshots: a run's weights at a few steps, in one safetensors file beside its checkpoint.

`lm.safetensors` keeps its snapshots in `lm.snapshots.safetensors`. Tensors are named `<step>/<parameter>`
(half precision by default); the metadata holds `format`, the model `config` they fit, and `snapshots`: one
row per step with epoch, tokens seen, the training loss at that step, wall time and a sha256 of the step's
tensors. Reading never unpickles. A damaged file or step is left out with one sentence (`note`), and the
checkpoint itself still opens: snapshots are an extra, never a reason to refuse a model.

A checkpoint with snapshots can be looked at as it was after any kept step: `at_step` gives the loaded
checkpoint with those weights (the checkpoint's own weights at its final step, so the last position of a
slider shows exactly what the page shows without one); `slider_steps` and `step_line` are what a step slider
offers and says.
"""

from __future__ import annotations

import copy
import hashlib
import json
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import torch
from safetensors import safe_open

from core.io.checkpoint import DEFAULT_MAX_BYTES, SNAPSHOTS_SUFFIX, _read_header, write_atomically
from core.io.loaded import CheckpointError, LoadedCheckpoint
from core.model.transformer import Transformer

FORMAT = "attention-lab-snapshots/1"
SUFFIX = SNAPSHOTS_SUFFIX
DTYPES = {"float16": torch.float16, "bfloat16": torch.bfloat16, "float32": torch.float32}


def snapshots_path(checkpoint: str | Path) -> Path:
    """`runs/lm.safetensors` -> `runs/lm.snapshots.safetensors`."""
    checkpoint = Path(checkpoint)
    return checkpoint.with_name(checkpoint.name.removesuffix(".safetensors") + SUFFIX)


def is_snapshots_file(path: str | Path) -> bool:
    return Path(path).name.endswith(SUFFIX)


@dataclass(frozen=True)
class Snapshot:
    """One kept step: the weights after `step` optimizer steps (step 0: the initial weights)."""

    step: int
    epoch: int
    tokens: int
    loss: float  # the loss of these weights on the training batch that followed them (the last step: on the last)
    wall_time: float
    sha256: str = ""


@dataclass
class SnapshotFile:
    """The readable snapshots of one checkpoint (sorted by step) and what was left out."""

    path: Path
    snapshots: list[Snapshot] = field(default_factory=list)
    bytes_per_snapshot: int = 0
    dtype: str = ""
    note: str = ""  # one sentence when some or all snapshots could not be used

    @property
    def steps(self) -> list[int]:
        return [s.step for s in self.snapshots]

    def at(self, step: int) -> Snapshot:
        """The kept step nearest to `step` (a URL may carry any number)."""
        return min(self.snapshots, key=lambda s: (abs(s.step - step), s.step))

    def size_line(self) -> str:
        return (f"{len(self.snapshots)} snapshots, {self.bytes_per_snapshot / 1e6:.2f} MB each ({self.dtype}), "
                f"{self.path.stat().st_size / 1e6:.1f} MB in {self.path.name}")


def digest(tensors: dict[str, torch.Tensor]) -> str:
    """sha256 over name, dtype, shape and bytes of each tensor, in name order."""
    h = hashlib.sha256()
    for name in sorted(tensors):
        t = tensors[name].detach().cpu().contiguous()
        h.update(f"{name}|{t.dtype}|{tuple(t.shape)}|".encode())
        h.update(t.view(torch.uint8).numpy().tobytes() if t.numel() else b"")
    return h.hexdigest()


def capture(model: Transformer, dtype: str = "float16") -> dict[str, torch.Tensor]:
    """A detached CPU copy of the model's floating-point weights in `dtype` (integer buffers as they are)."""
    target = DTYPES[dtype]
    return {name: (t.detach().to("cpu", target) if t.is_floating_point() else t.detach().cpu()).clone()
            for name, t in model.state_dict().items()}


def write(path: str | Path, kept: list[tuple[Snapshot, dict[str, torch.Tensor]]], config_json: str,
          plan: list[int] | None = None) -> Path:
    """Write every kept snapshot to `path` atomically (temporary file, fsync, rename); `plan`: every step
    the run means to keep, so that a resumed run carries on with the same ones."""
    path = Path(path)
    tensors: dict[str, torch.Tensor] = {}
    rows = []
    for snap, weights in sorted(kept, key=lambda pair: pair[0].step):
        rows.append(asdict(snap) | {"sha256": digest(weights)})
        tensors.update({f"{snap.step}/{name}": t.contiguous() for name, t in weights.items()})
    dtype = next((str(t.dtype).removeprefix("torch.") for t in tensors.values() if t.is_floating_point()), "")
    metadata = {"format": FORMAT, "config": config_json, "dtype": dtype, "snapshots": json.dumps(rows),
                "plan": json.dumps(sorted(plan if plan is not None else [r["step"] for r in rows]))}
    write_atomically(path, tensors, metadata)
    return path


def _rows(raw: dict[str, str], name: str) -> list[Snapshot]:
    try:
        rows = json.loads(raw.get("snapshots", ""))
        snaps = [Snapshot(step=int(r["step"]), epoch=int(r["epoch"]), tokens=int(r["tokens"]),
                          loss=float(r["loss"]), wall_time=float(r["wall_time"]), sha256=str(r.get("sha256", "")))
                 for r in rows]
    except (ValueError, TypeError, KeyError, RecursionError):
        raise CheckpointError(f"{name} has an unreadable list of snapshots.") from None
    return sorted(snaps, key=lambda s: s.step)


def written_steps(checkpoint: str | Path) -> list[int]:
    """The steps a run's snapshot file holds, from its header alone (a running job's progress line); [] when it has
    none yet or the file cannot be read (it is being replaced)."""
    path = snapshots_path(checkpoint)
    try:
        header, _ = _read_header(path, DEFAULT_MAX_BYTES)
        return [s.step for s in _rows(header.get("__metadata__") or {}, path.name)]
    except (OSError, CheckpointError):
        return []


def _config_matches(raw: dict[str, str], config: dict[str, Any]) -> bool:
    try:
        return json.loads(raw.get("config", "")) == config
    except (ValueError, RecursionError):
        return False


def read(checkpoint: str | Path, expected: dict[str, torch.Tensor], config: dict[str, Any],
         max_bytes: int = DEFAULT_MAX_BYTES, verify: bool = True) -> SnapshotFile | None:
    """The snapshots beside `checkpoint` that fit a model with state dict `expected` and `config`, or None
    when there is no snapshot file. Steps whose tensors are missing, misshapen or changed (sha256) are
    left out; `note` says so in one sentence."""
    path = snapshots_path(checkpoint)
    if not path.is_file():
        return None
    out = SnapshotFile(path=path)
    left_out = "; the model is shown without its training steps."
    try:
        header, _ = _read_header(path, max_bytes)
        raw = header.get("__metadata__") or {}
        if raw.get("format") != FORMAT:
            raise CheckpointError(f"{path.name} is not a snapshot file")
        if not _config_matches(raw, config):
            raise CheckpointError(f"{path.name} belongs to another model (its config differs)")
        snaps = _rows(raw, path.name)
    except CheckpointError as exc:
        out.note = f"The snapshots could not be read ({str(exc).rstrip('.')}){left_out}"
        return out
    good, bad = [], []
    for snap in snaps:
        entries = {name: header.get(f"{snap.step}/{name}") for name in expected}
        fits = all(isinstance(e, dict) and e.get("shape") == list(t.shape) and
                   (e.get("dtype") in ("F16", "BF16", "F32")) == t.is_floating_point()
                   for e, t in zip(entries.values(), expected.values()))
        (good if fits else bad).append(snap)
    if verify and good:
        try:
            with safe_open(str(path), framework="pt", device="cpu") as fh:
                checked = [s for s in good if digest({n: fh.get_tensor(f"{s.step}/{n}") for n in expected})
                           == s.sha256]
        except Exception:  # the library's own refusals: every step unreadable
            checked = []
        bad += [s for s in good if s not in checked]
        good = checked
    out.snapshots = good
    first = next(iter(expected.values()), None)
    if good and first is not None:
        entry = header[f"{good[0].step}/{next(iter(expected))}"]
        out.dtype = {"F16": "float16", "BF16": "bfloat16", "F32": "float32"}.get(entry["dtype"], entry["dtype"])
        out.bytes_per_snapshot = sum(header[f"{good[0].step}/{n}"]["data_offsets"][1] -
                                     header[f"{good[0].step}/{n}"]["data_offsets"][0] for n in expected)
    if bad:
        steps = ", ".join(str(s.step) for s in bad[:5]) + (" ..." if len(bad) > 5 else "")
        word = "step" if len(bad) == 1 else "steps"
        out.note = (f"{len(bad)} of {len(snaps)} snapshots in {path.name} are damaged and left out ({word} "
                    f"{steps})" + (left_out if not good else "."))
    return out


def snapshots_of(loaded: LoadedCheckpoint, verify: bool = True) -> SnapshotFile | None:
    """`read` for a loaded checkpoint (None for Hugging Face folders and files without snapshots)."""
    if loaded.path.is_dir():
        return None
    return read(loaded.path, loaded.model.state_dict(), loaded.metadata.get("config") or {}, verify=verify)


def weights(path: str | Path, step: int, names: list[str]) -> dict[str, torch.Tensor]:
    with safe_open(str(path), framework="pt", device="cpu") as fh:
        return {name: fh.get_tensor(f"{step}/{name}") for name in names}


def model_at(loaded: LoadedCheckpoint, snapshots: SnapshotFile, step: int) -> Transformer:
    """A copy of the loaded model (eval mode, same device) with the weights of the kept step nearest `step`."""
    model = copy.deepcopy(loaded.model)
    state = model.state_dict()
    kept = weights(snapshots.path, snapshots.at(step).step, list(state))
    # assign: the converted tensors become the weights (no second copy; on a busy CPU a copy_ per tensor cost
    # ~50 ms in all for 636k parameters)
    model.load_state_dict({name: kept[name].to(t.dtype) for name, t in state.items()}, assign=True)
    return model.eval()


# --- a checkpoint at a kept step (the pages' step slider) ---------------------------------------------------

def final_progress(loaded: LoadedCheckpoint) -> dict[str, Any]:
    """The checkpoint's saved progress (step, epoch, tokens, wall_time), {} when it has none or it is unreadable."""
    progress = loaded.metadata.get("progress")
    try:
        found = json.loads(progress) if isinstance(progress, str) else progress or {}
    except ValueError:
        return {}
    return found if isinstance(found, dict) else {}


def final_step(loaded: LoadedCheckpoint) -> int | None:
    """The optimizer steps the checkpoint's weights had (its saved progress), when it says."""
    step = final_progress(loaded).get("step")
    return int(step) if isinstance(step, int) else None


def slider_steps(loaded: LoadedCheckpoint, snapshots: SnapshotFile) -> list[int]:
    """The kept steps, then the checkpoint's own step when no snapshot has it (a run stopped early, a
    damaged last snapshot): the last position always shows the checkpoint."""
    last = final_step(loaded)
    return snapshots.steps + ([last] if last is not None and last > snapshots.steps[-1] else [])


def at_step(loaded: LoadedCheckpoint, snapshots: SnapshotFile, step: int) -> LoadedCheckpoint:
    """The checkpoint as it was after the kept step nearest `step` (its own weights at its own step);
    `.step` says which."""
    if step == final_step(loaded):
        return replace(loaded, step=step)
    kept = snapshots.at(step).step
    if kept == final_step(loaded):
        return replace(loaded, step=kept)
    return replace(loaded, model=model_at(loaded, snapshots, kept), step=kept)


def step_line(snapshots: SnapshotFile, step: int, last: int | None = None) -> str:
    """'step 127 of 640: 260,096 tokens seen, training loss 2.298' for the kept step nearest `step`."""
    s = snapshots.at(step)
    of = f" of {last:,}" if last else ""
    return f"step {s.step:,}{of}: {s.tokens:,} tokens seen, training loss {s.loss:.3f}"


def read_for_resume(path: str | Path) -> tuple[list[tuple[Snapshot, dict[str, torch.Tensor]]], dict[str, str]]:
    """Every snapshot of a file the trainer wrote (to carry on with `--resume`), and its metadata."""
    path = Path(path)
    header, _ = _read_header(path, DEFAULT_MAX_BYTES)
    raw = header.get("__metadata__") or {}
    kept = []
    with safe_open(str(path), framework="pt", device="cpu") as fh:
        keys = list(fh.keys())
        for snap in _rows(raw, path.name):
            prefix = f"{snap.step}/"
            kept.append((snap, {k[len(prefix):]: fh.get_tensor(k) for k in keys if k.startswith(prefix)}))
    return kept, raw
