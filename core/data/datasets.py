"""Datasets in the formats people already have (see DESIGN.md), as torch Datasets.

Random choices (span corruption, MLM masking) come from a per-item generator seeded by
(seed, epoch, index), so an epoch is reproducible, and a resumed run sees exactly the samples an
uninterrupted one would have.
"""

from __future__ import annotations

import random
from pathlib import Path

import torch
from torch.utils.data import Dataset

from core.model.tokenizer import MASK_CHAR, PAD_CHAR, CharTokenizer, SubwordTokenizer, Tokenizer


class DataError(ValueError):
    """A data file a user gave us cannot be used; the message is one sentence."""


def read_text(path: str | Path) -> str:
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path} does not exist.")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise DataError(f"{path} is not UTF-8 text (byte {exc.start} cannot be decoded).") from None
    if not text.strip():
        raise DataError(f"{path} is empty.")
    return text


def parse_tsv_pairs(text: str, source: str = "the file") -> list[tuple[str, str]]:
    """`A<TAB>B` per line (blank lines skipped); a line without a tab is refused by number."""
    pairs = []
    for number, line in enumerate(text.split("\n"), start=1):
        line = line.rstrip("\r")
        if not line.strip():
            continue
        if "\t" not in line:
            raise DataError(f"Line {number} of {source} has no tab; expected 'TEXT<TAB>ANSWER'.")
        first, second = line.split("\t", 1)
        pairs.append((first, second))
    if not pairs:
        raise DataError(f"{source} has no lines.")
    return pairs


def read_tsv_pairs(path: str | Path) -> list[tuple[str, str]]:
    return parse_tsv_pairs(read_text(path), str(path))


def check_no_reserved_characters(text: str, source: str) -> None:
    for char, name in ((MASK_CHAR, "MASK"), (PAD_CHAR, "PAD")):
        if char in text:
            line = text[: text.index(char)].count("\n") + 1
            raise DataError(f"{source} contains the {name} character {char} (U+{ord(char):04X}) on line "
                            f"{line}; it is reserved.")


class EpochSeeded(Dataset):
    seed: int = 0
    epoch: int = 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def rng(self, index: int) -> random.Random:
        return random.Random(f"{self.seed}-{self.epoch}-{index}")


