"""Uploaded files -> checkpoints in a folder, with size limits and one-sentence refusals.

Pure (no streamlit): the page hands over objects with `.name`, `.size` and `.getvalue()` (what
`st.file_uploader` returns) and gets back a `CheckpointInfo` for the picker. Sizes are checked
before the bytes are read. A file is validated completely (every tensor's name, shape and dtype)
in a hidden folder next to its destination and only then given its final name, never over an
existing file, so a refused upload leaves nothing behind. Uploads live in a private temporary
folder per session unless the user names a folder the operator allowed (`ATTENTION_LAB_ALLOWED_DIRS`,
see core.io.folders); the bundled checkpoints/ folder is never written to. A session's folder is
removed when the session ends (`SessionFolder`); since Streamlit drops a disconnected session (a closed or reloaded
tab) without ending it, a live session also touches its folder every `heartbeat_s()` and a timer in the server
removes the folders nothing touched for `grace_s()` (`sweep_stale`), as it does those a killed server left.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
import time
import tomllib
import weakref
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from core.io import checkpoint, folders, nanogpt
from core.io.checkpoint import CheckpointError, CheckpointInfo
from core.io.convert import (
    DEFAULT_N_HEAD,
    ConversionError,
    convert_cs224n_bytes,
    cs224n_command,
    save_conversion,
    sha256_bytes,
)
from core.io.formats import refusal

MB = 1024 * 1024
STREAMLIT_CONFIG = Path(__file__).resolve().parents[2] / ".streamlit" / "config.toml"
STREAMLIT_DEFAULT_UPLOAD_MB = 200  # Streamlit's own server.maxUploadSize when the config does not set it


def upload_ceiling_mb(config: Path = STREAMLIT_CONFIG) -> int:
    """server.maxUploadSize of the app's Streamlit config: what the server accepts per file, and the one number
    the model uploads' limits and their help texts are (issue 41: "Up to 512 MB" beside "1GB per file"; the
    uploader writes sizes over 500 MB rounded to GB, so the config keeps the ceiling at 500)."""
    try:
        with config.open("rb") as handle:
            value = tomllib.load(handle).get("server", {}).get("maxUploadSize", STREAMLIT_DEFAULT_UPLOAD_MB)
    except (OSError, tomllib.TOMLDecodeError):
        return STREAMLIT_DEFAULT_UPLOAD_MB
    return int(value) if isinstance(value, int) and value > 0 else STREAMLIT_DEFAULT_UPLOAD_MB


UPLOAD_CEILING_MB = upload_ceiling_mb()
CHECKPOINT_LIMIT_MB = UPLOAD_CEILING_MB
PARAMS_LIMIT_MB = UPLOAD_CEILING_MB
CORPUS_LIMIT_MB = min(100, UPLOAD_CEILING_MB)
RECORDS_LIMIT_MB = min(256, UPLOAD_CEILING_MB)  # attention records files (core.lens.records caps what they hold)
KNOWN_SUFFIXES = (".safetensors", ".params", ".pt", ".pth", ".bin", ".ckpt")


class UploadError(ValueError):
    """An upload that was refused; str() is one sentence for the user."""


class Upload(Protocol):
    """What st.file_uploader returns (streamlit's UploadedFile), or any stand-in in tests."""

    name: str
    size: int

    def getvalue(self) -> bytes: ...


@dataclass
class Added:
    info: CheckpointInfo
    warnings: list[str] = field(default_factory=list)


def read_upload(upload: Upload, limit_mb: int, what: str) -> bytes:
    """The bytes, after checking the declared size against the limit (nothing read when too big)."""
    name = Path(upload.name).name
    if upload.size <= 0:
        raise UploadError(f"{name} is empty; choose the {what} again.")
    if upload.size > limit_mb * MB:
        raise UploadError(f"{name} is {upload.size / MB:.0f} MB, over the {limit_mb} MB limit for a {what}.")
    data = upload.getvalue()
    if len(data) != upload.size:
        raise UploadError(f"{name} arrived incomplete ({len(data)} of {upload.size} bytes); upload it again.")
    return data


SESSION_PREFIX = "attention-lab-uploads-"
GRACE_ENV = "ATTENTION_LAB_UPLOAD_GRACE_S"
STALE_AFTER_S = 300  # a session folder untouched this long belongs to no live session (live ones touch theirs)


def grace_s() -> float:
    """How long a folder nothing touched is kept: Streamlit keeps a disconnected session for reconnecting for
    server.disconnectedSessionTTL (120 s), and a hidden tab's timers may be throttled to once a minute."""
    try:
        return max(1.0, float(os.environ.get(GRACE_ENV, STALE_AFTER_S)))
    except ValueError:
        return float(STALE_AFTER_S)


def heartbeat_s() -> float:
    """How often a live session touches its folder (and the server sweeps): well inside the grace time."""
    return grace_s() / 5


class SessionFolder:
    """A private folder (mode 0700) for one browser session's uploads. It is removed when this object
    is garbage-collected, which Streamlit does with a session's state when the session ends, or at
    `remove()`; models already loaded from it stay in memory."""

    def __init__(self, root: str | Path | None = None) -> None:
        self.path = Path(tempfile.mkdtemp(prefix=SESSION_PREFIX, dir=root))
        self._finalizer = weakref.finalize(self, shutil.rmtree, str(self.path), True)

    def remove(self) -> None:
        self._finalizer()

    def touch(self) -> None:
        """This session is alive: its folder is not stale (`sweep_stale`)."""
        try:
            os.utime(self.path)
        except OSError:  # removed already (its session ended, or it was stale)
            pass

    @property
    def exists(self) -> bool:
        return self.path.is_dir()


def _last_touched(folder: Path) -> float:
    times = [folder.stat().st_mtime]
    times += [p.stat().st_mtime for p in folder.iterdir() if not p.is_symlink()]
    return max(times)


def sweep_stale(root: str | Path | None = None, older_than_s: float | None = None,
                now: float | None = None) -> list[Path]:
    """Remove session folders (ours only: our prefix, owned by this user, real folders, not links) that
    nothing touched for `older_than_s` (default `grace_s()`): a session gone without being ended, or left behind
    by a server that was killed. Returns what it removed."""
    root = Path(root or tempfile.gettempdir())
    older_than_s = grace_s() if older_than_s is None else older_than_s
    now = time.time() if now is None else now
    removed = []
    for folder in root.glob(SESSION_PREFIX + "*"):
        try:
            if folder.is_symlink() or not folder.is_dir() or folder.stat().st_uid != os.getuid():
                continue
            if now - _last_touched(folder) > older_than_s:
                shutil.rmtree(folder)
                removed.append(folder)
        except OSError:  # another server removed it first, or it is not ours to read
            continue
    return removed


def destination_folder(requested: str | None, session_folder: Callable[[], Path],
                       allowed: Sequence[Path] = ()) -> Path:
    """Where to save: this session's private folder (`session_folder()` creates it on first use), or a
    folder the user typed, which must lie inside a folder the operator allowed (core.io.folders), must not
    be the bundled one and must be writable."""
    text = (requested or "").strip()
    if not text:
        return session_folder()
    try:
        resolved = folders.resolve_allowed(text, allowed)
    except folders.FolderError as exc:
        raise UploadError(str(exc)) from None
    # The picker lists these folders already (and a model there would show up twice); the bundled
    # one belongs to the app.
    for listed in {checkpoint.DEFAULT_DIR.resolve(), checkpoint.checkpoint_dir().resolve()}:
        if resolved == listed or listed in resolved.parents:
            raise UploadError("That is the app's bundled checkpoints folder, which uploads never write "
                              "to; choose another folder.")
    if not os.access(resolved, os.W_OK):
        raise UploadError(f"The folder {text[:200]!r} is not writable.")
    return resolved


def checkpoint_filename(upload_name: str) -> str:
    """`vanilla.finetune.params` -> `vanilla.finetune.safetensors` (no folders, no odd characters)."""
    stem = Path(upload_name).name
    for suffix in KNOWN_SUFFIXES:
        if stem.lower().endswith(suffix):
            stem = stem[: -len(suffix)]
            break
    stem = re.sub(r"[^A-Za-z0-9._-]+", "-", stem).strip(".-")[:100] or "uploaded-model"
    return f"{stem}.safetensors"


def picker_name(stem: str, taken: Iterable[str]) -> str:
    """A picker label no other checkpoint has (the picker selects by name)."""
    taken = set(taken)
    name, n = stem, 1
    while name in taken:
        n += 1
        name = f"{stem} (upload {n})"
    return name


def _refuse_existing(final: Path) -> None:
    if final.exists():
        raise UploadError(f"{final.name} already exists in {final.parent}; rename the file or choose "
                          "another folder.")


def _place(staged: Path, final: Path) -> None:
    """Give the validated file its final name without ever replacing an existing file."""
    try:
        os.link(staged, final)  # fails if final exists, atomically
    except FileExistsError:
        _refuse_existing(final)
        raise
    except OSError:  # a file system without hard links
        _refuse_existing(final)
        os.rename(staged, final)


def _info(final: Path, taken: Iterable[str]) -> CheckpointInfo:
    stat = final.stat()
    return CheckpointInfo(path=final, name=picker_name(final.stem, taken), size_bytes=stat.st_size,
                          modified=stat.st_mtime, metadata=checkpoint.read_metadata(final))


class _Staging:
    """A hidden folder beside the destination; the staged file carries the final name so that
    refusals from core.io.checkpoint name the user's file, not a temporary one."""

    def __init__(self, folder: Path, filename: str) -> None:
        self.folder, self.filename = folder, filename

    def __enter__(self) -> Path:
        try:
            self.dir = Path(tempfile.mkdtemp(prefix=".upload-", dir=self.folder))
        except OSError as exc:
            raise UploadError(f"Could not write to {self.folder} ({exc.strerror or type(exc).__name__}).") \
                from None
        return self.dir / self.filename

    def __exit__(self, *exc_info) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)


