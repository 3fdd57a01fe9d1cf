"""Tokenizers that serialise to JSON for the checkpoint.

`CharTokenizer` reproduces the CS224N vocabulary exactly: the sorted set of corpus characters,
then MASK (U+2047) inserted at index 0, then PAD (U+25A1) at index 0, so PAD=0 and MASK=1.
Characters outside the vocabulary never raise: they become PAD (id 0), the documented fallback,
and `tokenize` reports which ones they were so the UI can name them.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from core.model.splitters import SPLITTER_CHECKS, SPLITTERS
from core.text import MASK_CHAR, PAD_CHAR  # noqa: F401  (part of the tokenizer's interface)


@dataclass
class Tokenized:
    ids: list[int]
    tokens: list[str]  # one display string per id
    unknown: list[str] = field(default_factory=list)  # distinct input pieces not in the vocabulary (read as another)
    # distinct pieces in the vocabulary that no training text had: read as themselves, but their embeddings
    # never learned anything (a byte-level vocabulary has every text's pieces, so only these can be "new")
    untrained: list[str] = field(default_factory=list)
    # [start, end) of each piece in the text (subword tokenizers say; a special token's is empty): words are
    # found from the text's own characters, whatever pieces carry a space (core.lens.attention.word_spans)
    offsets: list[tuple[int, int]] | None = None


class TokenizerError(ValueError):
    pass


class _CharacterCodec:
    """One id per character of `self.chars` (`self.stoi` its index); a character outside it reads as
    `self.unknown_id` and is named in `tokenize(...).unknown`. Shared by the CS224N and nanoGPT vocabularies."""

    chars: list[str]
    stoi: dict[str, int]
    kind: str
    unknown_id: int

    @property
    def vocab_size(self) -> int:
        return len(self.chars)

    def tokenize(self, text: str) -> Tokenized:
        ids = [self.stoi.get(c, self.unknown_id) for c in text]
        unknown = list(dict.fromkeys(c for c in text if c not in self.stoi))
        return Tokenized(ids=ids, tokens=list(text), unknown=unknown)

    def encode(self, text: str) -> list[int]:
        return self.tokenize(text).ids

    def decode(self, ids: list[int]) -> str:
        return "".join(self.chars[i] if 0 <= i < len(self.chars) else PAD_CHAR for i in ids)

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "chars": "".join(self.chars)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]):
        return cls(list(data["chars"]))


class CharTokenizer(_CharacterCodec):
    kind = "char"
    unit = "character"  # what one token is called on the pages
    pad_id = 0
    mask_id = 1
    unknown_id = 0  # an unknown character reads as PAD

    def __init__(self, chars: list[str]) -> None:
        if chars[:2] != [PAD_CHAR, MASK_CHAR]:
            raise TokenizerError("A character vocabulary must start with PAD (U+25A1) then MASK (U+2047).")
        if len(set(chars)) != len(chars) or any(len(c) != 1 for c in chars):
            raise TokenizerError("A character vocabulary must be distinct single characters.")
        self.chars = list(chars)
        self.stoi = {c: i for i, c in enumerate(self.chars)}

    @classmethod
    def from_corpus(cls, text: str, min_freq: int = 1) -> CharTokenizer:
        """min_freq 1 is the CS224N vocabulary; higher drops rarer characters (they then read as PAD)."""
        found = {PAD_CHAR, MASK_CHAR} & set(text)
        if found:
            names = ", ".join(f"U+{ord(c):04X}" for c in sorted(found))
            raise TokenizerError(f"The corpus contains the reserved MASK/PAD character(s) {names}.")
        if min_freq > 1:
            counts = Counter(text)
            chars = sorted(c for c, n in counts.items() if n >= min_freq)
        else:
            chars = sorted(set(text))
        chars.insert(0, MASK_CHAR)
        chars.insert(0, PAD_CHAR)
        return cls(chars)



class WordTokenizer:
    """Words and punctuation (`splitter`: a key of core.model.splitters.SPLITTERS); min-frequency vocabulary
    with <pad>=0 and <unk>=1. A description without a splitter is `regex`, the only one before issue 30."""

    kind = "word"
    unit = "word"
    pad_id = 0
    unk_id = 1
    specials = ("<pad>", "<unk>")

    def __init__(self, words: list[str], lowercase: bool = True, splitter: str = "regex") -> None:
        if tuple(words[:2]) != self.specials:
            raise TokenizerError("A word vocabulary must start with <pad> then <unk>.")
        if splitter not in SPLITTERS:
            raise TokenizerError(f"Unknown word splitter {splitter!r}; choose one of: {', '.join(SPLITTERS)}.")
        if splitter in SPLITTER_CHECKS and (problem := SPLITTER_CHECKS[splitter]()):
            raise TokenizerError(problem)
        self.words = list(words)
        self.lowercase = lowercase
        self.splitter = splitter
        self.stoi = {w: i for i, w in enumerate(self.words)}

    def split(self, text: str) -> list[str]:
        return SPLITTERS[self.splitter](text.lower() if self.lowercase else text)

    @classmethod
    def from_corpus(cls, text: str, min_freq: int = 1, lowercase: bool = True,
                    max_size: int | None = None, splitter: str = "regex") -> WordTokenizer:
        counts = Counter(cls([*cls.specials], lowercase, splitter).split(text))
        kept = sorted((w for w, n in counts.items() if n >= min_freq), key=lambda w: (-counts[w], w))
        if max_size is not None:
            kept = kept[: max(0, max_size - 2)]
        return cls([*cls.specials, *kept], lowercase, splitter)

    @property
    def vocab_size(self) -> int:
        return len(self.words)

    def tokenize(self, text: str) -> Tokenized:
        pieces = self.split(text)
        ids = [self.stoi.get(p, self.unk_id) for p in pieces]
        unknown = list(dict.fromkeys(p for p in pieces if p not in self.stoi))
        return Tokenized(ids=ids, tokens=pieces, unknown=unknown)

    def encode(self, text: str) -> list[int]:
        return self.tokenize(text).ids

    def decode(self, ids: list[int]) -> str:
        return " ".join(self.words[i] if 0 <= i < len(self.words) else "<unk>" for i in ids)

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "words": self.words, "lowercase": self.lowercase, "splitter": self.splitter}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> WordTokenizer:
        return cls(list(data["words"]), bool(data.get("lowercase", True)), str(data.get("splitter", "regex")))


def _byte_level_alphabet() -> dict[str, int]:
    """GPT-2's byte-to-character table (the `ByteLevel` pre-tokenizer's), inverted: character -> byte."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("\u00a1"), ord("\u00ac") + 1),
                 *range(ord("\u00ae"), ord("\u00ff") + 1)]
    chars, extra = {}, 0
    for b in range(256):
        if b in printable:
            chars[chr(b)] = b
        else:
            chars[chr(256 + extra)] = b
            extra += 1
    return chars


