"""Hugging Face model folders (config.json + model.safetensors + tokenizer files) behind the lab's interface.

`load_folder` returns the same `LoadedCheckpoint` as `core.io.checkpoint.load`:
`.model.run_with_attention(idx)` gives (logits, attention (n_layer, B, n_head, T, T)) exactly as
`transformers` returns them with `output_attentions=True` and eager attention; `.tokenizer.tokenize`
gives display tokens people can read (byte-level `Ġ` becomes a visible space, WordPiece `##x` becomes
`·x`, special tokens keep their names). The families read are the entries of `core.io.hf_families.FAMILIES`
(GPT-2, LLaMA, Mistral, Qwen2/3, Gemma, Gemma 2/3, Phi-3, GPT-NeoX, Phi, OPT decoders; the BERT family of
encoders); a model type not there is named in one sentence.

`transformers` is an optional extra (requirements-hf.txt). Nothing is ever downloaded: the offline
switches are set before it is imported and every call passes `local_files_only=True`; folders are
checked first, so one that would need the network (no tokenizer files, remote code) is refused with one
sentence. Weights are read from safetensors only; a pickle (`pytorch_model.bin`) is refused.
"""

from __future__ import annotations

import importlib.util
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from core.io.hf_families import FAMILIES, NOT_READ, Family, decoders, encoders, family_of, path_get
from core.io.loaded import CheckpointError, CheckpointInfo, LoadedCheckpoint
from core.model.attention import QueryKey
from core.model.hooks import Hooks
from core.model.readout import FinalNorm
from core.model.tokenizer import PAD_CHAR, Tokenized, byte_level, bytes_of_piece

ENCODERS = tuple(encoders())
DECODERS = tuple(decoders())
FAMILY_NAMES = ", ".join(sorted({f.label for f in FAMILIES.values()}, key=str.lower))  # what the lab reads
WEIGHT_FILES = ("model.safetensors", "model.safetensors.index.json")
TOKENIZER_FILES = ("tokenizer.json", "vocab.txt", "vocab.json", "sentencepiece.bpe.model")
MAX_BYTES = 2 * 1024**3
CONTINUATION = "\u00b7"  # · marks a WordPiece piece that continues the previous word
WORD_START = ("\u0120", "\u2581")  # byte-level BPE's Ġ and SentencePiece's ▁: the piece starts a word
FORMAT = "huggingface"


class HFError(CheckpointError):
    """A folder that cannot be opened; str() is one sentence."""


def is_hf_folder(path: str | Path) -> bool:
    path = Path(path)
    return path.is_dir() and (path / "config.json").is_file()


def hub_name(folder: str | Path) -> str | None:
    """ORG/NAME for a snapshot folder of a Hugging Face hub cache (`models--ORG--NAME/snapshots/<commit>/`, the layout
    core.io.hf_cache reads); None for any other folder."""
    folder = Path(folder)
    repo = folder.parent.parent.name
    if folder.parent.name != "snapshots" or not repo.startswith("models--") or len(repo) == len("models--"):
        return None
    return repo.removeprefix("models--").replace("--", "/")


def folder_name(folder: str | Path) -> str:
    """A model folder's name in the picker: its hub name for a hub cache's snapshot, not the commit; else its name."""
    return hub_name(folder) or Path(folder).name


def available() -> bool:
    return importlib.util.find_spec("transformers") is not None


DOWNLOAD_ENV = "ATTENTION_LAB_HF_DOWNLOAD"  # 1: a typed hub name not in the cache may be downloaded (hf_cache)


def downloads_allowed(environ=None) -> bool:
    """Whether the person running the app allowed downloads (off unless DOWNLOAD_ENV is 1/true/yes/on)."""
    value = (os.environ if environ is None else environ).get(DOWNLOAD_ENV, "")
    return value.strip().lower() in ("1", "true", "yes", "on")


def offline() -> None:
    """Belt and braces around `local_files_only=True`: the library's own offline switches, except where the
    person running the app allowed downloads of typed hub names (core.io.hf_cache), which they would block for
    the rest of the process (huggingface_hub reads them once, at import)."""
    if not downloads_allowed():
        os.environ["HF_HUB_OFFLINE"] = "1"
        os.environ["TRANSFORMERS_OFFLINE"] = "1"
    os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")


