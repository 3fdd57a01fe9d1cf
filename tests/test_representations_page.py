"""The Representations page under AppTest (tiny checkpoints, and the bundled birthplace model for the world), its
bad inputs (one sentence each), the link it keeps, and its figures read through fig.data."""

from __future__ import annotations

import json

import numpy as np
from streamlit.testing.v1 import AppTest

from core.figures import representations as figures
from core.lens import probes
from tests.conftest import ROOT

PAGE = str(ROOT / "pages" / "representations.py")


def open_page(monkeypatch, folder, **params) -> AppTest:
    monkeypatch.setenv("ATTENTION_LAB_CHECKPOINTS", str(folder))
    at = AppTest.from_file(PAGE, default_timeout=90)
    for key, value in params.items():
        at.query_params[key] = value
    at.run()
    assert not at.exception, [e.message for e in at.exception]
    return at


def charts(at: AppTest) -> list[dict]:
    return [json.loads(c.proto.spec) for c in at.get("plotly_chart")]


def said(at: AppTest) -> str:
    kinds = ("warning", "info", "markdown", "caption")
    return " ".join(str(e.value).replace("\\", "") for kind in kinds for e in at.get(kind))


def test_the_world_on_the_bundled_model(monkeypatch):
    at = open_page(monkeypatch, ROOT / "checkpoints", model="birth-vanilla-pretrained")
    text = said(at)
    assert "The country becomes decodable at the last piece of" in text and "Warning" not in text
    (chart,) = charts(at)
    names = [trace.get("name") for trace in chart["data"]]
    assert names[:4] == ["probe", "shuffled labels", "majority", "embedding only"]
    assert at.get("plotly_chart") and at.dataframe[0].value.shape[0] == 3  # embedding + 2 blocks
    at.selectbox(key="rep_at").set_value("name").run()
    assert "Warning: the embedding alone already decodes it" in said(at)
    assert at.query_params["rep_at"] in ("name", ["name"])
    at.selectbox(key="rep_label").set_value("place")
    at.selectbox(key="rep_at").set_value("prompt").run()
    (chart,) = charts(at)  # the birthplace: 144 classes; a space is the next piece, so no logit lens (one sentence)
    assert "logit lens" not in [trace.get("name") for trace in chart["data"]] and "the same for every label" in said(at)


def test_a_bundled_file_and_the_map_on_a_tiny_model(monkeypatch, tiny_checkpoints):
    at = open_page(monkeypatch, tiny_checkpoints, model="tiny-lm", rep_source="file", rep_view="map",
                   rep_colour="prediction", rep_layer="1")
    assert "logit lens" not in json.dumps(charts(at))
    (chart,) = charts(at)
    assert [trace["name"] for trace in chart["data"]] == ["right", "wrong"]
    assert sum(len(trace["customdata"]) for trace in chart["data"]) == 200  # names_test.tsv
    assert "UMAP" in said(at) and "not installed" in said(at)
    assert at.selectbox(key="rep_layer").value == 1


def test_a_classifier_says_the_lens_is_not_available(monkeypatch, tiny_checkpoints):
    at = open_page(monkeypatch, tiny_checkpoints, model="tiny-classifier", rep_label="place")
    assert "logit lens is not available" in said(at)
    assert charts(at)  # the probes still run


def test_bad_uploads_are_one_sentence(monkeypatch, tiny_checkpoints):
    """One class, labels missing, fewer examples than folds, characters the model does not know: each is a sentence
    of the page (the core functions are called as the page calls them: AppTest cannot upload a file)."""
    cases = {"A\tAda\nA\tAlan\nA\tAda Lovelace\nA\tTuring\nA\tx\n": "at least two classes",
             "A\tAda\n\tAlan\n": "has no label",
             "A\tAda\nB\tAlan\nA\tTuring\n": "fewer than the 5 folds"}
    for text, sentence in cases.items():
        try:
            source = probes.file_source(text, "mine.tsv")
            probes.check_labels([e.label for e in source.examples], probes.FOLDS)
        except probes.ProbeError as exc:
            assert sentence in str(exc) and str(exc).count(". ") <= 1
        else:
            raise AssertionError(text)
    at = open_page(monkeypatch, tiny_checkpoints, model="tiny-lm", rep_source="upload")
    assert "Upload a file to probe it." in said(at) and not charts(at)


def test_unknown_characters_are_said(monkeypatch, tiny_checkpoints):
    at = open_page(monkeypatch, tiny_checkpoints, model="tiny-lm")  # the world's names: accents the model lacks
    assert "does not know" in said(at)


def test_the_accuracy_figure_reads_through_fig_data():
    fig = figures.probe_accuracy(["embedding", "after block 0"], [0.3, 0.8], [0.25, 0.7], [0.35, 0.9], [0.1, 0.12],
                                 [0.05, 0.1], [0.15, 0.14], 0.16, lens=[0.0, 0.4], control_name="shuffled labels")
    probe, control, majority, embedding, lens = fig.data
    assert list(probe.y) == [0.3, 0.8] and np.allclose(probe.error_y.array, [0.05, 0.1])
    assert np.allclose(probe.error_y.arrayminus, [0.05, 0.1])
    assert control.name == "shuffled labels" and list(control.y) == [0.1, 0.12]
    assert list(majority.y) == [0.16, 0.16] and list(embedding.y) == [0.3, 0.3] and list(lens.y) == [0.0, 0.4]
    assert fig.layout.yaxis.range == (0, 1.02)


def test_the_map_reads_through_fig_data():
    xy = np.array([[0, 0], [1, 1], [2, 2], [3, 3]])
    fig = figures.embedding_map(xy, ["b", "a", "b", "<i>"], ["t0", "t1", "t2", "<b>x</b>"])
    assert [t.name for t in fig.data] == ["&lt;i&gt;", "a", "b"]
    b = fig.data[2]
    assert list(b.x) == [0, 2] and [c[0] for c in b.customdata] == [0, 2]
    assert fig.data[0].customdata[0][2] == "&lt;b&gt;x&lt;/b&gt;"  # user text escaped
    fig = figures.embedding_map(xy, ["a"] * 4, ["t"] * 4, correct=[True, False, True, True])
    assert [t.name for t in fig.data] == ["right", "wrong"] and [c[0] for c in fig.data[1].customdata] == [1]
    points = probes.project_2d(np.random.default_rng(0).normal(size=(50, 8)) * np.arange(1, 9))
    assert points.xy.shape == (50, 2) and points.explained[0] >= points.explained[1] > 0


def test_the_features_tab_needs_no_label_file_and_draws_the_sae_section(monkeypatch, tiny_checkpoints):
    """?rep_view=features: the sparse autoencoder's section (ui.features_view), without reading any label source or
    running a probe; with no SAE beside the model it offers to train one (training allowed here)."""
    monkeypatch.setenv("ATTENTION_LAB_TRAINING", "1")
    at = open_page(monkeypatch, tiny_checkpoints, model="tiny-lm", rep_view="features")
    assert [t.label for t in at.tabs] == ["Probes", "Embedding map", "Features"]
    assert "Train an SAE" in [b.label for b in at.button]
    assert not at.get("plotly_chart")  # no probe ran
    assert not any(s.label.startswith("Label") for s in at.selectbox)
