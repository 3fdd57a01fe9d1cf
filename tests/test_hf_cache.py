"""The Hugging Face cache (issue 42, part 3): a cache laid out here by hand as huggingface_hub lays it out
(models--ORG--NAME/{blobs, refs/main, snapshots/<commit>/} with the snapshot's files symlinked into blobs/), listed
in the picker under hub names, a typed hub name resolved from it offline, downloads only where allowed (with
progress), one sentence otherwise; no network anywhere (a socket connect fails the test).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import socket
from pathlib import Path

import numpy as np
import pytest

from core.io import hf_cache
from core.io.checkpoint import load
from core.lens.trace import trace
from tests.conftest import ROOT, require_hf_extra

COMMIT = "0123456789abcdef0123456789abcdef01234567"
OLD_COMMIT = "fedcba9876543210fedcba9876543210fedcba98"


def lay_out(cache: Path, repo_id: str, folder: Path | None, commit: str = COMMIT, main: bool = True,
            kind: str = "models") -> Path:
    """One repository as huggingface_hub stores it: each file's bytes under blobs/<sha256>, the snapshot's files
    relative symlinks to them, refs/main holding the commit (when `main`)."""
    repo = cache / f"{kind}--{repo_id.replace('/', '--')}"
    (repo / "blobs").mkdir(parents=True, exist_ok=True)
    snapshot = repo / "snapshots" / commit
    snapshot.mkdir(parents=True)
    for file in sorted(folder.iterdir()) if folder is not None else []:
        data = file.read_bytes()
        digest = hashlib.sha256(data).hexdigest()
        (repo / "blobs" / digest).write_bytes(data)
        (snapshot / file.name).symlink_to(Path("..", "..", "blobs", digest))
    if main:
        (repo / "refs").mkdir(exist_ok=True)
        (repo / "refs" / "main").write_text(commit)
    return snapshot


@pytest.fixture(scope="module")
def tiny_llama(tmp_path_factory) -> Path:
    require_hf_extra()
    from bench.hf_folders import decoder_folder

    return decoder_folder(tmp_path_factory.mktemp("src") / "tiny-llama", "llama")


@pytest.fixture
def no_network(monkeypatch):
    def refuse(*_args, **_kwargs):
        raise AssertionError("the test tried to reach the network")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)


@pytest.fixture
def cache(tmp_path, tiny_llama, monkeypatch, no_network) -> Path:
    root = tmp_path / "hub"
    lay_out(root, "TinyOrg/tiny-llama", tiny_llama)
    unread = tmp_path / "t5"
    shutil.copytree(tiny_llama, unread)
    config = json.loads((unread / "config.json").read_text())
    (unread / "config.json").write_text(json.dumps({**config, "model_type": "t5"}))
    lay_out(root, "SomeOrg/some-t5", unread)
    lay_out(root, "SomeOrg/a-dataset", tiny_llama, kind="datasets")
    monkeypatch.setenv("HF_HUB_CACHE", str(root))
    monkeypatch.delenv(hf_cache.CACHE_ENV, raising=False)
    monkeypatch.delenv(hf_cache.DOWNLOAD_ENV, raising=False)
    return root


def test_the_cache_is_found_where_huggingface_hub_looks():
    assert hf_cache.cache_dir({"HF_HUB_CACHE": "/x/hub", "HF_HOME": "/y"}) == Path("/x/hub")
    assert hf_cache.cache_dir({"HF_HOME": "/y"}) == Path("/y/hub")
    assert hf_cache.cache_dir({}) == Path("~/.cache/huggingface/hub").expanduser()
    from huggingface_hub import constants

    assert hf_cache.cache_dir({}) == Path(constants.default_cache_path)


def test_the_scan_lists_models_by_hub_name_and_names_what_the_lab_cannot_read(cache):
    models = {m.name: m for m in hf_cache.scan()}
    assert sorted(models) == ["SomeOrg/some-t5", "TinyOrg/tiny-llama"]  # the data set is not a model
    llama = models["TinyOrg/tiny-llama"]
    assert llama.error is None and llama.snapshot == cache / "models--TinyOrg--tiny-llama" / "snapshots" / COMMIT
    assert llama.size_bytes == sum(p.stat().st_size for p in llama.snapshot.iterdir())
    refused = models["SomeOrg/some-t5"].error
    assert refused.startswith("SomeOrg/some-t5 is a 't5' model, which the lab cannot read yet")
    assert COMMIT not in refused
    infos = hf_cache.picker_infos()
    assert [i.name for i in infos] == ["TinyOrg/tiny-llama"] and infos[0].task == "lm"


def test_a_snapshot_opens_as_the_folder_it_was_made_from(cache, tiny_llama):
    (info,) = hf_cache.picker_infos()
    cached, original = load(info.path), load(tiny_llama)
    ids = original.tokenizer.encode("the cat sat on the mat.")
    assert cached.tokenizer.encode("the cat sat on the mat.") == ids
    assert np.array_equal(trace(cached.model, ids).attention, trace(original.model, ids).attention)


def test_refs_main_picks_the_snapshot(tmp_path, tiny_llama, monkeypatch, no_network):
    root = tmp_path / "hub"
    lay_out(root, "TinyOrg/tiny-llama", tiny_llama, commit=OLD_COMMIT, main=False)
    newer = lay_out(root, "TinyOrg/tiny-llama", tiny_llama, commit=COMMIT, main=False)
    os.utime(newer, (2e9, 2e9))
    (root / "models--TinyOrg--tiny-llama" / "refs").mkdir()
    (root / "models--TinyOrg--tiny-llama" / "refs" / "main").write_text(OLD_COMMIT)
    (model,) = hf_cache.scan(root)
    assert model.snapshot.name == OLD_COMMIT


def test_a_typed_hub_name_resolves_from_the_cache_offline(cache):
    info = hf_cache.resolve("  TinyOrg/tiny-llama ")
    assert info.name == "TinyOrg/tiny-llama" and info.path.name == COMMIT and info.task == "lm"


@pytest.mark.parametrize("typed,expected", [
    ("TinyOrg/not-here", "is not in the Hugging Face cache"),
    ("SomeOrg/some-t5", "which the lab cannot read yet"),
    ("../../etc/passwd", "is not a Hugging Face hub name"),
    ("a/b/c", "is not a Hugging Face hub name"),
    ("", "is not a Hugging Face hub name"),
    ("x" * 5000, "is not a Hugging Face hub name"),
])
def test_what_cannot_be_resolved_offline_is_one_sentence(cache, typed, expected):
    with pytest.raises(hf_cache.HubError) as refused:
        hf_cache.resolve(typed)
    message = str(refused.value)
    assert expected in message and "\n" not in message and len(message) < 400
    if "not in the" in message:
        assert f"{hf_cache.DOWNLOAD_ENV}=1" in message and "downloads are off" in message


def test_a_download_happens_only_where_allowed_and_reports_progress(cache, tiny_llama, monkeypatch):
    import huggingface_hub
    from huggingface_hub.errors import LocalEntryNotFoundError

    calls = []

    def fake_snapshot_download(repo_id, *, cache_dir, local_files_only=False, allow_patterns=None,
                               tqdm_class=None, **_):
        calls.append((repo_id, local_files_only, allow_patterns))
        if local_files_only:
            raise LocalEntryNotFoundError("not cached")
        files = sorted(tiny_llama.iterdir())
        bar = tqdm_class(total=len(files))
        snapshot = lay_out(Path(cache_dir), repo_id, None)
        for file in files:  # as huggingface_hub does: one update of its bar per file fetched
            shutil.copy(file, snapshot / file.name)
            bar.update(1)
        bar.close()
        return str(snapshot)

    monkeypatch.setattr(huggingface_hub, "snapshot_download", fake_snapshot_download)
    # a process whose operator allows downloads never sets huggingface_hub's offline switch (core.io.hf.offline);
    # in the test process an earlier test may have set it before huggingface_hub's first import, which reads it once
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
    with pytest.raises(hf_cache.HubError, match="downloads are off"):
        hf_cache.resolve("NewOrg/new-llama")
    assert [c[1] for c in calls] == [True]  # only the offline look-up
    monkeypatch.setenv(hf_cache.DOWNLOAD_ENV, "1")
    seen = []
    info = hf_cache.resolve("NewOrg/new-llama", progress=lambda done, total: seen.append((done, total)))
    assert info.name == "NewOrg/new-llama" and info.task == "lm"
    n = len(list(tiny_llama.iterdir()))
    assert seen[-1] == (n, n) and [d for d, _ in seen] == list(range(1, n + 1))
    patterns = calls[-1][2]
    assert "*.safetensors" in patterns and not any(p.endswith(".bin") or p == "*" for p in patterns)


def test_hosted_serving_turns_the_cache_off_unless_the_operator_turns_it_on():
    import serve.__main__ as serve_main

    assert serve_main.HF_CACHE_ENV == hf_cache.CACHE_ENV
    source = (ROOT / "serve" / "__main__.py").read_text()
    assert 'env.setdefault(HF_CACHE_ENV, "0")' in source
    assert hf_cache.listing_enabled({}) and not hf_cache.listing_enabled({hf_cache.CACHE_ENV: "0"})
    assert hf_cache.listing_enabled({hf_cache.CACHE_ENV: "1"})
    assert not hf_cache.downloads_allowed({}) and hf_cache.downloads_allowed({hf_cache.DOWNLOAD_ENV: "1"})


def _app(monkeypatch, tmp_path, page: str = "app.py"):
    from streamlit.testing.v1 import AppTest

    empty = tmp_path / "no-checkpoints"
    empty.mkdir(exist_ok=True)
    monkeypatch.setenv("ATTENTION_LAB_CHECKPOINTS", str(empty))
    at = AppTest.from_file(str(ROOT / page), default_timeout=60)
    at.run()
    assert not at.exception, [e.message for e in at.exception]
    return at


def test_the_picker_lists_cached_models_by_hub_name_and_hosting_hides_them(cache, monkeypatch, tmp_path):
    from ui.shared_caches import available_checkpoints, cached_hub_models

    at = _app(monkeypatch, tmp_path, "pages/open_model.py")
    assert at.sidebar.selectbox(key="picker_model").options == ["TinyOrg/tiny-llama"]
    assert any("1 cached model(s) the lab cannot open" in e.label for e in at.expander)
    at.text_input(key="hf_hub_name").input("TinyOrg/not-here").run()
    at.button(key="add_hub").click().run()
    assert [e.value for e in at.error] and "downloads are off" in at.error[0].value
    at.text_input(key="hf_hub_name").input("TinyOrg/tiny-llama").run()  # listed already: selected, and said so
    at.button(key="add_hub").click().run()
    assert not at.exception and at.sidebar.selectbox(key="picker_model").value == "TinyOrg/tiny-llama"
    said = [s.value.replace("\\", "") for s in at.success]
    assert any("TinyOrg/tiny-llama is already in the model picker" in s and "selected now" in s for s in said), said
    monkeypatch.setenv(hf_cache.CACHE_ENV, "0")
    cached_hub_models.clear()
    available_checkpoints.clear()
    at = _app(monkeypatch, tmp_path, "pages/open_model.py")
    assert not at.sidebar.selectbox  # no checkpoints at all: the cache is not listed
    assert any("hub names are off on this server" in i.value for i in at.info)



# --- a hub cache, or one of its snapshots, named as the checkpoints folder (issue 52) ---------------------------

def _picker(monkeypatch, checkpoints: Path):
    from streamlit.testing.v1 import AppTest

    from ui.shared_caches import available_checkpoints, cached_hub_models, checkpoints_folder_note

    for cached in (available_checkpoints, cached_hub_models, checkpoints_folder_note):
        cached.clear()
    monkeypatch.setenv("ATTENTION_LAB_CHECKPOINTS", str(checkpoints))
    at = AppTest.from_file(str(ROOT / "pages" / "home.py"), default_timeout=60).run()
    assert not at.exception, [e.message for e in at.exception]
    return at


def test_a_hub_cache_named_as_the_checkpoints_folder_says_hf_hub_cache_is_the_variable(tmp_path, tiny_llama,
                                                                                        monkeypatch, no_network):
    hub = tmp_path / "hub"
    lay_out(hub, "TinyOrg/tiny-llama", tiny_llama)
    monkeypatch.delenv(hf_cache.CACHE_ENV, raising=False)
    at = _picker(monkeypatch, hub)
    said = [i.value.replace("\\", "") for i in at.sidebar.info]
    assert said == [f"{hub} is a Hugging Face hub cache (models--ORG--NAME folders), not a folder of checkpoints: "
                    f"HF_HUB_CACHE is the variable for a cache (set HF_HUB_CACHE={hub}), and the picker lists its "
                    "models under their hub names."]
    assert "Run `make checkpoints`" not in " ".join(said)
    assert [w.value.replace("\\", "") for w in at.warning] == said  # the page says it too, not "no checkpoints"
    assert hf_cache.misplaced_cache(ROOT / "checkpoints") is None
    assert hf_cache.misplaced_cache(tmp_path / "missing") is None
    assert f"{hf_cache.CACHE_ENV}=1" in hf_cache.misplaced_cache(hub, {hf_cache.CACHE_ENV: "0"})
    monkeypatch.setenv("HF_HUB_CACHE", str(hub))  # as the sentence says: the model is listed by its hub name
    at = _picker(monkeypatch, tmp_path / "no-checkpoints")
    assert at.sidebar.selectbox(key="picker_model").options == ["TinyOrg/tiny-llama"]


def test_a_snapshot_folder_is_listed_by_its_hub_name_not_its_commit(tmp_path, tiny_llama, monkeypatch, no_network):
    from core.io import hf
    from core.io.checkpoint import list_checkpoints

    hub = tmp_path / "hub"
    snapshot = lay_out(hub, "TinyOrg/tiny-llama", tiny_llama)
    assert snapshot.name == COMMIT
    (only,) = list_checkpoints(snapshot)  # the snapshot itself named as the checkpoints folder
    assert (only.name, only.error, only.path) == ("TinyOrg/tiny-llama", None, snapshot)
    repo = hub / "models--TinyOrg--tiny-llama"
    assert [i.name for i in list_checkpoints(repo / "snapshots")] == ["TinyOrg/tiny-llama"]
    assert [i.name for i in list_checkpoints(repo)] == ["TinyOrg/tiny-llama"]
    lay_out(hub, "TinyOrg/tiny-llama", tiny_llama, commit=OLD_COMMIT)
    assert sorted(i.name for i in list_checkpoints(repo / "snapshots")) == [
        f"TinyOrg/tiny-llama@{COMMIT[:7]}", f"TinyOrg/tiny-llama@{OLD_COMMIT[:7]}"]
    assert hf.folder_info(snapshot).name == "TinyOrg/tiny-llama"  # a model folder typed on Open your model
    assert hf.folder_info(tiny_llama).name == "tiny-llama"  # any other folder: its own name
    assert hf.hub_name(tmp_path / "snapshots" / COMMIT) is None  # no models--ORG--NAME above it
    at = _picker(monkeypatch, snapshot)
    assert at.sidebar.selectbox(key="picker_model").options == ["TinyOrg/tiny-llama"]
    assert load(only.path).model is not None