def _read_config(folder: Path) -> dict[str, Any]:
    try:
        config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError, RecursionError):
        raise HFError(f"{folder.name}: config.json is not readable JSON.") from None
    if not isinstance(config, dict):
        raise HFError(f"{folder.name}: config.json is not a JSON object.")
    return config


def _task(config: dict[str, Any]) -> str:
    arch = str((config.get("architectures") or [""])[0])
    if arch.endswith("ForSequenceClassification"):  # a BERT-family or a decoder-family classifier (the Trainer's)
        return "classify"
    if config.get("model_type") in DECODERS:
        return "lm"
    if arch.endswith("ForMaskedLM"):
        return "masked-lm"
    if arch.endswith("ForSequenceClassification"):
        return "classify"
    return "encoder"


def _labels(config: dict[str, Any]) -> list[str]:
    id2label = config.get("id2label") or {}
    try:
        return [str(id2label[k]) for k in sorted(id2label, key=int)]
    except (TypeError, ValueError):
        return []


def check_folder(folder: str | Path) -> dict[str, Any]:
    """Everything decidable without transformers: architecture, weights, tokenizer files. Returns the
    metadata the picker shows (shaped like a checkpoint's), or raises HFError."""
    folder = Path(folder)
    name = folder.name
    config = _read_config(folder)
    model_type = config.get("model_type")
    family = family_of(model_type)
    if family is None:
        if str(model_type) in NOT_READ:
            raise HFError(f"{name} is {NOT_READ[str(model_type)]}.")
        raise HFError(f"{name} is a {str(model_type)[:40]!r} model, which the lab cannot read yet; it reads "
                      f"{FAMILY_NAMES}.")
    if family.causal and config.get("use_bidirectional_attention"):
        raise HFError(f"{name} attends in both directions (use_bidirectional_attention, an embedding model); the lab "
                      f"reads {family.label} as a causal language model only.")
    if config.get("auto_map"):
        raise HFError(f"{name} needs custom code from the Hub, which the lab never downloads or runs.")
    if not any((folder / f).is_file() for f in WEIGHT_FILES):
        pickled = (folder / "pytorch_model.bin").is_file()
        raise HFError(f"{name} has no model.safetensors" + (
            " (only pytorch_model.bin, a pickle the lab never opens; re-save it with save_pretrained)."
            if pickled else "; its weights are missing."))
    if not any((folder / f).is_file() for f in TOKENIZER_FILES):
        raise HFError(f"{name} has no tokenizer files (tokenizer.json or vocab files); fetching them would need "
                      "the network, which the lab never uses.")
    size = sum(p.stat().st_size for p in folder.glob("*.safetensors"))
    if size > MAX_BYTES:
        raise HFError(f"{name} has {size / 1e9:.1f} GB of weights, over the {MAX_BYTES / 1e9:.0f} GB limit.")
    n_layer = config.get("num_hidden_layers", config.get("n_layer", config.get("n_layers")))
    n_head = config.get("num_attention_heads", config.get("n_head", config.get("n_heads")))
    width = config.get("hidden_size", config.get("n_embd", config.get("dim")))
    block = config.get("n_positions", config.get("max_position_embeddings")) or family.default_length
    window = config.get("sliding_window") if config.get("use_sliding_window", True) else None
    if isinstance(window, int) and window > 0 and isinstance(block, int):
        block = min(block, window)  # Mistral's window: within it the mask is exactly causal (see load_folder)
    arch = str((config.get("architectures") or [model_type])[0])
    kv_heads = config.get("num_key_value_heads") or n_head
    return {
        "format": FORMAT, "task": _task(config), "labels": _labels(config), "history": [], "metrics": {},
        "architecture": arch, "model_type": model_type,
        "config": {"n_layer": n_layer, "n_head": n_head, "n_embd": width, "block_size": block,
                   "vocab_size": config.get("vocab_size"), "causal": family.causal, "n_kv_head": kv_heads,
                   "attention": f"{arch} (Hugging Face, eager)" + (
                       f", {kv_heads} key/value heads shared by {n_head} query heads" if kv_heads != n_head else ""),
                   "positional": f"{family.positions} ({family.label})", "head": "huggingface"},
    }


