"""Why this weight: one row of attention taken apart into the numbers it is made of.

For one layer, head and query token i, from the queries and keys a `Trace` recorded in its own pass
(`trace(..., queries_keys=True)`; the attention layers record them, nothing here recomputes a layer):

    products[j, d] = q_i[d] * k_j[d]            per dimension d of the head
    dot_j          = sum_d products[j, d]        the query-key product
    scaled_j       = dot_j * scale               scale = 1/sqrt(d_head)
    capped_j       = cap * tanh(scaled_j / cap)  Gemma 2's soft cap on the scores; no cap: scaled_j
    score_j        = capped_j + bias_j           ALiBi's distance penalty; 0 for other schemes
    weight         = softmax over the keys the mask allows (masked keys: exactly 0)

`tests/test_query_key.py` checks `weights` equals the trace's attention to 1e-6 for every positional scheme
and for Hugging Face BERT and GPT-2 folders. Numbers are float64 from the model's float32 q and k.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from core.lens.trace import LayerQueryKey

NO_QUERY_KEY = ("The synthesizer makes each weight from the query token alone and a learned column per key "
                "position, with no query-key product, so there is nothing here to take apart.")
TOP_DIMENSIONS = 12


class QueryKeyError(ValueError):
    """What the view cannot show for this model or pass; str() is one sentence for the user."""


@dataclass
class QueryKeyRow:
    """One query's row of one head, every step from q and k to the weight."""

    layer: int
    head: int
    query: int
    q: np.ndarray  # (hs,) the query vector q_i (after RoPE's rotation when the scheme is RoPE)
    keys: np.ndarray  # (T, hs) every key k_j of the head
    products: np.ndarray  # (T, hs) q_i[d] * k_j[d]
    dots: np.ndarray  # (T,) sum over d
    scale: float
    bias: np.ndarray | None  # (T,) added after scaling, or None (no score bias in this scheme)
    softcap: float | None  # the cap on the scaled scores (Gemma 2), or None
    allowed: np.ndarray  # (T,) bool: keys the mask lets this query attend
    scores: np.ndarray  # (T,) scaled dot (capped) + bias (before the mask)
    weights: np.ndarray  # (T,) the softmax over allowed keys; masked keys exactly 0

    @property
    def head_size(self) -> int:
        return self.q.shape[0]

    @property
    def n_keys(self) -> int:
        return self.keys.shape[0]

    def best_key(self) -> int:
        """The key this query weighs most (the view's default key)."""
        return int(np.argmax(np.where(self.allowed, self.weights, -1.0)))


def queries_keys_of(records: list[LayerQueryKey | None] | None, layer: int) -> LayerQueryKey:
    """The layer's record, or QueryKeyError with the one sentence saying why there is none."""
    if records is None:
        raise QueryKeyError("This pass did not record queries and keys; run it with queries_keys=True.")
    record = records[layer]
    if record is None:
        raise QueryKeyError(NO_QUERY_KEY)
    return record


def decompose(record: LayerQueryKey, allowed_row: np.ndarray, layer: int, head: int, query: int) -> QueryKeyRow:
    """Every step of one row: record (the layer's q, k, scale, bias), allowed_row (T,) the mask's row."""
    q = record.q[head, query].astype(np.float64)  # (hs,)
    keys = record.k[head].astype(np.float64)  # (T, hs)
    products = keys * q  # (T, hs)
    dots = products.sum(axis=1)  # (T,)
    bias = None if record.bias is None else record.bias[head, query].astype(np.float64)  # (T,)
    softcap = getattr(record, "softcap", None)
    scores = dots * record.scale
    if softcap is not None:
        scores = softcap * np.tanh(scores / softcap)
    scores = scores + (0.0 if bias is None else bias)
    allowed = np.asarray(allowed_row, dtype=bool)
    weights = np.zeros_like(scores)
    if allowed.any():
        shifted = np.exp(scores[allowed] - scores[allowed].max())
        weights[allowed] = shifted / shifted.sum()
    return QueryKeyRow(layer=layer, head=head, query=query, q=q, keys=keys, products=products, dots=dots,
                       scale=float(record.scale), bias=bias, softcap=softcap, allowed=allowed, scores=scores,
                       weights=weights)


def top_dimensions(row: QueryKeyRow, key: int, n: int = TOP_DIMENSIONS) -> tuple[np.ndarray, np.ndarray]:
    """The dimensions that move key `key`'s dot product most, largest |q_i[d] k_j[d]| first: (dims, products)."""
    products = row.products[key]
    order = np.argsort(-np.abs(products), kind="stable")[: min(n, row.head_size)]
    return order, products[order]


@dataclass
class Step:
    """One line of the sum as the view writes it: what is done, and the number it gives."""

    what: str
    value: float


def weight_steps(row: QueryKeyRow, key: int, bias_name: str = "position bias") -> list[Step]:
    """From the dot product to the weight of (query, key), each step with its number; the last is the weight."""
    steps = [Step(f"q·k = sum of {row.head_size} products", float(row.dots[key])),
             Step(f"× scale {row.scale:.4g} (1/√{row.head_size})" if abs(row.scale * np.sqrt(row.head_size) - 1) < 1e-6
                  else f"× scale {row.scale:.4g}", float(row.dots[key] * row.scale))]
    if row.softcap is not None:
        capped = row.softcap * np.tanh(row.dots[key] * row.scale / row.softcap)
        steps.append(Step(f"soft cap {row.softcap:g}·tanh(x / {row.softcap:g})", float(capped)))
    if row.bias is not None:
        steps.append(Step(f"+ {bias_name} {row.bias[key] + 0.0:+.4g}", float(row.scores[key])))  # +0.0: never '-0'
    if not row.allowed[key]:
        steps.append(Step("masked: this query may not attend this key", 0.0))
        return steps
    allowed_scores = row.scores[row.allowed]
    top = float(allowed_scores.max())
    total = float(np.exp(allowed_scores - top).sum())
    steps.append(Step(f"exp(score − max score {top:.4g})", float(np.exp(row.scores[key] - top))))
    steps.append(Step(f"÷ sum of exp over {int(row.allowed.sum())} allowed keys ({total:.4g}) = weight",
                      float(row.weights[key])))
    return steps


def contribution_caption(row: QueryKeyRow, key: int, n: int = 3) -> str:
    """One sentence, computed from the products shown: how much of the dot product the top dimensions give."""
    dims, values = top_dimensions(row, key, n)
    named = ", ".join(str(int(d)) for d in dims[:-1]) + (" and " if len(dims) > 1 else "") + str(int(dims[-1]))
    rest = float(row.dots[key] - values.sum())
    return (f"Dimensions {named} ({len(dims)} of {row.head_size}) give {values.sum():+.3g} of the dot product "
            f"{row.dots[key]:+.3g}; the other {row.head_size - len(dims)} give {rest:+.3g}.")
