"""Open nanoGPT checkpoints: `ckpt.pt` as nanoGPT's train.py writes it -> an Attention Lab checkpoint.

nanoGPT's `ckpt.pt` is a dict: `model` (the state dict, keys prefixed `_orig_mod.` when trained with
torch.compile), `model_args` (n_layer, n_head, n_embd, block_size, bias, vocab_size, dropout), `optimizer`,
`iter_num`, `best_val_loss` and `config` (train.py's settings, incl. `dataset`). It is read with
`torch.load(weights_only=True)`: tensors and plain values only, nothing run.

The model is GPT-2's: pre-LN blocks, exact GELU, scale 1/sqrt(head size), learned positions, `lm_head`
tied to `wte`, and with `bias=False` (its default) no bias tensors at all, LayerNorms included. Our
`Transformer` is the same computation under minGPT's names, so conversion renames tensors and splits
`c_attn` (3C x C, rows q|k|v) into query, key and value; `ModelConfig.bias` carries bias=False.

Its vocabulary is one of:
- characters (`data/<dataset>/meta.pkl`, a pickled {vocab_size, itos, stoi}): read by `read_meta`, an
  unpickler that builds dicts, lists, tuples, ints and strings only and refuses anything else;
- characters of the training text (`input.txt`): the sorted set, as nanoGPT's prepare.py builds it;
- GPT-2 pieces: a GPT-2 tokenizer folder (`tokenizer.json`, `vocab.json` + `merges.txt`, or OpenAI's
  `encoder.json` + `vocab.bpe` that tiktoken reads).

    python -m core.io.convert nanogpt out/ckpt.pt --meta data/shakespeare_char/meta.pkl -o sh.safetensors
"""

from __future__ import annotations

import io
import json
import pickle
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from core.io import checkpoint
from core.io.foreign_files import (
    ConversionError,
    check_output,
    corpus_text,
    load_torch_file,
    read_file,
    sha256_bytes,
    strip_wrapper_prefixes,
)
from core.model.config import ConfigError, ModelConfig
from core.model.meta_device import to_be_loaded
from core.model.tokenizer import ListedCharTokenizer, PiecesTokenizer, TokenizerError
from core.model.transformer import Transformer

META_LIMIT_BYTES = 16 * 1024 * 1024  # a character meta.pkl is a few kilobytes
CKPT_LIMIT_BYTES = 4 * 1024 ** 3  # on the command line: GPT-2 small's ckpt.pt is ~1.5 GB (2/3 of it AdamW state)
CKPT_KEYS = ("model", "model_args")
LAYER_KEY = re.compile(r"^transformer\.h\.(\d+)\.(.+)$")
# nanoGPT name inside a block -> ours (c_attn is split, the causal-mask buffer `attn.bias` dropped)
BLOCK_RENAMES = {"ln_1": "ln1", "ln_2": "ln2", "attn.c_proj": "attn.proj", "mlp.c_fc": "mlp.0",
                 "mlp.c_proj": "mlp.2"}
TOP_RENAMES = {"transformer.wte.weight": "tok_emb.weight", "transformer.wpe.weight": "pos.table",
               "transformer.ln_f.weight": "ln_f.weight", "transformer.ln_f.bias": "ln_f.bias",
               "lm_head.weight": "head.unembed.weight"}
# GPT-2 tokenizer files, in the order they are looked for: one file, or vocabulary + merges
TOKENIZER_FILES = (("tokenizer.json",), ("vocab.json", "merges.txt"), ("encoder.json", "vocab.bpe"))
GIVE_A_VOCABULARY = ("give its characters (the dataset's meta.pkl, or the training text) or, for a model on "
                     "GPT-2 pieces, GPT-2's tokenizer files (tokenizer.json, or vocab.json and merges.txt)")

Vocabulary = ListedCharTokenizer | PiecesTokenizer


@dataclass
class NanoCheckpoint:
    """What a ckpt.pt holds that the conversion uses."""

    state: dict[str, torch.Tensor]
    model_args: dict[str, Any]
    iter_num: int | None = None
    best_val_loss: float | None = None
    dataset: str | None = None


@dataclass
class NanoConversion:
    model: Transformer
    tokenizer: Vocabulary
    source: NanoCheckpoint
    warnings: list[str] = field(default_factory=list)
    stripped_prefix: str = ""

    @property
    def config(self) -> ModelConfig:
        return self.model.config


