"""Hugging Face model folders (config.json + model.safetensors + tokenizer files) behind the lab's interface.

`load_folder` returns the same `LoadedCheckpoint` as `core.io.checkpoint.load`:
`.model.run_with_attention(idx)` gives (logits, attention (n_layer, B, n_head, T, T)) exactly as
`transformers` returns them with `output_attentions=True` and eager attention; `.tokenizer.tokenize`
gives display tokens people can read (byte-level `Ġ` becomes a visible space, WordPiece `##x` becomes
`·x`, special tokens keep their names). BERT-family encoders and GPT-2-family decoders are supported.

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

from core.io.loaded import CheckpointError, CheckpointInfo, LoadedCheckpoint
from core.model.attention import QueryKey
from core.model.hooks import Hooks
from core.model.tokenizer import PAD_CHAR, Tokenized

ENCODERS = ("bert", "roberta", "xlm-roberta", "camembert", "distilbert", "electra")
DECODERS = ("gpt2",)
WEIGHT_FILES = ("model.safetensors", "model.safetensors.index.json")
TOKENIZER_FILES = ("tokenizer.json", "vocab.txt", "vocab.json", "sentencepiece.bpe.model")
MAX_BYTES = 2 * 1024**3
CONTINUATION = "\u00b7"  # · marks a WordPiece piece that continues the previous word
WORD_START = ("\u0120", "\u2581")  # byte-level BPE's Ġ and SentencePiece's ▁: the piece starts a word
FORMAT = "huggingface"
QK_PROJECTIONS = (("query", "key"), ("q_lin", "k_lin"))  # BERT family, DistilBERT; GPT-2 has one c_attn


class HFError(CheckpointError):
    """A folder that cannot be opened; str() is one sentence."""


def is_hf_folder(path: str | Path) -> bool:
    path = Path(path)
    return path.is_dir() and (path / "config.json").is_file()


def available() -> bool:
    return importlib.util.find_spec("transformers") is not None


def _offline() -> None:
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
    if model_type not in ENCODERS + DECODERS:
        raise HFError(f"{name} is a {str(model_type)[:40]!r} model; the lab opens BERT-family encoders "
                      f"({', '.join(ENCODERS)}) and GPT-2-family decoders.")
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
    block = config.get("n_positions", config.get("max_position_embeddings"))
    arch = str((config.get("architectures") or [model_type])[0])
    return {
        "format": FORMAT, "task": _task(config), "labels": _labels(config), "history": [], "metrics": {},
        "architecture": arch, "model_type": model_type,
        "config": {"n_layer": n_layer, "n_head": n_head, "n_embd": width, "block_size": block,
                   "vocab_size": config.get("vocab_size"), "causal": model_type in DECODERS,
                   "attention": f"{arch} (Hugging Face, eager)", "positional": "absolute (Hugging Face)",
                   "head": "huggingface"},
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


class HFModel(nn.Module):
    """A transformers model behind our model's interface: `forward(idx, targets)`, `run_with_attention(idx)`."""

    def __init__(self, inner: nn.Module, view: HFConfigView, max_positions: int) -> None:
        super().__init__()
        self.inner = inner
        self.config = view
        self._max_positions = max_positions

    @property
    def max_length(self) -> int:
        return self._max_positions

    def num_parameters(self, trainable_only: bool = False) -> int:
        return sum(p.numel() for p in self.parameters() if p.requires_grad or not trainable_only)

    def attention_mask(self, idx: torch.Tensor, start: int = 0, t_key: int | None = None) -> torch.Tensor:
        """Boolean (B|1, 1, Tq, Tk): causal for decoders, key padding for encoders (as the model masks)."""
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

    def run_with_attention(self, idx: torch.Tensor, queries_keys: list[QueryKey | None] | None = None,
                           hooks: Hooks | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """With a `queries_keys` list, each layer's queries and keys are captured in the same pass by forward
        hooks on its projections, with the module's own `scaling` (HF adds no score bias to these models).
        With `hooks` (core.model.hooks, read-only here), the same pass reports the residual stream and, for
        GPT-2 (pre-norm), each head's, attention's and MLP's output, through torch forward hooks."""
        handles, captured, modules = [], [], []
        if queries_keys is not None:
            modules = self._self_attentions()
            captured = [{} for _ in modules]
            handles = [h for module, slot in zip(modules, captured) for h in self._capture(module, slot)]
        if hooks is not None:
            handles += self._report(hooks)
        try:
            logits, _, attention, hidden = self._run(idx, None, attention=True, hidden=hooks is not None)
        finally:
            for handle in handles:
                handle.remove()
        if hooks is not None and not self._gpt2_blocks():  # an encoder: its hidden states are the stream
            for layer, (before, after) in enumerate(zip(hidden[:-1], hidden[1:])):
                hooks.resid_pre(layer, before)
                hooks.resid_post(layer, after)
        for module, slot in zip(modules, captured):
            heads = [t.view(*t.shape[:2], self.config.n_head, -1).transpose(1, 2) for t in (slot["q"], slot["k"])]
            queries_keys.append(QueryKey(heads[0], heads[1], float(module.scaling), None))  # (B, nh, T, hs)
        return logits, attention  # (L, B, H, T, T)

    def _gpt2_blocks(self) -> list[nn.Module]:
        transformer = getattr(self.inner, "transformer", None)
        return list(transformer.h) if transformer is not None and hasattr(transformer, "h") else []

    def _report(self, hooks: Hooks) -> list:
        """Forward hooks that call `hooks` at GPT-2's hook points (read-only: returns change nothing)."""
        handles = []
        transformer = getattr(self.inner, "transformer", None)
        for layer, block in enumerate(self._gpt2_blocks()):
            def pre(_m, args, layer=layer):
                hooks.resid_pre(layer, args[0])

            def post(_m, _args, out, layer=layer):
                hooks.resid_post(layer, out[0] if isinstance(out, tuple) else out)

            def merged(_m, args, layer=layer, block=block):
                z = args[0]  # c_proj's input: the heads' sums, concatenated (B, T, nh * hs)
                heads = z.view(*z.shape[:2], self.config.n_head, -1).transpose(1, 2)  # (B, nh, T, hs)
                conv = block.attn.c_proj  # Conv1D: y = z @ W + b, W (nh * hs, C)
                hooks.heads(layer, heads, _Projection(conv.weight.T, conv.bias))

            def attn(_m, _args, out, layer=layer):
                hooks.attn_out(layer, out[0] if isinstance(out, tuple) else out)

            def mlp(_m, _args, out, layer=layer):
                hooks.mlp_out(layer, out)

            handles += [block.register_forward_pre_hook(pre), block.register_forward_hook(post),
                        block.attn.c_proj.register_forward_pre_hook(merged), block.attn.register_forward_hook(attn),
                        block.mlp.register_forward_hook(mlp)]
        if transformer is not None and hasattr(transformer, "wte"):
            handles.append(transformer.wte.register_forward_hook(lambda _m, _a, out: hooks.embed(out)))
        return handles

    def readout(self) -> tuple[nn.Module, torch.Tensor]:
        """(final LayerNorm, unembedding (V, C)) of a GPT-2 language model; others refuse in one sentence."""
        transformer = getattr(self.inner, "transformer", None)
        head = getattr(self.inner, "lm_head", None)
        if transformer is None or not hasattr(transformer, "ln_f") or head is None:
            raise ValueError("Only GPT-2-family language models read their residual stream out as next-token "
                             "logits; a post-norm encoder (BERT) normalises after every sublayer.")
        return transformer.ln_f, head.weight

    def _self_attentions(self) -> list[nn.Module]:
        found = [m for m in self.inner.modules() if hasattr(m, "scaling") and (
            hasattr(m, "c_attn") or any(hasattr(m, q) and hasattr(m, k) for q, k in QK_PROJECTIONS))]
        if len(found) != self.config.n_layer:
            raise ValueError(f"The lab found {len(found)} attention modules with query and key projections in "
                             f"this {self.config.n_layer}-layer model, so it cannot show their queries and keys.")
        return found

    @staticmethod
    def _capture(module: nn.Module, slot: dict[str, torch.Tensor]) -> list:
        def keep(name: str):
            return lambda _module, _inputs, out: slot.__setitem__(name, out)  # (B, T, nh * hs)

        if hasattr(module, "c_attn"):  # GPT-2: one projection to q | k | v, split at the model's width
            def split(_module, _inputs, out):
                slot["q"], slot["k"], _ = out.split(out.size(-1) // 3, dim=2)
            return [module.c_attn.register_forward_hook(split)]
        q, k = next((q, k) for q, k in QK_PROJECTIONS if hasattr(module, q) and hasattr(module, k))
        return [getattr(module, q).register_forward_hook(keep("q")),
                getattr(module, k).register_forward_hook(keep("k"))]

    def _run(self, idx: torch.Tensor, targets: torch.Tensor | None, attention: bool, hidden: bool = False):
        if idx.size(1) > self.max_length:
            raise ValueError(f"This model can read at most {self.max_length} tokens; the input has {idx.size(1)}.")
        mask = None if self.config.causal else self._padding(idx)
        out = self.inner(input_ids=idx, attention_mask=mask, output_attentions=attention,
                         output_hidden_states=hidden)
        logits = out.logits if getattr(out, "logits", None) is not None else out.last_hidden_state
        loss = None
        if targets is not None and self.config.head in ("lm", "masked-lm"):
            loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), targets.reshape(-1),
                                   ignore_index=self.config.pad_id)
        return (logits, loss, torch.stack(out.attentions) if attention else None,  # (L, B, H, T, T)
                out.hidden_states if hidden else None)


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

    def tokenize(self, text: str) -> Tokenized:
        enc = self.inner(text, return_offsets_mapping=True, add_special_tokens=True, truncation=False)
        ids = list(enc["input_ids"])
        pieces = self.inner.convert_ids_to_tokens(ids)
        tokens = [self._display(i, p, text, s, e) for i, p, (s, e) in zip(ids, pieces, enc["offset_mapping"])]
        unknown = list(dict.fromkeys(t for i, t in zip(ids, tokens) if self.real_unk and i == self.unk_id))
        return Tokenized(ids=ids, tokens=tokens, unknown=unknown)

    def encode(self, text: str) -> list[int]:
        return self.tokenize(text).ids

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
    if not is_hf_folder(folder):
        raise HFError(f"{folder.name} has no config.json, so it is not a Hugging Face model folder.")
    metadata = check_folder(folder)
    if not available():
        raise HFError(f"{folder.name} is a Hugging Face model folder; install the optional extra to open it: "
                      "pip install -r requirements-hf.txt.")
    size = sum(p.stat().st_size for p in folder.glob("*.safetensors"))
    return CheckpointInfo(path=folder, name=folder.name, size_bytes=size, modified=folder.stat().st_mtime,
                          metadata=metadata)


def _model_class(transformers: Any, task: str):
    return {"lm": transformers.AutoModelForCausalLM, "masked-lm": transformers.AutoModelForMaskedLM,
            "classify": transformers.AutoModelForSequenceClassification}.get(task, transformers.AutoModel)


def load_folder(folder: str | Path, device: str = "cpu"):
    """(model, tokenizer, metadata) of a Hugging Face folder as a LoadedCheckpoint, or raise HFError."""
    folder = Path(folder)
    meta = check_folder(folder)
    if not available():
        raise HFError(f"{folder.name} is a Hugging Face model folder; install the optional extra to open it: "
                      "pip install -r requirements-hf.txt.")
    _offline()
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
                        n_classes=len(meta["labels"]) if task == "classify" else 0)
    model = HFModel(inner, view, max_positions).eval()
    return LoadedCheckpoint(model=model, tokenizer=HFTokenizer(tokenizer), metadata=meta, path=folder)
