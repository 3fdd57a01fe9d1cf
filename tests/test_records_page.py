"""Attention records on the pages (AppTest): opened on Open your model, drawn by the Attention page's weight-only
views exactly as stored; views that need the model say so in one sentence; bad files are one sentence and
nothing is added or drawn."""

from __future__ import annotations

import pickle
import re
from pathlib import Path

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from core.lens import records as rec
from core.lens.export import export
from tests.conftest import ROOT, save_tiny_checkpoint
from tests.test_attention_page import VIEWS, array, charts, drawn, model_attention
from tests.test_records import BAD_FILES, softmax_maps
from ui.attention_records import NEEDS_MODEL, RECORDS_KEY


def no_exception(at: AppTest) -> None:
    assert not at.exception, [e.message for e in at.exception]


def unescaped(text: str) -> str:
    return re.sub(r"\\(.)", r"\1", text)


def open_records(monkeypatch, folder: Path, files: list[Path]) -> AppTest:
    """The app on Open your model, each file opened on the records tab, then the Attention page."""
    monkeypatch.setenv("ATTENTION_LAB_CHECKPOINTS", str(folder))
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.switch_page("pages/open_model.py")
    at.run()
    for path in files:
        at.file_uploader(key="upload_records").upload(path.name, path.read_bytes())
        at.run()
        at.button(key="open_records").click().run()
        no_exception(at)
        assert not at.error, [e.value for e in at.error]
    at.switch_page("pages/attention.py").run()
    no_exception(at)
    return at


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    save_tiny_checkpoint(tmp_path / "ckpts" / "tiny-lm.safetensors", "lm")
    return tmp_path / "ckpts"


def test_every_weight_view_draws_the_record_and_the_others_say_what_they_need(monkeypatch, tmp_path, folder):
    tokens = [["the", "cat", "sat", "down"], ["a", "dog", "ran"]]
    maps = softmax_maps(2, 2, 3, 4, 4, causal=True).numpy()  # (layers, B, heads, T, T)
    maps[:, 1, :, :3, 3] = 0  # the second sentence is padded: its rows never reach the pad key
    maps[:, 1, :, :3, :3] /= maps[:, 1, :, :3, :3].sum(-1, keepdims=True)
    path = rec.save_attention(tmp_path / "mine.npz", tokens, list(maps), labels=["pos", "neg"],
                              predictions=["pos", "pos"], model_name="my PA2 model")
    at = open_records(monkeypatch, folder, [path])
    assert at.sidebar.selectbox(key="rec_file").value == "mine.npz"
    assert "my PA2 model" in unescaped(at.caption[0].value)
    at.selectbox(key="rec_layer").select(1)
    at.selectbox(key="rec_head").select(2).run()
    (fig,) = charts(at)
    z = array(fig["data"][0]["z"])
    allowed = np.tril(np.ones((4, 4), dtype=bool))
    np.testing.assert_array_equal(z[allowed], maps[1, 0, 2][allowed])
    assert np.isnan(z[~allowed]).all()
    table = at.dataframe[0].value
    assert table.to_dict("records") == [{"record": "label", "value": "pos"}, {"record": "prediction", "value": "pos"}]
    for view in VIEWS:
        at.radio(key="rec_view").set_value(view).run()
        no_exception(at)
        if view == "qk":
            assert not charts(at) and NEEDS_MODEL["qk"] in [i.value for i in at.info]
        elif view == "compare":  # the file's other sentence: different tokens, so no difference map
            assert len(charts(at)) == 2
            assert any("different tokens" in i.value for i in at.info)
        else:
            assert charts(at), view
    at.radio(key="rec_view").set_value("single")
    at.selectbox(key="rec_sentence").select(1).run()
    assert array(charts(at)[0]["data"][0]["z"]).shape == (3, 3)  # cut from the padded 4 x 4
    assert any("Where the next piece comes from needs" in c.value for c in at.caption)
    assert at.get("download_button")  # the CSV export
    at.sidebar.selectbox(key="rec_file").select("").run()  # back to the picked model
    no_exception(at)
    assert at.text_area(key="attn_text").value


def test_the_labs_own_export_opens_identically_and_compares(monkeypatch, tmp_path, folder):
    text = "Ada was born in London."
    export(folder / "tiny-lm.safetensors", text, tmp_path / "ada.npz")
    (tmp_path / "again").mkdir()
    export(folder / "tiny-lm.safetensors", text, tmp_path / "again" / "ada.npz")
    at = open_records(monkeypatch, folder, [tmp_path / "ada.npz", tmp_path / "again" / "ada.npz"])
    assert at.sidebar.selectbox(key="rec_file").value == "ada.npz (2)"
    attention, allowed = model_attention(folder, "tiny-lm", text)
    (fig,) = charts(at)
    z, p = array(fig["data"][0]["z"]), drawn(fig)  # past av.WHOLE_UP_TO tokens the records draw a window too
    cut = allowed[np.ix_(p, p)]
    np.testing.assert_array_equal(z[cut], attention[0, 0][np.ix_(p, p)][cut])
    at.radio(key="rec_view").set_value("compare").run()
    no_exception(at)
    left, right, difference = charts(at)
    assert "Difference, layer 0 head 0 (left minus right)" in difference["layout"]["title"]["text"].replace("<br>", " ")
    assert np.nanmax(np.abs(array(difference["data"][0]["z"]))) == 0.0


@pytest.mark.parametrize("case", ["rows", "nan", "count", "huge", "pickle"])
def test_a_bad_file_is_one_sentence_and_nothing_is_added(monkeypatch, tmp_path, folder, case):
    make, message = BAD_FILES[case]
    monkeypatch.setenv("ATTENTION_LAB_CHECKPOINTS", str(folder))
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.switch_page("pages/open_model.py")
    at.run()
    at.file_uploader(key="upload_records").upload("attention.npz", make())
    at.run()
    at.button(key="open_records").click().run()
    no_exception(at)
    (error,) = at.error
    assert re.search(message, unescaped(error.value))
    assert RECORDS_KEY not in at.session_state and not at.success
    at.switch_page("pages/attention.py").run()
    assert "rec_file" not in [s.key for s in at.sidebar.selectbox]


def test_a_pickle_uploaded_as_npz_is_never_loaded(monkeypatch, tmp_path, folder):
    marker = tmp_path / "ran"

    class RunsCode:
        def __reduce__(self):
            import os

            return (os.mkdir, (str(marker),))
    monkeypatch.setenv("ATTENTION_LAB_CHECKPOINTS", str(folder))
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.switch_page("pages/open_model.py")
    at.run()
    at.file_uploader(key="upload_records").upload("attention.npz", pickle.dumps(RunsCode()))
    at.run()
    at.button(key="open_records").click().run()
    assert "is a Python pickle" in unescaped(at.error[0].value) and not marker.exists()
