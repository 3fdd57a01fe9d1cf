"""Long inputs: which tokens a view draws (a window of positions) and finding a token to move it to.

A 512-token map has 262,144 cells and 512 labels no screen can show readably; the views draw a window of
positions first..last instead (`WINDOW_TOKENS` wide by default, every label readable at 1024x768), moved
with a slider or by searching for a token. Inputs up to `WHOLE_UP_TO` tokens are drawn whole, as before.
Pure functions on positions and display labels; the page keeps the window in the URL (pages.page_state.AttentionState).
"""

from __future__ import annotations

import numpy as np

WINDOW_TOKENS = 32  # default width: at 1024x768 plotly labels every row of a 32-token map (48 rows: every other)
WHOLE_UP_TO = 64  # inputs this short are drawn whole, with no window controls
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
    return (f"Tokens {first} to {last} ({last - first + 1} of {n_tokens}, positions from 0); weights to keys "
            "outside this window are not drawn, so a row's cells need not add up to 1 here.")


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
