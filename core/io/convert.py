"""Open models people already trained: CS224N minGPT `.params` files -> Attention Lab checkpoints.

The CS224N "pretrained transformers and knowledge access" assignment ends with files such as
`vanilla.finetune.params`: `torch.save(model.state_dict())` of minGPT. Our `Transformer` uses
minGPT's parameter names, so conversion is mostly renaming: strip `_orig_mod.` (torch.compile) and
`module.` (DataParallel) prefixes, drop the causal `attn.mask` buffers (checked: lower-triangular
ones), `pos_emb` (1, T, C) -> `pos.table` (T, C), `head.weight` -> `head.unembed.weight`. The config
is read off the tensor shapes; only n_head is not stored (8 in the assignment).

Loading uses `torch.load(weights_only=True)`: a pickle that would run code is refused, never run.
Every refusal is a `ConversionError` whose message is one sentence a user can act on.

    python -m core.io.convert cs224n vanilla.finetune.params --corpus wiki.txt -o vanilla.safetensors

nanoGPT's ckpt.pt has its own reader, core.io.nanogpt (`python -m core.io.convert nanogpt ...`).
"""

from __future__ import annotations

import argparse
import re
import shlex
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from core.io import checkpoint, nanogpt
from core.io.foreign_files import (  # noqa: F401  (ConversionError, read_file: part of this module's interface)
    WRAPPER_PREFIXES,
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
from core.model.tokenizer import MASK_CHAR, PAD_CHAR, CharTokenizer, TokenizerError
from core.model.transformer import Transformer

DEFAULT_N_HEAD = 8  # the assignment's GPTConfig(n_head=8); the file does not store it
WRAPPER_KEYS = ("state_dict", "model")  # {"state_dict": {...}} as some training loops save
BLOCK_KEY = re.compile(r"^blocks\.(\d+)\.")
MASK_KEY = re.compile(r"^blocks\.(\d+)\.attn\.mask$")
# minGPT name -> our name, for the tensors that are not renamed one to one.
RENAMED = {"pos_emb": "pos.table", "head.weight": "head.unembed.weight"}
OURS_TO_MINGPT = {ours: theirs for theirs, ours in RENAMED.items()}


@dataclass
class Conversion:
    """A converted model ready to save, and what the user should know about it."""

    model: Transformer
    tokenizer: CharTokenizer
    warnings: list[str] = field(default_factory=list)
    stripped_prefix: str = ""

    @property
    def config(self) -> ModelConfig:
        return self.model.config


# --- reading the files ---------------------------------------------------------------------------


def load_params(data: bytes, name: str) -> dict[str, torch.Tensor]:
    """Bytes of a `torch.save`d state dict -> {name: tensor}, refusing anything but tensors."""
    return _state_dict_of(load_torch_file(data, name), name)


def _state_dict_of(loaded: Any, name: str) -> dict[str, torch.Tensor]:
    if not isinstance(loaded, dict):
        raise ConversionError(f"{name} holds a {type(loaded).__name__}, not a state dict of tensors.")
    if not _all_tensors(loaded):
        for key in WRAPPER_KEYS:
            inner = loaded.get(key)
            if isinstance(inner, dict) and inner and _all_tensors(inner):
                return dict(inner)
        bad = next(k for k, v in loaded.items() if not (isinstance(k, str) and torch.is_tensor(v)))
        raise ConversionError(f"{name} has entry {str(bad)[:60]!r} that is not a tensor, so it is not a "
                              "plain state dict.")
    if not loaded:
        raise ConversionError(f"{name} holds an empty state dict.")
    return dict(loaded)


def _all_tensors(d: dict) -> bool:
    return all(isinstance(k, str) and torch.is_tensor(v) for k, v in d.items())


def corpus_tokenizer(data: bytes, name: str) -> CharTokenizer:
    """The assignment's vocabulary: sorted corpus characters after PAD and MASK."""
    text = corpus_text(data, name)
    reserved = sorted({PAD_CHAR, MASK_CHAR} & set(text))
    if reserved:
        shown = ", ".join(f"{c} (U+{ord(c):04X})" for c in reserved)
        raise ConversionError(f"{name} contains {shown}, which the vocabulary reserves for MASK/PAD, so it "
                              "cannot be the corpus the model was trained on.")
    try:
        return CharTokenizer.from_corpus(text)
    except TokenizerError as exc:
        raise ConversionError(f"{name}: {exc}") from None


# --- the conversion ------------------------------------------------------------------------------


def _is_causal_mask(mask: torch.Tensor, block_size: int) -> bool:
    if tuple(mask.shape) != (1, 1, block_size, block_size):
        return False
    return bool(torch.equal(mask.float(), torch.tril(torch.ones(block_size, block_size)).view_as(mask)))


def _attention_variant(state: dict[str, torch.Tensor], name: str) -> str:
    synthesizer = any(k.endswith(".attn.w1.weight") for k in state)
    vanilla = any(k.endswith(".attn.query.weight") for k in state)
    if synthesizer and vanilla:
        raise ConversionError(f"{name} mixes vanilla and synthesizer attention blocks.")
    if not (synthesizer or vanilla):
        raise ConversionError(f"{name} has no attention weights (neither attn.query nor attn.w1), so it is "
                              "not a minGPT model.")
    return "synthesizer" if synthesizer else "vanilla"


def _required(state: dict[str, torch.Tensor], key: str, dims: int, name: str) -> torch.Tensor:
    if key not in state:
        raise ConversionError(f"{name} lacks tensor {key!r}, so it is not a complete minGPT state dict.")
    tensor = state[key]
    if tensor.dim() != dims:
        raise ConversionError(f"{name}: tensor {key!r} has shape {tuple(tensor.shape)}, expected {dims} "
                              "dimensions.")
    return tensor


def infer_config(state: dict[str, torch.Tensor], n_head: int = DEFAULT_N_HEAD,
                 name: str = "the params file") -> ModelConfig:
    """Read layers, width, vocabulary, block size and attention variant off the tensor shapes."""
    if "transformer.wte.weight" in state and "tok_emb.weight" not in state:
        raise ConversionError(f"{name} is a nanoGPT checkpoint, not a CS224N minGPT one; convert it with "
                              "python -m core.io.convert nanogpt (or the nanoGPT tab of Open your model).")
    vocab_size, n_embd = _required(state, "tok_emb.weight", 2, name).shape
    pos_emb = _required(state, "pos_emb", 3, name)
    if pos_emb.size(0) != 1 or pos_emb.size(2) != n_embd:
        raise ConversionError(f"{name}: pos_emb has shape {tuple(pos_emb.shape)}, expected (1, block_size, "
                              f"{n_embd}).")
    block_size = pos_emb.size(1)
    layers = {int(m.group(1)) for k in state if (m := BLOCK_KEY.match(k))}
    if not layers:
        raise ConversionError(f"{name} has no transformer blocks (no 'blocks.0.' tensors).")
    n_layer = max(layers) + 1
    if len(layers) != n_layer:  # checked before building: a stray "blocks.99999." must not allocate
        gap = next(i for i, layer in enumerate(sorted(layers)) if i != layer)  # no range(n_layer): n may be 1e9
        raise ConversionError(f"{name} has tensors for block {n_layer - 1} but none for block {gap}.")
    attention = _attention_variant(state, name)
    if not isinstance(n_head, int) or n_head < 1:
        raise ConversionError(f"n_head must be a positive integer, got {n_head!r}.")
    if attention == "synthesizer":
        w2 = _required(state, "blocks.0.attn.w2", 2, name)
        rows = w2.size(0)
        if rows * n_head != n_embd:
            fits = (f"it was trained with {n_embd // rows} heads ({n_embd} / {rows}); set n_head to "
                    f"{n_embd // rows}" if rows and n_embd % rows == 0 else "no whole number of heads fits")
            raise ConversionError(f"{name}: the synthesizer's w2 has {rows} rows but n_embd {n_embd} / "
                                  f"n_head {n_head} = {n_embd / n_head:g}; {fits}.")
    elif n_embd % n_head:
        raise ConversionError(f"{name}: the width n_embd {n_embd} is not divisible by n_head {n_head}; "
                              f"the assignment uses {DEFAULT_N_HEAD}.")
    try:
        return ModelConfig(vocab_size=int(vocab_size), block_size=int(block_size), n_layer=n_layer,
                           n_head=n_head, n_embd=int(n_embd), dropout=0.0, causal=True,
                           positional="learned", attention=attention, head="lm")
    except ConfigError as exc:
        raise ConversionError(f"{name}: {exc}") from None


def convert_state_dict(state: dict[str, torch.Tensor], tokenizer: CharTokenizer,
                       n_head: int = DEFAULT_N_HEAD, name: str = "the params file",
                       corpus_name: str = "the corpus") -> Conversion:
    """A minGPT state dict (+ the corpus vocabulary) -> our Transformer with identical outputs."""
    state, stripped = strip_wrapper_prefixes(state)
    config = infer_config(state, n_head, name)
    if tokenizer.vocab_size != config.vocab_size:
        raise ConversionError(f"{corpus_name} gives a vocabulary of {tokenizer.vocab_size} entries (its "
                              f"characters plus PAD and MASK) but {name} has {config.vocab_size} embedding "
                              "rows; use the wiki.txt the model was pretrained on.")
    warnings: list[str] = []
    renamed: dict[str, torch.Tensor] = {}
    for key, tensor in state.items():
        if MASK_KEY.match(key):
            if not _is_causal_mask(tensor, config.block_size):
                warnings.append(f"{key} is not the usual lower-triangular causal mask; the converted model "
                                "uses a plain causal mask, so its outputs may differ.")
            continue
        renamed[RENAMED.get(key, key)] = tensor
    renamed["pos.table"] = renamed["pos.table"][0]  # (1, T, C) -> (T, C)

    with to_be_loaded():  # every weight is loaded below (strict), so none is drawn first
        model = Transformer(config)
    expected = model.state_dict()
    described = f"a {config.n_layer}-layer {config.attention} minGPT"
    missing = [k for k in expected if k not in renamed]
    if missing:
        theirs = OURS_TO_MINGPT.get(missing[0], missing[0])
        raise ConversionError(f"{name} lacks tensor {theirs!r} that {described} has.")
    unexpected = [k for k in renamed if k not in expected]
    if unexpected:
        theirs = OURS_TO_MINGPT.get(unexpected[0], unexpected[0])
        raise ConversionError(f"{name} has tensor {theirs!r} that {described} does not have.")
    converted_dtypes = set()
    for key, target in expected.items():
        tensor = renamed[key]
        theirs = OURS_TO_MINGPT.get(key, key)
        if tuple(tensor.shape) != tuple(target.shape):
            shown = (1, *tensor.shape) if key == "pos.table" else tuple(tensor.shape)
            wanted = (1, *target.shape) if key == "pos.table" else tuple(target.shape)
            raise ConversionError(f"{name}: tensor {theirs!r} has shape {tuple(shown)} but the other tensors "
                                  f"imply {tuple(wanted)}.")
        if not tensor.is_floating_point():
            raise ConversionError(f"{name}: tensor {theirs!r} holds {tensor.dtype} values, not weights.")
        if tensor.dtype != target.dtype:
            converted_dtypes.add(str(tensor.dtype).removeprefix("torch."))
        renamed[key] = tensor.to(target.dtype)
    if converted_dtypes:
        warnings.append(f"Weights stored as {', '.join(sorted(converted_dtypes))} were converted to float32.")
    model.load_state_dict(renamed)
    model.eval()
    return Conversion(model=model, tokenizer=tokenizer, warnings=warnings, stripped_prefix=stripped)


def convert_cs224n_bytes(params: bytes, params_name: str, corpus: bytes, corpus_name: str,
                         n_head: int = DEFAULT_N_HEAD) -> Conversion:
    tokenizer = corpus_tokenizer(corpus, corpus_name)
    return convert_state_dict(load_params(params, params_name), tokenizer, n_head, params_name, corpus_name)


def cs224n_command(params: str, corpus: str, n_head: int, out: str) -> str:
    return shlex.join(["python", "-m", "core.io.convert", "cs224n", params, "--corpus", corpus,
                       "--n-head", str(n_head), "-o", out])


def save_conversion(conversion: Conversion, out: Path, *, params_name: str, params_sha256: str,
                    corpus_name: str, corpus_sha256: str, command: str) -> Path:
    """Write the checkpoint (task birthplace) with where it came from in its metadata."""
    source = {"format": "cs224n minGPT state_dict", "stripped_prefix": conversion.stripped_prefix,
              "warnings": conversion.warnings}
    data = [{"path": corpus_name, "sha256": corpus_sha256, "role": "pretraining corpus (vocabulary)"},
            {"path": params_name, "sha256": params_sha256, "role": "converted params"}]
    return checkpoint.save(out, conversion.model, conversion.tokenizer, "birthplace", data=data,
                           command=command, extra={"source": source})


def convert_cs224n(params_path: str | Path, corpus_path: str | Path, out: str | Path,
                   n_head: int = DEFAULT_N_HEAD, force: bool = False,
                   max_bytes: int = checkpoint.DEFAULT_MAX_BYTES) -> tuple[Path, Conversion]:
    """Files on disk -> a checkpoint at `out` (refusing to overwrite unless `force`)."""
    params_path, corpus_path, out = Path(params_path), Path(corpus_path), Path(out)
    check_output(out, force)
    params = read_file(params_path, max_bytes)
    corpus = read_file(corpus_path, max_bytes)
    conversion = convert_cs224n_bytes(params, params_path.name, corpus, corpus_path.name, n_head)
    command = cs224n_command(str(params_path), str(corpus_path), n_head, str(out))
    save_conversion(conversion, out, params_name=str(params_path), params_sha256=sha256_bytes(params),
                    corpus_name=str(corpus_path), corpus_sha256=sha256_bytes(corpus), command=command)
    return out, conversion


# --- command line --------------------------------------------------------------------------------


class _OneLineParser(argparse.ArgumentParser):
    """Usage mistakes end in one line on stderr and exit code 2, like conversion errors."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"error: {message} (see --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _OneLineParser(prog="python -m core.io.convert",
                            description="Convert models trained elsewhere into Attention Lab checkpoints.")
    sub = parser.add_subparsers(dest="source", required=True, metavar="{cs224n,nanogpt}",
                                parser_class=_OneLineParser)
    cs = sub.add_parser("cs224n", help="a CS224N minGPT .params file (torch.save of the state_dict)")
    cs.add_argument("params", help="e.g. vanilla.finetune.params or synthesizer.finetune.params")
    cs.add_argument("--corpus", required=True, help="the pretraining wiki.txt (rebuilds the vocabulary)")
    cs.add_argument("--n-head", type=int, default=DEFAULT_N_HEAD,
                    help=f"attention heads; not stored in the file (default {DEFAULT_N_HEAD})")
    cs.add_argument("-o", "--out", required=True, help="output .safetensors path")
    cs.add_argument("--force", action="store_true", help="overwrite an existing output file")
    nano = sub.add_parser("nanogpt", help="a nanoGPT ckpt.pt (as its train.py writes it)")
    nano.add_argument("ckpt", help="e.g. out-shakespeare-char/ckpt.pt")
    vocab = nano.add_mutually_exclusive_group()
    vocab.add_argument("--meta", help="the dataset's meta.pkl (character models)")
    vocab.add_argument("--text", help="the training text, e.g. input.txt (its sorted characters)")
    vocab.add_argument("--tokenizer", help="a GPT-2 tokenizer folder (models on GPT-2 pieces)")
    nano.add_argument("-o", "--out", required=True, help="output .safetensors path")
    nano.add_argument("--force", action="store_true", help="overwrite an existing output file")
    return parser


def _convert(args: argparse.Namespace):
    if args.source == "nanogpt":
        return nanogpt.convert_nanogpt_files(args.ckpt, args.out, meta=args.meta, text=args.text,
                                     tokenizer=args.tokenizer, force=args.force)
    return convert_cs224n(args.params, args.corpus, args.out, args.n_head, args.force)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        out, conversion = _convert(args)
    except ConversionError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except (checkpoint.CheckpointError, OSError) as exc:
        print(f"error: could not write {args.out}: {exc}", file=sys.stderr)
        return 2
    for warning in conversion.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    cfg = conversion.config
    bias = "" if cfg.bias else ", no biases"
    print(f"Wrote {out}: {cfg.attention} attention, {cfg.n_layer} layers x {cfg.n_head} heads, "
          f"width {cfg.n_embd}, block {cfg.block_size}, vocabulary {cfg.vocab_size}{bias}.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