# --- reading ckpt.pt ----------------------------------------------------------------------------


def read_ckpt(data: bytes, name: str) -> NanoCheckpoint:
    """Bytes of a nanoGPT ckpt.pt -> its state dict and model_args (tensors and plain values only)."""
    loaded = load_torch_file(data, name)
    if not isinstance(loaded, dict) or not all(key in loaded for key in CKPT_KEYS):
        raise ConversionError(f"{name} is not a nanoGPT checkpoint: it lacks the 'model' and 'model_args' "
                              "entries that nanoGPT's train.py saves.")
    state, args = loaded["model"], loaded["model_args"]
    if not isinstance(state, dict) or not state or not all(
            isinstance(k, str) and torch.is_tensor(v) for k, v in state.items()):
        raise ConversionError(f"{name}: its 'model' entry is not a state dict of tensors.")
    if not isinstance(args, dict):
        raise ConversionError(f"{name}: its 'model_args' entry is not a dict.")
    config = loaded.get("config") if isinstance(loaded.get("config"), dict) else {}
    iter_num, best = loaded.get("iter_num"), loaded.get("best_val_loss")
    if torch.is_tensor(best):  # train.py keeps the loss tensor it evaluated
        best = best.item() if best.numel() == 1 else None
    return NanoCheckpoint(state=dict(state), model_args=dict(args),
                          iter_num=iter_num if isinstance(iter_num, int) else None,
                          best_val_loss=float(best) if isinstance(best, (int, float)) else None,
                          dataset=config["dataset"] if isinstance(config.get("dataset"), str) else None)


# --- vocabularies ------------------------------------------------------------------------------


class _Refused(pickle.UnpicklingError):
    """The pickle asked for a class or function: the way a pickle runs code."""


class _PlainDataUnpickler(pickle.Unpickler):
    """Builds only what needs no class: dicts, lists, tuples, numbers, strings. Any class or function
    stops it before it is looked up, so nothing a hostile file names is ever imported or called."""

    def find_class(self, module: str, name: str):
        raise _Refused(f"{module}.{name}"[:80])

    def persistent_load(self, pid):
        raise _Refused("a persistent object")


def _plain(value: Any, budget: int = 1_000_000) -> bool:
    """Only dicts, lists/tuples, ints and strings, at most 4 levels deep and `budget` values in all (a pickle
    can repeat one list by reference a million times at 2 bytes each); bools and floats are refused too."""
    stack, seen = [(value, 0)], 0
    while stack:
        item, depth = stack.pop()
        seen += 1
        if depth > 4 or seen > budget:
            return False
        if isinstance(item, str) or (isinstance(item, int) and not isinstance(item, bool)):
            continue
        if isinstance(item, (list, tuple)):
            stack.extend((v, depth + 1) for v in item)
        elif isinstance(item, dict):
            stack.extend((x, depth + 1) for kv in item.items() for x in kv)
        else:
            return False
    return True


def read_meta(data: bytes, name: str) -> ListedCharTokenizer:
    """nanoGPT's meta.pkl ({vocab_size, itos, stoi}) -> its character vocabulary, never running code."""
    if not data:
        raise ConversionError(f"{name} is empty.")
    if len(data) > META_LIMIT_BYTES:
        raise ConversionError(f"{name} is {len(data) / 1e6:.0f} MB; a character meta.pkl is a few kilobytes.")
    try:
        meta = _PlainDataUnpickler(io.BytesIO(data)).load()
    except _Refused as exc:
        raise ConversionError(f"{name} asks to build a Python object ({exc}), so it was refused without "
                              "running it; a nanoGPT meta.pkl holds only dicts, ints and strings.") from None
    except Exception:  # truncated or garbage bytes raise many types
        raise ConversionError(f"{name} is not a readable pickle.") from None
    if not isinstance(meta, dict) or not _plain(meta):
        raise ConversionError(f"{name} holds something other than dicts, lists, ints and strings (or over a "
                              "million of them), so it is "
                              "not a nanoGPT meta.pkl.")
    itos, stoi = meta.get("itos"), meta.get("stoi")
    if not isinstance(itos, dict) or not itos:
        raise ConversionError(f"{name} has no 'itos' table (id -> character), so it is not a character "
                              "meta.pkl.")
    if sorted(itos) != list(range(len(itos))):
        raise ConversionError(f"{name}: the ids of its 'itos' table are not 0..{len(itos) - 1}.")
    chars = [itos[i] for i in range(len(itos))]
    if any(not isinstance(c, str) or len(c) != 1 for c in chars):
        raise ConversionError(f"{name}: its 'itos' table maps ids to strings that are not single characters "
                              "(a GPT-2 pieces model has no meta.pkl; give a GPT-2 tokenizer folder).")
    if isinstance(stoi, dict) and any(stoi.get(c) != i for i, c in enumerate(chars)):
        raise ConversionError(f"{name}: its 'stoi' and 'itos' tables disagree.")
    size = meta.get("vocab_size", len(chars))
    if size != len(chars):
        raise ConversionError(f"{name} says vocab_size {size} but its 'itos' table has {len(chars)} characters.")
    try:
        return ListedCharTokenizer(chars)
    except TokenizerError as exc:
        raise ConversionError(f"{name}: {exc}") from None


