"""What the attention page shows, as plain data: pure functions, no streamlit.

`run_attention(model, tokenizer, task, labels, text)` tokenises a sentence, cuts it to what the model
can read (core.lens.trace.trace_text, the one cutting rule), asks for ONE `Trace` and returns an
`AttentionRun`: a view whose arrays are the Trace's own, plus plain values (cacheable, picklable).
Everything else here derives views from that run: combining heads, attention rollout (Abnar & Zuidema
2020), hiding tokens, differences between two models, the window of tokens a view draws of a long input,
sanity checks, the long-format CSV export; and the model's own output for the input (`ModelOutput`, one
function per task).
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from core.io.tables import csv_safe
from core.lens.probe.evaluation import ANSWER_CHARS, answer_from_completion
from core.lens.trace import AttentionShape, LayerQueryKey, TraceError, trace_text
from core.lens.training_pieces import CorpusCut, cuts_sentence
from core.model.tokenizer import Tokenizer
from core.text import MASK_CHAR, MASK_LABEL, TYPED_QUESTION_MARKS, markdown_escape, visible_token

MAX_TOKENS_PAST_BLOCK = 512  # no-hard-limit schemes: how far past block_size a user may run (memory)
ROW_SUM_TOLERANCE = 1e-6

# Sensible first sentences per task; the first one the tokenizer can read fully wins.
DEFAULT_SENTENCES: dict[str, tuple[str, ...]] = {
    "birthplace": tuple(f"Where was {name} born?"  # the page appends the MASK (birthplace_prompt)
                        for name in ("Daniel Dunn", "Giulia Rossi", "Ada Lovelace", "Alan Turing")),
    "lm": ("Daniel Dunn was an American actor, born in Baltimore.",
           "Ada Lovelace was born in London.", "Alan Turing was born in Maida Vale.",
           "abcdefghijklabcdefghijkl"),  # a repeated segment, for a model of symbols only (the induction run)
    "classify": ("Giulia Rossi", "Helena Tavares", "Ada Lovelace", "Alan Turing"),
}


class AttentionInputError(ValueError):
    """Text the page cannot show a map for; str() is one sentence for the user."""


@dataclass
class AttentionRun(AttentionShape):
    ids: list[int]
    tokens: list[str]  # display labels: spaces and invisible characters made visible
    unknown: list[str]  # distinct input pieces the vocabulary lacks (among the tokens read)
    fallback_token: str  # what unknown pieces were read as (PAD or <unk>)
    attention: np.ndarray  # (n_layer, n_head, T, T) float32: exactly the model's probabilities
    allowed: np.ndarray  # (T, T) bool: True where a query may attend a key
    special: np.ndarray  # (T,) bool: PAD / MASK positions
    causal: bool
    block_size: int
    max_length: int | None
    n_input_tokens: int  # before any cut
    notes: list[str]
    output: ModelOutput
    queries_keys: list[LayerQueryKey | None] | None = None  # per layer, from the same pass, when asked for
    untrained: list[str] = field(default_factory=list)  # pieces in the vocabulary no training text had
    pieces: list[str] = field(default_factory=list)  # each piece as itself: '‹F0›' for a byte of a character
    characters: list[tuple[int, int]] = field(default_factory=list)  # [start, end) of each whole character's pieces
    words: list[tuple[int, int]] = field(default_factory=list)  # [start, end) of each word's pieces


# --- text and tokens ---------------------------------------------------------------------------


def read_text(run: AttentionRun) -> str:
    """The text the run read, from its pieces (a character's byte pieces once, '␣' as a space): what a chart's
    title quotes, also for a file of attention maps that carries no text."""
    tokens = [run.tokens[a] for a, _ in run.characters] if run.characters else list(run.tokens)
    return "".join(tokens).replace("␣", " ")


def describe_piece(piece: str) -> str:
    """repr (Markdown-escaped) plus code point, so control characters and look-alikes are unambiguous."""
    shown = markdown_escape(repr(piece))
    return f"{shown} (U+{ord(piece):04X})" if len(piece) == 1 else shown


def unknown_message(unknown: list[str], fallback_token: str, limit: int = 20) -> str:
    """One warning sentence naming the unknown pieces; safe for st.warning (user text escaped)."""
    shown = ", ".join(describe_piece(p) for p in unknown[:limit])
    more = f" and {len(unknown) - limit} more" if len(unknown) > limit else ""
    noun = "piece is" if len(unknown) == 1 else "pieces are"
    return (f"{len(unknown)} {noun} not in this model's vocabulary and read as "
            f"{markdown_escape(visible_token(fallback_token))}: {shown}{more}.")


def untrained_message(untrained: list[str], limit: int = 20, cuts: list[CorpusCut] | None = None) -> str:
    """One sentence for pieces the vocabulary has (each its own id) but no training line was cut into; their
    letters may well be in the training text ('trans' in "translator"): with `cuts`
    (core.lens.training_pieces.corpus_cuts) it says how training cut them there. Markdown-safe."""
    shown = ", ".join(describe_piece(p) for p in untrained[:limit])
    more = f" and {len(untrained) - limit} more" if len(untrained) > limit else ""
    noun = "piece never occurs" if len(untrained) == 1 else "pieces never occur"
    it = "it" if len(untrained) == 1 else "them"
    how = (f" ({markdown_escape(cuts_sentence([c for c in cuts if c.piece in set(untrained[:limit])]))})"
           if cuts else "")
    return (f"{len(untrained)} {noun} on {'its' if len(untrained) == 1 else 'their'} own in this model's training "
            f"text, so it learned nothing about {it}: {shown}{more}{how}.")


def token_chips(tokens: list[str], spans: list[tuple[int, int]] | None = None) -> str:
    """Plain text, one bracketed chip per token, for st.code (never Markdown/HTML); with `spans`, one chip per
    span (a character the model reads as several byte pieces: the character once, with its piece count)."""
    if not spans:
        return " ".join(f"[{t}]" for t in tokens)
    return " ".join(f"[{tokens[a]}]" if b - a == 1 else f"[{tokens[a]} ×{b - a} pieces]" for a, b in spans)


# --- pieces joined: whole characters and words ------------------------------------------------------------
# A byte-level vocabulary may cut one character into several pieces (an emoji into four bytes), and ordinary
# words into several pieces. The views can join them, as BertViz users do by hand: a group's attention to a
# key group is the sum over its keys (the weight it gives the whole word), averaged over its queries.


def _incomplete(data: bytes) -> bool:
    """Whether `data` ends inside a UTF-8 character (more bytes would complete it)."""
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as exc:
        return exc.end == len(data) and exc.reason == "unexpected end of data"
    return False


def piece_bytes(tokenizer: Tokenizer, i: int) -> bytes | None:
    """The bytes of one piece for a byte-level vocabulary; None for character and word vocabularies."""
    read = getattr(tokenizer, "piece_bytes", None)
    return read(i) if read is not None else None


def piece_label(tokenizer: Tokenizer, i: int) -> str:
    """One piece as a person reads it: its text, or '‹F0›' for bytes that are only part of a character."""
    data = piece_bytes(tokenizer, i)
    return visible_token(tokenizer.decode([i]) if data is None else data)


def character_spans(tokenizer: Tokenizer, ids: list[int]) -> list[tuple[int, int]]:
    """[start, end) of the pieces that make each whole character (or run of whole characters): a piece on its
    own, or the 2-4 byte pieces of one character that the vocabulary never merged."""
    spans: list[tuple[int, int]] = []
    i = 0
    while i < len(ids):
        end, data = i + 1, piece_bytes(tokenizer, ids[i])
        while data is not None and _incomplete(data) and end < len(ids) and end - i < 4:
            more = piece_bytes(tokenizer, ids[end])
            if more is None:  # a special token: no character goes on into it
                break
            data += more
            end += 1
        spans.append((i, end))
        i = end
    return spans


def _word_class(text: str) -> str:
    r"""The tokenizers' pre-split classes (r'\w+|[^\w\s]+|\s'): a word, punctuation, or a space."""
    if text.isspace():
        return "space"
    return "word" if re.fullmatch(r"\w+", text) else "punctuation"


WORD_OR_PUNCTUATION = re.compile(r"\w+|[^\w\s]+")


def word_spans(raw: list[str], special: list[bool], characters: list[tuple[int, int]], text: str | None = None,
               offsets: list[tuple[int, int]] | None = None) -> list[tuple[int, int]]:
    """[start, end) of each word's pieces: consecutive whole characters of one class (letters and digits, or
    punctuation) join, as the tokenizers split text before cutting it into pieces; a space and a special token
    (PAD, MASK) stand alone. `raw`: each piece's text (a byte piece: its whole character). With the pieces'
    `offsets` in `text` (subword vocabularies), the words are the text's own (runs of letters and digits, or of
    punctuation), and pieces join when they cover the same word: a piece that carries a space ('␣was') is one
    word with what follows, never with the word before."""
    if text is not None and offsets is not None and len(offsets) >= len(raw):
        return _words_by_offsets(text, offsets, special, characters)
    words: list[tuple[int, int]] = []
    last = None
    for a, b in characters:
        kind = "special" if any(special[a:b]) else _word_class(raw[a])
        if words and kind == last and kind in ("word", "punctuation"):
            words[-1] = (words[-1][0], b)
        else:
            words.append((a, b))
        last = kind
    return words


def _words_by_offsets(text: str, offsets: list[tuple[int, int]], special: list[bool],
                      characters: list[tuple[int, int]]) -> list[tuple[int, int]]:
    word_of = np.full(len(text) + 1, -1)  # each character's word (-1: whitespace)
    for k, match in enumerate(WORD_OR_PUNCTUATION.finditer(text)):
        word_of[match.start():match.end()] = k
    words: list[tuple[int, int]] = []
    last: set[int] = set()
    for a, b in characters:
        start = min(offsets[i][0] for i in range(a, b))
        end = max(offsets[i][1] for i in range(a, b))
        covered = set() if any(special[a:b]) else set(word_of[start:end].tolist()) - {-1}
        if words and covered & last:  # another piece of the word the last one covered
            words[-1] = (words[-1][0], b)
            last |= covered
        else:
            words.append((a, b))
            last = covered
    return words


def join_attention(attention: np.ndarray, allowed: np.ndarray, spans: list[tuple[int, int]]
                   ) -> tuple[np.ndarray, np.ndarray]:
    """attention (..., T, T) and allowed (T, T) over groups of positions (`spans`, covering 0..T-1 in order):
    (..., G, G) with each group's weight to a key group summed over its keys and averaged over its queries, so
    rows still add up to 1; a group may attend another where any of its queries may attend any of its keys."""
    T = attention.shape[-1]
    member = np.zeros((T, len(spans)), dtype=np.float64)  # (T, G): which group each position is in
    for g, (a, b) in enumerate(spans):
        member[a:b, g] = 1.0
    mean_rows = (member / member.sum(axis=0)).T  # (G, T): averages a group's queries
    joined = mean_rows @ (attention.astype(np.float64) @ member)  # (..., T, T) @ (T, G) -> (..., G, G)
    may = (member.T @ allowed.astype(np.float64) @ member) > 0  # (G, G)
    return joined.astype(np.float32), may


@dataclass
class JoinedRun:
    """A run's attention over joined pieces (whole characters or words), with what each row and column is."""

    attention: np.ndarray  # (n_layer, n_head, G, G)
    allowed: np.ndarray  # (G, G)
    labels: list[str]  # one display label per group
    hovers: list[str]  # the pieces behind each label
    spans: list[tuple[int, int]]


def joined_run(run: AttentionRun, level: str) -> JoinedRun:
    """The run over whole characters ('characters': a character's byte pieces shown once) or words."""
    spans = run.words if level == "words" else run.characters
    attention, allowed = join_attention(run.attention, run.allowed, spans)
    pieces = run.pieces or run.tokens
    labels = ["".join(run.tokens[a] for a, _ in character_group(run.characters, a, b)) for a, b in spans]
    hovers = [f"piece {a}: {pieces[a]}" if b - a == 1 else
              f"pieces {a}-{b - 1}: " + " | ".join(pieces[a:b]) for a, b in spans]
    return JoinedRun(attention=attention, allowed=allowed, labels=labels, hovers=hovers, spans=spans)


def joinable(run: AttentionRun) -> bool:
    """Whether joining pieces changes anything: some word (or character) is more than one piece."""
    return any(b - a > 1 for a, b in run.words)


def character_group(characters: list[tuple[int, int]], a: int, b: int) -> list[tuple[int, int]]:
    """The whole characters inside the positions [a, b)."""
    return [span for span in characters if a <= span[0] and span[1] <= b]


def reading_sentence(metadata: dict[str, Any], tokenizer: Tokenizer, run: AttentionRun) -> str | None:
    """One sentence on why a text splits as it does, from the checkpoint's metadata (what its pieces were learned
    from: the vocabulary record's files, the checkpoint it took them from, a birthplace model's pretraining
    corpus, else its training files) and this run's counts; None for word vocabularies."""
    from core.lens.describe import vocabulary_record

    unit = getattr(tokenizer, "unit", "token")
    if unit == "word":
        return None
    vocabulary = vocabulary_record(metadata)
    data = [str(f["path"]) for f in metadata.get("data") or [] if isinstance(f, dict) and f.get("path")]
    files = [str(f.get("path")) for f in vocabulary.get("files") or [] if isinstance(f, dict)]
    named = [Path(str(f["path"])).name for f in metadata.get("data") or []  # a converted model: its vocabulary file
             if isinstance(f, dict) and f.get("path") and f.get("role") == "vocabulary"]
    if named and not files and not vocabulary.get("from"):
        vocabulary = {"from": " and ".join(named)}  # nanoGPT's meta.pkl, not the ckpt.pt beside it
    if metadata.get("task") == "birthplace" and data:
        files = data[:1]  # core.train.recipes.birthplace_vocabulary: the pretraining corpus, never the questions
    source = ("learned from " + " and ".join(files) + (" alone" if len(files) == 1 else "") if files
              else f"taken from {vocabulary['from']}" if vocabulary.get("from")
              else "learned from " + " and ".join(data) + (" alone" if len(data) == 1 else "") if data
              else "learned from its training text")
    n_words = sum(1 for a, b in run.words if not run.special[a] and any(re.search(r"\w", t) for t in run.tokens[a:b]))
    spaces = sum(1 for t in run.tokens if t in ("\u2423", "\u23ce", "\u21e5"))
    counts = (f"this text is {run.n_tokens} {unit}s for {n_words} word{'s' if n_words != 1 else ''}"
              + (f", {spaces} of them spaces (each space is a {unit} of its own)" if spaces and unit == "piece"
                 else ""))
    if unit == "character":
        return f"This model reads single characters ({tokenizer.vocab_size:,} of them, {source}): {counts}."
    return (f"This model reads {tokenizer.vocab_size:,} {unit}s {source}, so a word is a single "
            f"{unit} only if it was frequent there; {counts}.")


def special_ids(tokenizer: Tokenizer) -> set[int]:
    """PAD, (character tokenizers) MASK and (Hugging Face tokenizers) [CLS]/[SEP]/<s>…: the tokens
    'hide special tokens' removes."""
    ids = {tokenizer.pad_id} | set(getattr(tokenizer, "special_ids", ()))
    mask_id = getattr(tokenizer, "mask_id", None)  # word tokenizers have no MASK
    return ids if mask_id is None else ids | {mask_id}


def default_sentence(task: str, tokenizer: Tokenizer) -> str:
    candidates = DEFAULT_SENTENCES.get(task, DEFAULT_SENTENCES["lm"])
    for sentence in candidates:
        tokenized = tokenizer.tokenize(sentence)
        if tokenized.ids and not tokenized.unknown and not tokenized.untrained:
            return sentence
    return candidates[0]


def token_limit(max_length: int | None, block_size: int, run_past_block: bool) -> int:
    """How many tokens to read: the hard limit, else block_size unless the user asks for more."""
    if max_length is not None:
        return max_length
    return max(block_size, MAX_TOKENS_PAST_BLOCK) if run_past_block else block_size


def cut_notes(n_tokens: int, limit: int, block_size: int, max_length: int | None) -> list[str]:
    notes = []
    if n_tokens > limit:
        why = ("this model can read at most" if max_length is not None or limit > block_size
               else "this model was trained on")
        notes.append(f"The input has {n_tokens} tokens and {why} {limit}, so only the first {limit} "
                     "are shown.")
        if max_length is None and limit == block_size:
            notes.append("Its positional scheme has no hard limit: tick 'Run past the block size' to "
                         "read more.")
    if min(n_tokens, limit) > block_size:
        notes.append(f"Positions past {block_size} are beyond the length this model was trained on; "
                     "its attention there is extrapolation.")
    return notes


# --- the forward pass --------------------------------------------------------------------------


def birthplace_prompt(text: str) -> str:
    """A question typed with '?' (or '？') gets the MASK a birthplace model answers after: no keyboard
    has ⁇ (U+2047). Text already ending with the MASK, or with no question mark, is left alone."""
    stripped = text.rstrip()
    if stripped.endswith(tuple(TYPED_QUESTION_MARKS)):
        return stripped.rstrip(TYPED_QUESTION_MARKS) + "?" + MASK_CHAR
    return text


def run_attention(model, tokenizer: Tokenizer, task: str, text: str, labels: list[str] | None = None,
                  run_past_block: bool = False, queries_keys: bool = False) -> AttentionRun:
    """Tokenise, cut to what the model reads, one forward pass with attention (and, with `queries_keys`,
    every layer's queries and keys from that pass), the model's output."""
    if task == "birthplace":
        text = birthplace_prompt(text)
    if not text.strip():
        raise AttentionInputError("Type a sentence to see its attention (the box is empty or only "
                                  "whitespace).")
    tokenized = tokenizer.tokenize(text)
    if not tokenized.ids:
        raise AttentionInputError("This model reads words and punctuation, and the text has none; "
                                  "type a sentence with words.")
    config = model.config
    limit = token_limit(model.max_length, config.block_size, run_past_block)
    try:
        record = trace_text(model, tokenizer, text, limit, "start", queries_keys=queries_keys, tokenized=tokenized)
    except TraceError as exc:
        raise AttentionInputError(str(exc)) from None
    ids, unknown = record.ids, record.unknown
    read = tokenized.tokens[:len(ids)]
    untrained = [p for p in tokenized.untrained if p in set(read)]
    fallback = tokenizer.decode([ids[read.index(unknown[0])]]) if unknown else ""
    specials = special_ids(tokenizer)
    output_fn = MODEL_OUTPUTS.get(task, lm_next_tokens)
    special = [i in specials for i in ids]
    characters = character_spans(tokenizer, ids)
    return AttentionRun(  # a view: the arrays are the Trace's own, not copies
        ids=ids,
        tokens=record.tokens,
        unknown=unknown,
        fallback_token=fallback,
        untrained=untrained,
        attention=record.attention,  # (L, H, T, T)
        allowed=record.allowed,  # (T, T): exactly the model's mask
        special=np.array(special, dtype=bool),
        pieces=[piece_label(tokenizer, i) for i in ids],
        characters=characters,
        words=word_spans(read, special, characters, text, tokenized.offsets),
        causal=bool(config.causal),
        block_size=config.block_size,
        max_length=model.max_length,
        n_input_tokens=record.n_input_tokens,
        notes=cut_notes(record.n_input_tokens, limit, config.block_size, model.max_length),
        output=output_fn(model, tokenizer, record.idx, record.logits, labels or []),
        queries_keys=record.queries_keys,
    )


# --- what the model makes of the input, one function per task ---------------------------------------------
# Each takes (model, tokenizer, idx (1, T), logits from the traced pass, class labels) and returns a
# `ModelOutput`: a table (top next tokens, class probabilities), a generated answer, or a note.

TOP_K = 5
ANSWER_CHUNKS = (12, 20)  # the CS224N 32 characters, generated in these steps, stopping once answered


@dataclass
class ModelOutput:
    """What the model makes of the input: a table, an answer, or a note (whichever applies)."""

    title: str
    rows: list[dict[str, Any]] = field(default_factory=list)
    answer: str | None = None
    completion: str | None = None
    note: str | None = None

    @property
    def shown_completion(self) -> str | None:
        """The completion as people read it: each MASK as [MASK], not the '⁇' that reads as '??'."""
        return None if self.completion is None else self.completion.replace(MASK_CHAR, f"[{MASK_LABEL}]")


def lm_next_tokens(model, tokenizer: Tokenizer, idx: torch.Tensor, logits: torch.Tensor,
                   labels: list[str]) -> ModelOutput:
    """Top-5 next tokens after every position (the model's prediction for position + 1)."""
    probs = torch.softmax(logits[0].float(), dim=-1)  # (T, V)
    top = torch.topk(probs, min(TOP_K, probs.size(-1)), dim=-1)
    shown = {i: piece_label(tokenizer, i) for i in set(top.indices.flatten().tolist())}  # no '\ufffd': bytes as ‹F0›
    ids = idx[0].tolist()
    rows = []
    for pos, (values, indices) in enumerate(zip(top.values.tolist(), top.indices.tolist())):
        row: dict[str, Any] = {"pos": pos, "token": piece_label(tokenizer, ids[pos])}
        for rank, (p, i) in enumerate(zip(values, indices), start=1):
            row[f"next #{rank}"] = f"{shown[i]}  {p:.1%}"
        rows.append(row)
    return ModelOutput(title=f"Top-{TOP_K} next {getattr(tokenizer, 'unit', 'token')} after each position",
                       rows=rows)


def birthplace_answer(model, tokenizer: Tokenizer, idx: torch.Tensor, logits: torch.Tensor,
                      labels: list[str]) -> ModelOutput:
    # generation runs ANSWER_CHARS steps of the model's own unit: characters, or pieces of a subword vocabulary
    title = f"Generated answer (greedy, {ANSWER_CHARS} {getattr(tokenizer, 'unit', 'token')}s)"
    if not model.config.causal or model.config.head != "lm":
        return ModelOutput(title=title, note="This model cannot generate text.")
    if getattr(tokenizer, "mask_id", None) not in idx[0].tolist():
        return ModelOutput(title=title, note="A birthplace model answers a question: end it with '?', "
                                             "e.g. 'Where was Ada Lovelace born?' (the MASK it answers "
                                             "after is added for you).")
    out = idx
    with torch.inference_mode():
        # Greedy decoding is deterministic, so stopping once the answer's closing MASK is out changes
        # nothing but the time: a trained model answers in about ten characters, not 32.
        for chunk in ANSWER_CHUNKS:
            out = model.generate(out, chunk, do_sample=False)
            if (out[0, idx.size(1):] == tokenizer.mask_id).any():
                break
    completion = tokenizer.decode(out[0].tolist())
    answer = answer_from_completion(completion) if MASK_CHAR in completion else None
    return ModelOutput(title=title, answer=answer, completion=completion)


def class_probabilities(model, tokenizer: Tokenizer, idx: torch.Tensor, logits: torch.Tensor,
                        labels: list[str]) -> ModelOutput:
    probs = torch.softmax(logits[0].float(), dim=-1).tolist()  # (n_classes,)
    names = labels if len(labels) == len(probs) else [f"class {i}" for i in range(len(probs))]
    rows = sorted(({"label": n, "probability": round(p, 6)} for n, p in zip(names, probs)),
                  key=lambda r: -r["probability"])
    return ModelOutput(title="Class probabilities", rows=rows)


def masked_lm_predictions(model, tokenizer: Tokenizer, idx: torch.Tensor, logits: torch.Tensor,
                          labels: list[str]) -> ModelOutput:
    """A Hugging Face masked LM: what it predicts at every position (the same table as an LM's)."""
    output = lm_next_tokens(model, tokenizer, idx, logits, labels)
    output.title = f"Top-{TOP_K} tokens the masked LM predicts at each position"
    for row in output.rows:
        for key in [k for k in row if k.startswith("next #")]:
            row[key.replace("next", "predicted")] = row.pop(key)
    return output


def no_output_head(model, tokenizer: Tokenizer, idx: torch.Tensor, logits: torch.Tensor,
                   labels: list[str]) -> ModelOutput:
    return ModelOutput(title="Model output", note="This encoder has no output head (a bare "
                                                 "Hugging Face model); only its attention is shown.")


# task -> what the attention page shows under the map ("masked-lm" and "encoder": Hugging Face only)
MODEL_OUTPUTS: dict[str, Callable[..., ModelOutput]] = {
    "lm": lm_next_tokens,
    "birthplace": birthplace_answer,
    "classify": class_probabilities,
    "masked-lm": masked_lm_predictions,
    "encoder": no_output_head,
}


# --- combining heads and layers ----------------------------------------------------------------

def attention_rollout(attention: np.ndarray) -> np.ndarray:
    """Abnar & Zuidema (2020): per layer A = 0.5 * mean_heads(W) + 0.5 * I, rows renormalised;
    rollout = A_L @ ... @ A_1.  attention (L, H, T, T) -> (T, T)."""
    T = attention.shape[-1]
    result = np.eye(T, dtype=np.float64)
    for layer in attention.astype(np.float64):
        a = 0.5 * layer.mean(axis=0) + 0.5 * np.eye(T)
        a /= a.sum(axis=-1, keepdims=True)
        result = a @ result
    return result


HEAD_COMBINERS: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "mean": lambda heads: heads.mean(axis=0),
    "max": lambda heads: heads.max(axis=0),
}
COMBINE_TITLES = {"mean": "Mean over heads", "max": "Max over heads", "rollout": "Attention rollout"}