class CharCorruptionDataset(EpochSeeded):
    """CS224N span corruption: prefix ⁇ suffix ⁇ masked_content □□□, x = s[:-1], y = s[1:]."""

    def __init__(self, corpus: str, block_size: int, tokenizer: CharTokenizer | None = None,
                 seed: int = 0) -> None:
        check_no_reserved_characters(corpus, "The pretraining corpus")
        self.tokenizer = tokenizer or CharTokenizer.from_corpus(corpus)
        self.block_size = block_size
        self.documents = [line for line in corpus.split("\n") if line.strip()]
        self.seed = seed
        if not self.documents:
            raise DataError("The pretraining corpus has no documents.")

    def __len__(self) -> int:
        return len(self.documents)

    def corrupt(self, document: str, rng: random.Random) -> str:
        truncated = document[: rng.randint(4, int(self.block_size * 7 / 8))]
        # randint(1, L//2) has mean ~L/4: the masked span is a quarter of the text on average
        masked_len = rng.randint(1, max(1, len(truncated) // 2))
        prefix_len = rng.randint(0, len(truncated) - masked_len)
        prefix = truncated[:prefix_len]
        masked = truncated[prefix_len: prefix_len + masked_len]
        suffix = truncated[prefix_len + masked_len:]
        text = prefix + MASK_CHAR + suffix + MASK_CHAR + masked
        return text + PAD_CHAR * (self.block_size - len(text))

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        text = self.corrupt(self.documents[index], self.rng(index))
        ids = torch.tensor(self.tokenizer.encode(text), dtype=torch.long)
        return ids[:-1], ids[1:]


class TokenCorruptionDataset(EpochSeeded):
    """CS224N span corruption counted in tokens, for subword vocabularies: the same draws as
    CharCorruptionDataset (a character vocabulary gives the same samples), on documents encoded once.
    Batches are cut to their longest row (`trim_to_longest`): the cut columns are PAD targets, which
    the loss ignores, so a causal model's loss is unchanged and the padding is never computed."""

    trim_to_longest = True

    def __init__(self, corpus: str, block_size: int, tokenizer: SubwordTokenizer | CharTokenizer,
                 seed: int = 0) -> None:
        check_no_reserved_characters(corpus, "The pretraining corpus")
        self.tokenizer = tokenizer
        self.block_size = block_size
        documents = [line for line in corpus.split("\n") if line.strip()]
        if not documents:
            raise DataError("The pretraining corpus has no documents.")
        encode_batch = getattr(tokenizer, "encode_batch", None)
        self.documents = encode_batch(documents) if encode_batch else [tokenizer.encode(d) for d in documents]
        self.seed = seed

    def __len__(self) -> int:
        return len(self.documents)

    def corrupt(self, document: list[int], rng: random.Random) -> list[int]:
        mask, pad = self.tokenizer.mask_id, self.tokenizer.pad_id
        truncated = document[: rng.randint(4, int(self.block_size * 7 / 8))]
        masked_len = rng.randint(1, max(1, len(truncated) // 2))
        prefix_len = rng.randint(0, len(truncated) - masked_len)
        masked = truncated[prefix_len: prefix_len + masked_len]
        ids = truncated[:prefix_len] + [mask] + truncated[prefix_len + masked_len:] + [mask] + masked
        return ids + [pad] * (self.block_size - len(ids))

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        ids = torch.tensor(self.corrupt(self.documents[index], self.rng(index)), dtype=torch.long)
        return ids[:-1], ids[1:]


class DocumentStreamDataset(EpochSeeded):
    """Language modelling over documents packed end to end (each followed by a newline), in a new seeded
    order every epoch, cut into samples of block_size tokens: no padding at all, and a document cut at a
    sample's edge one epoch is whole the next. Items are x = sample[:-1], y = sample[1:], of block_size - 1
    tokens as in the assignment's datasets (its synthesizer reads at most block_size - 1)."""

    def __init__(self, corpus: str, block_size: int, tokenizer: SubwordTokenizer | CharTokenizer,
                 seed: int = 0) -> None:
        check_no_reserved_characters(corpus, "The pretraining corpus")
        self.tokenizer = tokenizer
        self.block_size = block_size
        documents = [line + "\n" for line in corpus.split("\n") if line.strip()]
        if not documents:
            raise DataError("The pretraining corpus has no documents.")
        encode_batch = getattr(tokenizer, "encode_batch", None)
        self.documents = encode_batch(documents) if encode_batch else [tokenizer.encode(d) for d in documents]
        self.seed = seed
        self._stream: tuple[int, torch.Tensor] | None = None

    def __len__(self) -> int:
        return (sum(len(d) for d in self.documents) - 1) // (self.block_size - 1)

    def stream(self) -> torch.Tensor:
        if self._stream is None or self._stream[0] != self.epoch:
            order = list(range(len(self.documents)))
            random.Random(f"{self.seed}-{self.epoch}-order").shuffle(order)
            ids = [i for k in order for i in self.documents[k]]
            self._stream = (self.epoch, torch.tensor(ids, dtype=torch.long))
        return self._stream[1]

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        start = index * (self.block_size - 1)  # consecutive samples share one token: every token is a target once
        chunk = self.stream()[start: start + self.block_size]
        return chunk[:-1], chunk[1:]


class NameDataset(Dataset):
    """CS224N finetuning: question ⁇ answer ⁇ □…; targets are PAD over the question. Built from token
    ids, so a character vocabulary gives the assignment's strings exactly and a subword one its pieces."""

    def __init__(self, pairs: list[tuple[str, str]], tokenizer: Tokenizer, block_size: int,
                 trim_to_longest: bool = False) -> None:
        self.tokenizer = tokenizer
        self.block_size = block_size
        self.pairs = pairs
        self.trim_to_longest = trim_to_longest
        mask, pad = tokenizer.mask_id, tokenizer.pad_id
        self.items = []
        for question, answer in pairs:
            check_no_reserved_characters(question + answer, "The question file")
            q, a = tokenizer.encode(question), tokenizer.encode(answer)
            if len(q) + len(a) + 2 > block_size:
                raise DataError(f"The line '{question[:40]}…' is longer than the block size {block_size}.")
            full = q + [mask] + a + [mask]
            full += [pad] * (block_size - len(full))
            self.items.append((full[:-1], [pad] * (len(q) - 1) + full[len(q):]))

    def __len__(self) -> int:
        return len(self.pairs)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        x, y = self.items[index]
        return torch.tensor(x, dtype=torch.long), torch.tensor(y, dtype=torch.long)


class LanguageModelDataset(Dataset):
    """Windows of a text, x = ids[s:s+T], y = ids[s+1:s+T+1], starting every `stride` tokens: by default
    every T (contiguous, non-overlapping blocks); 1 starts one at every token, as CSE 256 PA2's
    LanguageModelingDataset does (500 steps of 16 then see 8,000 different windows, never one twice)."""

    def __init__(self, text: str, tokenizer: Tokenizer, block_size: int, stride: int | None = None) -> None:
        self.tokenizer = tokenizer
        self.block_size = block_size
        self.stride = stride or block_size
        if not 1 <= self.stride <= block_size:
            raise DataError(f"--stride must be between 1 and the block size {block_size}, not {self.stride}.")
        self.ids = torch.tensor(tokenizer.encode(text), dtype=torch.long)
        if len(self.ids) < block_size + 1:
            raise DataError(f"The text has {len(self.ids)} tokens, fewer than one block of {block_size + 1}.")

    def __len__(self) -> int:
        return (len(self.ids) - 1 - self.block_size) // self.stride + 1

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        start = index * self.stride
        chunk = self.ids[start: start + self.block_size + 1]
        return chunk[:-1], chunk[1:]


class MaskedLMDataset(EpochSeeded):
    """Encoder pretraining (BERT-style, per character or word): 15% of tokens are hidden, of which
    80% become MASK, 10% a random token, 10% stay; only hidden positions have targets."""

    def __init__(self, lines: list[str], tokenizer: Tokenizer, block_size: int, mask_id: int,
                 seed: int = 0, mask_rate: float = 0.15) -> None:
        self.tokenizer = tokenizer
        self.block_size = block_size
        self.lines = [line for line in lines if line.strip()]
        self.mask_id = mask_id
        self.seed = seed
        self.mask_rate = mask_rate

    def __len__(self) -> int:
        return len(self.lines)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        rng = self.rng(index)
        ids = self.tokenizer.encode(self.lines[index])[: self.block_size]
        x, y = list(ids), [0] * len(ids)
        for i, token in enumerate(ids):
            if rng.random() < self.mask_rate:
                y[i] = token
                roll = rng.random()
                x[i] = self.mask_id if roll < 0.8 else (rng.randrange(2, self.tokenizer.vocab_size)
                                                        if roll < 0.9 else token)
        pad = self.block_size - len(ids)
        return torch.tensor(x + [0] * pad), torch.tensor(y + [0] * pad)


class ClassificationDataset(Dataset):
    """`LABEL<TAB>TEXT` lines (the CSE 256 format) -> (ids padded to block_size, label index)."""

    def __init__(self, pairs: list[tuple[str, str]], tokenizer: Tokenizer, block_size: int,
                 labels: list[str] | None = None) -> None:
        self.tokenizer = tokenizer
        self.block_size = block_size
        self.labels = labels or sorted({label for label, _ in pairs})
        unknown = sorted({label for label, _ in pairs} - set(self.labels))
        if unknown:
            raise DataError(f"Labels {', '.join(unknown[:5])} are not in the model's label set "
                            f"({', '.join(self.labels[:8])}).")
        index = {label: i for i, label in enumerate(self.labels)}
        self.items = [(tokenizer.encode(text)[:block_size], index[label]) for label, text in pairs]

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        ids, label = self.items[i]
        return torch.tensor(ids + [0] * (self.block_size - len(ids))), torch.tensor(label)


# Olsson et al. (2022)'s induction task: 62 symbols (PAD and MASK make the vocabulary 64), none of them reserved.
REPEAT_SYMBOLS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"


def repeat_tokenizer() -> CharTokenizer:
    """The induction task's vocabulary: PAD, MASK, then REPEAT_SYMBOLS (64 ids)."""
    return CharTokenizer([PAD_CHAR, MASK_CHAR, *REPEAT_SYMBOLS])


class RepeatedSegmentDataset(EpochSeeded):
    """Sequences where a random segment repeats: `prefix segment segment filler`, every token drawn uniformly
    from the ordinary symbols, the segment's length uniform in `segment` and its place uniform over the block,
    so no fixed offset predicts the copy (only attending to the token after an earlier copy of the current one
    does). Targets are PAD (ignored by the loss) except on the repeated tokens the model can predict: the second
    copy from its second token on, so the training loss is the repeated-token loss. Fresh rows every epoch."""

    def __init__(self, block_size: int, size: int, segment: tuple[int, int] = (6, 12), seed: int = 0,
                 tokenizer: CharTokenizer | None = None) -> None:
        low, high = segment
        if not 2 <= low <= high or 2 * high > block_size + 1:
            raise DataError(f"Segments of {low} to {high} tokens repeated twice must fit a block of {block_size}.")
        self.tokenizer = tokenizer or repeat_tokenizer()
        self.block_size, self.size, self.segment, self.seed = block_size, size, (low, high), seed
        self.symbols = list(range(2, self.tokenizer.vocab_size))  # every id but PAD and MASK

    def __len__(self) -> int:
        return self.size

    def row(self, index: int) -> tuple[list[int], int, int]:
        """(the block_size + 1 ids, where the first copy starts, the segment's length)."""
        rng = self.rng(index)
        n = rng.randint(*self.segment)
        start = rng.randint(0, self.block_size + 1 - 2 * n)
        ids = [rng.choice(self.symbols) for _ in range(self.block_size + 1)]
        ids[start + n: start + 2 * n] = ids[start: start + n]
        return ids, start, n

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        ids, start, n = self.row(index)
        s = torch.tensor(ids, dtype=torch.long)
        y = torch.full((self.block_size,), self.tokenizer.pad_id, dtype=torch.long)
        predictable = slice(start + n, start + 2 * n - 1)  # y[t] = s[t + 1]: targets s[start+n+1 .. start+2n-1]
        y[predictable] = s[predictable.start + 1: predictable.stop + 1]
        return s[:-1], y