def text_vocabulary(data: bytes, name: str) -> ListedCharTokenizer:
    """The training text's sorted set of characters, as nanoGPT's shakespeare_char/prepare.py builds it."""
    text = corpus_text(data, name)
    return ListedCharTokenizer(sorted(set(text)))


def gpt2_tokenizer(files: dict[str, bytes], where: str, vocab_size: int) -> PiecesTokenizer:
    """GPT-2 tokenizer files (name -> bytes) -> pieces over a model with `vocab_size` embedding rows."""
    from tokenizers import Tokenizer as HFTokenizer
    from tokenizers import decoders, models, pre_tokenizers

    present = next((names for names in TOKENIZER_FILES if all(n in files for n in names)), None)
    if present is None:
        raise ConversionError(f"{where} has no GPT-2 tokenizer files (tokenizer.json, vocab.json and "
                              "merges.txt, or encoder.json and vocab.bpe).")
    try:
        if present == ("tokenizer.json",):
            spec = files["tokenizer.json"].decode("utf-8")
            hf = HFTokenizer.from_str(spec)
        else:
            vocab = json.loads(files[present[0]].decode("utf-8"))
            lines = files[present[1]].decode("utf-8").splitlines()
            merges = [tuple(line.split(" ")) for line in lines if line and not line.startswith("#version")]
            if not isinstance(vocab, dict) or any(len(m) != 2 for m in merges):
                raise ValueError
            hf = HFTokenizer(models.BPE(vocab=vocab, merges=merges))
            hf.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
            hf.decoder = decoders.ByteLevel()
    except Exception:  # JSON, UTF-8 and the library's own errors: the files are not a tokenizer
        raise ConversionError(f"The tokenizer files in {where} ({', '.join(present)}) cannot be read as a "
                              "GPT-2 tokenizer.") from None
    pieces = hf.get_vocab_size(with_added_tokens=True)
    if pieces > vocab_size:
        raise ConversionError(f"The tokenizer in {where} has {pieces} pieces but the model has only "
                              f"{vocab_size} embedding rows, so it is not the model's tokenizer.")
    return PiecesTokenizer(hf.to_str(), vocab_size)


def tokenizer_folder_files(folder: Path) -> dict[str, bytes]:
    """The GPT-2 tokenizer files of a folder on disk (only those names; nothing else is read)."""
    if not folder.is_dir():
        raise ConversionError(f"{folder} is not a folder.")
    wanted = {n for names in TOKENIZER_FILES for n in names}
    return {p.name: p.read_bytes() for p in folder.iterdir() if p.name in wanted and p.is_file()
            and p.stat().st_size < 64 * 1024 * 1024}


# --- the conversion ----------------------------------------------------------------------------


def _arg(args: dict[str, Any], key: str, name: str) -> int:
    value = args.get(key)
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ConversionError(f"{name}: model_args[{key!r}] is {value!r}, not a positive integer.")
    return value


