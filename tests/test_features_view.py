"""ui.features_view.features_section, drawn by a tiny page under AppTest with tiny checkpoints: without an SAE a
Train control that runs the command in its own process (and shows its one-sentence failure); with an SAE trained
here in seconds, the sentence, the figures, the picker and steering; training off says so and runs nothing."""

from __future__ import annotations

from streamlit.testing.v1 import AppTest

from core.io.checkpoint import load
from core.lens import sae as S
from tests.conftest import ROOT, TINY_CORPUS

PAGE = f"""
import os
import sys
from pathlib import Path
sys.path.insert(0, {str(ROOT)!r})
from core.io.checkpoint import list_checkpoints, load
from ui.features_view import features_section

path = Path(os.environ["FEATURES_CHECKPOINT"])
info = next(i for i in list_checkpoints(path.parent) if i.path == path)
features_section(load(path), info)
"""


def open_page(tmp_path, monkeypatch, checkpoint) -> AppTest:
    monkeypatch.setenv("FEATURES_CHECKPOINT", str(checkpoint))
    script = tmp_path / "features_page.py"
    script.write_text(PAGE)
    at = AppTest.from_file(str(script), default_timeout=120)
    at.run()
    assert not at.exception, at.exception
    return at


def test_without_an_sae_the_train_button_runs_the_command_in_its_own_process(tiny_checkpoints, tmp_path,
                                                                            monkeypatch):
    import ui.features_view as view

    at = open_page(tmp_path, monkeypatch, tiny_checkpoints / "tiny-lm.safetensors")
    assert "No sparse autoencoder" in at.info[0].value
    at.button(key="features_train").click().run()
    assert not at.exception
    job = view.sae_slot().current()
    assert job is not None and job.out.name == "tiny-lm.sae-L1-resid.safetensors"
    job.process.wait(timeout=120)
    at.run()
    at.run()
    # the tiny checkpoint records no training text: the command's own sentence, no traceback
    assert any("records no training text" in e.value for e in at.error), [e.value for e in at.error]


def test_training_off_says_so_and_offers_no_button(tiny_checkpoints, tmp_path, monkeypatch):
    monkeypatch.setenv("ATTENTION_LAB_TRAINING", "0")
    at = open_page(tmp_path, monkeypatch, tiny_checkpoints / "tiny-lm.safetensors")
    assert not [b for b in at.button if b.key == "features_train"]
    assert any("Training is turned off" in c.value for c in at.caption)


def test_with_an_sae_the_section_shows_features_and_steers(tiny_checkpoints, tmp_path, monkeypatch):
    checkpoint = tiny_checkpoints / "tiny-lm.safetensors"
    loaded = load(checkpoint)
    settings = S.SAESettings(layer=1, expansion=2, k=4, steps=30, batch_size=64, buffer_rows=1024)
    S.save_sae(S.sae_path(checkpoint, 1, "resid"), *S.train_sae(loaded, settings, TINY_CORPUS * 30))
    at = open_page(tmp_path, monkeypatch, checkpoint)
    assert not at.error
    text = " ".join(m.value for m in at.markdown)
    assert "leaves" in text and "spliced in" in text and "fires on" in text
    charts = at.get("plotly_chart")
    assert len(charts) == 3  # densities, top contexts, raised / lowered
    at.radio(key="features_order").set_value("by number").run()
    at.number_input(key="features_number").set_value(5).run()
    assert "Feature 5 fires on" in " ".join(m.value for m in at.markdown)
    at.text_input(key="features_prompt").input("Ada <b>was</b>").run()
    at.slider(key="features_scale").set_value(8.0).run()
    at.button(key="features_steer").click().run()
    assert not at.exception and not at.warning
    codes = at.get("code")
    assert len(codes) == 2 and all(c.value.startswith("Ada <b>was</b>") for c in codes)
    assert len(at.get("plotly_chart")) == 4
