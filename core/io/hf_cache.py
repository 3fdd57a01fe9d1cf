"""The Hugging Face cache: models people already downloaded, listed under their hub names, and a typed hub name
resolved from the cache offline (downloaded only where the person running the app allowed it).

Where the cache is (read at each call, as huggingface_hub reads it): `HF_HUB_CACHE`, else `$HF_HOME/hub`, else
`~/.cache/huggingface/hub`. It is listed with huggingface_hub's own `scan_cache_dir()`: folders
`models--ORG--NAME/{blobs, refs/main, snapshots/<commit>/}`, the snapshot files symlinks into blobs/. A model is
its `refs/main` snapshot (else its most recently modified one) and opens as any Hugging Face folder
(core.io.hf): offline, safetensors only, never remote code.

Two switches, both environment variables of the process that runs the app:
- `ATTENTION_LAB_HF_CACHE`: list the cache in the model picker and resolve typed hub names from it. On by default
  for a local run; `make serve` (serve/__main__.py) turns it off unless the operator set it (a hosted app does
  not show its server's downloads to every visitor).
- `ATTENTION_LAB_HF_DOWNLOAD`: download a typed hub name that is not cached (config, tokenizer and safetensors
  files only). Off unless set to 1, locally and hosted.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from core.io import hf
from core.io.hf import DOWNLOAD_ENV, downloads_allowed
from core.io.loaded import CheckpointError, CheckpointInfo

CACHE_ENV = "ATTENTION_LAB_HF_CACHE"
__all__ = ["CACHE_ENV", "DOWNLOAD_ENV", "CachedModel", "HubError", "cache_dir", "downloads_allowed",
           "listing_enabled", "misplaced_cache", "picker_infos", "resolve", "scan"]
HUB_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,95}(/[A-Za-z0-9][A-Za-z0-9._-]{0,95})?$")
# what a download fetches: enough to open the model offline, never a pickle
DOWNLOAD_PATTERNS = ["config.json", "generation_config.json", "*.safetensors", "model.safetensors.index.json",
                     "tokenizer*", "special_tokens_map.json", "vocab.*", "merges.txt", "*.model"]
ON = ("1", "true", "yes", "on")

# Called while files download: (files done, files in all).
Progress = Callable[[int, int], None]


class HubError(CheckpointError):
    """A hub name that cannot be opened; str() is one sentence for the user."""


def _switch(name: str, default: bool, environ=None) -> bool:
    value = (os.environ if environ is None else environ).get(name)
    return default if value is None or not value.strip() else value.strip().lower() in ON


def listing_enabled(environ=None) -> bool:
    return _switch(CACHE_ENV, True, environ)


def cache_dir(environ=None) -> Path:
    """The hub cache as huggingface_hub finds it: HF_HUB_CACHE, else $HF_HOME/hub, else the default."""
    env = os.environ if environ is None else environ
    if env.get("HF_HUB_CACHE"):
        return Path(env["HF_HUB_CACHE"]).expanduser()
    if env.get("HF_HOME"):
        return Path(env["HF_HOME"]).expanduser() / "hub"
    return Path("~/.cache/huggingface/hub").expanduser()


def misplaced_cache(folder: str | Path, environ=None) -> str | None:
    """One sentence when a folder named as the checkpoints folder (ATTENTION_LAB_CHECKPOINTS) is a hub cache (it holds
    models--ORG--NAME folders): HF_HUB_CACHE is the variable for a cache. None for any other folder."""
    folder = Path(folder)
    try:
        is_cache = any(p.name.startswith("models--") and p.is_dir() for p in folder.iterdir())
    except OSError:
        return None
    if not is_cache:
        return None
    also = "" if listing_enabled(environ) else f" and {CACHE_ENV}=1"
    return (f"{folder} is a Hugging Face hub cache (models--ORG--NAME folders), not a folder of checkpoints: "
            f"HF_HUB_CACHE is the variable for a cache (set HF_HUB_CACHE={folder}{also}), and the picker lists its "
            "models under their hub names.")


@dataclass(frozen=True)
class CachedModel:
    """One model repository in the cache: its hub name, the snapshot opened, and whether the lab reads it."""

    name: str  # ORG/NAME
    snapshot: Path
    size_bytes: int
    modified: float
    error: str | None  # one sentence: why the lab cannot open it; None: it can


def scan(cache: Path | None = None) -> list[CachedModel]:
    """Every model repository in the cache (huggingface_hub.scan_cache_dir), by hub name; a repository with no
    snapshot (an interrupted download) is left out."""
    hf.offline()  # before huggingface_hub is first imported (the picker lists the cache first): it reads them once
    from huggingface_hub import scan_cache_dir
    from huggingface_hub.errors import CacheNotFound, CorruptedCacheException

    cache = cache_dir() if cache is None else Path(cache)
    if not cache.is_dir():
        return []
    try:
        info = scan_cache_dir(cache)
    except (CacheNotFound, CorruptedCacheException, OSError):
        return []
    out = []
    for repo in sorted(info.repos, key=lambda r: r.repo_id.lower()):
        if repo.repo_type != "model" or not repo.revisions:
            continue
        main = [r for r in repo.revisions if "main" in r.refs]
        revision = main[0] if main else max(repo.revisions, key=lambda r: r.last_modified)
        out.append(CachedModel(name=repo.repo_id, snapshot=Path(revision.snapshot_path),
                               size_bytes=int(revision.size_on_disk), modified=float(revision.last_modified),
                               error=_refusal(repo.repo_id, Path(revision.snapshot_path))))
    return out


def _refusal(name: str, snapshot: Path) -> str | None:
    try:
        hf.check_folder(snapshot)
    except CheckpointError as exc:
        return str(exc).replace(snapshot.name, name, 1)  # the sentence names the hub name, not the commit
    return None


def picker_infos(cache: Path | None = None) -> list[CheckpointInfo]:
    """The cached models the lab can open, as picker entries named by their hub names."""
    out = []
    for model in scan(cache):
        if model.error is None:
            try:
                info = hf.folder_info(model.snapshot)
            except CheckpointError:
                continue
            out.append(replace(info, name=model.name))
    return out


def resolve(name: str, progress: Progress | None = None, cache: Path | None = None,
            allow_download: bool | None = None) -> CheckpointInfo:
    """A typed hub name (ORG/NAME) -> a picker entry, from the cache offline; downloaded (with `progress`) only
    where downloads are allowed. Raises HubError with one sentence."""
    name = (name or "").strip()
    if not HUB_NAME.match(name) or ".." in name:
        raise HubError(f"{name[:100]!r} is not a Hugging Face hub name such as HuggingFaceTB/SmolLM2-135M.")
    cache = cache_dir() if cache is None else Path(cache)
    allow = downloads_allowed() if allow_download is None else allow_download
    snapshot = _cached_snapshot(name, cache)
    if snapshot is None:
        if not allow:
            raise HubError(f"{name} is not in the Hugging Face cache ({cache}) and downloads are off: download it "
                           f"with the command: hf download {name}, or let the app download with {DOWNLOAD_ENV}=1.")
        snapshot = _download(name, cache, progress)
    try:
        info = hf.folder_info(snapshot)
    except CheckpointError as exc:
        raise HubError(str(exc).replace(snapshot.name, name, 1)) from None
    return replace(info, name=name)


def _cached_snapshot(name: str, cache: Path) -> Path | None:
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import LocalEntryNotFoundError

    try:
        return Path(snapshot_download(name, cache_dir=cache, local_files_only=True))
    except (LocalEntryNotFoundError, OSError, ValueError):
        return None


def _download(name: str, cache: Path, progress: Progress | None) -> Path:
    from huggingface_hub import constants, snapshot_download
    from huggingface_hub.errors import HfHubHTTPError, RepositoryNotFoundError
    from tqdm.auto import tqdm

    if constants.HF_HUB_OFFLINE:
        raise HubError(f"{name} is not in the Hugging Face cache ({cache}), and HF_HUB_OFFLINE is set in this "
                       "app's environment, so nothing is downloaded.")

    class Reported(tqdm):  # huggingface_hub's bar over the files: each update is reported to `progress`
        def __init__(self, *args, **kwargs):
            kwargs["disable"] = False
            super().__init__(*args, **kwargs)

        def update(self, n=1):
            out = super().update(n)
            if progress is not None:
                progress(int(self.n), int(self.total or 0))
            return out

    try:
        path = snapshot_download(name, cache_dir=cache, allow_patterns=DOWNLOAD_PATTERNS, tqdm_class=Reported)
    except RepositoryNotFoundError:
        raise HubError(f"The Hugging Face hub has no model {name} (or it is private or gated).") from None
    except (HfHubHTTPError, OSError, ValueError) as exc:
        first = str(exc).strip().split("\n")[0][:160]
        raise HubError(f"{name} could not be downloaded ({type(exc).__name__}: {first}).") from None
    return Path(path)


def main(argv: list[str] | None = None) -> int:
    """`python -m core.io.hf_cache [NAME ...]`: what the cache holds and which of it the lab opens; with hub names,
    where each resolves (from the cache; downloaded only with ATTENTION_LAB_HF_DOWNLOAD=1)."""
    import argparse
    import sys

    parser = argparse.ArgumentParser(prog="python -m core.io.hf_cache", description=main.__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", metavar="NAME", help="hub names (ORG/NAME) to resolve")
    parser.add_argument("--cache", type=Path, default=None, help="the hub cache (default: as huggingface_hub finds it)")
    args = parser.parse_args(argv)
    cache = args.cache or cache_dir()
    if not args.names:
        models = scan(cache)
        print(f"{cache}: {len(models)} model(s); {sum(m.error is None for m in models)} the lab opens.")
        for m in models:
            print(f"{m.name}\t{m.size_bytes / 1e6:.0f} MB\t{'opens' if m.error is None else m.error}")
        return 0
    failed = 0
    for name in args.names:
        try:
            info = resolve(name, cache=cache, progress=lambda done, total: print(f"{done}/{total} files",
                                                                                  file=sys.stderr))
        except CheckpointError as exc:
            print(exc, file=sys.stderr)
            failed += 1
            continue
        print(f"{info.name}\t{info.path}")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())


def load_named(name: str, device: str = "cpu"):
    """What a command is given as its model: a checkpoint file or a model folder on this machine, else a hub name
    opened from the cache (`resolve`). Raises CheckpointError (HubError included) with one sentence."""
    from core.io import checkpoint

    path = Path(str(name)).expanduser()
    if path.exists():
        return checkpoint.load(path, device=device)
    return checkpoint.load(resolve(str(name)).path, device=device)
