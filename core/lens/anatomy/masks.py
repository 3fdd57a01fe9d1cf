"""The anatomy page's masks: causal and padding masks as (T, T) matrices, exactly as the model builds
them, and a typed input cut or padded to a length."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from core.text import PAD_CHAR


def causal_mask(length: int) -> np.ndarray:
    """(T, T) bool, True where query i may attend key j: j <= i (a decoder never sees the future)."""
    return np.tril(np.ones((length, length), dtype=bool))


def padding_mask(is_real: Sequence[bool]) -> np.ndarray:
    """(T, T) bool: every query may attend every real key, no query attends padding. As in the model,
    an input with no real token at all attends everything rather than nothing."""
    real = np.asarray(is_real, dtype=bool)
    if not real.any():
        real = np.ones_like(real)
    return np.broadcast_to(real[None, :], (real.size, real.size)).copy()


@dataclass
class MaskInput:
    tokens: list[str]  # display strings, padding included
    is_real: list[bool]  # False for padding (and for anything the model reads as PAD)
    unknown: list[str]  # input pieces outside the tokenizer's vocabulary
    truncated: int  # tokens cut to fit the length
    read_as_padding: int  # input positions (kept ones) whose id is PAD, so the padding mask hides them


def mask_input(text: str, tokenizer=None, length: int = 16) -> MaskInput:
    """Tokenize (or split into characters without a tokenizer), cut or pad to `length`.

    With a tokenizer, a position is padding when its id is the PAD id, exactly what the model's
    padding mask uses, so a character the vocabulary lacks (read as PAD) shows as masked too.
    """
    length = max(1, int(length))
    if tokenizer is None:
        tokens, unknown = list(text), []
        real = [True] * len(tokens)
        pad_token = PAD_CHAR
    else:
        tokenized = tokenizer.tokenize(text)
        tokens, unknown = list(tokenized.tokens), list(tokenized.unknown)
        real = [i != tokenizer.pad_id for i in tokenized.ids]
        pad_token = tokenizer.decode([tokenizer.pad_id])
    truncated = max(0, len(tokens) - length)
    tokens, real = tokens[:length], real[:length]
    padding = length - len(tokens)
    return MaskInput(tokens + [pad_token] * padding, real + [False] * padding, unknown, truncated,
                     read_as_padding=real.count(False))
