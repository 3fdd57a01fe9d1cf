"""The Hugging Face families the lab reads: one `Family` entry per architecture, behind one interface.

A family says where its pieces are in a `transformers` model (module paths from the `...ForCausalLM` /
`...ForMaskedLM` object), how its queries and keys reach the scores (`queries_keys`: the projections' outputs
as the layer captured them, with the family's own rotary function from its modeling module, applied exactly
as the attention layer applies it), and how its final norm reads the stream (`norm`). `core.io.hf` hooks
these paths; nothing here runs a model.

    family        positions                    final norm                 decoder layer
    gpt2          learned absolute (wpe)       LayerNorm                  pre-norm, attn then MLP
    llama/mistral rotary, grouped k/v heads    RMSNorm                    pre-norm, attn then MLP
    qwen2         rotary (q/k biases), GQA     RMSNorm                    pre-norm
    qwen3         rotary after q/k RMSNorm     RMSNorm                    pre-norm
    gemma         rotary, GQA                  RMSNorm with (1 + w)       pre-norm; embeddings x sqrt(d)
    phi3          rotary (partial: Phi-4-mini) RMSNorm                    pre-norm; one qkv_proj (q | k | v, GQA)
    gemma3_text   rotary after q/k RMSNorm;    RMSNorm with (1 + w); the  pre-norm, embeddings x sqrt(d); each
                  local base on sliding-       output logits soft-capped  sublayer's output normed again before it
                  window layers, global base   where the config caps them joins the stream (attn_out, mlp: the
                  on full-attention layers     (final_softcap)            post-norms); score scale
                                                                          query_pre_attn_scalar^-0.5
    gemma2        rotary; local and global     as gemma3_text (output     as gemma3_text, and the scaled scores
                  layers share one base        logits capped: 30 in the   soft-capped, cap * tanh(s / cap), before
                                               released models)           the mask (`softcap`: QueryKey.softcap)
    gpt_neox      partial rotary (rotary_pct)  LayerNorm                  parallel (or serial) residual
    phi           partial rotary               LayerNorm; head has bias   parallel residual
    opt           learned absolute (offset 2)  LayerNorm                  pre-norm (post-norm: 350m)
    bloom         ALiBi (a score bias)         LayerNorm                  adds its residual inside attention:
                                                                          attention and query-key only
    bert family   learned absolute             (post-norm: no lens)       encoder

A model type not listed here is named in one sentence by `core.io.hf.check_folder` and never half-drawn (`NOT_READ`:
the types with a sentence of their own, such as Gemma 3's image-and-text `gemma3`).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

# What a family's `queries_keys` reads: the outputs of the projections (as hooked), the attention module,
# and the keyword arguments its forward received (rotary families: `position_embeddings` = (cos, sin); BLOOM:
# `alibi`). It returns q, k (B, n_head, T, hs) and the score bias added after scaling ((n_head, T, T)) or None.
Captured = dict[str, Any]
QueriesKeys = Callable[[nn.Module, Captured, int], tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]]


@dataclass(frozen=True)
class Family:
    """One architecture. Paths are dotted attribute paths from the loaded transformers model; a None path:
    the family has no such piece. `projections`: the module names (on the attention module) whose outputs
    `queries_keys` reads."""

    label: str  # what the card shows: "LLaMA", "GPT-NeoX"
    causal: bool
    positions: str  # "learned absolute", "rotary", "partial rotary"
    layers: str  # "model.layers"
    attention: str  # attribute of a layer: "self_attn"
    projections: tuple[str, ...]  # on the attention module: ("q_proj", "k_proj")
    queries_keys: QueriesKeys
    out_proj: str | None = None  # on the attention module: its output projection ("o_proj")
    mlp: str | None = None  # on the layer: what joins the residual after the MLP ("mlp"; OPT: "fc2"; Gemma 3: a norm)
    embed: str | None = None  # the token embedding ("model.embed_tokens")
    final_norm: str | None = None  # ("model.norm")
    lm_head: str | None = None  # ("lm_head")
    norm: str = "layernorm"  # "layernorm" | "rms" | "rms (1 + w)"
    conv1d: bool = False  # GPT-2's Conv1D: y = x @ W + b, W (in, out)
    scaling: str = "scaling"  # the attention module's attribute holding its score scale
    # on the layer: the norm whose output joins the stream after attention (Gemma 2/3: "post_attention_layernorm");
    # None: the attention module's own output does. The heads' shares are read through it with its scale frozen.
    attn_out: str | None = None
    final_softcap: str | None = None  # the config attribute capping the output logits: cap * tanh(z / cap)
    softcap: str | None = None  # the attention module's attribute capping its scaled scores (Gemma 2), as final_softcap
    # why the lab does not split this family's residual stream (no logit lens, attribution or patching); None: it does
    stream_refusal: str | None = None
    default_length: int | None = None  # for a family without a position table (ALiBi): the length read at most

    @property
    def pre_norm(self) -> bool:
        return self.embed is not None


def path_get(root: nn.Module, path: str) -> Any:
    out: Any = root
    for part in path.split("."):
        out = getattr(out, part)
    return out


def _rotary_function(attention: nn.Module) -> Callable:
    """The `apply_rotary_pos_emb` of the attention module's own modeling file: the function the layer calls."""
    return sys.modules[type(attention).__module__].apply_rotary_pos_emb