CHECKPOINT_EXPECTED = "an Attention Lab checkpoint (.safetensors)"
PARAMS_EXPECTED = "a minGPT params file (torch.save of the model's state dict)"
CORPUS_EXPECTED = "a pretraining corpus (plain UTF-8 text, one document per line)"


def _check_format(data: bytes, upload: Upload, accepted: set[str], expected: str) -> None:
    """One sentence (UploadError) when the bytes are not a kind the box takes: what it expected, what it found."""
    wrong = refusal(data, accepted, expected, Path(upload.name).name)
    if wrong:
        raise UploadError(wrong)


def add_checkpoint(upload: Upload, folder: Path, taken_names: Iterable[str] = ()) -> Added:
    """An Attention Lab .safetensors upload, fully validated, saved into `folder`."""
    data = read_upload(upload, CHECKPOINT_LIMIT_MB, "checkpoint")
    _check_format(data, upload, {"safetensors"}, CHECKPOINT_EXPECTED)
    final = folder / checkpoint_filename(upload.name)
    _refuse_existing(final)
    with _Staging(folder, final.name) as staged:
        try:
            staged.write_bytes(data)
            checkpoint.load(staged, max_bytes=CHECKPOINT_LIMIT_MB * MB)  # every tensor checked
            _place(staged, final)
        except CheckpointError as exc:
            raise UploadError(str(exc)) from None
        except OSError as exc:
            reason = exc.strerror or type(exc).__name__
            raise UploadError(f"Could not save {final.name} ({reason}).") from None
    return Added(info=_info(final, taken_names))