@dataclass
class HFConfigView:
    """The ModelConfig fields the pages and core read, for a Hugging Face model."""

    vocab_size: int
    block_size: int
    n_layer: int
    n_head: int
    n_embd: int
    causal: bool
    head: str  # "lm" (decoder), "masked-lm", "classifier", "none"
    pad_id: int
    n_classes: int = 0
    attention: str = "huggingface"
    positional: str = "absolute (Hugging Face)"
    n_kv_head: int = 0  # key/value heads (grouped-query attention: fewer than n_head); 0: as many as n_head
    position_note: str = ""  # how positions reach q and k, for the query-key view (`position_note`)


class HFModel(nn.Module):
    """A transformers model behind our model's interface: `forward(idx, targets)`, `run_with_attention(idx)`,
    and for pre-norm decoders `hidden_states(idx, hooks)`, `readout()`, `head.unembed`, `tok_emb` (what the
    where-from views patch and read). Where each piece sits is the model's `Family` (core.io.hf_families):
    every hook below is written once, for all families."""

    def __init__(self, inner: nn.Module, view: HFConfigView, max_positions: int, family: Family) -> None:
        super().__init__()
        self.inner = inner
        self.config = view
        self.family = family
        self._max_positions = max_positions
        self.head = _Head(_OutputHead(self._module(family.lm_head, base=False), self.logit_softcap)) \
            if family.lm_head and view.head == "lm" else None

    @property
    def max_length(self) -> int:
        return self._max_positions

    @property
    def logit_softcap(self) -> float | None:
        """Gemma 2's (and some Gemma 3's) cap on the output logits: logits = cap * tanh(z / cap); None: none."""
        cap = getattr(self.inner.config, self.family.final_softcap, None) if self.family.final_softcap else None
        return float(cap) if cap else None

    @property
    def base(self) -> nn.Module:
        return self.inner.base_model

    @property
    def as_its_library_names_it(self) -> nn.Module:
        """The transformers model itself: anatomy's rows carry the module names its `named_modules()` gives
        (`model.layers.0.self_attn`), not this wrapper's (`inner.model...`)."""
        return self.inner

    def _module(self, path: str, base: bool = True) -> nn.Module:
        return path_get(self.base if base else self.inner, path)

    @property
    def tok_emb(self) -> nn.Module:
        """The token embedding as the model applies it (Gemma's multiplies by sqrt(d) itself)."""
        if self.family.embed is None:
            raise AttributeError("This model's embeddings are not read by the lab.")
        return self._module(self.family.embed)

    def num_parameters(self, trainable_only: bool = False) -> int:
        return sum(p.numel() for p in self.parameters() if p.requires_grad or not trainable_only)

    def attention_mask(self, idx: torch.Tensor, start: int = 0, t_key: int | None = None) -> torch.Tensor:
        """Boolean (B|1, 1, Tq, Tk): causal for decoders, key padding for encoders (as the model masks). A
        sliding window never cuts in: the model's length is capped at its window (see `load_folder`)."""
        t_key = start + idx.size(1) if t_key is None else t_key
        T = idx.size(1)
        if self.config.causal:
            query_pos = torch.arange(start, start + T, device=idx.device).view(T, 1)
            return (torch.arange(t_key, device=idx.device).view(1, t_key) <= query_pos).view(1, 1, T, t_key)
        real = self._padding(idx).bool()
        return real.view(idx.size(0), 1, 1, T).expand(-1, 1, T, T)

    def _padding(self, idx: torch.Tensor) -> torch.Tensor:
        real = idx != self.config.pad_id if self.config.pad_id >= 0 else torch.ones_like(idx, dtype=torch.bool)
        return torch.where(real.any(dim=1, keepdim=True), real, torch.ones_like(real)).long()

    def forward(self, idx: torch.Tensor, targets: torch.Tensor | None = None):
        logits, loss, _, _ = self._run(idx, targets, attention=False)
        return logits, loss

    # ----------------------------------------------------------------------- one pass, recorded

    def run_with_attention(self, idx: torch.Tensor, queries_keys: list[QueryKey | None] | None = None,
                           hooks: Hooks | None = None, logits: bool = True) -> tuple[torch.Tensor | None, torch.Tensor]:
        """With a `queries_keys` list, each layer's queries and keys are captured in the same pass (the
        projections' outputs, with the family's rotary function and the (cos, sin) the layer was given, grouped
        key heads repeated per query head) with the module's own `scaling`. With `hooks` (core.model.hooks),
        the same pass reports the residual stream and, for pre-norm decoders, each head's, attention's and
        MLP's output (forward hooks at the family's module paths). `logits=False`: the base model only, its
        output head (a 49,152 x 576 matrix on a 135M LLaMA) not run, logits None."""
        handles, captured, modules = [], [], []
        if queries_keys is not None:
            modules = self.attentions()
            captured = [{"out": [None] * len(self.family.projections), "kwargs": {}} for _ in modules]
            handles = [h for module, slot in zip(modules, captured) for h in self._capture(module, slot)]
        if hooks is not None and self.reads_stream:
            handles += self._report(hooks, idx.shape)
        try:
            out, _, attention, hidden = self._run(idx, None, attention=True,
                                                  hidden=hooks is not None and not self.reads_stream, logits=logits)
        finally:
            for handle in handles:
                handle.remove()
        if hooks is not None and not self.reads_stream:  # an encoder: its hidden states are the stream
            for layer, (before, after) in enumerate(zip(hidden[:-1], hidden[1:])):
                hooks.resid_pre(layer, before)
                hooks.resid_post(layer, after)
        for module, slot in zip(modules, captured):
            q, k, bias = self.family.queries_keys(module, slot, self.config.n_head)  # (B, nh, T, hs), (nh, T, T)
            cap = getattr(module, self.family.softcap, None) if self.family.softcap else None
            queries_keys.append(QueryKey(q, k, float(getattr(module, self.family.scaling)), bias,
                                         softcap=float(cap) if cap else None))
        return out, attention  # (L, B, H, T, T)

    def hidden_states(self, idx: torch.Tensor, hooks: Hooks | None = None, **_unused) -> tuple[torch.Tensor, list]:
        """(B, T, C) after the final norm, through the base model with `hooks` patching (causal tracing, input
        attribution); `head.unembed` turns it into logits."""
        self._check_length(idx.size(1))
        handles = self._report(hooks, idx.shape) if hooks is not None else []
        try:
            out = self.base(input_ids=idx)
        finally:
            for handle in handles:
                handle.remove()
        return out.last_hidden_state, []

    @property
    def reads_stream(self) -> bool:
        """A pre-norm decoder whose sublayers add into one residual stream (what the where-from views need)."""
        return self.family.causal and self.family.pre_norm and self._post_norm_reason() is None

    def _post_norm_reason(self) -> str | None:
        c = self.inner.config
        if self.family.stream_refusal:
            return self.family.stream_refusal
        if getattr(c, "do_layer_norm_before", True) is False:  # OPT-350m
            return "normalises after each sublayer (post-norm)"
        if getattr(self.base, "decoder", None) is not None and getattr(self.base.decoder, "project_out", None):
            return "projects its stream to a narrower width before the output head"
        if self.family.attn_out and getattr(self.attentions()[0], self.family.out_proj).bias is not None:
            return "normalises its attention output with the output projection's bias inside (attention_bias)"
        return None

    def attentions(self) -> list[nn.Module]:
        """Each layer's attention module, at the family's path."""
        return [path_get(layer, self.family.attention) for layer in self._module(self.family.layers)]

    def _report(self, hooks: Hooks, shape: torch.Size) -> list:
        """Forward hooks that call `hooks` at the family's hook points; what a hook returns replaces the
        module's output (a recorder returns it unchanged; causal tracing returns restored states)."""
        family, B, T = self.family, shape[0], shape[1]
        n_head = self.config.n_head
        handles = [self.tok_emb.register_forward_hook(lambda _m, _a, out: hooks.embed(out))]
        for i, layer in enumerate(self._module(family.layers)):
            attention = path_get(layer, family.attention)
            out_proj = getattr(attention, family.out_proj)
            post_norm = path_get(layer, family.attn_out) if family.attn_out else None  # Gemma 2/3's sandwich norm

            def pre(_m, args, kwargs, i=i):
                if args:
                    return (hooks.resid_pre(i, args[0]), *args[1:]), kwargs
                return args, {**kwargs, "hidden_states": hooks.resid_pre(i, kwargs["hidden_states"])}

            def post(_m, _args, out, i=i):
                if isinstance(out, tuple):
                    return (hooks.resid_post(i, out[0]), *out[1:])
                return hooks.resid_post(i, out)

            def merged(_m, args, out, i=i, out_proj=out_proj, post_norm=post_norm):
                z = args[0]  # the heads' sums, concatenated (B, T, nh * hs)
                heads = z.view(*z.shape[:2], n_head, -1).transpose(1, 2)  # (B, nh, T, hs)
                weight = out_proj.weight.T if family.conv1d else out_proj.weight  # (C, nh * hs)
                if post_norm is not None:  # the layer adds norm(out) = out * gain / rms(out): with rms frozen at
                    inverse = torch.rsqrt(out.float().pow(2).mean(-1, keepdim=True) + _eps(post_norm))  # (B, T, 1)
                    heads = heads * inverse.to(heads.dtype).unsqueeze(1)  # its value, each head's share is linear
                    weight = weight * self._gain(post_norm)[:, None]  # (C, nh * hs)
                hooks.heads(i, heads, _Projection(weight, out_proj.bias))

            def attn(_m, _args, out, i=i):
                if isinstance(out, tuple):  # the attention module: (output, weights)
                    return (hooks.attn_out(i, out[0]), *out[1:])
                return hooks.attn_out(i, out)  # the post-attention norm: what the layer adds

            def mlp(_m, _args, out, i=i):
                y = hooks.mlp_out(i, out.view(B, T, -1))  # OPT's fc2 works on (B * T, C)
                return y.reshape(out.shape)

            handles += [layer.register_forward_pre_hook(pre, with_kwargs=True), layer.register_forward_hook(post),
                        out_proj.register_forward_hook(merged),
                        (attention if post_norm is None else post_norm).register_forward_hook(attn),
                        getattr(layer, family.mlp).register_forward_hook(mlp)]
        return handles

    def readout(self) -> tuple[nn.Module, torch.Tensor]:
        """(final norm, unembedding (V, C)) of a pre-norm decoder; others refuse in one sentence. The norm is a
        `FinalNorm`: the model's own module, with the gain, bias and eps direct attribution freezes."""
        if not self.family.causal:
            raise ValueError("Only decoder language models read their residual stream out as next-token logits; a "
                             "post-norm encoder (BERT) normalises after every sublayer.")
        reason = self._post_norm_reason()
        if reason is not None:
            raise ValueError(f"This {self.family.label} model {reason}, so the lab does not read its residual stream "
                             "out as next-token logits.")
        norm = self._module(self.family.final_norm)
        weight = self._gain(norm).detach() if getattr(norm, "weight", None) is not None else None
        final = FinalNorm(norm, weight=weight, bias=getattr(norm, "bias", None), eps=_eps(norm),
                          centered=self.family.norm == "layernorm")
        return final, self.head.unembed.weight

    def _gain(self, norm: nn.Module) -> torch.Tensor:
        """The gain a norm of this family multiplies by: its weight, or Gemma's (1 + w)."""
        return 1.0 + norm.weight if self.family.norm == "rms (1 + w)" else norm.weight

    @property
    def unembed_bias(self) -> torch.Tensor | None:
        """The output head's bias (Phi's lm_head has one), or None."""
        return None if self.head is None else self.head.unembed.bias

    @property
    def patchable(self) -> bool:
        """Whether the where-from views may patch this model (causal tracing, input attribution)."""
        return self.reads_stream and self.head is not None

    def _capture(self, module: nn.Module, slot: dict) -> list:
        """Hooks keeping the attention's keyword arguments (rotary (cos, sin)) and its projections' outputs."""
        def keep_kwargs(_m, _args, kwargs):
            slot["kwargs"] = kwargs

        def keep(n: int):
            return lambda _module, _inputs, out: slot["out"].__setitem__(n, out)  # (B, T, width)

        return [module.register_forward_pre_hook(keep_kwargs, with_kwargs=True)] + [
            getattr(module, name).register_forward_hook(keep(n)) for n, name in enumerate(self.family.projections)]

    def _check_length(self, T: int) -> None:
        if T > self.max_length:
            raise ValueError(f"This model can read at most {self.max_length} tokens; the input has {T}.")

    def _run(self, idx: torch.Tensor, targets: torch.Tensor | None, attention: bool, hidden: bool = False,
             logits: bool = True):
        self._check_length(idx.size(1))
        mask = None if self.config.causal else self._padding(idx)
        model = self.inner if logits or targets is not None else self.base
        out = model(input_ids=idx, attention_mask=mask, output_attentions=attention, output_hidden_states=hidden)
        if not logits and targets is None:
            return (None, None, torch.stack(out.attentions) if attention else None,
                    out.hidden_states if hidden else None)
        logits = out.logits if getattr(out, "logits", None) is not None else out.last_hidden_state
        loss = None
        if targets is not None and self.config.head in ("lm", "masked-lm"):
            loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), targets.reshape(-1),
                                   ignore_index=self.config.pad_id)
        return (logits, loss, torch.stack(out.attentions) if attention else None,  # (L, B, H, T, T)
                out.hidden_states if hidden else None)


