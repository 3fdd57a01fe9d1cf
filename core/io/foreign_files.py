"""Reading files that other code wrote (torch.save files, training text), shared by the converters.

`load_torch_file` uses `torch.load(weights_only=True)`: a pickle that names any Python object other than
tensors and plain values is refused without running it. Every refusal is a `ConversionError` whose message
is one sentence a user can act on.
"""

from __future__ import annotations

import hashlib
import io
import pickle
from pathlib import Path
from typing import Any

import torch

from core.io import checkpoint

WRAPPER_PREFIXES = ("_orig_mod.", "module.")  # torch.compile, DataParallel / DDP


class ConversionError(ValueError):
    """A file that cannot become a checkpoint; str() is one sentence for the user."""


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _looks_like_safetensors(head: bytes) -> bool:
    return len(head) > 9 and head[8:9] == b"{"


def load_torch_file(data: bytes, name: str) -> Any:
    """Bytes of a `torch.save` file -> what it holds, with `weights_only=True`: tensors and plain values
    only; a file that names any other Python object is refused without running it."""
    if not data:
        raise ConversionError(f"{name} is empty.")
    is_zip = data[:4] == b"PK\x03\x04"
    is_legacy_pickle = data[:1] == b"\x80"  # pickle protocol marker of torch's legacy format
    if not (is_zip or is_legacy_pickle):
        if _looks_like_safetensors(data[:16]):
            raise ConversionError(f"{name} is a safetensors file, not a params file; "
                                  "add it as an Attention Lab checkpoint instead.")
        raise ConversionError(f"{name} is not a file written by torch.save.")
    try:
        loaded = torch.load(io.BytesIO(data), weights_only=True, map_location="cpu")
    except pickle.UnpicklingError as exc:
        if "Unsupported global" in str(exc) or "GLOBAL" in str(exc):
            raise ConversionError(f"{name} contains Python objects other than tensors, so it was refused "
                                  "without running them; save plain model.state_dict() instead.") from None
        raise ConversionError(f"{name} is damaged: it is not a readable torch.save file.") from None
    except Exception:  # torch's readers raise many types for damaged input; all mean the same here
        raise ConversionError(f"{name} is truncated or damaged: torch could not read it.") from None
    return loaded


def corpus_text(data: bytes, name: str) -> str:
    """The corpus as the assignment reads it: UTF-8, universal newlines (open(..., encoding='utf-8'))."""
    if not data:
        raise ConversionError(f"{name} is empty; the vocabulary is rebuilt from the pretraining corpus.")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConversionError(f"{name} is not UTF-8 text (byte {exc.start} cannot be decoded).") from None
    return text.replace("\r\n", "\n").replace("\r", "\n")


def strip_wrapper_prefixes(state: dict[str, torch.Tensor]) -> tuple[dict[str, torch.Tensor], str]:
    """Remove `_orig_mod.` / `module.` (in any nesting) when every key carries it."""
    stripped = ""
    changed = True
    while changed:
        changed = False
        for prefix in WRAPPER_PREFIXES:
            if state and all(k.startswith(prefix) for k in state):
                state = {k[len(prefix):]: v for k, v in state.items()}
                stripped += prefix
                changed = True
    return state, stripped


def read_file(path: Path, max_bytes: int = checkpoint.DEFAULT_MAX_BYTES) -> bytes:
    if not path.is_file():
        raise ConversionError(f"{path} does not exist or is not a file.")
    size = path.stat().st_size
    if size > max_bytes:
        raise ConversionError(f"{path.name} is {size / 1e6:.0f} MB, over the {max_bytes / 1e6:.0f} MB limit.")
    try:
        return path.read_bytes()
    except OSError as exc:
        raise ConversionError(f"{path} could not be read ({exc.strerror or type(exc).__name__}).") from None


def check_output(out: Path, force: bool) -> None:
    """Refuse a folder, an existing file (unless `force`) and a missing parent folder."""
    if out.is_dir():
        raise ConversionError(f"{out} is a folder; give a file name ending in .safetensors.")
    if out.exists() and not force:
        raise ConversionError(f"{out} already exists; pass --force to overwrite it.")
    if not out.parent.is_dir():
        raise ConversionError(f"The folder {out.parent} does not exist.")