def _heads(x: torch.Tensor, head_dim: int) -> torch.Tensor:
    return x.view(*x.shape[:2], -1, head_dim).transpose(1, 2)  # (B, T, n * hs) -> (B, n, T, hs)


def per_query_head(k: torch.Tensor, n_head: int) -> torch.Tensor:
    """Grouped key heads (B, n_kv, T, hs) -> one per query head (B, n_head, T, hs), as `repeat_kv` pairs them:
    query head h reads key/value head h // (n_head / n_kv)."""
    return k.repeat_interleave(n_head // k.size(1), dim=1)


def _separate(attention: nn.Module, got: Captured, n_head: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Two projections, no positions on q and k (BERT family, OPT)."""
    q, k = got["out"][0], got["out"][1]  # (B, T, nh * hs)
    hs = q.size(-1) // n_head
    return _heads(q, hs), per_query_head(_heads(k, hs), n_head), None


def _gpt2(attention: nn.Module, got: Captured, n_head: int) -> tuple[torch.Tensor, torch.Tensor]:
    q, k, _ = got["out"][0].split(got["out"][0].size(-1) // 3, dim=2)  # c_attn: q | k | v
    hs = q.size(-1) // n_head
    return _heads(q, hs), _heads(k, hs), None


def _rotary(attention: nn.Module, got: Captured, n_head: int) -> tuple[torch.Tensor, torch.Tensor]:
    """LLaMA, Mistral, Qwen2/3, Gemma 1/2/3: q_proj and k_proj (Qwen3, Gemma 3: then q_norm/k_norm per head), then the
    module's apply_rotary_pos_emb with the (cos, sin) the layer was given."""
    hs = attention.head_dim
    q, k = _heads(got["out"][0], hs), _heads(got["out"][1], hs)  # (B, nh, T, hs), (B, nkv, T, hs)
    if hasattr(attention, "q_norm"):
        q = attention.q_norm(q.transpose(1, 2)).transpose(1, 2)
        k = attention.k_norm(k.transpose(1, 2)).transpose(1, 2)
    cos, sin = got["kwargs"]["position_embeddings"]
    q, k = _rotary_function(attention)(q, k, cos, sin)
    return q, per_query_head(k, n_head), None


def _phi3(attention: nn.Module, got: Captured, n_head: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Phi-3 (Phi-3.5, Phi-4-mini): one qkv_proj laid out as all query heads | the key heads | the value heads
    (grouped k/v), then the modeling file's apply_rotary_pos_emb, which rotates as many leading dimensions of each
    head as its cos has (partial_rotary_factor) and passes the rest."""
    hs = attention.head_dim
    qkv = got["out"][0]  # (B, T, (nh + 2 n_kv) hs)
    q, k = qkv[..., : n_head * hs], qkv[..., n_head * hs: (n_head + attention.num_key_value_heads) * hs]
    q, k = _heads(q, hs), _heads(k, hs)  # (B, nh, T, hs), (B, n_kv, T, hs)
    cos, sin = got["kwargs"]["position_embeddings"]
    q, k = _rotary_function(attention)(q, k, cos, sin)
    return q, per_query_head(k, n_head), None


def _neox(attention: nn.Module, got: Captured, n_head: int) -> tuple[torch.Tensor, torch.Tensor]:
    """GPT-NeoX: one projection laid out per head as q | k | v; the modeling file's apply_rotary_pos_emb
    rotates the first rotary_ndims dimensions (cos has that width) and passes the rest."""
    qkv = got["out"][0]
    qkv = qkv.view(*qkv.shape[:2], -1, 3 * attention.head_size).transpose(1, 2)  # (B, nh, T, 3 hs)
    q, k, _ = qkv.chunk(3, dim=-1)
    cos, sin = got["kwargs"]["position_embeddings"]
    return *_rotary_function(attention)(q, k, cos, sin), None


def _phi(attention: nn.Module, got: Captured, n_head: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Phi: q_proj, k_proj, the optional per-head LayerNorms, then rotary on the first rotary_ndims only."""
    hs = attention.head_dim
    q, k = _heads(got["out"][0], hs), _heads(got["out"][1], hs)
    if getattr(attention, "qk_layernorm", False):
        q, k = attention.q_layernorm(q), attention.k_layernorm(k)
    cos, sin = got["kwargs"]["position_embeddings"]
    r = attention.rotary_ndims
    q_rot, k_rot = _rotary_function(attention)(q[..., :r], k[..., :r], cos, sin)
    q, k = torch.cat((q_rot, q[..., r:]), dim=-1), torch.cat((k_rot, k[..., r:]), dim=-1)
    return q, per_query_head(k, n_head), None


def _bloom(attention: nn.Module, got: Captured, n_head: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """BLOOM: one projection laid out per head as q | k | v, and ALiBi: the `alibi` tensor the block hands its
    attention ((B * nh, 1, T): slope x key position) added to the scaled product with beta 1, as its baddbmm does.
    Per query the slope x query position it lacks is a constant, which the softmax cancels."""
    qkv = got["out"][0]
    B, T = qkv.shape[:2]
    qkv = qkv.view(B, T, n_head, 3, -1)
    q, k = qkv[..., 0, :].transpose(1, 2), qkv[..., 1, :].transpose(1, 2)  # (B, nh, T, hs)
    alibi = got["kwargs"]["alibi"].view(B, n_head, 1, -1)[0]  # (nh, 1, T)
    return q, k, alibi.expand(n_head, T, alibi.size(-1))  # (nh, T, T)


_LLAMA_LIKE = dict(causal=True, positions="rotary", layers="layers", attention="self_attn",
                   projections=("q_proj", "k_proj"), queries_keys=_rotary, out_proj="o_proj", mlp="mlp",
                   embed="embed_tokens", final_norm="norm", lm_head="lm_head", norm="rms")
# Gemma 2/3: a norm before and after each sublayer; what joins the stream is the second norm's output
_GEMMA_SANDWICH = dict(_LLAMA_LIKE, norm="rms (1 + w)", attn_out="post_attention_layernorm",
                       mlp="post_feedforward_layernorm", final_softcap="final_logit_softcapping")
_BERT = dict(causal=False, positions="learned absolute", attention="attention.self", projections=("query", "key"),
             queries_keys=_separate)

FAMILIES: dict[str, Family] = {
    "gpt2": Family("GPT-2", causal=True, positions="learned absolute", layers="h", attention="attn",
                   projections=("c_attn",), queries_keys=_gpt2, out_proj="c_proj", mlp="mlp",
                   embed="wte", final_norm="ln_f", lm_head="lm_head", conv1d=True),
    "llama": Family("LLaMA", **_LLAMA_LIKE),
    "mistral": Family("Mistral", **_LLAMA_LIKE),
    "qwen2": Family("Qwen2", **_LLAMA_LIKE),
    "qwen3": Family("Qwen3", **_LLAMA_LIKE),
    "gemma": Family("Gemma", **{**_LLAMA_LIKE, "norm": "rms (1 + w)"}),
    "gemma3_text": Family("Gemma 3", **_GEMMA_SANDWICH),  # its attention ignores attn_logit_softcapping
    "gemma2": Family("Gemma 2", **_GEMMA_SANDWICH, softcap="attn_logit_softcapping"),
    "phi3": Family("Phi-3", **{**_LLAMA_LIKE, "projections": ("qkv_proj",), "queries_keys": _phi3}),
    "gpt_neox": Family("GPT-NeoX", causal=True, positions="partial rotary", layers="layers",
                       attention="attention", projections=("query_key_value",), queries_keys=_neox, out_proj="dense",
                       mlp="mlp", embed="embed_in", final_norm="final_layer_norm",
                       lm_head="lm_head"),
    "phi": Family("Phi", causal=True, positions="partial rotary", layers="layers", attention="self_attn",
                  projections=("q_proj", "k_proj"), queries_keys=_phi, out_proj="dense", mlp="mlp",
                  embed="embed_tokens", final_norm="final_layernorm", lm_head="lm_head"),
    "opt": Family("OPT", causal=True, positions="learned absolute", layers="decoder.layers",
                  attention="self_attn", projections=("q_proj", "k_proj"), queries_keys=_separate,
                  out_proj="out_proj", mlp="fc2", embed="decoder.embed_tokens",
                  final_norm="decoder.final_layer_norm", lm_head="lm_head"),
    "bloom": Family("BLOOM", causal=True, positions="ALiBi", layers="h", attention="self_attention",
                    projections=("query_key_value",), queries_keys=_bloom, scaling="inv_norm_factor",
                    stream_refusal="adds its residual inside its attention module",
                    default_length=2048),
    "bert": Family("BERT", layers="encoder.layer", **_BERT),
    "roberta": Family("RoBERTa", layers="encoder.layer", **_BERT),
    "xlm-roberta": Family("XLM-RoBERTa", layers="encoder.layer", **_BERT),
    "camembert": Family("CamemBERT", layers="encoder.layer", **_BERT),
    "electra": Family("ELECTRA", layers="encoder.layer", **_BERT),
    "distilbert": Family("DistilBERT", causal=False, positions="learned absolute",
                         layers="transformer.layer", attention="attention",
                         projections=("q_lin", "k_lin"), queries_keys=_separate),
}


# model types the lab refuses with a sentence of their own (the others: "cannot read yet")
NOT_READ: dict[str, str] = {
    "gemma3": "a Gemma 3 image-and-text model, which the lab does not read; it reads Gemma 3's text-only models "
              "(model type gemma3_text: gemma-3-270m, gemma-3-1b)",
}


def family_of(model_type: Any) -> Family | None:
    return FAMILIES.get(str(model_type))


def decoders() -> list[str]:
    return [name for name, family in FAMILIES.items() if family.causal]


def encoders() -> list[str]:
    return [name for name, family in FAMILIES.items() if not family.causal]
