"""The second moment of each MLP's keys over the pretraining corpus, C = E[k k^T], which the rank-one edit
(ROME) and MEMIT whiten by: an update along C^-1 k touches the directions other keys seldom use.

A key is an MLP's hidden activation (after the nonlinearity, the input of its output projection) at one
position. C is computed once per checkpoint (every layer in one pass over the corpus's documents) and kept in
a per-user cache folder, never beside the checkpoint (a class's checkpoints folder may be read-only, and is
never written to): `ATTENTION_LAB_EDIT_CACHE` when set, else `$XDG_CACHE_HOME/attention-lab/edit-statistics`,
else `~/.cache/attention-lab/edit-statistics`. A file there is named by the checkpoint's and the corpus's
sha256, so two checkpoint folders never collide (the same bytes share their statistics) and a changed
checkpoint gets new ones; a file there that is not this module's own is never overwritten, and where the
folder cannot be written the statistics are computed and kept in memory only.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import torch
from safetensors import safe_open
from safetensors.torch import save_file
from torch import nn

from core.lens.trace import Progress, model_device

CACHE_ENV = "ATTENTION_LAB_EDIT_CACHE"  # the folder the key statistics are kept in
CACHE_FORMAT = "attention-lab/key-moments/1"
BATCH = 128


def file_sha256(path: str | Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


@dataclass
class KeyStatistics:
    """Per layer: C (d_ff, d_ff) = mean of k k^T over `count` corpus positions."""

    moments: list[torch.Tensor]
    count: int
    corpus_sha256: str

    def inverse_times(self, layer: int, keys: torch.Tensor, ridge: float = 1e-4) -> torch.Tensor:
        """C^-1 keys for keys (d_ff,) or (d_ff, n), with a small ridge (relative to C's mean diagonal) so a
        direction the corpus never used does not blow up."""
        c = self.moments[layer].double()
        c = c + ridge * c.diagonal().mean() * torch.eye(c.size(0), dtype=c.dtype)
        return torch.linalg.solve(c, keys.double()).to(keys.dtype)


def mlp_projection(model: nn.Module, layer: int) -> nn.Linear:
    """The output projection of a block's MLP (Linear, GELU, Linear, Dropout): the matrix an edit writes."""
    return model.blocks[layer].mlp[2]


class KeyCatcher:
    """Keeps the input of chosen layers' MLP output projections (the keys) during forward passes."""

    def __init__(self, model: nn.Module, layers: Sequence[int]) -> None:
        self.keys: dict[int, torch.Tensor] = {}
        self.handles = [mlp_projection(model, layer).register_forward_pre_hook(self._keeper(layer))
                        for layer in layers]

    def _keeper(self, layer: int):
        def keep(_module, inputs):
            self.keys[layer] = inputs[0]
        return keep

    def close(self) -> None:
        for handle in self.handles:
            handle.remove()

    def __enter__(self) -> KeyCatcher:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


@torch.no_grad()
def compute_key_statistics(model: nn.Module, tokenizer, corpus: str, progress: Progress | None = None
                           ) -> KeyStatistics:
    """C for every layer over the corpus's documents (one per line, each cut to the model's context)."""
    model.eval()
    device = model_device(model)
    context = model.max_length or model.config.block_size
    documents = [line for line in corpus.split("\n") if line.strip()]
    rows = [ids[:context] for ids in (tokenizer.encode(d) for d in documents) if ids]
    rows.sort(key=len)
    n_layer = len(model.blocks)
    width = mlp_projection(model, 0).in_features
    sums = [torch.zeros(width, width, dtype=torch.float64) for _ in range(n_layer)]
    count = 0
    with KeyCatcher(model, range(n_layer)) as catcher:
        for start in range(0, len(rows), BATCH):
            chunk = rows[start:start + BATCH]
            longest = max(len(r) for r in chunk)
            idx = torch.full((len(chunk), longest), tokenizer.pad_id, dtype=torch.long)
            real = torch.zeros(len(chunk), longest, dtype=torch.bool)
            for i, r in enumerate(chunk):  # right-padded: causal, so padding never changes a real position
                idx[i, :len(r)] = torch.tensor(r)
                real[i, :len(r)] = True
            model(idx.to(device))
            for layer in range(n_layer):
                keys = catcher.keys[layer][real.to(device)].double().cpu()  # (n_real, d_ff)
                sums[layer] += keys.T @ keys
            count += int(real.sum())
            if progress:
                progress(min(start + BATCH, len(rows)), len(rows))
    moments = [(s / max(count, 1)).float() for s in sums]
    return KeyStatistics(moments=moments, count=count,
                         corpus_sha256=hashlib.sha256(corpus.encode("utf-8")).hexdigest())


def cache_dir(environ=None) -> Path:
    """Where the statistics are kept: ATTENTION_LAB_EDIT_CACHE, else the user's cache folder (XDG)."""
    environ = os.environ if environ is None else environ
    if environ.get(CACHE_ENV):
        return Path(environ[CACHE_ENV]).expanduser()
    base = Path(environ["XDG_CACHE_HOME"]).expanduser() if environ.get("XDG_CACHE_HOME") else \
        Path("~/.cache").expanduser()
    return base / "attention-lab" / "edit-statistics"


def cache_path(checkpoint: str | Path, checkpoint_sha256: str, corpus_sha256: str) -> Path:
    """The file for this checkpoint's bytes and this corpus: named by both hashes, never by the folder."""
    stem = "".join(c if c.isalnum() or c in "-_" else "_" for c in Path(checkpoint).stem)[:64]
    return cache_dir() / f"{stem}.{checkpoint_sha256[:16]}.{corpus_sha256[:16]}.key_moments.safetensors"


def _read_cache(path: Path, checkpoint_sha256: str, corpus_sha256: str) -> KeyStatistics | None:
    """The kept statistics when `path` is this module's file for this checkpoint and corpus; else None."""
    try:
        with safe_open(str(path), framework="pt", device="cpu") as fh:
            meta = fh.metadata() or {}
            if (meta.get("format") != CACHE_FORMAT or meta.get("checkpoint_sha256") != checkpoint_sha256
                    or meta.get("corpus_sha256") != corpus_sha256):
                return None
            n_layer = int(meta["n_layer"])
            moments = [fh.get_tensor(f"layer{i}") for i in range(n_layer)]
            return KeyStatistics(moments=moments, count=int(meta["count"]), corpus_sha256=corpus_sha256)
    except Exception:  # unreadable, foreign or truncated: not ours to trust
        return None


def _is_ours(path: Path) -> bool:
    try:
        with safe_open(str(path), framework="pt", device="cpu") as fh:
            return (fh.metadata() or {}).get("format") == CACHE_FORMAT
    except Exception:
        return False


def _write_cache(path: Path, stats: KeyStatistics, checkpoint_sha256: str) -> bool:
    """Atomically, and only where nothing is or our own older file is; False when it could not be kept."""
    if path.exists() and not _is_ours(path):
        return False
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        os.close(fd)
        try:
            meta = {"format": CACHE_FORMAT, "checkpoint_sha256": checkpoint_sha256,
                    "corpus_sha256": stats.corpus_sha256, "count": str(stats.count),
                    "n_layer": str(len(stats.moments)), "what": json.dumps("mean of k k^T per layer")}
            save_file({f"layer{i}": m.contiguous() for i, m in enumerate(stats.moments)}, tmp, metadata=meta)
            os.replace(tmp, path)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
    except OSError:
        return False
    return True


def key_statistics(checkpoint: str | Path | None, model: nn.Module, tokenizer, corpus: str,
                   progress: Progress | None = None) -> KeyStatistics:
    """C for this checkpoint: read from the cache folder (`cache_dir`) when kept for the same file and corpus,
    else computed (and kept when that folder allows). `checkpoint` None: computed, nothing written. Nothing is
    ever written beside the checkpoint."""
    if checkpoint is None or not Path(checkpoint).is_file():
        return compute_key_statistics(model, tokenizer, corpus, progress)
    sha = file_sha256(checkpoint)
    corpus_sha = hashlib.sha256(corpus.encode("utf-8")).hexdigest()
    path = cache_path(checkpoint, sha, corpus_sha)
    kept = _read_cache(path, sha, corpus_sha) if path.is_file() else None
    if kept is not None:
        return kept
    stats = compute_key_statistics(model, tokenizer, corpus, progress)
    _write_cache(path, stats, sha)
    return stats
