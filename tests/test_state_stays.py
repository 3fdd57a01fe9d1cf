"""State that stays (issue 15), through AppTest: the sidebar model across page switches and from the URL,
an added model listed on every page of the session, the probe view from a link."""

from __future__ import annotations

from pathlib import Path

from streamlit.testing.v1 import AppTest

from core.data.world import generate_world, write_world
from tests.conftest import ROOT, save_tiny_checkpoint
from ui.page_state import ProbeState, from_url

APP = str(ROOT / "app.py")


def start(monkeypatch, folder: Path, query: dict[str, str] | None = None, page: str | None = None) -> AppTest:
    monkeypatch.setenv("ATTENTION_LAB_CHECKPOINTS", str(folder))
    at = AppTest.from_file(APP, default_timeout=120)
    for key, value in (query or {}).items():
        at.query_params[key] = value
    if page:
        at.switch_page(page)
    at.run()
    assert not at.exception, [e.message for e in at.exception]
    return at


def picker(at: AppTest):
    return at.sidebar.selectbox(key="picker_model")


def test_the_choice_survives_switching_pages(monkeypatch, tiny_checkpoints):
    at = start(monkeypatch, tiny_checkpoints)
    names = picker(at).options
    picker(at).set_value(names[-1]).run()
    for page in ("pages/curves.py", "pages/anatomy.py", "pages/home.py", "pages/attention.py"):
        at.switch_page(page).run()
        assert not at.exception, (page, [e.message for e in at.exception])
        assert picker(at).value == names[-1], page
        assert at.query_params["model"] in (names[-1], [names[-1]]), page


def test_a_link_picks_the_model_and_an_unknown_one_says_so(monkeypatch, tiny_checkpoints):
    names = sorted(p.stem for p in tiny_checkpoints.glob("*.safetensors"))
    at = start(monkeypatch, tiny_checkpoints, {"model": names[-1]}, "pages/anatomy.py")
    assert picker(at).value == names[-1]
    at = start(monkeypatch, tiny_checkpoints, {"model": "someone-elses-upload"}, "pages/anatomy.py")
    assert picker(at).value == "tiny-lm"  # the page's own default: Anatomy opens on a language model
    notes = [i.value.replace("\\", "") for i in at.sidebar.info]
    assert any("'someone-elses-upload', which is not here" in n for n in notes), notes


def test_an_added_model_is_listed_and_kept_on_every_page(monkeypatch, tiny_checkpoints, tmp_path):
    at = start(monkeypatch, tiny_checkpoints, page="pages/open_model.py")
    data = save_tiny_checkpoint(tmp_path / "mine.safetensors", "lm").read_bytes()
    at.file_uploader(key="upload_checkpoint").upload("mine.safetensors", data)
    at.run()
    at.button(key="add_checkpoint").click().run()
    assert not at.error and picker(at).value == "mine"
    for page in ("pages/attention.py", "pages/curves.py", "pages/home.py"):
        at.switch_page(page).run()
        assert not at.exception, (page, [e.message for e in at.exception])
        assert "mine" in picker(at).options and picker(at).value == "mine", page


def test_a_probe_link_reopens_its_tab_name_and_focus(monkeypatch, tiny_checkpoints, tmp_path):
    world = tmp_path / "world"
    write_world(generate_world(5, n_people=40, n_dev=8, n_test=0), world)
    monkeypatch.setenv("ATTENTION_LAB_WORLD", str(world))
    save_tiny_checkpoint(tiny_checkpoints / "tiny-birthplace-2.safetensors", "birthplace", block_size=64)
    at = start(monkeypatch, tiny_checkpoints, {"tab": "ask", "name": "Where was Ada Lovelace born?",
                                               "focus": "tiny-birthplace-2"}, "pages/probe.py")
    assert at.session_state["probe_tab"] == "Ask"
    assert at.text_input(key="probe_ask").value == "Where was Ada Lovelace born?"
    assert at.selectbox(key="probe_focus").value == "tiny-birthplace-2"
    assert from_url(ProbeState, at.query_params)[0].name == "Where was Ada Lovelace born?"
    at = start(monkeypatch, tiny_checkpoints, {"tab": "dev", "name": "Ada"}, "pages/probe.py")
    assert at.session_state["probe_tab"] == "Dev set"
    assert "name" not in at.query_params and from_url(ProbeState, at.query_params)[0].tab == "dev"
    at = start(monkeypatch, tiny_checkpoints, {"tab": "<script>", "focus": "nobody"}, "pages/probe.py")
    assert at.session_state["probe_tab"] == "Ask" and from_url(ProbeState, at.query_params)[0].tab == "ask"


def test_curves_runs_come_back_after_a_page_switch_and_from_a_link(monkeypatch, tiny_checkpoints):
    at = start(monkeypatch, tiny_checkpoints, page="pages/curves.py")
    runs = at.multiselect(key="curves_runs")
    chosen = [n for n in runs.options if n.startswith("tiny-")][:2]
    runs.set_value(chosen).run()
    at.slider(key="curves_smoothing").set_value(0.9).run()
    at.switch_page("pages/home.py").run()
    at.switch_page("pages/curves.py").run()
    assert not at.exception, [e.message for e in at.exception]
    assert at.multiselect(key="curves_runs").value == chosen
    assert at.slider(key="curves_smoothing").value == 0.9
    link = {k: v[-1] if isinstance(v, list) else v for k, v in at.query_params.items()}
    again = start(monkeypatch, tiny_checkpoints, link, "pages/curves.py")
    assert again.multiselect(key="curves_runs").value == chosen
    assert again.slider(key="curves_smoothing").value == 0.9
