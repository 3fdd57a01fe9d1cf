"""Attention records: the attention maps a model computed in someone else's code, as a file the lab opens.

A record is one sentence: its tokens and, per layer, the attention of every head (heads x T x T); a file holds
one or more records, with optional labels, predictions and a model name. `.npz` (read with
`allow_pickle=False`) or `.safetensors`; never a pickle. Students call one function from their own code:

    from core.lens.records import save_attention
    _, attn_maps = model(x)                                   # CSE 256 PA2: a list of (1, T, T) maps
    save_attention("pa2.npz", tokens, attn_maps, heads_per_layer=2)
    _, _, attn_maps = encoder(x)                              # a PA2 solution: (n_layer, n_head, B, T, T)
    save_attention("pa2.npz", [tokens], attn_maps, layout="layer head batch")
    out = hf_model(**batch, output_attentions=True)           # transformers: a tuple of (B, H, T, T)
    save_attention("bert.npz", tokens, out.attentions, model_name="bert-base-uncased")
    _, w = mha(x, x, x, need_weights=True, average_attn_weights=False)   # nn.MultiheadAttention: (B, H, T, T)
    save_attention("mha.npz", tokens, [w])

`attention_maps` accepts the shapes people have: one array (n_layer, n_head, T, T), (n_layer, B, n_head, T, T)
or (n_layer, n_head, B, T, T) (a PA2 solution's torch.stack), or a list/tuple with one entry per layer of (T, T),
(B, T, T) or (B, n_head, T, T); with `heads_per_layer=k` a flat list of single-head maps (PA2's) is grouped k at
a time into layers. Which axis is which is read from the token lists (B sentences need B lists) and
`heads_per_layer`: a shape only one reading fits is read that way; a shape two readings fit (two sentences and
two heads) is refused naming both, and `layout="layer head batch"` says which. Shorter sentences are cut from
padded maps (their rows must still sum to 1, so padding they attended is caught).

`read_records(data, name)` opens a file (ours, or the lab's own export `python -m core.lens.export`) and checks
it completely before anything is drawn; every refusal is a `RecordsError` whose message is one sentence.
`as_run` makes a record the `AttentionRun` the Attention page's weight-only views draw.
"""

from __future__ import annotations

import hashlib
import io
import json
import struct
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:  # the page's run type; imported lazily below, so writing a file needs no torch
    from core.lens.attention import AttentionRun

FORMAT = "attention-lab-records/1"
MAX_TOKENS = 2048  # a T x T map past this is more than any view can show (and 16 MB per head)
MAX_VALUES = 64 * 1024 * 1024  # attention weights in one file (256 MB of float32)
MAX_UNPACKED_BYTES = 512 * 1024 * 1024  # every array of an .npz once decompressed
# tokens "hide special tokens" hides in a record: what BERT, RoBERTa, GPT-2 and the lab's own vocabularies call theirs
SPECIAL_TOKENS = frozenset({"[CLS]", "[SEP]", "[PAD]", "[MASK]", "<s>", "</s>", "<pad>", "<mask>", "<|endoftext|>",
                            "<bos>", "<eos>", "<unk>", "[UNK]", "\u25a1", "\u2047", "MASK"})
ROW_TOLERANCE = 1e-3  # |row sum - 1| a record may have (half-precision maps); the page's sanity check is stricter


class RecordsError(ValueError):
    """A records file or call that cannot be used; str() is one sentence for the user."""


@dataclass
class AttentionRecord:
    tokens: list[str]
    attention: np.ndarray  # (n_layer, n_head, T, T) float32, rows are queries
    label: str | None = None
    prediction: str | None = None
    allowed: np.ndarray | None = None  # (T, T) bool when the file says (the lab's export); else inferred
    ids: list[int] | None = None


