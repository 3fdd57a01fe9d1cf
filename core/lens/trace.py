"""One forward pass, recorded: what every analysis reads instead of running the model itself.

`trace(model, ids)` is to this lab what TransformerLens's `run_with_cache` is to its users: the attention
page, the positional page's sentence view, the probe's "where does it look" and the export command
all ask for a `Trace`, so the pass (device, inference mode, the model's own mask) is written once.
`trace(..., queries_keys=True)` also keeps each layer's queries and keys from that same pass (the
query-key view: why a weight is what it is); `trace(..., activations=True)` keeps, from that same pass, the
residual stream before and after each block, each head's and each MLP's output and the final LayerNorm's
scale (`Activations`, read through the model's hook points, core.model.hooks): what the where-from views
(logit lens, direct attribution, causal tracing) read.

`trace_text(model, tokenizer, text, limit, keep)` is the one rule for inputs longer than a view reads: keep the
first `limit` tokens (a sentence read from its start) or the last (a prompt the model answers after, as
generation crops it), and say how many were left out. Every view over a Trace (the attention page's
`AttentionRun`, the positional page's `SentenceAttention`, the probe's `AnswerAttention`) cuts through it and
raises `TraceError` for input the model refuses.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
import torch

from core.text import visible_token


class TraceError(ValueError):
    """Input the model refuses (too long for its positions); str() is one sentence for the user."""


class AttentionShape:
    """Sizes read from `attention` (n_layer, n_head, T, T) and `ids`, for every record of a pass."""

    attention: np.ndarray
    ids: list[int]

    @property
    def n_layer(self) -> int:
        return self.attention.shape[0]

    @property
    def n_head(self) -> int:
        return self.attention.shape[1]

    @property
    def n_tokens(self) -> int:
        return len(self.ids)


@dataclass
class LayerQueryKey:
    """One layer's queries and keys as its scores used them: scores = q @ k^T * scale (soft-capped where `softcap`:
    softcap * tanh(s / softcap)) + bias, masked, softmax."""

    q: np.ndarray  # (n_head, T, hs) float32, after the positional scheme (RoPE: rotated)
    k: np.ndarray  # (n_head, T, hs) float32
    scale: float  # 1/sqrt(hs), or what a Hugging Face module scales by
    bias: np.ndarray | None  # (n_head, T, T) added after scaling (ALiBi), or None
    softcap: float | None = None  # the cap on the scaled scores (Gemma 2), or None


def layer_queries_keys(records: list) -> list[LayerQueryKey | None]:
    """The model's QueryKey records (batch 0) as numpy; a bias equal to the previous layer's is shared."""
    out: list[LayerQueryKey | None] = []
    last_bias = None
    for record in records:
        if record is None:  # a layer without a query-key product (the synthesizer)
            out.append(None)
            continue
        bias = None if record.bias is None else record.bias.float().cpu().numpy()
        if bias is not None and last_bias is not None and np.array_equal(bias, last_bias):
            bias = last_bias  # ALiBi's bias is the same in every layer: kept (and cached) once
        last_bias = bias if bias is not None else last_bias
        out.append(LayerQueryKey(q=record.q[0].float().cpu().numpy(), k=record.k[0].float().cpu().numpy(),
                                 scale=float(record.scale), bias=bias, softcap=getattr(record, "softcap", None)))
    return out


@dataclass
class Activations:
    """One pass's residual stream and what each sublayer wrote into it (batch row 0, float32, on the CPU).

    For a pre-norm model resid_post[l] = resid_pre[l] + attn_out[l] + mlp_out[l], resid_pre[l + 1] =
    resid_post[l], and attn_out[l] = head_out[l].sum(0) + attn_bias[l]; resid_pre[0] is the embedding (token
    plus position). `final_scale` is sqrt(var + eps) of the stream entering the final LayerNorm (an RMSNorm's:
    sqrt(mean(x^2) + eps)), per position: the divisor direct attribution freezes (as TransformerLens's
    `apply_ln_to_stack` does).
    A field is None where the architecture has no such quantity (a BERT-family encoder is post-norm: its
    sublayer outputs are normalised before the sum, so only its residual stream is recorded)."""

    resid_pre: np.ndarray  # (L, T, C)
    resid_post: np.ndarray  # (L, T, C)
    attn_out: np.ndarray | None = None  # (L, T, C)
    head_out: np.ndarray | None = None  # (L, H, T, C): each head's share after the output projection, no bias
    attn_bias: np.ndarray | None = None  # (L, C): the output projection's bias (added once, not per head)
    mlp_out: np.ndarray | None = None  # (L, T, C)
    final_scale: np.ndarray | None = None  # (T,)

    @property
    def embedded(self) -> np.ndarray:
        return self.resid_pre[0]  # (T, C)


def activations_from(recorder, final_norm=None) -> Activations:
    """A core.model.hooks.Recorder's lists as one Activations; `final_norm`: the model's final LayerNorm."""
    def stack(xs: list) -> np.ndarray | None:
        return np.stack([x.numpy() for x in xs]) if xs and all(x is not None for x in xs) else None

    from core.model.readout import norm_divisor

    post = stack(recorder.post)
    scale = None
    if final_norm is not None and post is not None:
        scale = norm_divisor(final_norm, post[-1]).astype(np.float32)  # LayerNorm's or RMSNorm's divisor
    return Activations(resid_pre=stack(recorder.pre), resid_post=post, attn_out=stack(recorder.attn),
                       head_out=stack(recorder.head_out), attn_bias=stack(recorder.attn_bias),
                       mlp_out=stack(recorder.mlp), final_scale=scale)


@dataclass
class Trace(AttentionShape):
    ids: list[int]  # what the model read, (T,)
    tokens: list[str]  # one display label per id (core.text.visible_token)
    attention: np.ndarray  # (n_layer, n_head, T, T) float32: the model's own probabilities
    allowed: np.ndarray  # (T, T) bool: exactly the model's mask, True where a query may attend a key
    logits: torch.Tensor  # (1, T, V) for language models, (1, n_classes) for classifiers; model's device
    idx: torch.Tensor  # (1, T) the ids as a tensor on the model's device (for generation after the pass)
    queries_keys: list[LayerQueryKey | None] | None = None  # per layer, when asked for; None: not recorded
    activations: Activations | None = None  # when asked for; None: not recorded
    n_input_tokens: int = 0  # tokens of the text before any cut (trace_text); 0: ids given directly
    cut: int = 0  # tokens left out (trace_text): from the end (keep="start") or the front (keep="end")
    unknown: list[str] = field(default_factory=list)  # distinct input pieces the vocabulary lacks (trace_text)
    # every row's attention when traced as a batch (trace_batch): (n_layer, B, n_head, T, T), the model's own
    # tensor on the CPU; `attention`, `ids` and `tokens` are then row 0's. None: one sequence was traced.
    rows_attention: torch.Tensor | None = None
    # every row's residual stream when traced as a batch with streams=True: (n_layer + 1, B, T, C) float32 on the
    # CPU, the embedding (entering block 0) then the stream after each block, from the same pass. None: not asked.
    rows_stream: torch.Tensor | None = None


def model_device(model) -> torch.device:
    return next(model.parameters()).device


# Called as a model works through many inputs (questions, windows, batches): (done, total).
Progress = Callable[[int, int], None]


def final_norm(model):
    """The model's final LayerNorm (None for a model that reads nothing out through one)."""
    try:
        return model.readout()[0]
    except (AttributeError, ValueError):
        return None


