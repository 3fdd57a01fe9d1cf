"""The attention page's navigation for long inputs: a window of tokens (a range slider) and a token search
that moves it ('Next' goes on to the next match). Past `core.lens.token_window.WHOLE_UP_TO` tokens the head
view, model view, query-key view, combine and compare draw only the window's rows and columns, so 512
tokens stay readable at 1024x768 and quick to draw. Not a page (app.py lists pages explicitly)."""

from __future__ import annotations

import streamlit as st

from core.lens import token_window as tw

WINDOW_KEY, FIND_KEY = "attn_window", "attn_find"


def _width() -> int:
    first, last = st.session_state.get(WINDOW_KEY) or (0, tw.WINDOW_TOKENS - 1)
    return last - first + 1


def move_to(position: int, n_tokens: int) -> None:
    """Centre the window on a position, keeping its width (callbacks: the key picker, the search)."""
    window = st.session_state.get(WINDOW_KEY)
    if window is None or not window[0] <= position <= window[1]:
        st.session_state[WINDOW_KEY] = tw.window_around(position, n_tokens, _width())


def _found(tokens: list[str]) -> None:
    matches = tw.find_tokens(tokens, st.session_state.get(FIND_KEY, ""))
    if matches:
        st.session_state[WINDOW_KEY] = tw.window_around(matches[0], len(tokens), _width())


def _next(tokens: list[str]) -> None:
    matches = tw.find_tokens(tokens, st.session_state.get(FIND_KEY, ""))
    window = tw.clamp_window(st.session_state.get(WINDOW_KEY), len(tokens))
    target = tw.next_match(matches, window)
    if target is not None:
        st.session_state[WINDOW_KEY] = tw.window_around(target, len(tokens), window[1] - window[0] + 1)


def window_controls(tokens: list[str], around: int | None = None) -> list[int] | None:
    """Draw the window controls for a long input and return the positions to draw; None: draw every token.
    With no window chosen yet, it starts at the first token, or centred on `around`."""
    n = len(tokens)
    if not tw.needs_window(n):
        return None
    window = st.session_state.get(WINDOW_KEY)
    if window is None and around is not None:
        window = tw.window_around(around, n)
    st.session_state[WINDOW_KEY] = tw.clamp_window(window, n)
    find, step, move = st.columns([2, 1, 5], vertical_alignment="bottom")
    find.text_input("Find a token", key=FIND_KEY, on_change=_found, args=(tokens,), placeholder="e.g. born",
                    help="Moves the window to the first token containing this text (case ignored).")
    matches = tw.find_tokens(tokens, st.session_state.get(FIND_KEY, ""))
    step.button("Next", on_click=_next, args=(tokens,), disabled=len(matches) < 2,
                help="Move the window to the next token that matches the search.")
    window = move.slider("Tokens shown (first, last position)", 0, n - 1, key=WINDOW_KEY)
    found = ""
    if st.session_state.get(FIND_KEY, "").strip():
        listed = ", ".join(str(m) for m in matches[:8]) + (", …" if len(matches) > 8 else "")
        found = f" {len(matches)} token{'s' if len(matches) != 1 else ''} match the search" + (
            f": positions {listed}" if matches else "") + ("" if listed.endswith("…") else ".")
    st.caption(tw.window_caption(window, n) + found)
    return tw.window_positions(window)
