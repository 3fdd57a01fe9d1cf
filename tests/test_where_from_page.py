"""The "Where from" views through Streamlit's AppTest: the probe's Ask and Dev set tabs, the Attention page; their
options in the URL; CSV downloads; bad input as one sentence."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from core.lens.probe import corpus
from core.lens.where_from import dev_set
from tests.conftest import ROOT
from ui.page_state import WhereFromState, from_url, to_url

APP = str(ROOT / "app.py")
KNOWLEDGE = ROOT / "data" / "knowledge"
MODEL = "birth-vanilla-pretrained"


@pytest.fixture
def bundled_one(tmp_path) -> Path:
    """The bundled vanilla model alone (a link, not a copy), so the page compares one model."""
    folder = tmp_path / "ckpts"
    folder.mkdir()
    os.symlink(ROOT / "checkpoints" / f"{MODEL}.safetensors", folder / f"{MODEL}.safetensors")
    return folder


@pytest.fixture
def small_world(tmp_path) -> Path:
    """The knowledge world with a 5-question dev file, so the Dev set tab is quick."""
    folder = tmp_path / "world"
    folder.mkdir()
    for name in ("wiki.txt", "birth_places_train.tsv"):
        shutil.copy(KNOWLEDGE / name, folder / name)
    lines = (KNOWLEDGE / "birth_dev.tsv").read_text(encoding="utf-8").splitlines()[:5]
    (folder / "birth_dev.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return folder


def open_probe(monkeypatch, checkpoints: Path, world: Path, **params) -> AppTest:
    monkeypatch.setenv("ATTENTION_LAB_CHECKPOINTS", str(checkpoints))
    monkeypatch.setenv(corpus.WORLD_ENV, str(world))
    at = AppTest.from_file(str(ROOT / "pages" / "probe.py"), default_timeout=180)
    for key, value in params.items():
        at.query_params[key] = value
    at.run()
    assert not at.exception, [e.message for e in at.exception]
    return at


def chart_titles(at: AppTest) -> list[str]:
    out = []
    for chart in at.get("plotly_chart"):
        title = json.loads(chart.proto.spec)["layout"].get("title") or {}
        out.append((title.get("text", "") if isinstance(title, dict) else str(title)).replace("<br>", " "))
    return out


def param(at: AppTest, key: str):
    value = at.query_params.get(key)
    return value[-1] if isinstance(value, list) else value


def test_the_ask_tab_draws_where_from_from_a_link(monkeypatch, bundled_one, small_world):
    at = open_probe(monkeypatch, bundled_one, small_world, tab="ask", name="Michelle Lefort", wf="1",
                    wf_samples="2", wf_seed="5")
    assert at.toggle(key="wf_ask_open").value is True
    assert at.number_input(key="wf_ask_samples").value == 2 and at.number_input(key="wf_ask_seed").value == 5
    titles = chart_titles(at)
    assert any("by layer" in t for t in titles) and any("what writes" in t for t in titles)
    assert any("restoring one state (probability)" in t for t in titles) and any("salience" in t for t in titles)
    body = " ".join(m.value for m in at.markdown)  # the findings are body text, not grey captions
    assert "first becomes the top piece" in body or "never becomes the top piece" in body
    assert "frozen at its value in this pass" in body and "brings back the most" in body
    assert "brings back the most" not in " ".join(c.value for c in at.caption)
    labels = [b.proto.label for b in at.get("download_button")]
    assert {"Logit lens (CSV)", "Attribution (CSV)", "Causal trace (CSV)", "Input attribution (CSV)"} <= set(labels)
    at.selectbox(key="wf_ask_corruption").set_value("swap").run()
    assert not at.exception, [e.message for e in at.exception]
    assert param(at, "wf_corrupt") == "swap" and param(at, "wf") == "1" and param(at, "wf_samples") == "2"
    assert any("logit difference" in t for t in chart_titles(at))
    at.toggle(key="wf_ask_open").set_value(False).run()
    assert param(at, "wf") is None and not any("what writes" in t for t in chart_titles(at))


def test_a_fabricated_name_traces_the_models_own_answer(monkeypatch, bundled_one, small_world):
    at = open_probe(monkeypatch, bundled_one, small_world, tab="ask", name="Mara Dunn", wf="1", wf_samples="1")
    assert any("own first piece" in i.value for i in at.info)
    assert any("what writes" in t for t in chart_titles(at))


def test_the_dev_tab_computes_the_averaged_grids_once_and_keeps_them(monkeypatch, tmp_path, small_world):
    folder = tmp_path / "copy"
    folder.mkdir()
    shutil.copy(ROOT / "checkpoints" / f"{MODEL}.safetensors", folder)  # the sidecar is written beside it
    at = open_probe(monkeypatch, folder, small_world, tab="dev", wf="1", wf_samples="2")
    assert any("Not computed yet" in c.value for c in at.caption)
    at.button(key="wf_dev_run").click().run()
    assert not at.exception, [e.message for e in at.exception]
    assert dev_set.sidecar_path(folder / f"{MODEL}.safetensors").is_file()
    assert any("mean over people" in t for t in chart_titles(at))
    assert any("brings back the most" in m.value for m in at.markdown)
    again = open_probe(monkeypatch, folder, small_world, tab="dev", wf="1")
    assert not any("Not computed yet" in c.value for c in again.caption)  # read back, not recomputed
    assert any("mean over people" in t for t in chart_titles(again))


def test_the_attention_page_traces_the_next_piece(monkeypatch, tiny_checkpoints):
    monkeypatch.setenv("ATTENTION_LAB_CHECKPOINTS", str(tiny_checkpoints))
    at = AppTest.from_file(str(ROOT / "pages" / "attention.py"), default_timeout=60)
    at.query_params["wf"] = "1"
    at.run()
    assert not at.exception, [e.message for e in at.exception]
    assert at.toggle(key="wf_next_open").value is True
    titles = chart_titles(at)
    assert any("by layer" in t for t in titles) and any("what writes" in t for t in titles)
    assert any("next piece after the sentence" in c.value for c in at.caption)
    assert any(t.endswith("probability of the next piece by layer") for t in titles)  # not "first piece"


def test_the_url_codec_keeps_only_what_differs_and_survives_bad_values():
    state = WhereFromState(open=True, corruption="swap", samples=3, seed=42)
    params = to_url(state)
    assert params == {"wf": "1", "wf_corrupt": "swap", "wf_samples": "3", "wf_seed": "42"}
    assert from_url(WhereFromState, params)[0] == state
    assert to_url(WhereFromState()) == {}
    bad = {"wf": "maybe", "wf_corrupt": "<script>", "wf_samples": "999", "wf_seed": "-1"}
    assert from_url(WhereFromState, bad)[0] == WhereFromState()


def test_each_number_for_one_answer_is_named_for_what_it_is(monkeypatch, bundled_one, small_world):
    """Issue 41: the table's "confidence", the chart's probability and the logit lens's value are three
    quantities; each view names its own in the column or axis title."""
    at = open_probe(monkeypatch, bundled_one, small_world, tab="ask", name="Michelle Lefort", wf="1",
                    wf_samples="1")
    table = at.dataframe[0]
    columns = json.loads(table.proto.columns)
    assert columns["confidence"]["label"] == "P(whole answer)", columns
    specs = {json.loads(c.proto.spec)["layout"]["title"]["text"].replace("<br>", " "): json.loads(c.proto.spec)
             for c in at.get("plotly_chart")}
    bars = next(s for t, s in specs.items() if "candidates" in t)
    assert bars["layout"]["xaxis"]["title"]["text"].replace("<br>", " ") == "share among the candidates"
    lens_title, lens = next((t, s) for t, s in specs.items() if "by layer" in t)
    assert "probability of the first piece" in lens_title
    assert lens["data"][0]["colorbar"]["title"]["text"].startswith("probability of the first piece: ")
    # the numbers really differ as the names say: the chart's share is the table's probability over the list's sum
    answer, confidence = table.value.at[0, "greedy answer"], float(table.value.at[0, "confidence"])
    bar = bars["data"][0]
    labels = [t for t in bars["layout"]["yaxis"]["ticktext"]]
    share = next(x for x, label in zip(bar["x"], labels) if label.startswith(answer))
    assert share >= confidence - 1e-9


@pytest.fixture
def bundled_kept(tmp_path) -> Path:
    """The bundled vanilla model with its kept dev-set averages beside it (links, not copies)."""
    folder = tmp_path / "kept"
    folder.mkdir()
    for suffix in (".safetensors", ".where_from.json"):
        os.symlink(ROOT / "checkpoints" / f"{MODEL}{suffix}", folder / f"{MODEL}{suffix}")
    return folder


def body_text(at: AppTest) -> str:
    return " ".join(m.value.replace("\\", "") for m in at.markdown)


def test_a_question_whose_grid_cannot_teach_says_so_and_opens_the_views_that_do(monkeypatch, bundled_kept):
    """Issue 41: the probe's opening question (the first dev person) traced with noise brings back "1%" over an
    almost white grid, in a grey caption. The page says in body text what that means and offers, one click away,
    the dev-set average; for a name with a same-length namesake, the name swap too."""
    at = open_probe(monkeypatch, bundled_kept, KNOWLEDGE, tab="ask", wf="1")
    first = (KNOWLEDGE / "birth_dev.tsv").read_text(encoding="utf-8").splitlines()[0].split("\t")[0]
    assert prompt_question(at) == first
    text = body_text(at)
    assert "**This question's grid teaches little.** No single restored state brings back more than" in text, text
    assert not any("No single restored state" in c.value for c in at.caption)
    assert "What does teach: open the average over the dev people" in text
    assert at.button(key="wf_ask_teach__open_dev_average")
    at.button(key="wf_ask_teach__open_dev_average").click().run()
    assert not at.exception, [e.message for e in at.exception]
    assert at.session_state["probe_tab"] == "Dev set" and at.toggle(key="wf_dev_open").value is True
    assert any("mean over people" in t for t in chart_titles(at))  # the kept averages, read at once

    at = open_probe(monkeypatch, bundled_kept, KNOWLEDGE, tab="ask", wf="1", name="Nela Švecová")
    assert "This question's grid teaches little." in body_text(at)
    at.button(key="wf_ask_teach__use_swap").click().run()
    assert not at.exception, [e.message for e in at.exception]
    assert at.selectbox(key="wf_ask_corruption").value == "swap"
    assert "teaches little" not in body_text(at) and "brings back the most" in body_text(at)


def prompt_question(at: AppTest) -> str:
    line = next(m.value.replace("\\", "") for m in at.markdown if m.value.startswith("**Prompt:**"))
    return line.removeprefix("**Prompt:** ").split(" :violet-badge")[0]


def test_the_csv_downloads_are_made_when_clicked_and_hold_the_views_numbers(monkeypatch, bundled_one, small_world):
    # issue 45: four tables built and sent with every new name were work no one asked for; each download button now
    # gets a callable, which Streamlit runs on the click. Here the callables are run as a click would.
    import csv
    import io

    import streamlit

    made: dict[str, object] = {}
    real = streamlit.download_button

    def keep(label, data, *args, **kwargs):
        made[label] = data
        return real(label, data, *args, **kwargs)

    monkeypatch.setattr(streamlit, "download_button", keep)
    at = open_probe(monkeypatch, bundled_one, small_world, tab="ask", name="Michelle Lefort", wf="1", wf_samples="1")
    assert not at.exception
    wanted = {"Logit lens (CSV)": "layer", "Attribution (CSV)": "logit", "Causal trace (CSV)": "share recovered",
              "Input attribution (CSV)": "integrated"}
    for label, column in wanted.items():
        assert callable(made[label]), label  # nothing built until the click
        rows = list(csv.DictReader(io.StringIO(made[label]().decode() if isinstance(made[label](), bytes)
                                               else made[label]())))
        assert rows and any(column in name for name in rows[0]), (label, list(rows[0]))