def combined_attention(run: AttentionRun, method: str, layer: int) -> tuple[np.ndarray, np.ndarray]:
    """(weights (T, T), allowed (T, T)) for 'mean'/'max' over one layer's heads or 'rollout'."""
    if method == "rollout":
        # The identity term keeps each token's own cell alive, even where the layer mask is 0.
        return attention_rollout(run.attention), run.allowed | np.eye(run.n_tokens, dtype=bool)
    return HEAD_COMBINERS[method](run.attention[layer]), run.allowed


def hide_positions(weights: np.ndarray, allowed: np.ndarray, keep: np.ndarray
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Drop hidden tokens (rows and columns) and renormalise each row over the keys left.

    Returns (weights (K, K), allowed (K, K), kept positions (K,)). A row whose whole weight was on
    hidden keys has nothing left to show: it becomes masked (all False in `allowed`).
    """
    positions = np.flatnonzero(keep)
    sub = weights[np.ix_(positions, positions)].astype(np.float64)
    sub_allowed = allowed[np.ix_(positions, positions)].copy()
    sums = np.where(sub_allowed, sub, 0.0).sum(axis=-1, keepdims=True)
    empty = sums[:, 0] <= 0
    sub = np.divide(sub, sums, out=np.zeros_like(sub), where=sums > 0)
    sub_allowed[empty] = False
    return sub, sub_allowed, positions


def keep_mask(run: AttentionRun, hide_first: bool, hide_special: bool) -> np.ndarray:
    keep = np.ones(run.n_tokens, dtype=bool)
    if hide_first:
        keep[0] = False
    if hide_special:
        keep &= ~run.special
    return keep


# --- comparing two models ----------------------------------------------------------------------


def same_tokenisation(a: AttentionRun, b: AttentionRun) -> bool:
    """A cell-by-cell difference only means something when both models read the same tokens."""
    return a.ids == b.ids and a.tokens == b.tokens


def attention_difference(a: np.ndarray, a_allowed: np.ndarray, b: np.ndarray, b_allowed: np.ndarray
                         ) -> tuple[np.ndarray, np.ndarray]:
    """(a - b, allowed where both may attend)."""
    return a.astype(np.float64) - b.astype(np.float64), a_allowed & b_allowed


def clip_index(value: int | None, count: int, default: int = 0) -> int:
    """A layer/head/position from a URL or another model, clipped into range(count).

    `default` is used when value is None; -1 means the last one.
    """
    if count <= 0:
        return 0
    if value is None:
        value = count - 1 if default < 0 else default
    return min(max(int(value), 0), count - 1)


# --- sanity checks -----------------------------------------------------------------------------


@dataclass
class SanityCheck:
    name: str
    passed: bool | None  # None: does not apply to this model
    detail: str


def sanity_checks(run: AttentionRun) -> list[SanityCheck]:
    attention = run.attention
    row_error = float(np.abs(attention.sum(axis=-1, dtype=np.float64) - 1.0).max())
    checks = [SanityCheck("Rows sum to 1", row_error <= ROW_SUM_TOLERANCE,
                          f"largest |row sum - 1| = {row_error:.2e} (tolerance {ROW_SUM_TOLERANCE:g})")]
    if run.causal:
        above = attention[..., ~np.tril(np.ones((run.n_tokens,) * 2, dtype=bool))]
        leaked = float(np.abs(above).max()) if above.size else 0.0
        checks.append(SanityCheck("Causal mask respected", leaked == 0.0,
                                  f"largest weight above the diagonal = {leaked:g} (must be exactly 0)"))
    else:
        padded = attention[..., ~run.allowed]
        leaked = float(np.abs(padded).max()) if padded.size else 0.0
        checks.append(SanityCheck("Padding keys get no attention", leaked == 0.0 if padded.size else None,
                                  f"largest weight on a PAD key = {leaked:g}" if padded.size
                                  else "encoder: no PAD tokens in this input"))
    T, block = run.n_tokens, run.block_size
    cut = f" (cut from {run.n_input_tokens})" if run.n_input_tokens > T else ""
    checks.append(SanityCheck("Length within block size", T <= block,
                              f"{T} tokens read{cut}; block size {block}; hard limit "
                              f"{run.max_length if run.max_length is not None else 'none'}"))
    return checks


# --- long inputs: which tokens a view draws ---------------------------------------------------------------
# A window of positions, and finding a token to move it to.
# A 512-token map has 262,144 cells and 512 labels no screen can show readably; the views draw a window of
# positions first..last instead (`WINDOW_TOKENS` wide by default, every label readable at 1024x768), moved
# with a slider or by searching for a token. Inputs up to `WHOLE_UP_TO` tokens are drawn whole, as before.
# Pure functions on positions and display labels; the page keeps the window in the URL
# (ui.page_state.AttentionState).

# At 1024x768 a single map's plot is 350-390 px wide (less beside long labels): 20 columns of 17+ px, each under
# a 12 px label turned upright (16 px)
# (32 columns labelled every other one, a 52-token sentence a third of them: issue 41)
WINDOW_TOKENS = 20  # default width: every row and column of the window labelled at 1024x768
WHOLE_UP_TO = 20  # inputs this short are drawn whole, with no window controls
MAX_MATCHES = 200  # a search listing more positions than this is no help to anyone


def needs_window(n_tokens: int) -> bool:
    return n_tokens > WHOLE_UP_TO


def clamp_window(window: tuple[int, int] | None, n_tokens: int, size: int = WINDOW_TOKENS) -> tuple[int, int]:
    """(first, last) positions, both shown, inside the input; None: the first `size` tokens. A window past the
    end (a shorter text than the link's) keeps its width and moves back inside. Needs n_tokens >= 1."""
    if window is None:
        return 0, min(size, n_tokens) - 1
    first, last = sorted(max(int(p), 0) for p in window)
    width = min(last - first + 1, n_tokens)
    first = min(first, n_tokens - width)
    return first, first + width - 1


def window_around(position: int, n_tokens: int, size: int = WINDOW_TOKENS) -> tuple[int, int]:
    """(first, last) of a window `size` tokens wide with `position` in its middle, kept inside the input."""
    size = max(1, min(size, n_tokens))
    first = min(max(int(position) - size // 2, 0), n_tokens - size)
    return first, first + size - 1


def window_positions(window: tuple[int, int]) -> list[int]:
    return list(range(window[0], window[1] + 1))


def next_match(matches: list[int], window: tuple[int, int]) -> int | None:
    """The first match after the window's middle (wrapping to the first): where 'next' moves the window."""
    if not matches:
        return None
    middle = window[0] + (window[1] - window[0] + 1) // 2  # where window_around puts a position
    return next((m for m in matches if m > middle), matches[0])


def find_tokens(tokens: list[str], text: str) -> list[int]:
    """Positions whose display label contains `text` (case-insensitive, surrounding spaces ignored, so
    'london' finds '␣London'); an empty search finds nothing."""
    needle = text.strip().casefold()
    if not needle:
        return []
    found = [i for i, token in enumerate(tokens) if needle in token.casefold()]
    return found[:MAX_MATCHES]


def window_caption(window: tuple[int, int], n_tokens: int) -> str:
    first, last = window
    # one line at 1024 px (two pushed a long question's map below the fold); the slider's help says the rest
    return f"Tokens {first} to {last} ({last - first + 1} of {n_tokens}); keys outside the window are not drawn."


def cut_to_window(attention: np.ndarray, allowed: np.ndarray, positions: list[int] | None
                  ) -> tuple[np.ndarray, np.ndarray]:
    """attention (..., T, T) and allowed (T, T) cut to the rows and columns at `positions` (None: all)."""
    if positions is None:
        return attention, allowed
    index = np.asarray(positions, dtype=int)
    return attention[..., index[:, None], index], allowed[np.ix_(index, index)]


def cut_kept_to_window(weights: np.ndarray, allowed: np.ndarray, kept: np.ndarray, positions: list[int] | None
                       ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A map over the `kept` positions (some tokens hidden, rows renormalised first) cut to the kept positions
    inside the window (None: all): (weights, allowed, those positions)."""
    if positions is None:
        return weights, allowed, kept
    inside = np.flatnonzero(np.isin(kept, positions))
    return weights[np.ix_(inside, inside)], allowed[np.ix_(inside, inside)], np.asarray(kept)[inside]


def same_window(positions: list[int] | None, n_tokens: int) -> list[int] | None:
    """The window `positions` (of one model's tokens) for a text another model reads as `n_tokens` tokens:
    the same first and last positions kept inside it; None when that model's text is short enough whole."""
    if positions is None or not needs_window(n_tokens):
        return None
    return window_positions(clamp_window((positions[0], positions[-1]), n_tokens))


def tokens_at(tokens: list[str], positions: list[int] | None) -> list[str]:
    return tokens if positions is None else [tokens[p] for p in positions]


# --- export ------------------------------------------------------------------------------------

CSV_COLUMNS = ("layer", "head", "query_pos", "query_token", "key_pos", "key_token", "weight")


def attention_csv(attention: np.ndarray, tokens: list[str]) -> str:
    """Long format, one row per (layer, head, query, key): every weight the model computed."""
    L, H, T, _ = attention.shape
    labels = [csv_safe(t) for t in tokens]
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for layer in range(L):
        for head in range(H):
            weights = attention[layer, head].tolist()
            for q in range(T):
                row = weights[q]
                writer.writerows((layer, head, q, labels[q], k, labels[k], repr(row[k])) for k in range(T))
    return buffer.getvalue()