_BYTE_OF = _byte_level_alphabet()
_BYTE_FALLBACK = re.compile(r"<0x([0-9A-Fa-f]{2})>")  # SentencePiece's byte fallback (LLaMA, Gemma): '<0xE2>'


def byte_level(spec: dict | None) -> bool:
    """Whether a `tokenizers` description decodes with GPT-2's byte-level alphabet (its decoder, or one of a
    sequence of decoders, is ByteLevel)."""
    return '"ByteLevel"' in json.dumps((spec or {}).get("decoder"))


def bytes_of_piece(token: str | None, is_byte_level: bool) -> bytes | None:
    """The bytes a piece's vocabulary entry stands for, when the entry says them: a byte fallback '<0xE2>', or a
    byte-level entry ('Ġthe', 'ð'); None otherwise (its decoded text is then the whole story)."""
    if token is None:
        return None
    if match := _BYTE_FALLBACK.fullmatch(token):
        return bytes([int(match.group(1), 16)])
    if is_byte_level and token and all(c in _BYTE_OF for c in token):
        return bytes(_BYTE_OF[c] for c in token)
    return None


class SubwordTokenizer:
    """Byte-level BPE (Hugging Face `tokenizers`, as GPT-2 and RoBERTa use) learned from a corpus, with the
    CS224N PAD and MASK as its two special tokens (PAD=0, MASK=1). Decoding gives back exactly the text
    that was encoded, so every birthplace routine that splits a completion on MASK works unchanged; a name
    the corpus never had is not `<unk>` but a few pieces, so `tokenize(...).unknown` is always empty;
    `.untrained` lists the pieces the training corpus never produced: the model has never read them (their
    embeddings are only initialised), though each has its own id."""

    kind = "bpe"
    unit = "piece"
    pad_id = 0
    mask_id = 1

    def __init__(self, spec: str, seen: Iterable[int] = ()) -> None:
        from tokenizers import Tokenizer as HFTokenizer

        try:
            self.hf = HFTokenizer.from_str(spec)
        except Exception:  # the library raises its own Exception type for malformed JSON
            raise TokenizerError("The subword tokenizer description cannot be read.") from None
        if [self.hf.id_to_token(0), self.hf.id_to_token(1)] != [PAD_CHAR, MASK_CHAR]:
            raise TokenizerError("A subword vocabulary must start with PAD (U+25A1) then MASK (U+2047).")
        self.spec = spec
        self.seen = frozenset(int(i) for i in seen)

    @classmethod
    def from_corpus(cls, text: str, vocab_size: int = 2000) -> SubwordTokenizer:
        from tokenizers import Regex, decoders, models, pre_tokenizers, trainers
        from tokenizers import Tokenizer as HFTokenizer

        lines = [line for line in text.split("\n") if line.strip()]
        hf = HFTokenizer(models.BPE())
        # Words, runs of punctuation and each whitespace character are pieces of their own, then bytes:
        # unlike GPT-2, whose pieces carry the space before a word ('ĠLondon'), a word is the same pieces
        # after a space in a biography and right after the MASK in a question, so an answer the finetuning
        # teaches is spelled as the fact pretraining stored.
        hf.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(r"\w+|[^\w\s]+|\s"), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
        hf.decoder = decoders.ByteLevel()
        trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=[PAD_CHAR, MASK_CHAR],
                                      initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
        hf.train_from_iterator(lines, trainer)
        seen = {i for encoding in hf.encode_batch(lines) for i in encoding.ids}
        return cls(hf.to_str(), seen)

    @property
    def vocab_size(self) -> int:
        return self.hf.get_vocab_size()

    def tokenize(self, text: str) -> Tokenized:
        encoding = self.hf.encode(text)
        # each piece as the text it covers (a character cut into two byte pieces shows in both)
        tokens = [text[start:end] for start, end in encoding.offsets]
        untrained = list(dict.fromkeys(t for i, t in zip(encoding.ids, tokens, strict=True)
                                       if i not in self.seen and i > self.mask_id))
        return Tokenized(ids=list(encoding.ids), tokens=tokens, untrained=untrained, offsets=list(encoding.offsets))

    def encode(self, text: str) -> list[int]:
        return list(self.hf.encode(text).ids)

    def encode_batch(self, texts: list[str]) -> list[list[int]]:
        return [list(e.ids) for e in self.hf.encode_batch(texts)]

    def decode(self, ids: list[int]) -> str:
        size = self.vocab_size
        return self.hf.decode([i if 0 <= i < size else self.pad_id for i in ids], skip_special_tokens=False)

    def piece_bytes(self, i: int) -> bytes:
        """The bytes one piece stands for: a piece may hold only part of a character (an emoji is four byte
        pieces until merges join them), which `decode([i])` can only show as U+FFFD."""
        if i in (self.pad_id, self.mask_id) or not 0 <= i < self.vocab_size:
            return self.decode([i]).encode("utf-8")
        return bytes(_BYTE_OF[c] for c in self.hf.id_to_token(i))

    def reading(self, texts: Iterable[str]) -> SubwordTokenizer:
        """The same pieces, with those of `texts` counted as read in training (finetuning questions)."""
        return SubwordTokenizer(self.spec, self.seen | {i for ids in self.encode_batch(list(texts)) for i in ids})

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "spec": self.spec, "seen": sorted(self.seen)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SubwordTokenizer:
        return cls(str(data["spec"]), [int(i) for i in data.get("seen", [])])