def add_cs224n(params: Upload, corpus: Upload, folder: Path, n_head: int = DEFAULT_N_HEAD,
               taken_names: Iterable[str] = ()) -> Added:
    """A CS224N minGPT params upload + its wiki.txt -> a converted checkpoint saved into `folder`."""
    params_bytes = read_upload(params, PARAMS_LIMIT_MB, "params file")
    corpus_bytes = read_upload(corpus, CORPUS_LIMIT_MB, "corpus")
    _check_format(params_bytes, params, {"torch", "pickle"}, PARAMS_EXPECTED)
    _check_format(corpus_bytes, corpus, {"text"}, CORPUS_EXPECTED)
    params_name, corpus_name = Path(params.name).name, Path(corpus.name).name
    final = folder / checkpoint_filename(params_name)
    _refuse_existing(final)
    try:
        conversion = convert_cs224n_bytes(params_bytes, params_name, corpus_bytes, corpus_name, n_head)
    except ConversionError as exc:
        raise UploadError(str(exc)) from None
    with _Staging(folder, final.name) as staged:
        try:
            save_conversion(conversion, staged, params_name=params_name,
                            params_sha256=sha256_bytes(params_bytes), corpus_name=corpus_name,
                            corpus_sha256=sha256_bytes(corpus_bytes),
                            command=cs224n_command(params_name, corpus_name, n_head, final.name))
            _place(staged, final)
        except (CheckpointError, OSError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            raise UploadError(f"Could not save {final.name} ({reason}).") from None
    return Added(info=_info(final, taken_names), warnings=conversion.warnings)


def add_nanogpt(ckpt: Upload, vocabulary: Sequence[Upload], folder: Path, taken_names: Iterable[str] = ()) -> Added:
    """A nanoGPT ckpt.pt upload + its vocabulary (meta.pkl, the training text, or GPT-2 tokenizer files)
    -> a converted checkpoint saved into `folder`."""
    ckpt_bytes = read_upload(ckpt, PARAMS_LIMIT_MB, "checkpoint")
    files = {Path(u.name).name: read_upload(u, CORPUS_LIMIT_MB, "vocabulary") for u in vocabulary}
    ckpt_name = Path(ckpt.name).name
    try:
        source = nanogpt.vocabulary_source(files)
        conversion, vocab_name, vocab_bytes = nanogpt.convert_nanogpt_bytes(ckpt_bytes, ckpt_name, **source)
    except ConversionError as exc:
        raise UploadError(str(exc)) from None
    dataset = conversion.source.dataset
    # every run saves ckpt.pt: name the model for its data set, as nanoGPT names its out_dir
    named = f"nanogpt-{dataset}.pt" if Path(ckpt_name).stem == "ckpt" and dataset else ckpt_name
    final = folder / checkpoint_filename(named)
    _refuse_existing(final)
    with _Staging(folder, final.name) as staged:
        try:
            flag = next(iter(source)).split("_")[0]  # meta | text | tokenizer
            nanogpt.save_nanogpt(conversion, staged, ckpt_name=ckpt_name, ckpt_sha256=sha256_bytes(ckpt_bytes),
                                 vocabulary_name=vocab_name, vocabulary_sha256=sha256_bytes(vocab_bytes),
                                 command=nanogpt.nanogpt_command(ckpt_name, final.name, **{flag: vocab_name}))
            _place(staged, final)
        except (CheckpointError, OSError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            raise UploadError(f"Could not save {final.name} ({reason}).") from None
    return Added(info=_info(final, taken_names), warnings=conversion.warnings)
