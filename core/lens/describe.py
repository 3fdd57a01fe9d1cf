"""Plain-data descriptions of a checkpoint for the model card (no streamlit here)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from core.io.checkpoint import CheckpointInfo

TASK_NAMES = {"lm": "language model", "birthplace": "birthplace QA (CS224N)", "classify": "classifier"}


def vocabulary_record(metadata: dict[str, Any]) -> dict[str, Any]:
    """The `vocabulary` record of a run (lm, classify): a JSON string in a file, a dict before saving;
    {} when there is none or it cannot be read (a checkpoint is untrusted input)."""
    record = metadata.get("vocabulary")
    if isinstance(record, str):
        try:
            record = json.loads(record)
        except (ValueError, RecursionError):
            return {}
    return record if isinstance(record, dict) else {}


def describe_vocabulary(metadata: dict[str, Any], tokenizer: dict[str, Any], size: int) -> str:
    """One line: size, level, splitter and what the vocabulary was built from (each --vocab-from file with
    the start of its sha256), e.g. '6,136 entries (word, nltk splitter), built from train_CLS.tsv (sha256
    1c2b…), train_LM.txt (…)'. `tokenizer` is the checkpoint's tokenizer description."""
    kind = str(tokenizer.get("kind", "?"))
    splitter = f", {tokenizer.get('splitter', 'regex')} splitter" if kind == "word" else ""
    line = f"{size:,} entries ({kind}{splitter})"
    record = vocabulary_record(metadata)
    files = [f for f in record.get("files") or [] if isinstance(f, dict)]
    if files:
        names = (f"{Path(str(f.get('path', '?'))).name} (sha256 {str(f.get('sha256', '?'))[:12]})" for f in files)
        return f"{line}, built from {', '.join(names)}"
    if record.get("from"):
        return f"{line}, taken from {record['from']}"
    return f"{line}, built from the training text" if record else line


def parameter_count(config: dict[str, Any]) -> int | None:
    """Count by building the model on the meta device: exact, and allocates nothing."""
    from core.model.config import ConfigError, ModelConfig
    from core.model.meta_device import shapes_only
    from core.model.transformer import Transformer

    try:
        with shapes_only():
            return Transformer(ModelConfig.from_dict(config)).num_parameters()
    except (ConfigError, TypeError, ValueError):
        return None


def tied_head_values(path: str | Path) -> int:
    """How many numbers the file's output head repeats of its embedding: V·C when `head.unembed.weight` equals
    `tok_emb.weight` (a converted nanoGPT model stores its tied tensor twice), else 0. Reads only those two."""
    import torch
    from safetensors import safe_open

    try:
        with safe_open(str(path), framework="pt", device="cpu") as fh:
            if not {"tok_emb.weight", "head.unembed.weight"} <= set(fh.keys()):
                return 0
            if fh.get_slice("tok_emb.weight").get_shape() != fh.get_slice("head.unembed.weight").get_shape():
                return 0
            embedding, head = fh.get_tensor("tok_emb.weight"), fh.get_tensor("head.unembed.weight")
            return embedding.numel() if torch.equal(embedding, head) else 0
    except Exception:  # unreadable or foreign: the card counts the architecture as it is
        return 0


def model_card(info: CheckpointInfo) -> dict[str, str]:
    """Ordered label -> value rows for the sidebar card."""
    if info.error:
        return {"Problem": info.error}
    meta, cfg = info.metadata, info.config
    rows = {
        "Task": TASK_NAMES.get(meta.get("task", ""), str(meta.get("task"))),
        "Architecture": (f"{'decoder' if cfg.get('causal', True) else 'encoder'}, "
                         f"{cfg.get('n_layer')} layers x {cfg.get('n_head')} heads, "
                         f"width {cfg.get('n_embd')}, block {cfg.get('block_size')}"),
        "Attention": str(cfg.get("attention")),
        "Positional encoding": str(cfg.get("positional")),
    }
    count = parameter_count(cfg)
    if count is not None:
        tied = tied_head_values(info.path) if Path(info.path).is_file() else 0
        rows["Parameters"] = (f"{count - tied:,} (the output head shares the embedding's weights: counted once)"
                              if tied else f"{count:,}")
    tokenizer, size = meta.get("tokenizer"), cfg.get("vocab_size")
    if isinstance(tokenizer, dict) and isinstance(size, int):
        rows["Vocabulary"] = describe_vocabulary(meta, tokenizer, size)
    data = meta.get("data") or []
    if data:
        names = (str(d.get("path", "?")).rsplit("/", 1)[-1] for d in data if isinstance(d, dict))
        rows["Data"] = ", ".join(names)
    metrics = meta.get("metrics") or {}
    if metrics:
        rows["Final metrics"] = ", ".join(
            f"{k} {v:.4g}" if isinstance(v, (int, float)) else f"{k} {v}" for k, v in metrics.items())
    rows["File"] = f"{info.path.name} ({info.size_bytes / 1e6:.1f} MB)"
    return rows