@dataclass
class _Head:
    """The output head as causal tracing calls it (`model.head.unembed(h)`), like our Transformer's."""

    unembed: nn.Module


class _OutputHead(nn.Module):
    """The model's lm_head as the model applies it: with Gemma 2's soft-cap, logits = cap * tanh(z / cap), so what
    patches and probes read is the model's own output. `weight` and `bias` are the head's (before the cap)."""

    def __init__(self, lm_head: nn.Module, softcap: float | None) -> None:
        super().__init__()
        self.lm_head = lm_head
        self.softcap = softcap

    @property
    def weight(self) -> torch.Tensor:
        return self.lm_head.weight

    @property
    def bias(self) -> torch.Tensor | None:
        return self.lm_head.bias

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        z = self.lm_head(h)
        return z if self.softcap is None else self.softcap * torch.tanh(z / self.softcap)


def _eps(norm: nn.Module) -> float:
    """A norm's epsilon under its class's name for it (LayerNorm, Gemma: eps; LLaMA's RMSNorm: variance_epsilon)."""
    return float(getattr(norm, "eps", getattr(norm, "variance_epsilon", None)))


@dataclass
class _Projection:
    """What a hook point is told of an output projection: y = z @ weight^T + bias (weight (C, nh * hs))."""

    weight: torch.Tensor
    bias: torch.Tensor | None