def trace(model, ids: Sequence[int], tokens: Sequence[str] | None = None, queries_keys: bool = False,
          activations: bool = False) -> Trace:
    """Run `model` once on `ids` with attention recorded. `tokens`: the raw token strings for the
    labels (default: one per id, unlabelled positions numbered). `queries_keys`: also keep every layer's
    queries and keys (recorded by the attention layers themselves in this pass). `activations`: also keep
    the residual stream and every sublayer's output (`Activations`, through the model's hook points)."""
    from core.model.hooks import Recorder  # the model package's hook points; imported where used

    ids = [int(i) for i in ids]
    if tokens is not None and len(tokens) != len(ids):
        raise ValueError(f"{len(tokens)} token labels for {len(ids)} ids.")
    if not ids:
        raise TraceError("There is nothing to read: the input has no tokens.")
    idx = torch.tensor([ids], dtype=torch.long, device=model_device(model))  # (1, T)
    recorder = Recorder() if activations else None
    try:
        with torch.inference_mode():
            records: list | None = [] if queries_keys else None
            extra = {} if recorder is None else {"hooks": recorder}
            logits, attention = model.run_with_attention(idx, queries_keys=records, **extra)  # (L, 1, H, T, T)
            allowed = model.attention_mask(idx)[0, 0]  # (T, T)
    except ValueError as exc:  # a length the model refuses: already one sentence
        raise TraceError(str(exc)) from None
    labels = [visible_token(t) for t in tokens] if tokens is not None else [str(i) for i in range(len(ids))]
    return Trace(ids=ids, tokens=labels, attention=attention[:, 0].float().cpu().numpy(),
                 allowed=allowed.cpu().numpy().astype(bool), logits=logits, idx=idx,
                 queries_keys=layer_queries_keys(records) if records is not None else None,
                 activations=activations_from(recorder, final_norm(model)) if recorder is not None else None,
                 n_input_tokens=len(ids))


