"""Issue 41: the params box's help said "Up to 512 MB" and the uploader "1GB per file". Every uploader's limit is
written on it the way Streamlit's frontend writes it (ported below), and its help text says the same number; the
model uploads' limit is the Streamlit config's server.maxUploadSize (what the server accepts), read in one place."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from core.io import uploads
from core.lens.probe import corpus
from tests.conftest import ROOT

UNITS = ["gb", "mb", "kb", "b"]


def frontend_size(size: float, unit: str, base: int, rounding: int = 0) -> str:
    """streamlit/frontend getSizeDisplay: a size over half the next unit is written in the next unit."""
    r = UNITS.index(unit)
    if r and size > base / 2:
        return frontend_size(size / base, UNITS[r - 1], base, rounding)
    return f"{size:.{rounding}f}{unit.upper()}"


def written_on_box(limit_mb: int) -> set[str]:
    """'N MB per file' as the uploader shows it; the frontend counts in 1000s or 1024s depending on the OS."""
    return {frontend_size(limit_mb * base * base, "b", base) for base in (1000, 1024)}


def config_ceiling() -> int:
    with (ROOT / ".streamlit" / "config.toml").open("rb") as handle:
        return tomllib.load(handle)["server"]["maxUploadSize"]


def test_the_model_upload_limits_are_the_configs_ceiling():
    assert uploads.CHECKPOINT_LIMIT_MB == uploads.PARAMS_LIMIT_MB == config_ceiling()
    assert written_on_box(config_ceiling()) == {f"{config_ceiling()}MB"}
    assert frontend_size(512 * 1000 * 1000, "b", 1000) == "1GB"  # the "1GB per file" for 512 MB


def _boxes(monkeypatch, tmp_path: Path, tiny: Path) -> list:
    monkeypatch.setenv("ATTENTION_LAB_CHECKPOINTS", str(tiny))
    monkeypatch.setenv(corpus.WORLD_ENV, str(ROOT / "data" / "knowledge"))
    found = []
    for page, setup in (("pages/open_model.py", {}), ("pages/curves.py", {}),
                        ("pages/probe.py", {"probe_tab": "Dev set", "probe_dev_source": "upload"})):
        at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
        at.run()
        at.switch_page(page)
        for key, value in setup.items():
            at.session_state[key] = value
        at.run()
        assert not at.exception, [e.message for e in at.exception]
        found += [(page, box.proto) for box in at.get("file_uploader")]
    return found


@pytest.mark.slow
def test_every_uploader_says_one_number(monkeypatch, tmp_path, tiny_checkpoints):
    boxes = _boxes(monkeypatch, tmp_path, tiny_checkpoints)
    assert len(boxes) >= 5  # params, corpus, checkpoint, curves, probe questions
    for page, proto in boxes:
        limit = proto.max_upload_size_mb or config_ceiling()
        assert limit <= config_ceiling(), (page, proto.label)  # the server accepts what the box offers
        said = re.search(r"up to (\d+) MB", proto.help, re.IGNORECASE)
        assert said, (page, proto.label, proto.help)
        assert written_on_box(limit) == {f"{said.group(1)}MB"}, (page, proto.label, limit, proto.help)


@pytest.mark.parametrize("what", ["records file", "params file", "checkpoint", "corpus", "vocabulary"])
def test_an_empty_upload_is_named_once(what):
    """The walk-through read "empty.npz is empty; choose the records file file again."."""

    class Empty:
        name, size = "empty.npz", 0

        def getvalue(self) -> bytes:
            return b""

    with pytest.raises(uploads.UploadError) as err:
        uploads.read_upload(Empty(), 10, what)
    said = str(err.value)
    assert said == f"empty.npz is empty; choose the {what} again." and "file file" not in said
