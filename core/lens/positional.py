"""What the positional-encodings page shows, as plain data: pure functions, no streamlit.

Four parts, in the page's order:
- the encodings themselves: the sinusoidal table (Vaswani et al. 2017), a learned table read from a
  checkpoint, cosine similarity between position vectors, ALiBi's per-head biases (Press et al. 2022),
  and RoPE's query-key score as a function of relative distance (Su et al. 2021);
- which checkpoints differ only in their positional scheme (found by comparing configs, not names),
  and one sentence through each of them: attention maps and mean attention by query-key distance;
- their training histories (from checkpoint metadata only);
- length extrapolation (the last tab) has its own home, `core.lens.extrapolation`: one planner and runner
  for the page and the command line.

Every figure's numbers come from the functions that the model itself uses (`core.model.positional`), so
what the page draws is what the models compute.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import torch

from core.io.checkpoint import CheckpointInfo
from core.lens.history.records import empty_frame, history_from_metadata
from core.lens.trace import Trace, TraceError, trace_text
from core.model.positional import (
    alibi_bias,
    alibi_slopes,
    rope_angles,
    rope_rotate,
    scheme_label,
    scheme_order,
    sinusoidal_table,
)

# --------------------------------------------------------------------------- the encodings themselves


def sinusoidal_values(length: int, dim: int, base: float = 10000.0) -> np.ndarray:
    """(length, dim): PE(p, 2i) = sin(p / base^(2i/d)), PE(p, 2i+1) = cos(p / base^(2i/d))."""
    return sinusoidal_table(length, dim, base).numpy()


def cosine_similarity(vectors: np.ndarray) -> np.ndarray:
    """(P, D) -> (P, P) cosine similarity between every pair of rows; a zero row gives NaN."""
    vectors = np.asarray(vectors, dtype=np.float64)
    norms = np.linalg.norm(vectors, axis=1)
    safe = np.where(norms > 0, norms, np.nan)
    unit = vectors / safe[:, None]
    return unit @ unit.T


def learned_table(model) -> np.ndarray | None:
    """The learned position table `model.pos.table` (block_size, n_embd), or None for other schemes."""
    table = getattr(model.pos, "table", None)
    if table is None:
        return None
    return table.detach().cpu().double().numpy()


@dataclass
class AlibiView:
    slopes: list[float]  # one per head, Press et al.'s official sequence
    bias: np.ndarray  # (n_head, T, T): -slope * (i - j), what is added to the scaled scores

    def slope_rows(self) -> list[dict[str, Any]]:
        return [{"head": h, "slope": s, "as a power of 2": power_of_two_text(s),
                 "bias at distance 10": -10 * s} for h, s in enumerate(self.slopes)]


def power_of_two_text(value: float) -> str:
    exponent = math.log2(value)
    return f"2^{exponent:g}" if abs(exponent - round(exponent)) > 1e-9 else f"2^{round(exponent)}"


def alibi_view(n_head: int, length: int, causal: bool = True) -> AlibiView:
    """Slopes and the bias matrices exactly as `core.model.positional.ALiBi` adds them (not scaled by 1/sqrt(d))."""
    return AlibiView(alibi_slopes(n_head), alibi_bias(n_head, length, length, 0, causal).double().numpy())


def fixed_random_vector(head_size: int, seed: int = 0) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(head_size, generator=generator, dtype=torch.float64)


def rope_query_key_scores(q: torch.Tensor, k: torch.Tensor, query_positions: torch.Tensor,
                          key_positions: torch.Tensor, base: float = 10000.0) -> np.ndarray:
    """(Tq, Tk) dot products of q rotated to each query position with k rotated to each key position,
    with the model's own `rope_angles`/`rope_rotate`."""
    hs = q.numel()
    rq = rope_rotate(q.double().expand(len(query_positions), hs), rope_angles(query_positions, hs, base))
    rk = rope_rotate(k.double().expand(len(key_positions), hs), rope_angles(key_positions, hs, base))
    return (rq @ rk.T).numpy()


