"""Plain-data descriptions of a checkpoint for the model card (no streamlit here)."""

from __future__ import annotations

from typing import Any

from core.io.checkpoint import CheckpointInfo

TASK_NAMES = {"lm": "language model", "birthplace": "birthplace QA (CS224N)", "classify": "classifier"}


def parameter_count(config: dict[str, Any]) -> int | None:
    """Count by building the model on the meta device: exact, and allocates nothing."""
    import torch

    from core.model.config import ConfigError, ModelConfig
    from core.model.transformer import Transformer

    try:
        with torch.device("meta"):
            return Transformer(ModelConfig.from_dict(config)).num_parameters()
    except (ConfigError, TypeError, ValueError):
        return None


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
        rows["Parameters"] = f"{count:,}"
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