class ListedCharTokenizer(_CharacterCodec):
    """Exactly the listed characters, ids in list order, no PAD or MASK: nanoGPT's character vocabulary
    (`meta.pkl`'s itos, or the sorted set of the training text's characters). A character outside it
    becomes the space (or, without one, id 0), named in `tokenize(...).unknown`; nanoGPT itself would stop."""

    kind = "listed-char"
    unit = "character"
    pad_id = -1  # no id is padding
    mask_id = None

    def __init__(self, chars: list[str]) -> None:
        if not chars or len(set(chars)) != len(chars) or any(len(c) != 1 for c in chars):
            raise TokenizerError("A character vocabulary must be one or more distinct single characters.")
        self.chars = list(chars)
        self.stoi = {c: i for i, c in enumerate(self.chars)}
        self.unknown_id = self.stoi.get(" ", 0)



class PiecesTokenizer:
    """A `tokenizers` description used as it is (GPT-2's byte-level BPE for a nanoGPT model on GPT-2 pieces),
    over a model whose embedding may have more rows than the tokenizer has pieces (nanoGPT pads 50257 to
    50304): `vocab_size` is the model's, and an id past the pieces decodes to nothing. No PAD, no MASK."""

    kind = "pieces"
    unit = "piece"
    pad_id = -1
    mask_id = None

    def __init__(self, spec: str, vocab_size: int | None = None) -> None:
        from tokenizers import Tokenizer as HFTokenizer

        try:
            self.hf = HFTokenizer.from_str(spec)
        except Exception:  # the library raises its own Exception type for malformed JSON
            raise TokenizerError("The tokenizer description cannot be read.") from None
        self.spec = spec
        self.n_pieces = self.hf.get_vocab_size(with_added_tokens=True)
        self.rows = self.n_pieces if vocab_size is None else int(vocab_size)
        if self.rows < self.n_pieces:
            raise TokenizerError(f"The tokenizer has {self.n_pieces} pieces but the model only {self.rows} "
                                 "embedding rows.")
        self.special_ids = {i for i in (self.hf.token_to_id("<|endoftext|>"),) if i is not None}
        try:
            self.byte_level = byte_level(json.loads(spec))
        except ValueError:
            self.byte_level = False

    @property
    def vocab_size(self) -> int:
        return self.rows

    def tokenize(self, text: str) -> Tokenized:
        encoding = self.hf.encode(text, add_special_tokens=False)
        tokens = [text[start:end] for start, end in encoding.offsets]
        return Tokenized(ids=list(encoding.ids), tokens=tokens, offsets=list(encoding.offsets))

    def encode(self, text: str) -> list[int]:
        return list(self.hf.encode(text, add_special_tokens=False).ids)

    def decode(self, ids: list[int]) -> str:
        return self.hf.decode([i for i in ids if 0 <= i < self.n_pieces], skip_special_tokens=False)

    def piece_bytes(self, i: int) -> bytes | None:
        """A byte-level piece's bytes (GPT-2's pieces: an emoji may be several), so each shows as itself."""
        if i in self.special_ids or not 0 <= i < self.n_pieces:
            return None
        return bytes_of_piece(self.hf.id_to_token(i), self.byte_level)

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "spec": self.spec, "vocab_size": self.rows}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PiecesTokenizer:
        return cls(str(data["spec"]), int(data["vocab_size"]) if "vocab_size" in data else None)


