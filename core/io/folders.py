"""Which server folders a browser user may name: none, unless the operator allows some.

The app is served to a class as often as it runs on a laptop, so a path typed into a text box is a
request to read or write the server's file system. By default no typed path is accepted. The operator
names the folders a browser may use in `ATTENTION_LAB_ALLOWED_DIRS` (separated by `os.pathsep`, ':'
on Linux and macOS); a typed folder is accepted only when, with every symlink resolved, it is one of
them or lies inside one. `..` is refused before anything touches the disk.

Run locally (`make app`, the browser on the same machine), the Training curves page takes any folder typed
(issue 53: "run locally, any folder typed"): `any_folder_allowed`. `make serve` (hosting for a class) sets
`ATTENTION_LAB_ANY_FOLDER=0` unless the operator set it, so a hosted app keeps to the allowed folders; a browser
connecting from another machine is kept to them too. No streamlit here.
"""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Mapping, Sequence
from pathlib import Path

from core.io.formats import sniff

ALLOWED_DIRS_ENV = "ATTENTION_LAB_ALLOWED_DIRS"
MAX_PATH_CHARS = 1024
NOT_ALLOWED = (f"This app does not open folders on the server; its operator can allow some with "
               f"{ALLOWED_DIRS_ENV}.")


ANY_FOLDER_ENV = "ATTENTION_LAB_ANY_FOLDER"
OFF = ("0", "false", "no", "off")


def any_folder_allowed(environ: Mapping[str, str] | None = None, client_ip: str | None = None) -> bool:
    """Whether a typed folder may be any folder of this machine: the app runs locally. On unless
    `ATTENTION_LAB_ANY_FOLDER` is 0/false/no/off (`make serve` sets 0 unless the operator set it), and only for a
    browser on this machine: `client_ip` is Streamlit's `st.context.ip_address`, None for localhost (and for
    every browser behind `make serve`'s proxy, which the switch covers)."""
    value = (os.environ if environ is None else environ).get(ANY_FOLDER_ENV)
    if value is not None and value.strip().lower() in OFF:
        return False
    if not isinstance(client_ip, str):  # None: localhost (Streamlit's AppTest gives a stand-in object)
        return True
    try:
        return ipaddress.ip_address(client_ip.split("%")[0]).is_loopback
    except ValueError:
        return False


class FolderError(ValueError):
    """A typed folder that was refused; str() is one sentence for the user."""


def allowed_dirs(environ: Mapping[str, str] | None = None) -> list[Path]:
    """The operator's allowed folders, symlinks resolved; entries that are not existing folders are
    dropped (a typo there must not widen anything)."""
    raw = (os.environ if environ is None else environ).get(ALLOWED_DIRS_ENV, "")
    folders: list[Path] = []
    for entry in raw.split(os.pathsep):
        entry = entry.strip()
        if not entry:
            continue
        try:
            folder = Path(entry).expanduser().resolve(strict=True)
        except (OSError, RuntimeError, ValueError):
            continue
        if folder.is_dir() and folder not in folders:
            folders.append(folder)
    return folders


def _shown(text: str) -> str:
    return repr(text[:200])


def describe_file(path: Path, head_bytes: int = 4 * 1024 * 1024) -> str:
    """What a file holds, from its first bytes (core.io.formats): 'a safetensors checkpoint', 'plain text, 40
    lines'... ('an unreadable file' when it cannot be opened)."""
    try:
        with path.open("rb") as handle:
            head = handle.read(head_bytes)
    except OSError:
        return "an unreadable file"
    return sniff(head).description


def resolve_allowed(text: str | None, allowed: Sequence[Path]) -> Path:
    """The existing folder `text` names, symlinks resolved, if it lies inside an allowed folder.

    Relative paths are taken inside the first allowed folder. Refusals (no allowed folders, '..',
    a missing folder, a file, a path outside) raise FolderError with one sentence."""
    text = (text or "").strip()
    if not allowed:
        raise FolderError(NOT_ALLOWED)
    if not text:
        raise FolderError("Type the path of a folder.")
    if len(text) > MAX_PATH_CHARS or "\x00" in text:
        raise FolderError("That is not a folder path.")
    typed = Path(text)
    if ".." in typed.parts:
        raise FolderError(f"Paths with '..' are not accepted; type the folder's full path, not {_shown(text)}.")
    if text.startswith("~"):
        raise FolderError(f"Type the folder's full path (like {allowed[0]}), not {_shown(text)}.")
    candidate = typed if typed.is_absolute() else allowed[0] / typed
    try:
        folder = candidate.resolve(strict=True)
    except (OSError, RuntimeError, ValueError):
        raise FolderError(f"The folder {_shown(text)} does not exist.") from None
    inside = any(folder == root or root in folder.parents for root in allowed)
    if not folder.is_dir() and inside:  # what it is, read only inside the allowed folders
        raise FolderError(f"{_shown(text)} is a file ({describe_file(folder)}), not a folder.")
    if not folder.is_dir():
        raise FolderError(f"{_shown(text)} is a file, not a folder.")
    if not inside:
        raise FolderError(f"{_shown(text)} is outside the folders this app may use: "
                          + ", ".join(str(root) for root in allowed) + ".")
    return folder


def resolve_any(text: str | None, base: Path | None = None) -> Path:
    """The existing folder `text` names, anywhere on this machine (run locally: `any_folder_allowed`); `~` is the
    user's home, a relative path is taken inside `base` (the working folder when None). Refusals (empty, missing,
    a file) raise FolderError with one sentence."""
    text = (text or "").strip()
    if not text:
        raise FolderError("Type the path of a folder.")
    if len(text) > MAX_PATH_CHARS or "\x00" in text:
        raise FolderError("That is not a folder path.")
    try:
        typed = Path(text).expanduser()
    except RuntimeError:  # `~someone/...` for a user this machine does not have
        raise FolderError(f"{_shown(text)} names the home folder of a user this machine does not know.") from None
    candidate = typed if typed.is_absolute() or base is None else base / typed
    try:
        folder = candidate.resolve(strict=True)
    except (OSError, RuntimeError, ValueError):
        raise FolderError(f"The folder {_shown(text)} does not exist.") from None
    if not folder.is_dir():
        raise FolderError(f"{_shown(text)} is a file ({describe_file(folder)}), not a folder.")
    return folder


def inside_allowed(path: Path, allowed: Sequence[Path]) -> bool:
    """Whether a file (symlinks resolved) lies inside an allowed folder: for listing a folder's files,
    so that a link inside it cannot lead out."""
    try:
        resolved = Path(path).resolve(strict=True)
    except (OSError, RuntimeError, ValueError):
        return False
    return any(root in resolved.parents for root in allowed)
