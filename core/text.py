"""Showing user-controlled text (names, paths, sentences) safely in Markdown-rendering elements, and
reading what people type."""

from __future__ import annotations

TYPED_QUESTION_MARKS = "?？"  # what keyboards type at the end of a question (ASCII and full-width)
_MARKDOWN_PUNCTUATION = frozenset("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~")


def markdown_escape(text: object) -> str:
    """Backslash-escape every ASCII punctuation character (CommonMark allows it for all of them), so
    the text renders literally: no emphasis, links, HTML, :shortcodes: or $math$."""
    return "".join("\\" + c if c in _MARKDOWN_PUNCTUATION else c for c in str(text))