class HFTokenizer:
    """The lab's tokenizer interface over a transformers tokenizer, with readable display tokens."""

    kind = "subword"
    unit = "token"

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.pad_id = inner.pad_token_id if inner.pad_token_id is not None else -1
        self.mask_id = inner.mask_token_id
        self.unk_id = inner.unk_token_id
        # GPT-2 calls <|endoftext|> its unknown token too, though byte-level BPE never needs one
        self.real_unk = self.unk_id is not None and self.unk_id not in (inner.bos_token_id, inner.eos_token_id)
        # [CLS], [SEP], <s>, <|endoftext|>...: what "hide special tokens" should hide ([UNK] stands for text)
        self.special_ids = set(inner.all_special_ids) - ({self.unk_id} if self.real_unk else set())
        backend = getattr(inner, "backend_tokenizer", None)  # a fast tokenizer: GPT-2's byte-level pieces say bytes
        try:
            self.byte_level = byte_level(json.loads(backend.to_str())) if backend is not None else False
        except (ValueError, AttributeError):
            self.byte_level = False

    @property
    def vocab_size(self) -> int:
        return len(self.inner)

    def _display(self, token_id: int, piece: str, text: str, start: int, end: int) -> str:
        if token_id in self.special_ids:
            return piece  # [CLS], [SEP], <|endoftext|>: their own names
        shown = text[start:end] if end > start else self.inner.decode([token_id])
        if piece.startswith("##"):
            return CONTINUATION + shown
        if piece[:1] in WORD_START and not shown.startswith(" "):  # offsets trimmed of the space the piece has
            return " " + shown
        return shown

    def piece_bytes(self, i: int) -> bytes | None:
        """The bytes of a byte-level piece (GPT-2, Pythia, OPT) or a byte fallback ('<0xE2>', LLaMA), so a
        character cut into several pieces shows each as its bytes ('‹E2›'), never all as U+FFFD."""
        if i in self.special_ids or not 0 <= i < self.vocab_size:
            return None
        return bytes_of_piece(self.inner.convert_ids_to_tokens(i), self.byte_level)

    def tokenize(self, text: str) -> Tokenized:
        enc = self.inner(text, return_offsets_mapping=True, add_special_tokens=True, truncation=False)
        ids = list(enc["input_ids"])
        pieces = self.inner.convert_ids_to_tokens(ids)
        tokens = [self._display(i, p, text, s, e) for i, p, (s, e) in zip(ids, pieces, enc["offset_mapping"])]
        unknown = list(dict.fromkeys(t for i, t in zip(ids, tokens) if self.real_unk and i == self.unk_id))
        return Tokenized(ids=ids, tokens=tokens, unknown=unknown,
                         offsets=[(int(s), int(e)) for s, e in enc["offset_mapping"]])

    def encode(self, text: str) -> list[int]:
        return self.tokenize(text).ids

    def offsets(self, text: str) -> list[tuple[int, int]]:
        """(start, end) characters of `text` each piece of `tokenize(text)` covers ((0, 0) for a special token)."""
        enc = self.inner(text, return_offsets_mapping=True, add_special_tokens=True, truncation=False)
        return [(int(a), int(b)) for a, b in enc["offset_mapping"]]

    def decode(self, ids: list[int]) -> str:
        if any(not 0 <= i < self.vocab_size for i in ids):  # e.g. GPT-2's missing PAD (-1): the lab's PAD sign
            return "".join(PAD_CHAR if not 0 <= i < self.vocab_size else self.decode([i]) for i in ids)
        if len(ids) == 1:
            piece = self.inner.convert_ids_to_tokens(ids)[0] or ""
            if piece.startswith("##"):
                return CONTINUATION + piece[2:]
            if ids[0] in self.special_ids:
                return piece
        return self.inner.decode(ids)


