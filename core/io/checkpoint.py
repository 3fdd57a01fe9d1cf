"""Save, load and list checkpoints: one .safetensors file per model.

Tensors are the model's state dict; everything else is string metadata (JSON where structured):
format, config, tokenizer, task, labels, history, metrics, data, command, seed, versions, created.
Loading never unpickles anything. Every refusal is a `CheckpointError` whose message is one
sentence a user can act on. Saving writes a temporary file, fsyncs and renames, so a crash never
leaves half a file where a checkpoint was.
"""

from __future__ import annotations

import json
import os
import platform
import re
import struct
import tempfile
import time
from pathlib import Path
from typing import Any

import torch
from safetensors import safe_open
from safetensors.torch import save_file

from core.io import hf
from core.io.loaded import CheckpointError, CheckpointInfo, LoadedCheckpoint
from core.model.config import ConfigError, ModelConfig
from core.model.meta_device import shapes_only, to_be_loaded
from core.model.tokenizer import Tokenizer, TokenizerError, tokenizer_from_dict
from core.model.transformer import Transformer

FORMAT = "attention-lab/1"
SUPPORTED_FORMATS = (FORMAT,)
TASKS = ("lm", "birthplace", "classify")
DEFAULT_MAX_BYTES = 512 * 1024 * 1024
MAX_HEADER_BYTES = 64 * 1024 * 1024  # history and tokenizer live here; far above any real one
CHECKPOINT_DIR_ENV = "ATTENTION_LAB_CHECKPOINTS"
SNAPSHOTS_SUFFIX = ".snapshots.safetensors"  # a run's training-step snapshots (core/io/snapshots.py), not a model
# a model's sparse autoencoder, kept beside it (core.lens.sae.sae_path: <name>.sae-L<layer>-<site>.safetensors)
SAE_FILE = re.compile(r".+\.sae-L[0-9]+-[A-Za-z]+\.safetensors")


def is_beside_a_model(path: Path) -> bool:
    """A file kept beside a checkpoint that is not a model of its own: its snapshots, its sparse autoencoders."""
    return path.name.endswith(SNAPSHOTS_SUFFIX) or SAE_FILE.fullmatch(path.name) is not None
DEFAULT_DIR = Path(__file__).resolve().parents[2] / "checkpoints"


def checkpoint_dir() -> Path:
    return Path(os.environ.get(CHECKPOINT_DIR_ENV) or DEFAULT_DIR)


def library_versions() -> dict[str, str]:
    import safetensors

    return {"python": platform.python_version(), "torch": torch.__version__,
            "safetensors": safetensors.__version__}