def nanogpt_config(args: dict[str, Any], state: dict[str, torch.Tensor], name: str) -> ModelConfig:
    """model_args -> our config (checked against the tensors' shapes, which are what the model is)."""
    n_layer, n_head = _arg(args, "n_layer", name), _arg(args, "n_head", name)
    n_embd, block_size = _arg(args, "n_embd", name), _arg(args, "block_size", name)
    wte, wpe = state.get("transformer.wte.weight"), state.get("transformer.wpe.weight")
    if wte is None or wpe is None:
        missing = "transformer.wte.weight" if wte is None else "transformer.wpe.weight"
        raise ConversionError(f"{name} lacks tensor {missing!r}, so it is not a complete nanoGPT model.")
    vocab_size = int(wte.shape[0])
    if args.get("vocab_size", vocab_size) != vocab_size:
        raise ConversionError(f"{name}: model_args says vocab_size {args.get('vocab_size')!r} but "
                              f"transformer.wte.weight has {vocab_size} rows.")
    if tuple(wpe.shape) != (block_size, n_embd):
        raise ConversionError(f"{name}: transformer.wpe.weight has shape {tuple(wpe.shape)} but model_args "
                              f"says block_size {block_size}, n_embd {n_embd}.")
    layers = {int(m.group(1)) for k in state if (m := LAYER_KEY.match(k))}
    if layers != set(range(n_layer)):
        raise ConversionError(f"{name}: model_args says {n_layer} layers but the file has tensors for "
                              f"{len(layers)} (transformer.h.N).")
    bias = args.get("bias", any(k.endswith("ln_1.bias") for k in state))
    if not isinstance(bias, bool):
        raise ConversionError(f"{name}: model_args['bias'] is {bias!r}, not true or false.")
    try:
        # pad_id = vocab_size: no id is padding (nanoGPT's loss ignores none of its tokens)
        return ModelConfig(vocab_size=vocab_size, block_size=block_size, n_layer=n_layer, n_head=n_head,
                           n_embd=n_embd, dropout=0.0, causal=True, positional="learned",
                           attention="vanilla", head="lm", bias=bias, pad_id=vocab_size)
    except ConfigError as exc:
        raise ConversionError(f"{name}: {exc}") from None


def _is_causal_mask(tensor: torch.Tensor, block_size: int) -> bool:
    ones = torch.tril(torch.ones(block_size, block_size))
    return tuple(tensor.shape) == (1, 1, block_size, block_size) and bool(torch.equal(tensor.float()[0, 0], ones))


def rename_state(state: dict[str, torch.Tensor], config: ModelConfig, name: str
                 ) -> tuple[dict[str, torch.Tensor], list[str]]:
    """nanoGPT's names -> ours; c_attn split into query, key, value; lm_head from wte when absent (tied)."""
    C = config.n_embd
    renamed: dict[str, torch.Tensor] = {}
    warnings: list[str] = []
    for key, tensor in state.items():
        if key in TOP_RENAMES:
            renamed[TOP_RENAMES[key]] = tensor
            continue
        match = LAYER_KEY.match(key)
        if match is None:
            raise ConversionError(f"{name} has tensor {key!r}, which a nanoGPT GPT does not have.")
        layer, rest = match.groups()
        if rest == "attn.bias" and tensor.dim() == 4:  # the causal mask buffer of nanoGPT's slow path
            if not _is_causal_mask(tensor, config.block_size):
                warnings.append(f"{key} is not the usual causal mask; the converted model uses a plain "
                                "causal mask, so its outputs may differ.")
            continue
        module, _, kind = rest.rpartition(".")  # e.g. ("attn.c_attn", "weight")
        if module == "attn.c_attn":
            if tensor.shape[0] != 3 * C:
                raise ConversionError(f"{name}: {key} has {tensor.shape[0]} rows, not 3 x n_embd = {3 * C}.")
            for part, chunk in zip(("query", "key", "value"), tensor.split(C, dim=0), strict=True):  # q|k|v
                renamed[f"blocks.{layer}.attn.{part}.{kind}"] = chunk
            continue
        if module not in BLOCK_RENAMES:
            raise ConversionError(f"{name} has tensor {key!r}, which a nanoGPT GPT does not have.")
        renamed[f"blocks.{layer}.{BLOCK_RENAMES[module]}.{kind}"] = tensor
    if "head.unembed.weight" not in renamed and "tok_emb.weight" in renamed:
        renamed["head.unembed.weight"] = renamed["tok_emb.weight"]  # tied, saved once
    return renamed, warnings


def _theirs(ours: str) -> str:
    """Our tensor name -> nanoGPT's, for messages."""
    back = {v: k for k, v in TOP_RENAMES.items()}
    if ours in back:
        return back[ours]
    match = re.match(r"^blocks\.(\d+)\.(.+)\.(weight|bias)$", ours)
    if not match:
        return ours
    layer, module, kind = match.groups()
    if module in ("attn.query", "attn.key", "attn.value"):
        module = "attn.c_attn"
    module = {v: k for k, v in BLOCK_RENAMES.items()}.get(module, module)
    return f"transformer.h.{layer}.{module}.{kind}"