def folder_info(path: str | Path):
    """A typed folder path -> the picker's CheckpointInfo (for an 'open a folder' box), or HFError."""

    folder = Path(str(path).strip()).expanduser()
    if not str(path).strip() or not folder.is_dir():
        raise HFError(f"{str(path)[:200]} is not a folder on this machine.")
    name = folder_name(folder)
    if not is_hf_folder(folder):
        raise HFError(f"{name} has no config.json, so it is not a Hugging Face model folder.")
    try:
        metadata = check_folder(folder)
    except CheckpointError as exc:  # the sentence names the hub name, not a snapshot's commit
        raise HFError(str(exc).replace(folder.name, name, 1) if name != folder.name else str(exc)) from None
    if not available():
        raise HFError(f"{name} is a Hugging Face model folder; install the optional extra to open it: "
                      "pip install -r requirements-hf.txt.")
    size = sum(p.stat().st_size for p in folder.glob("*.safetensors"))
    return CheckpointInfo(path=folder, name=name, size_bytes=size, modified=folder.stat().st_mtime,
                          metadata=metadata)


def _model_class(transformers: Any, task: str):
    return {"lm": transformers.AutoModelForCausalLM, "masked-lm": transformers.AutoModelForMaskedLM,
            "classify": transformers.AutoModelForSequenceClassification}.get(task, transformers.AutoModel)