def save(path: str | Path, model: Transformer, tokenizer: Tokenizer, task: str, *,
         labels: list[str] | None = None, history: list[dict] | None = None,
         metrics: dict[str, float] | None = None, data: list[dict] | None = None,
         command: str = "", seed: int | None = None, extra: dict[str, Any] | None = None) -> Path:
    """Write the checkpoint atomically (temporary file in the same folder, fsync, rename)."""
    if task not in TASKS:
        raise CheckpointError(f"Unknown task {task!r}; choose one of: {', '.join(TASKS)}.")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tensors = {name: t.detach().cpu().contiguous() for name, t in model.state_dict().items()}
    metadata = {
        "format": FORMAT,
        "config": model.config.to_json(),
        "tokenizer": json.dumps(tokenizer.to_dict(), ensure_ascii=False),
        "task": task,
        "labels": json.dumps(labels or [], ensure_ascii=False),
        "history": json.dumps(history or [], allow_nan=True),
        "metrics": json.dumps(metrics or {}, allow_nan=True),
        "data": json.dumps(data or [], ensure_ascii=False),
        "command": command,
        "seed": json.dumps(seed),
        "versions": json.dumps(library_versions()),
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
    for key, value in (extra or {}).items():
        metadata[key] = value if isinstance(value, str) else json.dumps(value)
    write_atomically(path, tensors, metadata)
    return path


def write_atomically(path: Path, tensors: dict[str, torch.Tensor], metadata: dict[str, str]) -> None:
    """safetensors to a temporary file beside `path`, synced, then renamed: a crash never leaves half a file."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        save_file(tensors, tmp, metadata=metadata)
        with open(tmp, "rb") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def update_metadata(path: str | Path, updates: dict[str, str], max_bytes: int = DEFAULT_MAX_BYTES) -> Path:
    """Add or replace metadata entries of a checkpoint file, tensors unchanged (read without unpickling,
    written atomically). `format`, `config` and `tokenizer` describe the tensors and are refused here."""
    path = Path(path)
    fixed = sorted({"format", "config", "tokenizer"} & set(updates))
    if fixed:
        raise CheckpointError(f"'{fixed[0]}' metadata describes the tensors; save the model again to change it.")
    header, _ = _read_header(path, max_bytes)
    raw = header.get("__metadata__") or {}
    _decode_metadata(raw, path.name)  # an Attention Lab checkpoint, readable
    with safe_open(str(path), framework="pt", device="cpu") as fh:
        tensors = {key: fh.get_tensor(key) for key in fh.keys()}
    write_atomically(path, tensors, {**raw, **{k: str(v) for k, v in updates.items()}})
    return path


JSON_FIELDS = ("config", "tokenizer", "labels", "history", "metrics", "data", "seed", "versions")


def _decode_metadata(raw: dict[str, str] | None, name: str) -> dict[str, Any]:
    if not raw:
        raise CheckpointError(f"{name} has no Attention Lab metadata (is it a plain safetensors file?).")
    fmt = raw.get("format")
    if fmt not in SUPPORTED_FORMATS:
        raise CheckpointError(f"{name} has format {str(fmt)[:40]!r}; this version reads "
                              f"{', '.join(SUPPORTED_FORMATS)}.")
    meta: dict[str, Any] = dict(raw)
    for key in JSON_FIELDS:
        if key not in raw:
            continue
        try:
            meta[key] = json.loads(raw[key])
        except (ValueError, RecursionError):
            raise CheckpointError(f"{name} has unreadable '{key}' metadata.") from None
    if meta.get("task") not in TASKS:
        raise CheckpointError(f"{name} names an unknown task {str(meta.get('task'))[:40]!r}.")
    for key, kind in (("config", dict), ("tokenizer", dict), ("labels", list), ("history", list),
                      ("metrics", dict), ("data", list)):
        if key in meta and not isinstance(meta[key], kind):
            raise CheckpointError(f"{name} has '{key}' metadata of the wrong type.")
    return meta


def _read_header(path: Path, max_bytes: int) -> tuple[dict[str, Any], int]:
    """Check size and the safetensors header by hand before the library touches the file."""
    name = path.name
    if not path.is_file():
        raise CheckpointError(f"{name} does not exist or is not a file.")
    size = path.stat().st_size
    if size > max_bytes:
        raise CheckpointError(f"{name} is {size / 1e6:.0f} MB, over the {max_bytes / 1e6:.0f} MB limit.")
    if size < 8:
        raise CheckpointError(f"{name} is empty or too short to be a safetensors file.")
    with open(path, "rb") as fh:
        (header_len,) = struct.unpack("<Q", fh.read(8))
        if header_len > min(MAX_HEADER_BYTES, size - 8):
            raise CheckpointError(f"{name} is not a safetensors file, or it is truncated.")
        header_bytes = fh.read(header_len)
    if not header_bytes.startswith(b"{"):
        raise CheckpointError(f"{name} is not a safetensors file.")
    try:
        header = json.loads(header_bytes)
    except (ValueError, RecursionError):
        raise CheckpointError(f"{name} has a damaged header (not valid JSON).") from None
    if not isinstance(header, dict):
        raise CheckpointError(f"{name} has a damaged header.")
    data_len = 0
    for key, entry in header.items():
        if key == "__metadata__":
            if not isinstance(entry, dict) or not all(isinstance(v, str) for v in entry.values()):
                raise CheckpointError(f"{name} has metadata that is not a map of strings.")
            continue
        offsets = entry.get("data_offsets") if isinstance(entry, dict) else None
        if not (isinstance(offsets, list) and len(offsets) == 2 and all(isinstance(o, int) for o in offsets)):
            raise CheckpointError(f"{name} has a damaged header entry for tensor {key[:60]!r}.")
        data_len = max(data_len, offsets[1])
    if 8 + header_len + data_len > size:
        raise CheckpointError(f"{name} is truncated: its header promises {8 + header_len + data_len} "
                              f"bytes but the file has {size}.")
    return header, size


def read_metadata(path: str | Path, max_bytes: int = DEFAULT_MAX_BYTES) -> dict[str, Any]:
    path = Path(path)
    if path.is_dir():  # a Hugging Face model folder (config.json only; transformers not needed)
        return hf.check_folder(path)
    header, _ = _read_header(path, max_bytes)
    return _decode_metadata(header.get("__metadata__"), path.name)


# Tensors renamed after files were written in this format; such files load under the new names.
OLD_NAMES = {"head.head.weight": "head.unembed.weight"}


def _model_key(file_key: str) -> str:
    return OLD_NAMES.get(file_key, file_key)


def _check_config_against_header(config: ModelConfig, header: dict[str, Any], name: str) -> None:
    """Compare what the config implies with the tensors the file declares, before building anything:
    a small file whose config claims a huge model must be refused, not allocated."""
    shapes = {_model_key(key): entry.get("shape") for key, entry in header.items() if key != "__metadata__"}
    blocks = {key.split(".")[1] for key in shapes if key.startswith("blocks.")}
    if len(blocks) != config.n_layer:
        raise CheckpointError(f"{name}: the config has {config.n_layer} layers but the file has tensors for "
                              f"{len(blocks)}.")
    embedding = shapes.get("tok_emb.weight")
    if embedding != [config.vocab_size, config.n_embd]:
        raise CheckpointError(f"{name}: tensor 'tok_emb.weight' has shape {tuple(embedding or ())} but the "
                              f"config implies {(config.vocab_size, config.n_embd)}.")
    with shapes_only():  # shapes only, no memory
        expected = Transformer(config).state_dict()
    missing = sorted(set(expected) - set(shapes))
    unexpected = sorted(set(shapes) - set(expected))
    if missing:
        raise CheckpointError(f"{name} lacks tensor {missing[0]!r} that the config requires.")
    if unexpected:
        raise CheckpointError(f"{name} has tensor {unexpected[0]!r} that the config does not use.")
    for key, tensor in expected.items():
        if list(tensor.shape) != shapes[key]:
            raise CheckpointError(f"{name}: tensor {key!r} has shape {tuple(shapes[key] or ())} but the "
                                  f"config implies {tuple(tensor.shape)}.")


def load(path: str | Path, max_bytes: int = DEFAULT_MAX_BYTES, device: str = "cpu") -> LoadedCheckpoint:
    """Rebuild (model in eval mode, tokenizer, metadata) from a file, or raise CheckpointError.
    A Hugging Face model folder comes back through the same type (see core.io.hf)."""
    path = Path(path)
    if path.is_dir():
        return hf.load_folder(path, device=device)
    name = path.name
    header, _ = _read_header(path, max_bytes)
    meta = _decode_metadata(header.get("__metadata__"), name)
    try:
        config = ModelConfig.from_dict(meta.get("config"))
    except ConfigError as exc:
        raise CheckpointError(f"{name}: {exc}") from None
    try:
        tokenizer = tokenizer_from_dict(meta.get("tokenizer"))
    except TokenizerError as exc:
        raise CheckpointError(f"{name}: {exc}") from None
    if tokenizer.vocab_size != config.vocab_size:
        raise CheckpointError(f"{name}: the tokenizer has {tokenizer.vocab_size} entries but the model "
                              f"expects {config.vocab_size}.")
    if config.head == "classifier" and len(meta.get("labels") or []) != config.n_classes:
        raise CheckpointError(f"{name}: the classifier has {config.n_classes} classes but "
                              f"{len(meta.get('labels') or [])} labels.")
    _check_config_against_header(config, header, name)
    with to_be_loaded():  # every weight is loaded below (strict), so none is drawn first
        model = Transformer(config)
    expected = model.state_dict()
    try:
        with safe_open(str(path), framework="pt", device=device) as fh:
            file_keys = {_model_key(key): key for key in fh.keys()}
            names = set(file_keys)
            missing = sorted(set(expected) - names)
            unexpected = sorted(names - set(expected))
            if missing:
                raise CheckpointError(f"{name} lacks tensor {missing[0]!r} that the config requires.")
            if unexpected:
                raise CheckpointError(f"{name} has tensor {unexpected[0]!r} that the config does not use.")
            state = {}
            for key in expected:
                tensor = fh.get_tensor(file_keys[key])
                if tuple(tensor.shape) != tuple(expected[key].shape):
                    raise CheckpointError(f"{name}: tensor {key!r} has shape {tuple(tensor.shape)} but the "
                                          f"config implies {tuple(expected[key].shape)}.")
                if tensor.dtype != expected[key].dtype:
                    raise CheckpointError(f"{name}: tensor {key!r} is {tensor.dtype}, expected "
                                          f"{expected[key].dtype}.")
                state[key] = tensor
    except CheckpointError:
        raise
    except Exception as exc:  # the library's own refusals (bad dtype string, bad offsets...)
        raise CheckpointError(f"{name} could not be read as safetensors ({type(exc).__name__}).") from None
    model.load_state_dict(state)
    model.to(device).eval()
    return LoadedCheckpoint(model=model, tokenizer=tokenizer, metadata=meta, path=path)


def _model_paths(folder: Path) -> list[Path]:
    """What a checkpoints folder holds: its *.safetensors and Hugging Face model folders; the folder itself when it
    is one model folder (a hub cache's snapshot named directly); a hub cache repository's (`models--ORG--NAME`, or
    its `snapshots/`) snapshot folders."""
    if hf.is_hf_folder(folder):
        return [folder]
    if folder.name.startswith("models--") and (folder / "snapshots").is_dir():
        folder = folder / "snapshots"
    return [*(p for p in folder.glob("*.safetensors") if not is_beside_a_model(p)),
            *(p for p in folder.iterdir() if hf.is_hf_folder(p))]


def list_checkpoints(folder: str | Path | None = None) -> list[CheckpointInfo]:
    """Every *.safetensors in the folder and every Hugging Face model folder in it (a subfolder with a
    config.json), sorted by name, metadata only; bad ones carry `error`. A hub cache's snapshot folder is named
    by its hub name (ORG/NAME, with @ and the commit's first 7 characters when two snapshots of one model are
    listed), never by its commit alone."""
    folder = Path(folder) if folder is not None else checkpoint_dir()
    if not folder.is_dir():
        return []
    infos = []
    paths = _model_paths(folder)
    names = [path.stem if path.is_file() else hf.folder_name(path) for path in paths]
    for path, name in sorted(zip(paths, names, strict=True), key=lambda pair: pair[0].name):
        if path.is_dir() and hf.hub_name(path) and names.count(name) > 1:
            name = f"{name}@{path.name[:7]}"
        stat = path.stat()
        size = stat.st_size if path.is_file() else sum(p.stat().st_size for p in path.glob("*.safetensors"))
        info = CheckpointInfo(path=path, name=name, size_bytes=size, modified=stat.st_mtime)
        try:
            info.metadata = read_metadata(path)
            if path.is_dir() and not hf.available():
                info.error = (f"{name} is a Hugging Face model folder; install the optional extra to "
                              "open it: pip install -r requirements-hf.txt.")
        except CheckpointError as exc:
            info.error = str(exc).replace(path.name, name, 1) if path.is_dir() and name != path.name else str(exc)
        infos.append(info)
    return infos
