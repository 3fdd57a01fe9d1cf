"""Shared fixtures: tiny models and checkpoints built in the test, never downloaded (the builders live in
bench/tiny_checkpoints.py, which the load test uses too, and are re-exported here)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from bench.tiny_checkpoints import TINY_CORPUS, save_tiny_checkpoint, tiny_checkpoint_folder, tiny_model

# Two test workers share two cores with whatever else runs; one thread each is faster overall.
torch.set_num_threads(1)

ROOT = Path(__file__).resolve().parent.parent
HF_EXTRA = "requirements-hf.txt"
__all__ = ["TINY_CORPUS", "save_tiny_checkpoint", "tiny_model"]


def require_hf_extra():
    """`transformers`, or skip naming the extra that is missing (CI installs it: .ci/run)."""
    return pytest.importorskip("transformers", reason=f"the optional Hugging Face extra is not installed "
                                                       f"(pip install -r {HF_EXTRA})")


@pytest.fixture(autouse=True)
def empty_hugging_face_cache(tmp_path_factory, monkeypatch):
    """Every test sees an empty Hugging Face cache (the picker lists the real one on a local run), unless it
    lays one out itself (tests/test_hf_cache.py)."""
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path_factory.mktemp("empty-hf-cache")))


@pytest.fixture(scope="session")
def _session_edit_cache(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("edit-cache")


@pytest.fixture(autouse=True)
def edit_cache_of_the_test_run(_session_edit_cache, monkeypatch):
    """The rank-one edit's key statistics go to one folder of this test run, never the user's cache folder
    (a test that watches the cache sets ATTENTION_LAB_EDIT_CACHE itself)."""
    monkeypatch.setenv("ATTENTION_LAB_EDIT_CACHE", str(_session_edit_cache))


@pytest.fixture
def tiny_checkpoints(tmp_path: Path) -> Path:
    """A folder with one checkpoint of each task, for app and page tests."""
    return tiny_checkpoint_folder(tmp_path / "ckpts")
