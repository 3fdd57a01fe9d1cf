"""Text shared by every layer: the CS224N special characters, showing tokens and user-controlled text
(names, paths, sentences) safely, and reading what people type. Imports nothing of core."""

from __future__ import annotations

import unicodedata

MASK_CHAR = "\u2047"  # ⁇: the CS224N MASK (span corruption; the birthplace models answer after it)
PAD_CHAR = "\u25a1"  # □: the CS224N PAD
MASK_LABEL = "MASK"  # how the MASK is shown (⁇ reads as two question marks)
VISIBLE = {" ": "\u2423", "\n": "\u23ce", "\t": "\u21e5"}  # ␣ ⏎ ⇥
EMPTY_LABEL = "\u2205"  # ∅: a token that decodes to nothing
DOTTED_CIRCLE = "\u25cc"  # ◌: carries a combining mark shown alone
INVISIBLE_CATEGORIES = {"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp", "Zs"}  # control, format, spaces...
COMBINING_CATEGORIES = {"Mn", "Mc", "Me"}
TYPED_QUESTION_MARKS = "?？"  # what keyboards type at the end of a question (ASCII and full-width)
_MARKDOWN_PUNCTUATION = frozenset("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~")


def markdown_escape(text: object) -> str:
    """Backslash-escape every ASCII punctuation character (CommonMark allows it for all of them), so
    the text renders literally: no emphasis, links, HTML, :shortcodes: or $math$."""
    return "".join("\\" + c if c in _MARKDOWN_PUNCTUATION else c for c in str(text))


def _byte_labels(data: bytes) -> str:
    return "".join(f"\u2039{b:02X}\u203a" for b in data)  # ‹F0›: a byte, not a character


def quoted_token(token: str | bytes) -> str:
    """A token inside a sentence: its one label (`visible_token`) in quotes, so a newline piece reads '⏎' in the
    sentence as on the chart beside it, never '\\n'."""
    return f"'{visible_token(token)}'"


def shortened(text: str, limit: int) -> str:
    """`text` as it is when it fits in `limit` characters, else cut at the last word boundary before the limit
    (never inside a word, unless one word is longer than the limit) with '…'."""
    if len(text) <= limit:
        return text
    cut = text[:limit - 1]
    space = cut.rfind(" ")
    return (cut[:space] if space > limit // 3 else cut).rstrip() + "…"


def visible_token(token: str | bytes) -> str:
    """The one label a person sees for a token, on every page and chart: 'MASK' for the CS224N MASK (⁇
    reads as two question marks), '␣' '⏎' '⇥' for a space, newline and tab, U+XXXX for other control,
    format and invisible characters, '∅' for an empty token. A label shown again comes back unchanged, so
    a chart may apply it to labels a lens already made. A byte-level piece given as its bytes shows the
    bytes that are only part of a character as '‹F0›' each (decoding them alone gives '\ufffd', which says
    nothing), and its whole characters as above."""
    if isinstance(token, bytes):
        try:
            return visible_token(token.decode("utf-8"))
        except UnicodeDecodeError as exc:
            head = visible_token(token[:exc.start]) if exc.start else ""
            tail = visible_token(token[exc.end:]) if exc.end < len(token) else ""
            return head + _byte_labels(token[exc.start:exc.end]) + tail
    if token == MASK_CHAR:
        return MASK_LABEL
    if token == "":
        return EMPTY_LABEL
    out = []
    for ch in token:
        if ch in VISIBLE:
            out.append(VISIBLE[ch])
        elif unicodedata.category(ch) in INVISIBLE_CATEGORIES:
            out.append(f"U+{ord(ch):04X}")
        elif unicodedata.category(ch) in COMBINING_CATEGORIES and not (out and out[-1] == DOTTED_CIRCLE):
            out.append(DOTTED_CIRCLE + ch)  # a lone accent shown on a dotted circle, not on the chip's bracket
        else:
            out.append(ch)
    return "".join(out)