def convert_nanogpt(ckpt: NanoCheckpoint, tokenizer: Vocabulary, name: str = "ckpt.pt",
                    vocabulary_name: str = "the vocabulary") -> NanoConversion:
    """A read ckpt.pt + its vocabulary -> our Transformer computing what nanoGPT's GPT computes."""
    state, stripped = strip_wrapper_prefixes(ckpt.state)
    config = nanogpt_config(ckpt.model_args, state, name)
    if tokenizer.vocab_size != config.vocab_size:
        hint = (" (a model with 50304 or 50257 rows reads GPT-2 pieces: give a GPT-2 tokenizer folder)"
                if config.vocab_size >= 50257 else "; use the meta.pkl or input.txt of the dataset it was "
                                                   "trained on")
        raise ConversionError(f"{vocabulary_name} has {tokenizer.vocab_size} characters but {name} has "
                              f"{config.vocab_size} embedding rows{hint}.")
    renamed, warnings = rename_state(state, config, name)
    with to_be_loaded():  # every weight is loaded below (strict), so none is drawn first
        model = Transformer(config)
    expected = model.state_dict()
    described = f"a {config.n_layer}-layer nanoGPT with bias={config.bias}"
    missing = [k for k in expected if k not in renamed]
    if missing:
        raise ConversionError(f"{name} lacks tensor {_theirs(missing[0])!r} that {described} has.")
    unexpected = [k for k in renamed if k not in expected]
    if unexpected:
        raise ConversionError(f"{name} has tensor {_theirs(unexpected[0])!r} that {described} does not have.")
    dtypes = set()
    for key, target in expected.items():
        tensor = renamed[key]
        if tuple(tensor.shape) != tuple(target.shape):
            raise ConversionError(f"{name}: tensor {_theirs(key)!r} has shape {tuple(tensor.shape)} where "
                                  f"model_args implies {tuple(target.shape)}.")
        if not tensor.is_floating_point():
            raise ConversionError(f"{name}: tensor {_theirs(key)!r} holds {tensor.dtype} values, not weights.")
        if tensor.dtype != target.dtype:
            dtypes.add(str(tensor.dtype).removeprefix("torch."))
        renamed[key] = tensor.to(target.dtype)
    if dtypes:
        warnings.append(f"Weights stored as {', '.join(sorted(dtypes))} were converted to float32.")
    if not all(bool(torch.isfinite(t).all()) for t in renamed.values()):
        raise ConversionError(f"{name} has weights that are NaN or infinite.")
    model.load_state_dict(renamed)
    model.eval()
    return NanoConversion(model=model, tokenizer=tokenizer, source=ckpt, warnings=warnings,
                          stripped_prefix=stripped)


def vocabulary_for(ckpt: NanoCheckpoint, ckpt_name: str, *, meta: tuple[str, bytes] | None = None,
                   text: tuple[str, bytes] | None = None,
                   tokenizer_files: tuple[str, dict[str, bytes]] | None = None) -> tuple[Vocabulary, str, bytes]:
    """Exactly one vocabulary source -> (tokenizer, its name, its bytes for the record)."""
    given = [x for x in (meta, text, tokenizer_files) if x is not None]
    if len(given) != 1:
        rows = ckpt.state.get("transformer.wte.weight", ckpt.state.get("_orig_mod.transformer.wte.weight"))
        pieces = rows is not None and rows.shape[0] >= 50257
        what = ("it reads GPT-2 pieces, so give a GPT-2 tokenizer folder (tokenizer.json, or vocab.json and "
                "merges.txt; --tokenizer DIR)" if pieces else GIVE_A_VOCABULARY + " (--meta, --text or --tokenizer)")
        raise ConversionError(f"{ckpt_name} stores no vocabulary: {what}." if not given else
                              "Give one vocabulary: a meta.pkl, a training text or a GPT-2 tokenizer folder.")
    if meta is not None:
        return read_meta(meta[1], meta[0]), meta[0], meta[1]
    if text is not None:
        return text_vocabulary(text[1], text[0]), text[0], text[1]
    where, files = tokenizer_files  # type: ignore[misc]
    rows = next((t.shape[0] for k, t in ckpt.state.items() if k.endswith("transformer.wte.weight")), 0)
    joined = b"".join(files[k] for k in sorted(files))
    return gpt2_tokenizer(files, where, int(rows)), where, joined


