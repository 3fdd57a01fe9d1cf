"""Showing user-controlled text (names, paths, sentences) safely in Markdown-rendering elements."""

from __future__ import annotations

from pathlib import Path

_MARKDOWN_PUNCTUATION = frozenset("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~")


def markdown_escape(text: object) -> str:
    """Backslash-escape every ASCII punctuation character (CommonMark allows it for all of them), so
    the text renders literally: no emphasis, links, HTML, :shortcodes: or $math$."""
    return "".join("\\" + c if c in _MARKDOWN_PUNCTUATION else c for c in str(text))


def existing_folder(text: str) -> Path | None:
    """The folder a user typed, if it exists; None for anything else (a name over the file system's
    limit, '~nosuchuser', NUL bytes...) instead of the OSError/RuntimeError/ValueError Path raises."""
    try:
        folder = Path(text.strip()).expanduser()
        return folder if folder.is_dir() else None
    except (OSError, RuntimeError, ValueError):
        return None
