"""How a word vocabulary cuts text into words: one function per splitter, behind one registry.

- `regex` (the default): runs of word characters and single punctuation marks, `\\w+|[^\\w\\s]`
  ("don't" -> don ' t). Needs nothing, reads any language the same way.
- `nltk`: the words of NLTK's `word_tokenize`, which CSE 256 PA2 builds its vocabulary with
  ("don't" -> do n't, quotes -> `` and ''). `word_tokenize` is Punkt's sentence splitter followed by
  `NLTKWordTokenizer`, and the sentences matter: `NLTKWordTokenizer` splits off only the period that ends
  its input ("sat. The" keeps "sat." whole). Punkt's English model is a data download, which this
  project never makes, so sentences are found here without it: every line is a sentence (the PA2 files
  hold one per line), and inside a line a period before a capital ends one unless it follows an initial
  ("W."), a word with an inner period ("U.S.") or a title ("Dr."), the cases Punkt's abbreviation list
  keeps. On the PA2 speeches this gives the course's tokens except at a few abbreviations at line ends
  (measured in tests/test_splitters.py and the issue 30 note).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import lru_cache

WORD_PATTERN = re.compile(r"\w+|[^\w\s]")

# Titles written with a period that a capitalised name follows ("Dr. King"): not a sentence end.
TITLES = frozenset({"Mr", "Mrs", "Ms", "Dr", "Jr", "Sr", "St", "Prof", "Rev", "Gen", "Gov", "Sen", "Rep",
                    "Lt", "Col", "Capt", "Sgt", "Mt", "vs", "Messrs"})
# a period, closing quotes or brackets, whitespace, then (after opening ones) a capital letter
_PERIOD_BEFORE_CAPITAL = re.compile(r"(\S+)\.([\"'”’)\]]*)(?=\s+[\"'“‘(\[]*[A-Z])")


def split_regex(text: str) -> list[str]:
    return WORD_PATTERN.findall(text)


def sentences(line: str) -> list[str]:
    """One line cut where a period ends a sentence (see the module docstring for which do not)."""
    found, start = [], 0
    for match in _PERIOD_BEFORE_CAPITAL.finditer(line):
        word = match.group(1).lstrip("\"'“‘([")
        if len(word) > 1 and "." not in word and word not in TITLES:
            found.append(line[start: match.end()])
            start = match.end()
    found.append(line[start:])
    return [s for s in found if s.strip()]


@lru_cache(maxsize=1)
def _nltk_words() -> Callable[[str], list[str]]:
    from nltk.tokenize.destructive import NLTKWordTokenizer  # ~0.4 s: only word models that ask for it pay

    return NLTKWordTokenizer().tokenize


def split_nltk(text: str) -> list[str]:
    words = _nltk_words()
    return [word for line in text.splitlines() for sentence in sentences(line) for word in words(sentence)]


def nltk_missing() -> str | None:
    """Why the nltk splitter cannot run here (one sentence), or None when it can."""
    try:
        _nltk_words()
    except ImportError:
        return "The nltk word splitter needs NLTK: .venv/bin/python -m pip install -r requirements.txt."
    return None


SPLITTERS: dict[str, Callable[[str], list[str]]] = {"regex": split_regex, "nltk": split_nltk}
# What each needs before it can run; a splitter missing here needs nothing.
SPLITTER_CHECKS: dict[str, Callable[[], str | None]] = {"nltk": nltk_missing}