TOKENIZERS: dict[str, type] = {"char": CharTokenizer, "word": WordTokenizer, "bpe": SubwordTokenizer}  # levels to train
# what a checkpoint may carry: the levels, and the vocabularies of models trained elsewhere (core.io.nanogpt)
READABLE_TOKENIZERS: dict[str, type] = {**TOKENIZERS, "listed-char": ListedCharTokenizer, "pieces": PiecesTokenizer}
Tokenizer = CharTokenizer | WordTokenizer | SubwordTokenizer | ListedCharTokenizer | PiecesTokenizer


def tokenizer_from_dict(data: Any) -> Tokenizer:
    if not isinstance(data, dict) or data.get("kind") not in READABLE_TOKENIZERS:
        raise TokenizerError(f"Unknown tokenizer; expected one of: {', '.join(READABLE_TOKENIZERS)}.")
    try:
        return READABLE_TOKENIZERS[data["kind"]].from_dict(data)
    except (KeyError, TypeError) as exc:
        raise TokenizerError(f"The tokenizer description is incomplete ({exc}).") from None


@dataclass
class VocabularyChoice:
    """How a vocabulary is built from training text; the same defaults for every task, saved with the model.

    Defaults keep every piece as written (no lowercasing, nothing dropped), as the courses do: a
    vocabulary that folds case or drops rare words turns more of a test text into `<unk>`, which makes
    perplexity look better than the model is.

    `files` (`--vocab-from`): build from these files instead of the training text, as CSE 256 PA2 builds
    one vocabulary from every training file of its folder. This layer reads no file: core.data gives the
    text (`vocabulary_text`), and the recipe records each file with its sha256."""

    level: str = "char"
    lowercase: bool = False
    min_freq: int = 1
    splitter: str = "regex"  # word level: a key of core.model.splitters.SPLITTERS
    files: tuple[str, ...] = ()
    vocab_size: int = 2000  # bpe level: the pieces learned (256 bytes and the two specials at least)

    def __post_init__(self) -> None:
        if self.level not in TOKENIZERS:
            raise TokenizerError(f"Unknown level {self.level!r}; choose one of: {', '.join(TOKENIZERS)}.")
        if self.min_freq < 1:
            raise TokenizerError("--min-freq must be 1 or more.")
        if self.level == "char" and self.lowercase:
            raise TokenizerError("--lowercase applies to word vocabularies; add --level word.")
        if self.splitter not in SPLITTERS:
            raise TokenizerError(f"Unknown splitter {self.splitter!r}; choose one of: {', '.join(SPLITTERS)}.")
        if self.level != "word" and self.splitter != "regex":
            raise TokenizerError("--splitter applies to word vocabularies; add --level word.")
        if self.level == "bpe" and (self.lowercase or self.min_freq != 1):
            raise TokenizerError("--lowercase and --min-freq apply to word vocabularies; bpe keeps every byte.")
        if self.level == "bpe" and self.vocab_size < 260:
            raise TokenizerError(f"--vocab-size must be at least 260 (256 bytes and the specials), "
                                 f"not {self.vocab_size}.")
        self.files = tuple(str(f) for f in self.files)
        if len(set(self.files)) != len(self.files):
            raise TokenizerError("--vocab-from names the same file twice; name each file once.")

    def build(self, text: str) -> Tokenizer:
        if self.level == "char":
            return CharTokenizer.from_corpus(text, min_freq=self.min_freq)
        if self.level == "bpe":
            return SubwordTokenizer.from_corpus(text, self.vocab_size)
        return WordTokenizer.from_corpus(text, min_freq=self.min_freq, lowercase=self.lowercase,
                                         splitter=self.splitter)

    def to_dict(self) -> dict[str, Any]:
        """What the checkpoint's `vocabulary` record starts with (the recipe adds `files` with sha256)."""
        return {"level": self.level, "lowercase": self.lowercase, "min_freq": self.min_freq,
                **({"splitter": self.splitter} if self.level == "word" else {}),
                **({"vocab_size": self.vocab_size} if self.level == "bpe" else {})}