def trace_batch(model, rows: Sequence[Sequence[int]], logits: bool = True, streams: bool = False) -> Trace:
    """`trace` over several sequences of one length in one pass (what a score over many generated probes
    reads, e.g. the head roles of core.lens.heads): the record is row 0's, and `rows_attention` holds every
    row's attention as the model returned it, (n_layer, B, n_head, T, T). `logits=False`: a record of attention
    only (its `logits` an empty tensor): the model's output head is not run. `streams=True`: `rows_stream` also
    holds every row's residual stream from the same pass (core.model.hooks.StreamRecorder; the probes read it)."""
    from core.model.hooks import StreamRecorder

    rows = [[int(i) for i in row] for row in rows]
    if not rows or not rows[0]:
        raise TraceError("There is nothing to read: the input has no tokens.")
    if len({len(row) for row in rows}) > 1:
        raise ValueError("Rows traced together must have one length.")
    idx = torch.tensor(rows, dtype=torch.long, device=model_device(model))  # (B, T)
    recorder = StreamRecorder() if streams else None
    extra = {} if recorder is None else {"hooks": recorder}
    try:
        with torch.inference_mode():
            out, attention = model.run_with_attention(idx, **extra) if logits else \
                model.run_with_attention(idx, logits=False, **extra)  # (L, B, H, T, T)
            allowed = model.attention_mask(idx)[0, 0]  # (T, T): row 0's
    except ValueError as exc:
        raise TraceError(str(exc)) from None
    attention = attention.float().cpu()
    return Trace(ids=rows[0], tokens=[str(i) for i in range(len(rows[0]))], attention=attention[:, 0].numpy(),
                 allowed=allowed.cpu().numpy().astype(bool), logits=out[:1] if out is not None else torch.empty(0),
                 idx=idx[:1], n_input_tokens=len(rows[0]), rows_attention=attention,
                 rows_stream=recorder.stacked() if recorder is not None and recorder.post else None)


def cut_to_limit(n_tokens: int, limit: int, keep: str = "start") -> slice:
    """The one rule for an input longer than a view reads: the first `limit` tokens (keep="start": a sentence
    read from its beginning) or the last `limit` (keep="end": a prompt, cropped as generation crops it)."""
    if keep not in ("start", "end"):
        raise ValueError(f"keep must be 'start' or 'end', got {keep!r}.")
    limit = max(int(limit), 1)
    return slice(0, limit) if keep == "start" else slice(max(0, n_tokens - limit), n_tokens)


def trace_text(model, tokenizer, text: str, limit: int, keep: str = "start", queries_keys: bool = False,
               activations: bool = False, tokenized=None) -> Trace:
    """Tokenise `text` (or take its `tokenized` form), cut it to `limit` tokens by `cut_to_limit`, one
    `trace`. The Trace says how many tokens the text had and how many were left out, and which pieces the
    vocabulary lacks (among those read)."""
    tokenized = tokenizer.tokenize(text) if tokenized is None else tokenized
    if not tokenized.ids:
        raise TraceError("There is nothing to read: the text has no tokens this model knows how to split.")
    window = cut_to_limit(len(tokenized.ids), limit, keep)
    ids, raw = tokenized.ids[window], tokenized.tokens[window]
    record = trace(model, ids, raw, queries_keys=queries_keys, activations=activations)
    kept = set(raw)
    record.n_input_tokens = len(tokenized.ids)
    record.cut = len(tokenized.ids) - len(ids)
    record.unknown = [p for p in tokenized.unknown if p in kept]
    return record