def _rotated_dims(model: HFModel, attention: nn.Module, head_size: int) -> int:
    """How many leading dimensions of each head rotary rotates: the attention's own `rotary_ndims` (GPT-NeoX, Phi),
    else twice the model's rotary frequencies (Phi-3's partial_rotary_factor: 0.75 in Phi-4-mini), else all."""
    frequencies = getattr(getattr(model.base, "rotary_emb", None), "inv_freq", None)
    return int(getattr(attention, "rotary_ndims", 0) or (2 * frequencies.numel() if frequencies is not None else 0)
               or head_size)


def position_note(model: HFModel) -> str:
    """One sentence for the query-key view, from the model's own attention module: how positions reach q and k,
    and which query heads share a key/value head."""
    attention = model.attentions()[0]
    config = model.config
    if model.family.positions.endswith("rotary"):
        hs = int(getattr(attention, "head_dim", getattr(attention, "head_size", 0)))
        rotated = _rotated_dims(model, attention, hs)
        which = ("each pair of dimensions" if rotated == hs else
                 f"the first {rotated} of each head's {hs} dimensions (the other {hs - rotated} carry no position)")
        note = (f"q and k are shown after {model.family.label}'s rotary embedding (its apply_rotary_pos_emb) rotated "
                f"{which} by the token's position, as the product uses them.")
        rope = getattr(model.inner.config, "rope_parameters", None) or {}
        bases = {kind: params.get("rope_theta") for kind, params in rope.items() if isinstance(params, dict)}
        if len(bases) > 1:  # Gemma 3: a local base on sliding-window layers, a global one on full-attention layers
            note += " Its rotary base differs by layer: " + ", ".join(
                f"{theta:g} on {kind.replace('_', '-')} layers" for kind, theta in sorted(bases.items())) + "."
    elif model.family.positions == "ALiBi":
        note = (f"{model.family.label}'s ALiBi adds the head's slope times the key's position after the product (the "
                "'+' line); per query that differs from minus the slope times the distance by a constant, which the "
                "softmax cancels.")
    else:
        note = "This model's positions were added to the token embeddings, so q and k already carry them."
    kv = config.n_kv_head or config.n_head
    if kv < config.n_head:
        group = config.n_head // kv
        note += (f" Its {config.n_head} query heads share {kv} key/value head(s): query head h reads key head "
                 f"h // {group}, so heads 0 to {group - 1} show the same keys.")
    return note