def nanogpt_command(ckpt: str, out: str, meta: str | None = None, text: str | None = None,
                    tokenizer: str | None = None) -> str:
    flag, value = next((f, v) for f, v in (("--meta", meta), ("--text", text), ("--tokenizer", tokenizer))
                       if v is not None)
    return shlex.join(["python", "-m", "core.io.convert", "nanogpt", ckpt, flag, value, "-o", out])


def save_nanogpt(conversion: NanoConversion, out: Path, *, ckpt_name: str, ckpt_sha256: str,
                 vocabulary_name: str, vocabulary_sha256: str, command: str) -> Path:
    """Write the checkpoint (task lm) with where it came from in its metadata."""
    src = conversion.source
    source = {"format": "nanoGPT ckpt.pt", "stripped_prefix": conversion.stripped_prefix,
              "iter_num": src.iter_num, "best_val_loss": src.best_val_loss, "dataset": src.dataset,
              "warnings": conversion.warnings}
    data = [{"path": vocabulary_name, "sha256": vocabulary_sha256, "role": "vocabulary"},
            {"path": ckpt_name, "sha256": ckpt_sha256, "role": "converted nanoGPT checkpoint"}]
    return checkpoint.save(out, conversion.model, conversion.tokenizer, "lm", data=data, command=command,
                           extra={"source": source})


def convert_nanogpt_bytes(ckpt: bytes, ckpt_name: str, **vocabulary) -> tuple[NanoConversion, str, bytes]:
    """ckpt.pt bytes + one vocabulary source (see `vocabulary_for`) -> (conversion, vocabulary name, bytes)."""
    read = read_ckpt(ckpt, ckpt_name)
    tokenizer, vocab_name, vocab_bytes = vocabulary_for(read, ckpt_name, **vocabulary)
    return convert_nanogpt(read, tokenizer, ckpt_name, vocab_name), vocab_name, vocab_bytes


def convert_nanogpt_files(ckpt_path: str | Path, out: str | Path, *, meta: str | Path | None = None,
                          text: str | Path | None = None, tokenizer: str | Path | None = None,
                          force: bool = False) -> tuple[Path, NanoConversion]:
    """Files on disk -> a checkpoint at `out` (refusing to overwrite unless `force`)."""
    ckpt_path, out = Path(ckpt_path), Path(out)
    check_output(out, force)
    data = read_file(ckpt_path, CKPT_LIMIT_BYTES)
    vocabulary: dict[str, Any] = {}
    if meta is not None:
        vocabulary["meta"] = (Path(meta).name, read_file(Path(meta)))
    if text is not None:
        vocabulary["text"] = (Path(text).name, read_file(Path(text)))
    if tokenizer is not None:
        vocabulary["tokenizer_files"] = (str(tokenizer), tokenizer_folder_files(Path(tokenizer)))
    conversion, vocab_name, vocab_bytes = convert_nanogpt_bytes(data, ckpt_path.name, **vocabulary)
    command = nanogpt_command(str(ckpt_path), str(out), meta=None if meta is None else str(meta),
                              text=None if text is None else str(text),
                              tokenizer=None if tokenizer is None else str(tokenizer))
    save_nanogpt(conversion, out, ckpt_name=str(ckpt_path), ckpt_sha256=sha256_bytes(data),
                 vocabulary_name=str(meta or text or tokenizer), vocabulary_sha256=sha256_bytes(vocab_bytes),
                 command=command)
    return out, conversion


def vocabulary_source(files: dict[str, bytes]) -> dict[str, Any]:
    """Files a user gave by name (uploads) -> the one keyword `vocabulary_for` takes: a `*.pkl` is meta.pkl,
    GPT-2's file names are a tokenizer, one other file is the training text."""
    wanted = {n for names in TOKENIZER_FILES for n in names}
    if any(name in wanted for name in files):
        others = sorted(name for name in files if name not in wanted)
        if others:
            raise ConversionError(f"Give one vocabulary: {others[0]} cannot go with GPT-2's tokenizer files.")
        return {"tokenizer_files": ("the uploaded tokenizer files", files)}
    if len(files) != 1:
        raise ConversionError(f"Give one vocabulary, not {len(files)} files: {GIVE_A_VOCABULARY}.")
    (name, data), = files.items()
    return {"meta": (name, data)} if name.lower().endswith(".pkl") else {"text": (name, data)}
