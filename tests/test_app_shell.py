from streamlit.testing.v1 import AppTest

from tests.conftest import ROOT

APP = str(ROOT / "app.py")


def _run(monkeypatch, folder):
    monkeypatch.setenv("ATTENTION_LAB_CHECKPOINTS", str(folder))
    at = AppTest.from_file(APP, default_timeout=60)
    at.run()
    assert not at.exception, [e.message for e in at.exception]
    return at


def test_shell_without_checkpoints_says_how_to_make_them(monkeypatch, tmp_path):
    at = _run(monkeypatch, tmp_path / "none")
    texts = " ".join(i.value for i in at.info) + " ".join(w.value for w in at.warning)
    assert "make checkpoints" in texts


def test_shell_with_checkpoints_offers_them_and_shows_a_card(monkeypatch, tiny_checkpoints):
    at = _run(monkeypatch, tiny_checkpoints)
    picker = at.sidebar.selectbox(key="picker_model")
    assert picker.options == ["tiny-birthplace", "tiny-classifier", "tiny-lm"]
    picker.select("tiny-lm").run()
    assert not at.exception
    assert at.query_params["model"] in ("tiny-lm", ["tiny-lm"])
    card = " ".join(t.value for t in at.sidebar.text)
    assert "language model" in card and "alibi" not in card and "learned" in card


def test_model_in_url_is_preselected(monkeypatch, tiny_checkpoints):
    monkeypatch.setenv("ATTENTION_LAB_CHECKPOINTS", str(tiny_checkpoints))
    at = AppTest.from_file(APP, default_timeout=60)
    at.query_params["model"] = "tiny-classifier"
    at.run()
    assert at.sidebar.selectbox(key="picker_model").value == "tiny-classifier"