def load_folder(folder: str | Path, device: str = "cpu"):
    """(model, tokenizer, metadata) of a Hugging Face folder as a LoadedCheckpoint, or raise HFError."""
    folder = Path(folder)
    meta = check_folder(folder)
    if not available():
        raise HFError(f"{folder.name} is a Hugging Face model folder; install the optional extra to open it: "
                      "pip install -r requirements-hf.txt.")
    offline()
    import transformers

    task = meta["task"]
    try:
        inner, info = _model_class(transformers, task).from_pretrained(
            str(folder), local_files_only=True, attn_implementation="eager", dtype=torch.float32,
            output_loading_info=True, trust_remote_code=False)
        tokenizer = transformers.AutoTokenizer.from_pretrained(str(folder), local_files_only=True,
                                                               trust_remote_code=False)
    except Exception as exc:  # the library's refusals: damaged files, unknown tokenizer, missing pieces
        first = str(exc).strip().split("\n")[0][:160]
        raise HFError(f"{folder.name} could not be opened offline with transformers ({type(exc).__name__}: "
                      f"{first}).") from None
    if info.get("missing_keys"):
        raise HFError(f"{folder.name} lacks weights for {sorted(info['missing_keys'])[0]!r}, so part of the model "
                      "would be random.")
    if not getattr(tokenizer, "is_fast", True) and not hasattr(tokenizer, "_tokenizer"):
        raise HFError(f"{folder.name}: its tokenizer gives no character offsets, which the lab needs.")
    inner.eval().to(device)
    c = inner.config
    offset = (c.pad_token_id or 0) + 1 if meta["model_type"] in ("roberta", "xlm-roberta", "camembert") else 0
    max_positions = int(meta["config"]["block_size"]) - offset
    view = HFConfigView(vocab_size=int(c.vocab_size), block_size=max_positions, n_layer=int(meta["config"]["n_layer"]),
                        n_head=int(meta["config"]["n_head"]), n_embd=int(meta["config"]["n_embd"]),
                        causal=task == "lm", head={"lm": "lm", "masked-lm": "masked-lm",
                                                   "classify": "classifier"}.get(task, "none"),
                        pad_id=tokenizer.pad_token_id if tokenizer.pad_token_id is not None else -1,
                        n_classes=len(meta["labels"]) if task == "classify" else 0,
                        n_kv_head=int(meta["config"]["n_kv_head"] or 0))
    model = HFModel(inner, view, max_positions, family_of(meta["model_type"])).eval()
    view.position_note = position_note(model)
    return LoadedCheckpoint(model=model, tokenizer=HFTokenizer(tokenizer), metadata=meta, path=folder)
