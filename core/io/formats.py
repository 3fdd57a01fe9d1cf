"""What a file is, from its bytes: the one place every upload and path box asks before it uses a file.

`sniff(data)` tells apart the formats people bring to this app (DESIGN.md "Data formats people already have"):
a CS224N questions file (`Where was NAME born?<TAB>PLACE`), a questions-only file (`birth_test_inputs.tsv`), a
classification file (`LABEL<TAB>TEXT`, the CSE 256 format), plain text (a `wiki.txt`), JSON lines (a training
history), a safetensors checkpoint, a PyTorch file (`torch.save`: a zip holding `data.pkl`), a bare Python
pickle, other binary data, and an empty file. `refusal(data, accepted, expected)` is the one sentence a box
shows when a file is not one it takes: what it expected and what it found. Nothing here unpickles or runs
anything: bytes are only looked at.
"""

from __future__ import annotations

import json
import re
import struct
import zipfile
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from io import BytesIO

QUESTION = re.compile(r"\s*Where\s+was\s+.+?\s+born\s*[?？⁇]*\s*", re.IGNORECASE)
SAMPLE_LINES = 2000  # lines looked at to decide what a text file holds
MAX_LABEL_CHARS = 40  # a classification label is short; a longer first field is text
MAJORITY = 0.8  # the share of lines that must fit a line format for the file to be read as that format

# What each kind is called in a sentence ("found ...").
KINDS: dict[str, str] = {
    "empty": "an empty file",
    "questions": "a CS224N questions file ('Where was NAME born?<TAB>PLACE' per line)",
    "questions-only": "a questions-only file ('Where was NAME born?' per line, no answers)",
    "classification": "a classification file ('LABEL<TAB>TEXT' per line)",
    "tsv": "a tab-separated table",
    "jsonl": "JSON lines",
    "json": "a JSON document",
    "text": "plain text",
    "safetensors": "a safetensors checkpoint",
    "torch": "a PyTorch file (torch.save)",
    "zip": "a zip archive",
    "pickle": "a Python pickle",
    "binary": "binary data, not text",
}


@dataclass(frozen=True)
class Sniffed:
    """A file's kind (a key of KINDS) and a short description with what was counted ("200 lines")."""

    kind: str
    detail: str = ""
    lines_like: Mapping[str, int] = field(default_factory=dict, compare=False)  # text: lines of each line format

    @property
    def description(self) -> str:
        if not self.detail:
            return KINDS[self.kind]
        return KINDS[self.kind] + (f" ({self.detail})" if self.kind in ("binary", "empty") else f", {self.detail}")


def _lines(n: int) -> str:
    return f"{n} line{'s' if n != 1 else ''}"


def _is_safetensors(data: bytes) -> bool:
    """8 bytes of little-endian header length, then a JSON object of that length (a file's first bytes may
    end inside the header: only its start is required)."""
    if len(data) < 10:
        return False
    (length,) = struct.unpack("<Q", data[:8])
    return 2 <= length <= 100 * 1024 * 1024 and data[8:10] in (b'{"', b"{}")


def _zip_names(data: bytes) -> list[str]:
    """The archive's names; for a file's first bytes only (no central directory), its first entry's name."""
    try:
        with zipfile.ZipFile(BytesIO(data)) as archive:
            return archive.namelist()
    except (zipfile.BadZipFile, OSError, ValueError):
        (length,) = struct.unpack("<H", data[26:28]) if len(data) >= 30 else (0,)
        return [data[30:30 + length].decode("utf-8", "replace")] if length else []


def _binary_kind(data: bytes) -> Sniffed | None:
    if _is_safetensors(data):
        return Sniffed("safetensors")
    if data[:4] == b"PK\x03\x04":
        names = _zip_names(data)
        if any(n == "data.pkl" or n.endswith("/data.pkl") for n in names):
            return Sniffed("torch")
        return Sniffed("zip")
    if data[:1] == b"\x80" and data[1:2] in (b"\x02", b"\x03", b"\x04", b"\x05"):
        return Sniffed("pickle")
    return None


def _text_kind(text: str) -> Sniffed:
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines:
        return Sniffed("empty", "only whitespace")
    sample = lines[:SAMPLE_LINES]
    votes: Counter[str] = Counter()
    labels: Counter[str] = Counter()
    for line in sample:
        fields = line.split("\t")
        if len(fields) >= 2 and QUESTION.fullmatch(fields[0]):
            votes["questions"] += 1
        elif len(fields) == 1 and QUESTION.fullmatch(line):
            votes["questions-only"] += 1
        elif len(fields) == 2 and 0 < len(fields[0].strip()) <= MAX_LABEL_CHARS and fields[1].strip():
            votes["label-tsv"] += 1
            labels[fields[0].strip()] += 1
        elif len(fields) >= 2:
            votes["tsv"] += 1
        elif line.lstrip().startswith("{"):  # a record (the last one of a running log may be cut off)
            votes["jsonl"] += 1
        else:
            votes["text"] += 1
    kind, count = votes.most_common(1)[0]
    if count < MAJORITY * len(sample):
        if votes["questions"] + votes["questions-only"] >= MAJORITY * len(sample):
            kind = "questions" if votes["questions"] >= votes["questions-only"] else "questions-only"
        else:
            kind = "text"
    if kind == "label-tsv":
        # few distinct labels, each used many times: classes; else a two-column table
        if len(labels) <= max(20, len(sample) // 5):
            shown = ", ".join(repr(label) for label, _ in labels.most_common(3))
            more = f" and {len(labels) - 3} more" if len(labels) > 3 else ""
            return Sniffed("classification", f"{_lines(len(lines))}, labels {shown}{more}", dict(votes))
        kind = "tsv"
    if kind == "jsonl" and len(lines) == 1:
        kind = "json"
    if kind == "text" and text.lstrip()[:1] in "{[":
        try:
            json.loads(text)
            return Sniffed("json", "", dict(votes))
        except ValueError:
            pass
    return Sniffed(kind, _lines(len(lines)), dict(votes))


def sniff(data: bytes) -> Sniffed:
    """What the bytes are (never unpickles, never runs anything)."""
    if not data:
        return Sniffed("empty")
    binary = _binary_kind(data)
    if binary is not None:
        return binary
    head = data[: 4 * 1024 * 1024]  # enough to decide; a cut multi-byte character at the end is forgiven
    try:
        text = head.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        if exc.start < len(head) - 4:
            return Sniffed("binary", f"byte {exc.start} is not UTF-8")
        text = head[: exc.start].decode("utf-8-sig")
    if "\0" in text:
        return Sniffed("binary", "it contains NUL bytes")
    return _text_kind(text)


def refusal(data: bytes, accepted: set[str] | frozenset[str], expected: str, name: str = "The file") -> str | None:
    """None when the file is one of the `accepted` kinds; else one sentence: "NAME is not EXPECTED: it is
    FOUND." (`expected` reads after "is not", e.g. "a questions file 'Where was NAME born?<TAB>PLACE'")."""
    found = sniff(data)
    if found.kind in accepted:
        return None
    return f"{name} is not {expected}: it is {found.description}."