@dataclass
class AttentionRecords:
    records: list[AttentionRecord]
    name: str  # the file's name
    model_name: str = ""
    digest: str = ""  # sha256 of the file's bytes: what the page's figure cache keys on

    @property
    def n_layer(self) -> int:
        return self.records[0].attention.shape[0]

    @property
    def n_head(self) -> int:
        return self.records[0].attention.shape[1]


# --- from what people's code returns -------------------------------------------------------------


def _array(x: Any, what: str) -> np.ndarray:
    if hasattr(x, "detach"):  # a torch tensor, without importing torch here
        x = x.detach().float().cpu().numpy()
    try:
        array = np.asarray(x)
    except (ValueError, TypeError):
        raise RecordsError(f"{what} is not an array of numbers.") from None
    if not np.issubdtype(array.dtype, np.number) or np.iscomplexobj(array):
        raise RecordsError(f"{what} holds {array.dtype} values, not attention weights.")
    return array.astype(np.float32)


# Readings tried when no `layout=` is given: the shapes people's code returns (the axes before each (T, T) map).
# A list's first axis is always its layers. A shape that more than one of these fits with the given token lists,
# giving different maps, is refused with a sentence naming the readings: never a guess.
ARRAY_LAYOUTS = {
    3: ("batch", "head", "layer"),  # one layer averaged over heads (B, T, T); one sentence's heads; single-head layers
    4: ("layer head", "batch head", "layer batch"),  # one sentence; one layer of a batch; single-head layers
    5: ("layer batch head", "layer head batch", "batch layer head"),  # torch.stack of transformers' tuple; one
}  # PA2 solution's torch.stack of per-layer (n_head, B, T, T); a batch of per-sentence stacks
LIST_LAYOUTS = {
    2: ("layer",),  # (T, T) per layer
    3: ("layer batch", "layer head"),  # PA2's (1, T, T) maps; nn.MultiheadAttention averaged; one sentence's heads
    4: ("layer batch head", "layer head batch"),  # transformers, BertViz, nn.MultiheadAttention per head; transposed
}
AXES = ("layer", "head", "batch")


def _parse_layout(layout: str, ndim: int, is_list: bool) -> tuple[str, ...]:
    words = tuple(str(layout).replace(",", " ").split())
    leading = ndim - 2 + (1 if is_list else 0)
    if len(words) != leading or len(set(words)) != len(words) or not set(words) <= set(AXES):
        what = f"each entry of the list has {ndim} dimensions" if is_list else f"the attention has {ndim} dimensions"
        raise RecordsError(f"layout={layout!r} does not fit: {what}, so name {leading} distinct axes before the two "
                           f"map axes from 'layer', 'head' and 'batch' (e.g. {' '.join(AXES[:leading])!r}).")
    if is_list and words[0] != "layer":
        raise RecordsError(f"layout={layout!r} does not fit a list: a list holds one entry per layer, so the layout "
                           "starts with 'layer' (e.g. 'layer batch head').")
    return words


def _read_as(array: np.ndarray, words: tuple[str, ...]) -> np.ndarray:
    """`array` whose leading axes are `words` -> (B, n_layer, n_head, T, T)."""
    for axis in AXES:
        if axis not in words:
            array, words = array[None], (axis, *words)
    order = [words.index(axis) for axis in ("batch", "layer", "head")]
    return array.transpose(*order, len(words), len(words) + 1)