def rope_distance_scores(head_size: int, max_distance: int, vector: str = "ones", base: float = 10000.0,
                         seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """(distances 0..max_distance, q.k after rotation) for q = k = all-ones or a fixed random vector,
    the query at position m = distance and the key at position n = 0 (the score depends on m - n only)."""
    ones = torch.ones(head_size, dtype=torch.float64)
    q = ones if vector == "ones" else fixed_random_vector(head_size, seed)
    distances = torch.arange(max_distance + 1)
    scores = rope_query_key_scores(q, q, distances, torch.zeros(1, dtype=torch.long), base)[:, 0]
    return distances.numpy(), scores


def rope_decay_bound(head_size: int, max_distance: int, base: float = 10000.0
                     ) -> tuple[np.ndarray, np.ndarray]:
    """Su et al. (2021), section 3.4.3 and figure 2: the long-term decay of RoPE.

    With S_j = sum_{k<j} exp(i (m-n) theta_k), |q.k| <= max_i |h_{i+1} - h_i| * sum_j |S_j|; the figure
    plots the relative upper bound (1 / (d/2)) * sum_{j=1}^{d/2} |S_j| against m - n.
    """
    distances = np.arange(max_distance + 1, dtype=np.float64)
    theta = base ** (-np.arange(0, head_size, 2, dtype=np.float64) / head_size)  # (d/2,)
    partial = np.cumsum(np.exp(1j * distances[:, None] * theta[None, :]), axis=1)  # S_1..S_{d/2}
    return distances.astype(int), np.abs(partial).sum(axis=1) / (head_size // 2)


def rope_relative_matrix(length: int, head_size: int, base: float = 10000.0) -> np.ndarray:
    """(T, T): q.k for all-ones q = k rotated to positions m (rows) and n (columns).

    In closed form: sum_i 2 cos((m - n) theta_i), a function of m - n alone."""
    q = torch.ones(head_size, dtype=torch.float64)
    positions = torch.arange(length)
    return rope_query_key_scores(q, q, positions, positions, base)


NO_VECTOR_NOTE = {
    "alibi": "ALiBi has no per-position vector: it adds -slope x (i - j) to the score of query i and key j, "
             "so what it knows about position is this bias matrix (one per head; head 0 shown).",
    "rope": "RoPE has no per-position vector either: it rotates queries and keys, so a score depends on "
            "the distance m - n alone; shown is q.k for all-ones q = k rotated to positions m and n.",
}


@dataclass
class SimilarityPanel:
    key: str
    title: str
    matrix: np.ndarray | None  # None: nothing to show (no learned table loaded)
    value: str  # what the colour means
    zmin: float | None = None
    zmax: float | None = None
    note: str | None = None


def similarity_panels(sinusoid: np.ndarray, learned: np.ndarray | None, learned_name: str | None,
                      alibi: AlibiView, length: int, dim: int) -> list[SimilarityPanel]:
    """What "how similar are two positions" means for each scheme: cosine similarity of the vectors for
    the additive schemes, and for ALiBi / RoPE (no vectors) the position-pair term they add or compute."""
    return [
        SimilarityPanel("sin", "Sinusoidal: cosine similarity", cosine_similarity(sinusoid),
                        "cosine similarity", -1.0, 1.0),
        SimilarityPanel("learned", f"Learned ({learned_name}): cosine similarity",
                        cosine_similarity(learned) if learned is not None else None, "cosine similarity",
                        -1.0, 1.0),
        SimilarityPanel("alibi", f"ALiBi: bias of head 0 (slope {alibi.slopes[0]:.4g})", alibi.bias[0],
                        "bias", note=NO_VECTOR_NOTE["alibi"]),
        SimilarityPanel("rope", "RoPE: q·k, all-ones q = k", rope_relative_matrix(length, dim), "q·k",
                        note=NO_VECTOR_NOTE["rope"]),
    ]


def rope_curves(head_size: int, max_distance: int) -> tuple[np.ndarray, ...]:
    """(distances, all-ones scores, random scores, bound distances, Su et al.'s bound) for the figure."""
    distances, ones = rope_distance_scores(head_size, max_distance)
    _, random = rope_distance_scores(head_size, max_distance, vector="random")
    return (distances, ones, random, *rope_decay_bound(head_size, max_distance))


# --------------------------------------------------------------------------- same config, other positions


@dataclass
class PositionalFamily:
    """Checkpoints whose configs are identical except `positional` (and whose task is the same)."""

    members: list[CheckpointInfo]
    task: str
    shared: dict[str, Any]  # the config fields they share

    @property
    def positionals(self) -> list[str]:
        return [m.config.get("positional", "") for m in self.members]

    @property
    def names(self) -> list[str]:
        return [m.name for m in self.members]

    def describe(self) -> str:
        c = self.shared
        if len(self.members) == 1:  # the selected model, which no checkpoint matches but for its encoding
            return (f"{self.members[0].name} alone ({scheme_label(self.positionals[0])}): no checkpoint is the same "
                    f"model with another positional encoding; {c.get('n_layer')} layers, {c.get('n_head')} heads, "
                    f"{c.get('n_embd')} dimensions, block size {c.get('block_size')}")
        return (f"{len(self.members)} {self.task} checkpoints identical except positional encoding "
                f"({', '.join(scheme_label(p) for p in dict.fromkeys(self.positionals))}): "
                f"{c.get('n_layer')} layers, {c.get('n_head')} heads, {c.get('n_embd')} dimensions, "
                f"block size {c.get('block_size')}, {c.get('attention')} attention")


def positional_families(infos: Iterable[CheckpointInfo]) -> list[PositionalFamily]:
    """Group readable checkpoints by (task, config without `positional`); keep groups with at least two
    different schemes. Largest family first; members in the order sinusoidal, learned, ALiBi, RoPE."""
    groups: dict[str, list[CheckpointInfo]] = {}
    for info in infos:
        if info.error or not info.config:
            continue
        rest = {k: v for k, v in info.config.items() if k != "positional"}
        key = json.dumps([info.task, rest], sort_keys=True, default=str)
        groups.setdefault(key, []).append(info)
    families = []
    for key, members in groups.items():
        if len({m.config.get("positional") for m in members}) < 2:
            continue
        members = sorted(members, key=lambda m: (scheme_order(m.config.get("positional", "")), m.name))
        task, shared = json.loads(key)
        families.append(PositionalFamily(members, task, shared))
    return sorted(families, key=lambda f: (-len(f.members), f.names))


def family_for(families: Sequence[PositionalFamily], name: str | None) -> int:
    """Index of the family that holds checkpoint `name` (the picker's), else 0."""
    for i, family in enumerate(families):
        if name in family.names:
            return i
    return 0


def with_selected(families: Sequence[PositionalFamily], selected: CheckpointInfo | None
                  ) -> tuple[list[PositionalFamily], int]:
    """The families to choose from and the one to open on: the selected model's family; a selected causal LM that
    is in none (a nanoGPT model, a Hugging Face folder) as a family of its own, first, so the page shows it."""
    families = list(families)
    if selected is None or selected.error or not is_causal_lm(selected):
        return families, family_for(families, None)
    if any(selected.name in f.names for f in families):
        return families, family_for(families, selected.name)
    shared = {k: v for k, v in selected.config.items() if k != "positional"}
    return [PositionalFamily([selected], selected.task or "lm", shared), *families], 0


def is_causal_lm(info: CheckpointInfo) -> bool:
    return info.config.get("head", "lm") == "lm" and bool(info.config.get("causal", True))


# --------------------------------------------------------------------------- one sentence, several models


class SentenceError(ValueError):
    """A sentence the page cannot run; str() is one sentence for the user."""


@dataclass
class SentenceAttention:
    """A view over one Trace of a sentence: its tokens, attention and mask, and how much was cut."""

    record: Trace

    @property
    def tokens(self) -> list[str]:
        return self.record.tokens

    @property
    def attention(self) -> np.ndarray:
        return self.record.attention  # (n_layer, n_head, T, T): the model's own probabilities

    @property
    def allowed(self) -> np.ndarray:
        return self.record.allowed  # (T, T) bool

    @property
    def unknown(self) -> list[str]:
        return self.record.unknown

    @property
    def cut(self) -> int:
        return self.record.cut  # tokens left out past the limit


def sentence_attention(model, tokenizer, text: str, max_tokens: int) -> SentenceAttention:
    """Tokenise, keep at most max_tokens (and never more than the model can encode), one traced pass."""
    limit = max_tokens if model.max_length is None else min(max_tokens, model.max_length)
    try:
        return SentenceAttention(trace_text(model, tokenizer, text, limit, "start"))
    except TraceError as exc:
        raise SentenceError("The sentence is empty; type a few words." if not text.strip() or
                            "nothing to read" in str(exc) else str(exc)) from None


def attention_by_distance(attention: np.ndarray, allowed: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Mean attention weight at each query-key distance d = i - j, per layer and head.

    attention (L, H, T, T), allowed (T, T) -> (distances, (L, H, D)): the mean over the allowed (i, j)
    with i - j = d, i.e. over the query positions that have a key at that distance. Distances run from
    the most negative allowed one (0 for causal models) to T - 1; NaN where no pair exists.
    """
    attention = np.asarray(attention, dtype=np.float64)
    T = attention.shape[-1]
    i, j = np.nonzero(allowed)
    d = i - j
    distances = np.arange(d.min() if d.size else 0, T)
    sums = np.zeros(attention.shape[:2] + (len(distances),))
    np.add.at(sums, (slice(None), slice(None), d - distances[0]), attention[:, :, i, j])
    counts = np.bincount(d - distances[0], minlength=len(distances)).astype(float)
    with np.errstate(invalid="ignore", divide="ignore"):
        means = sums / np.where(counts > 0, counts, np.nan)
    return distances, means


# --------------------------------------------------------------------------- training histories


def training_frame(infos: Sequence[CheckpointInfo]) -> tuple[pd.DataFrame, list[str]]:
    """Every member's history rows (run = checkpoint name), plus train perplexity = exp(train loss)
    where the trainer logged only the loss (it logs perplexity on the dev split only)."""
    frames, notes = [], []
    for info in infos:
        loaded = history_from_metadata(info.metadata, info.name)
        notes += loaded.notes
        frame = loaded.frame
        has_train_ppl = ((frame["split"] == "train") & (frame["metric"] == "perplexity")).any()
        if not has_train_ppl:
            train_loss = frame[(frame["split"] == "train") & (frame["metric"] == "loss")].copy()
            train_loss["metric"] = "perplexity"
            train_loss["value"] = np.exp(np.minimum(train_loss["value"].to_numpy(float), 50.0))
            frame = pd.concat([frame, train_loss], ignore_index=True)
        frames.append(frame)
    frames = [f for f in frames if not f.empty]
    return (pd.concat(frames, ignore_index=True) if frames else empty_frame()), notes


def _last(frame: pd.DataFrame, run: str, split: str, metric: str) -> float:
    rows = frame[(frame["run"] == run) & (frame["split"] == split) & (frame["metric"] == metric)]
    rows = rows.sort_values("step", kind="stable")
    values = rows["value"].to_numpy(float)
    values = values[np.isfinite(values)]
    return float(values[-1]) if values.size else math.nan


def training_table(frame: pd.DataFrame, infos: Sequence[CheckpointInfo]) -> pd.DataFrame:
    """Final train loss (the last logged batch), final dev loss and their perplexities, per checkpoint."""
    rows = []
    for info in infos:
        train, dev = _last(frame, info.name, "train", "loss"), _last(frame, info.name, "val", "loss")
        dev_ppl = _last(frame, info.name, "val", "perplexity")
        rows.append({"checkpoint": info.name, "positional": scheme_label(info.config.get("positional", "")),
                     "final train loss": train, "final dev loss": dev,
                     "train perplexity": math.exp(min(train, 50)) if math.isfinite(train) else math.nan,
                     "dev perplexity": dev_ppl if math.isfinite(dev_ppl) else
                     (math.exp(min(dev, 50)) if math.isfinite(dev) else math.nan)})
    return pd.DataFrame(rows, columns=["checkpoint", "positional", "final train loss", "final dev loss",
                                       "train perplexity", "dev perplexity"])
