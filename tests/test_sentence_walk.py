"""bench/sentence_walk.py: what a typed sentence passes through, counted from a trace of the Attention page."""

from __future__ import annotations

import pytest

from bench.sentence_walk import ROOT, layer, traced_sentence, walk


def test_walk_counts_files_in_order_and_the_core_functions_pages_call():
    page, views, lens, model = (str(ROOT / p) for p in ("pages/attention.py", "ui/attention_views.py",
                                                          "core/lens/attention.py", "core/model/transformer.py"))
    calls = [(None, page, "<module>"), (page, lens, "run_attention"), (lens, model, "forward"),
             (page, views, "show_single"), (views, lens, "cut_to_window"), (page, lens, "token_chips"),
             (lens, lens, "helper")]
    found = walk(calls)
    assert found["files"] == ["pages/attention.py", "core/lens/attention.py", "core/model/transformer.py",
                              "ui/attention_views.py"]
    assert found["pages"] == ["pages/attention.py", "ui/attention_views.py"]
    # one round trip per core file a page calls; core calling core is no trip
    assert found["doors"] == {"core/lens/attention.py": ["run_attention", "cut_to_window", "token_chips"]}
    assert layer(str(ROOT / "app.py")) == "pages" and layer(str(ROOT / "bench" / "load.py")) is None
    assert layer("/usr/lib/python3/json/__init__.py") is None


def test_a_sentence_typed_on_the_attention_page_is_traced_to_its_figure(monkeypatch, tiny_checkpoints):
    monkeypatch.setenv("ATTENTION_LAB_CHECKPOINTS", str(tiny_checkpoints))
    found = traced_sentence("the cat sat on the mat")
    files = found["files"]
    assert files[0] == "pages/attention.py"
    for expected in ("core/lens/attention.py", "core/lens/trace.py", "core/model/transformer.py",
                     "core/figures/attention.py", "core/figures/browser.py", "ui/display.py"):
        assert expected in files
    assert "run_attention" in found["doors"]["core/lens/attention.py"]  # a new sentence: one forward pass
    assert "for_browser" in found["doors"]["core/figures/browser.py"]
    assert len(files) == len(found["pages"]) + len(found["core"])


def test_a_folder_without_checkpoints_is_one_sentence_not_a_traceback(monkeypatch, tmp_path):
    monkeypatch.setenv("ATTENTION_LAB_CHECKPOINTS", str(tmp_path))
    with pytest.raises(SystemExit, match=r"no sentence box to type into \(No checkpoints found in"):
        traced_sentence("the cat sat")