def _group_heads(maps: np.ndarray, heads_per_layer: int | None) -> np.ndarray | str:
    """Single-head maps grouped `heads_per_layer` at a time into layers (PA2's flat list), or why not."""
    if heads_per_layer is None:
        return maps
    B, L, H, T, _ = maps.shape
    if H == heads_per_layer:
        return maps
    if H != 1:
        return f"it has {H} heads per layer, not heads_per_layer={heads_per_layer}"
    if L % heads_per_layer:
        return f"its {L} maps cannot be grouped {heads_per_layer} heads per layer"
    return maps.reshape(B, L // heads_per_layer, heads_per_layer, T, T)


def _describe(words: tuple[str, ...], shape: tuple[int, ...]) -> str:
    names = {"layer": ("layer", "layers"), "head": ("head", "heads"), "batch": ("sentence", "sentences")}
    parts = [f"{n} {names[w][n != 1]}" for w, n in zip(words, shape, strict=False)]
    return f"'{' '.join(words)}' ({', '.join(parts)})"


def attention_maps(attentions: Any, heads_per_layer: int | None = None, layout: str | None = None,
                   n_sentences: int | None = None) -> np.ndarray:
    """What a model's code returned -> (B, n_layer, n_head, T, T) float32 (see the module docstring).

    `layout` names the axes before each (T, T) map ("layer head batch"; for a list, of its entries with the
    list's own axis first: "layer batch head"). Without it, every usual reading is tried against
    `n_sentences` (the number of token lists) and `heads_per_layer`: one that fits is taken, several that fit
    and disagree are refused naming each, so a heads axis is never silently read as sentences."""
    is_list = isinstance(attentions, (list, tuple))
    if is_list:
        if not attentions:
            raise RecordsError("The attention list is empty: give one map (or one tensor of heads) per layer.")
        layers = [_array(a, f"Layer {i}'s attention") for i, a in enumerate(attentions)]
        shapes = {a.shape for a in layers}
        if len(shapes) != 1:
            raise RecordsError(f"The layers' maps have different shapes ({', '.join(map(str, sorted(shapes)))}); "
                               "give one shape for every layer.")
        array = np.stack(layers)  # (n_entries, ..., T, T)
        ndim, tried = layers[0].ndim, LIST_LAYOUTS
        if ndim not in tried:
            raise RecordsError(f"Each layer's attention has {ndim} dimensions; expected (T, T), (B, T, T) or "
                               "(B, heads, T, T).")
    else:
        array = _array(attentions, "The attention")
        ndim, tried = array.ndim, ARRAY_LAYOUTS
        if ndim not in tried:
            raise RecordsError(f"The attention has {ndim} dimensions; give (layers, heads, T, T), "
                               "(layers, B, heads, T, T), or a list with one entry per layer.")
    if array.shape[-1] != array.shape[-2]:
        raise RecordsError(f"The attention's last two axes are {array.shape[-2]} x {array.shape[-1]}; each map is "
                           "T x T (queries x keys).")
    candidates = [_parse_layout(layout, ndim, is_list)] if layout is not None else \
        [tuple(c.split()) for c in tried[ndim]]
    fits: list[tuple[tuple[str, ...], np.ndarray]] = []
    misfits: list[str] = []
    for words in candidates:
        maps = _group_heads(_read_as(array, words), heads_per_layer)
        if isinstance(maps, str):
            misfits.append(f"as {_describe(words, array.shape)} {maps}")
        elif n_sentences is not None and maps.shape[0] != n_sentences:
            misfits.append(f"as {_describe(words, array.shape)} it holds {maps.shape[0]} sentence(s), not "
                           f"{n_sentences}")
        else:
            fits.append((words, maps))
    shape = f"a list of {len(array)} maps of shape {tuple(array.shape[1:])}" if is_list else \
        f"an array of shape {tuple(array.shape)}"
    lists = f"{n_sentences} token list(s)" if n_sentences is not None else "the token lists"
    if not fits:
        if layout is not None:
            raise RecordsError(f"With layout={layout!r}, {shape} does not fit {lists}: "
                               f"{misfits[0].split(') ', 1)[1]}.")
        raise RecordsError(f"The attention, {shape}, fits no reading with {lists}: {'; '.join(misfits)}; check the "
                           "token lists (one per sentence) and heads_per_layer, or name the axes with layout=.")
    first = fits[0][1]
    differ = [words for words, maps in fits[1:] if maps.shape != first.shape or not np.array_equal(maps, first)]
    if differ:
        readings = [fits[0][0], *differ]
        named = " and ".join(_describe(w, array.shape) for w in readings)
        choose = " or ".join(f"layout={' '.join(w)!r}" for w in readings)
        raise RecordsError(f"The attention, {shape}, fits {len(readings)} readings with {lists}: {named}; say "
                           f"which with {choose}.")
    return first


def check_record(tokens: Sequence[Any], attention: np.ndarray, where: str) -> None:
    """Refuse what no view should draw: a token count that is not T, too many tokens, NaN, negative
    weights, rows that do not sum to 1."""
    if attention.ndim != 4 or attention.shape[-1] != attention.shape[-2] or 0 in attention.shape:
        raise RecordsError(f"{where}: the attention has shape {attention.shape}, not (layers, heads, T, T).")
    T = attention.shape[-1]
    if len(tokens) > MAX_TOKENS or T > MAX_TOKENS:
        raise RecordsError(f"{where} has {max(len(tokens), T):,} tokens; the lab draws records of at most "
                           f"{MAX_TOKENS:,} tokens, so cut the text first.")
    if len(tokens) != T:
        raise RecordsError(f"{where} has {len(tokens)} tokens but its maps are {T} x {T}; give one token per "
                           "row of the map.")
    if not all(isinstance(t, str) for t in tokens):
        raise RecordsError(f"{where}: its tokens are not all strings.")
    if not np.isfinite(attention).all():
        raise RecordsError(f"{where}: its attention has NaN or infinite weights.")
    if float(attention.min()) < -1e-6:
        raise RecordsError(f"{where}: its attention has negative weights ({float(attention.min()):.3g}), so it "
                           "is not softmax probabilities.")
    error = float(np.abs(attention.sum(axis=-1, dtype=np.float64) - 1.0).max())
    if error > ROW_TOLERANCE:
        raise RecordsError(f"{where}: its rows do not sum to 1 (largest |sum - 1| = {error:.3g}); save the "
                           "probabilities after the softmax, before dropout or averaging over layers.")


def records_from(tokens: Sequence[Any], attentions: Any, *, labels: Sequence[Any] | None = None,
                 predictions: Sequence[Any] | None = None, heads_per_layer: int | None = None,
                 layout: str | None = None) -> list[AttentionRecord]:
    """One or more sentences' tokens + what the model's code returned -> checked records."""
    token_lists = [tokens] if tokens and all(isinstance(t, str) for t in tokens) else list(tokens)
    token_lists = [[_token(t) for t in sentence] for sentence in token_lists]
    if not token_lists or not all(token_lists):
        raise RecordsError("No tokens were given: give the sentence's tokens, or one list per sentence.")
    maps = attention_maps(attentions, heads_per_layer, layout, n_sentences=len(token_lists))  # (B, L, H, T, T)
    B, T = maps.shape[0], maps.shape[-1]
    records = []
    for i, sentence in enumerate(token_lists):
        where = f"Sentence {i}" if B > 1 else "The sentence"
        n = len(sentence)
        attention = maps[i] if B == 1 or n >= T else maps[i, :, :, :n, :n]  # (L, H, n, n): padding cut away
        check_record(sentence, attention, where)
        records.append(AttentionRecord(tokens=sentence, attention=np.ascontiguousarray(attention),
                                       label=_optional(labels, i, B, "labels"),
                                       prediction=_optional(predictions, i, B, "predictions")))
    return records


def _token(token: Any) -> str:
    if isinstance(token, bytes):
        return token.decode("utf-8", errors="replace")
    return token if isinstance(token, str) else str(token)


def _optional(values: Sequence[Any] | None, i: int, n: int, what: str) -> str | None:
    if values is None:
        return None
    if isinstance(values, str):
        values = [values]
    if len(values) != n:
        raise RecordsError(f"{len(values)} {what} were given for {n} sentence(s).")
    return str(values[i])


# --- files ---------------------------------------------------------------------------------------


def save_attention(path: str | Path, tokens: Sequence[Any], attentions: Any, *,
                   labels: Sequence[Any] | None = None, predictions: Sequence[Any] | None = None,
                   model_name: str = "", heads_per_layer: int | None = None, layout: str | None = None) -> Path:
    """Write an attention records file (.npz or .safetensors) the lab's Open your model page opens.

    tokens: one sentence's tokens, or one list per sentence; attentions: what the model's code returned
    (see `attention_maps`); layout: its axes before each (T, T) map when two readings fit ("layer head batch").
    Raises RecordsError (one sentence) for anything a view could not draw."""
    path = Path(path)
    records = records_from(tokens, attentions, labels=labels, predictions=predictions,
                           heads_per_layer=heads_per_layer, layout=layout)
    return write_records(path, records, model_name)


def write_records(path: Path, records: list[AttentionRecord], model_name: str = "") -> Path:
    described = {"model_name": model_name, "tokens": [r.tokens for r in records],
                 "labels": [r.label for r in records], "predictions": [r.prediction for r in records]}
    tensors = {f"attention_{i}": r.attention.astype(np.float32) for i, r in enumerate(records)}
    if path.suffix == ".safetensors":
        from safetensors.numpy import save_file

        save_file(tensors, str(path), metadata={"format": FORMAT, "records": json.dumps(described)})
    elif path.suffix == ".npz":
        np.savez(path, format=np.array(FORMAT), records=np.array(json.dumps(described)), **tensors)
    else:
        raise RecordsError(f"{path.name}: name the file .npz or .safetensors.")
    return path


def _npz_shapes(data: bytes, name: str) -> dict[str, tuple[tuple[int, ...], np.dtype]]:
    """Each array's shape and dtype from its header alone (nothing large is read before it is checked)."""
    shapes = {}
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        for info in archive.infolist():
            if not info.filename.endswith(".npy"):
                raise RecordsError(f"{name} holds {info.filename[:60]!r}, which is not a numpy array.")
            with archive.open(info) as member:
                version = np.lib.format.read_magic(member)
                if version == (1, 0):
                    shape, _, dtype = np.lib.format.read_array_header_1_0(member)
                else:
                    shape, _, dtype = np.lib.format.read_array_header_2_0(member)
            shapes[info.filename[:-4]] = (shape, dtype)
    return shapes


def _check_sizes(shapes: dict[str, tuple[tuple[int, ...], Any]], name: str) -> None:
    for key, (shape, _) in shapes.items():
        if key.startswith("tokens") and shape and shape[0] > MAX_TOKENS:
            raise RecordsError(f"{name} has {shape[0]:,} tokens in one sentence; the lab draws records of at most "
                               f"{MAX_TOKENS:,} tokens, so cut the text first.")
        if key.startswith("attention") and len(shape) >= 2 and shape[-1] > MAX_TOKENS:
            raise RecordsError(f"{name} has {shape[-1]:,} x {shape[-1]:,} maps; the lab draws records of at most "
                               f"{MAX_TOKENS:,} tokens, so cut the text first.")
    total = sum(int(np.prod(shape)) for key, (shape, _) in shapes.items() if key.startswith("attention"))
    if total > MAX_VALUES:
        raise RecordsError(f"{name} holds {total:,} attention weights, over the {MAX_VALUES:,} the lab opens.")
    unpacked = sum(int(np.prod(shape)) * np.dtype(dtype).itemsize for shape, dtype in shapes.values() if dtype)
    if unpacked > MAX_UNPACKED_BYTES:  # a small compressed file can unpack to gigabytes
        raise RecordsError(f"{name} unpacks to {unpacked / 1e6:,.0f} MB, over the {MAX_UNPACKED_BYTES / 1e6:,.0f} MB "
                           "the lab opens.")


def read_records(data: bytes, name: str) -> AttentionRecords:
    """A records file's bytes -> checked records, or RecordsError (one sentence)."""
    if not data:
        raise RecordsError(f"{name} is empty.")
    digest = hashlib.sha256(data).hexdigest()
    if data[:4] == b"PK\x03\x04":
        return replace(_read_npz(data, name), digest=digest)
    if len(data) > 10 and data[8:9] == b"{":
        return replace(_read_safetensors(data, name), digest=digest)
    if data[:1] == b"\x80":
        raise RecordsError(f"{name} is a Python pickle, not a .npz or .safetensors file; pickles can run code, so "
                           "it is not opened (write the file with core.lens.records.save_attention).")
    if data[:6] == b"\x93NUMPY":
        raise RecordsError(f"{name} is a single numpy array without its tokens; write the file with "
                           "core.lens.records.save_attention.")
    raise RecordsError(f"{name} is not a .npz or .safetensors file.")


def _read_npz(data: bytes, name: str) -> AttentionRecords:
    try:
        shapes = _npz_shapes(data, name)
    except (zipfile.BadZipFile, ValueError, OSError, EOFError):
        raise RecordsError(f"{name} is damaged: it is not a readable .npz file.") from None
    if any(np.dtype(dtype).hasobject for _, dtype in shapes.values()):
        raise RecordsError(f"{name} holds pickled Python objects, which are never opened; save tokens as strings "
                           "(core.lens.records.save_attention does).")
    _check_sizes(shapes, name)
    try:
        arrays = dict(np.load(io.BytesIO(data), allow_pickle=False))
    except (ValueError, OSError, EOFError, zipfile.BadZipFile):
        raise RecordsError(f"{name} is damaged: it is not a readable .npz file.") from None
    if "attention" in arrays and "tokens" in arrays:  # the lab's own export (core.lens.export)
        return _read_export(arrays, name)
    if "records" in arrays:
        described = _described(str(arrays["records"]), name)
        return _assemble(described, arrays, name)
    raise RecordsError(f"{name} has neither 'attention' and 'tokens' arrays (the lab's export) nor the records "
                       "that core.lens.records.save_attention writes.")


def _read_export(arrays: dict[str, np.ndarray], name: str) -> AttentionRecords:
    tokens = [str(t) for t in np.atleast_1d(arrays["tokens"])]
    attention = arrays["attention"].astype(np.float32)
    check_record(tokens, attention, name)
    allowed = arrays.get("allowed")
    if allowed is not None and (allowed.dtype != bool or allowed.shape != attention.shape[-2:]):
        raise RecordsError(f"{name}: its 'allowed' mask is not a {len(tokens)} x {len(tokens)} boolean array.")
    ids = arrays.get("ids")
    return AttentionRecords(records=[AttentionRecord(tokens=tokens, attention=attention, allowed=allowed,
                                                     ids=None if ids is None else [int(i) for i in ids])],
                            name=name, model_name="")


def _described(text: str, name: str) -> dict[str, Any]:
    try:
        described = json.loads(text)
    except json.JSONDecodeError:
        raise RecordsError(f"{name}: its description of the records is not JSON.") from None
    tokens = described.get("tokens") if isinstance(described, dict) else None
    if not isinstance(tokens, list) or not tokens or not all(isinstance(t, list) for t in tokens):
        raise RecordsError(f"{name}: its description has no token lists.")
    if any(len(t) > MAX_TOKENS for t in tokens):
        longest = max(len(t) for t in tokens)
        raise RecordsError(f"{name} has {longest:,} tokens in one sentence; the lab draws records of at most "
                           f"{MAX_TOKENS:,} tokens, so cut the text first.")
    return described


def _assemble(described: dict[str, Any], arrays: dict[str, np.ndarray], name: str) -> AttentionRecords:
    tokens = described["tokens"]
    labels, predictions = described.get("labels") or [], described.get("predictions") or []
    records = []
    shapes = set()
    for i, sentence in enumerate(tokens):
        if f"attention_{i}" not in arrays:
            raise RecordsError(f"{name} has tokens for {len(tokens)} sentences but no attention for sentence {i}.")
        attention = arrays[f"attention_{i}"].astype(np.float32)
        check_record(sentence, attention, f"{name}, sentence {i}" if len(tokens) > 1 else name)
        shapes.add(attention.shape[:2])
        records.append(AttentionRecord(tokens=[str(t) for t in sentence], attention=attention,
                                       label=_text_or_none(labels, i), prediction=_text_or_none(predictions, i)))
    if len(shapes) > 1:
        raise RecordsError(f"{name}: its sentences have different numbers of layers or heads; one file is one model.")
    model_name = described.get("model_name")
    return AttentionRecords(records=records, name=name, model_name=model_name if isinstance(model_name, str) else "")


def _text_or_none(values: list[Any], i: int) -> str | None:
    return str(values[i]) if i < len(values) and values[i] is not None else None


def _read_safetensors(data: bytes, name: str) -> AttentionRecords:
    (length,) = struct.unpack("<Q", data[:8])
    if length > len(data) - 8 or length > 64 * 1024 * 1024:
        raise RecordsError(f"{name} is damaged: its header runs past the end of the file.")
    try:
        header = json.loads(data[8:8 + length])
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise RecordsError(f"{name} is damaged: its header is not JSON.") from None
    metadata = header.pop("__metadata__", None) or {}
    if metadata.get("format") != FORMAT or "records" not in metadata:
        what = " (it looks like a model checkpoint: add it on the Attention Lab checkpoint tab)" if \
            "config" in metadata else ""
        raise RecordsError(f"{name} is not an attention records file{what}.")
    shapes = {k: (tuple(v.get("shape", ())), None) for k, v in header.items() if isinstance(v, dict)}
    _check_sizes(shapes, name)
    described = _described(metadata["records"], name)
    from safetensors import SafetensorError
    from safetensors.numpy import load

    try:
        arrays = load(data)
    except (SafetensorError, ValueError):
        raise RecordsError(f"{name} is damaged: its tensors cannot be read.") from None
    return _assemble(described, arrays, name)


# --- for the Attention page ----------------------------------------------------------------------


def inferred_allowed(attention: np.ndarray) -> tuple[np.ndarray, bool]:
    """(allowed (T, T), causal): a decoder's maps are exactly 0 above the diagonal in every head."""
    T = attention.shape[-1]
    lower = np.tril(np.ones((T, T), dtype=bool))
    causal = T > 1 and not attention[..., ~lower].any()
    return (lower if causal else np.ones((T, T), dtype=bool)), causal


def as_run(record: AttentionRecord) -> AttentionRun:
    """A record as the AttentionRun the Attention page's weight-only views draw (no model: no output)."""
    from core.lens.attention import AttentionRun, ModelOutput
    from core.text import visible_token

    allowed, causal = inferred_allowed(record.attention)
    if record.allowed is not None:
        allowed = record.allowed
    T = len(record.tokens)
    special = np.array([t in SPECIAL_TOKENS for t in record.tokens], dtype=bool)  # (T,)
    said = [f"label: {record.label}"] if record.label is not None else []
    said += [f"prediction: {record.prediction}"] if record.prediction is not None else []
    output = ModelOutput(title="What the file says about this sentence",
                         rows=[{"record": s.split(": ", 1)[0], "value": s.split(": ", 1)[1]} for s in said],
                         note=None if said else "The file has no label or prediction for this sentence.")
    return AttentionRun(attention=record.attention, ids=record.ids if record.ids is not None else list(range(T)),
                        tokens=[visible_token(t) for t in record.tokens], unknown=[], fallback_token="",
                        allowed=allowed, special=special, causal=causal, block_size=T,
                        max_length=None, n_input_tokens=T, notes=[], output=output)
