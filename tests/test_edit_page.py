"""The Birthplace probe's Edit tab through AppTest: run two methods side by side, keep an edit, undo it; the
shared cached model and every file stay as they were; the sweep; a model that cannot be edited."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from streamlit.testing.v1 import AppTest

from core.figures.edit import site_sweep_panels
from core.lens.edit.key_statistics import CACHE_ENV
from core.lens.probe import corpus
from tests.conftest import ROOT

APP = str(ROOT / "app.py")
BUNDLED = ROOT / "checkpoints" / "birth-vanilla-pretrained.safetensors"


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    out = tmp_path / "ckpts"
    out.mkdir()
    shutil.copy(BUNDLED, out / BUNDLED.name)
    return out


def open_edit_tab(monkeypatch, checkpoints: Path) -> AppTest:
    monkeypatch.setenv("ATTENTION_LAB_CHECKPOINTS", str(checkpoints))
    monkeypatch.delenv(corpus.WORLD_ENV, raising=False)
    at = AppTest.from_file(APP, default_timeout=240)
    at.run()
    at.switch_page("pages/probe.py")
    at.session_state["probe_tab"] = "Edit"
    at.run()
    assert not at.exception, [e.message for e in at.exception]
    return at


def hashes(paths) -> dict[Path, str]:
    return {p: hashlib.sha256(p.read_bytes()).hexdigest() for p in paths}


def test_run_keep_undo_and_nothing_on_disk_changes(monkeypatch, folder):
    watched = [folder / BUNDLED.name, *sorted((ROOT / "data" / "knowledge").glob("*"))]
    before = hashes(watched)
    at = open_edit_tab(monkeypatch, folder)
    assert any("causal trace of this question restores" in c.value for c in at.caption)
    at.selectbox(key="edit_place").set_value("Berlin")
    at.button(key="edit_run").click().run()
    assert not at.exception, [e.message for e in at.exception]
    said = [m.value.replace("\\", "") for m in at.markdown]
    assert any(s.startswith("Before: 'Where was") for s in said)
    assert sum(s.startswith("After ") for s in said) == 2  # rank-one and finetuning, side by side
    assert any("the neighbours best" in s for s in said)
    table = at.dataframe[0].value
    assert list(table.columns) == ["measure", "rank-one (ROME)", "finetuning (FT-L)"]
    assert list(table["measure"])[:3] == ["answer after", "P(answer) after", "efficacy"]
    # keep the rank-one edit: this session's copy changes, the shared model does not
    at.button(key="edit_keep_rank-one").click().run()
    assert not at.exception, [e.message for e in at.exception]
    sessions = at.session_state["edit_sessions"]
    (kept,) = sessions.values()
    assert len(kept.edits) == 1
    from core.io.checkpoint import load

    fresh = load(folder / BUNDLED.name).model.state_dict()
    edited = kept.model.state_dict()
    assert not all(torch.equal(fresh[k], edited[k]) for k in fresh)
    # the model every session shares (the page's own cache entry) is another object, bitwise the file's
    from ui.shared_caches import load_cached

    path = folder / BUNDLED.name
    shared = load_cached(str(path), path.stat().st_mtime)
    assert shared.model is not kept.model
    assert all(torch.equal(fresh[k], v) for k, v in shared.model.state_dict().items())
    at.button(key="edit_undo").click().run()
    assert not at.exception
    assert not kept.edits and all(torch.equal(fresh[k], kept.model.state_dict()[k]) for k in fresh)
    assert hashes(watched) == before
    assert sorted(p.name for p in folder.iterdir()) == [BUNDLED.name]  # only the checkpoint: nothing written beside it


def test_a_read_only_checkpoints_folder_works_and_nothing_is_written_there(monkeypatch, folder, tmp_path):
    """A class's checkpoints/ may be read-only: the rank-one edit keeps its key statistics in the user's cache. (Root
    ignores the modes; the folder's listing still shows that nothing was written there.)"""
    import stat

    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "user-cache"))
    checkpoint = folder / BUNDLED.name
    before = hashes([checkpoint])
    checkpoint.chmod(stat.S_IRUSR | stat.S_IRGRP | stat.S_IROTH)
    folder.chmod(stat.S_IRUSR | stat.S_IXUSR | stat.S_IRGRP | stat.S_IXGRP)
    try:
        at = open_edit_tab(monkeypatch, folder)
        at.selectbox(key="edit_place").set_value("Berlin")
        at.button(key="edit_run").click().run()
        assert not at.exception, [e.message for e in at.exception]
        assert sum(m.value.replace("\\", "").startswith("After ") for m in at.markdown) == 2
        assert not [e.value for e in at.error], [e.value for e in at.error]
        assert sorted(p.name for p in folder.iterdir()) == [BUNDLED.name]
        assert hashes([checkpoint]) == before
        assert len(list((tmp_path / "user-cache").glob("*.key_moments.safetensors"))) == 1
    finally:
        folder.chmod(stat.S_IRWXU)
        checkpoint.chmod(stat.S_IRUSR | stat.S_IWUSR)


def test_a_typed_name_that_is_a_bad_question_is_one_sentence(monkeypatch, folder):
    at = open_edit_tab(monkeypatch, folder)
    at.text_input(key="edit_typed").set_value("x" * 400).run()
    assert not at.exception
    assert at.warning and "\n" not in at.warning[0].value


def test_the_sweep_figure_reads_its_panels():
    efficacy = np.array([[1.0, 0.9], [1.0, np.nan]])
    impossible = np.array([[False, False], [False, True]])
    fig = site_sweep_panels({"efficacy": efficacy, "unchanged": efficacy * 0.9, "traced": efficacy / 2},
                            ["last position", "name's last piece"], impossible)
    assert len(fig.data) == 6
    assert np.isnan(fig.data[0].z[1][1]) and fig.data[0].z[0][1] == 0.9
    assert fig.data[1].z[1][1] == 1.0 and np.isnan(fig.data[1].z[0][0])
    assert fig.data[2].z[1][0] == pytest.approx(0.9) and fig.data[4].z[0][0] == 0.5
    assert fig.data[0].text[0][1] == "90%"
    notes = [a.text for a in fig.layout.annotations]
    assert notes[:3] == ["efficacy", "unchanged", "traced"]  # one panel under another: each title its own row
    assert any(n.startswith("grey: cannot reach the answer") for n in notes)  # the grey cells are said
    domains = [fig.layout[f"yaxis{k or ''}"].domain for k in (0, 2, 3)]
    assert all(a[0] > b[1] for a, b in zip(domains, domains[1:], strict=False))  # stacked, not side by side


def test_a_kept_edit_answers_on_every_tab_with_a_mark_and_an_undo(monkeypatch, folder):
    """The walk-through: after "Keep the rank-one edit" the Ask tab still answered from the file. Now Ask and
    the Errors page read the session's edited model, a mark says so above the tabs, and its Undo undoes it."""
    at = open_edit_tab(monkeypatch, folder)
    person = at.selectbox(key="edit_person").value
    at.selectbox(key="edit_place").set_value("Berlin")
    at.multiselect(key="edit_methods").set_value(["rank-one"])
    at.button(key="edit_run").click().run()
    assert not at.exception, [e.message for e in at.exception]
    def marks() -> list[str]:
        return [w.value.replace("\\", "") for w in at.warning if "Edited" in w.value]

    assert not marks()  # nothing kept yet: no mark
    at.button(key="edit_keep_rank-one").click().run()
    name = BUNDLED.name.removesuffix(".safetensors")
    (mark,) = marks()
    assert "1 kept edit" in mark and "Berlin" in mark and "rank-one" in mark and name in mark

    def ask_answer() -> str:
        at.session_state["probe_tab"] = "Ask"
        at.session_state["probe_ask"] = person
        at.run()
        assert not at.exception, [e.message for e in at.exception]
        table = next(d.value for d in at.dataframe if "greedy answer" in d.value.columns)
        return str(table.loc[table["model"] == name, "greedy answer"].iloc[0])

    assert ask_answer() == "Berlin"  # the session's edited model answers on Ask
    at.button(key=f"probe_edited_{name}_undo").click().run()
    assert not at.exception and not marks()
    assert ask_answer() != "Berlin"  # undone from the mark: the file's answer again


def test_the_edit_tabs_choices_survive_a_visit_to_another_tab(monkeypatch, folder):
    """The walk-through: MEMIT dropped out of the method choice after a tab switch (a lazy tab's widgets are not
    drawn, so Streamlit forgot their values); the person, the place and the methods come back as chosen."""
    at = open_edit_tab(monkeypatch, folder)
    people = at.selectbox(key="edit_person").options
    at.selectbox(key="edit_person").set_value(people[2])
    at.selectbox(key="edit_place").set_value("Berlin")
    at.multiselect(key="edit_methods").set_value(["rank-one", "memit"]).run()
    at.session_state["probe_tab"] = "Ask"
    at.run()
    assert not at.exception, [e.message for e in at.exception]
    at.session_state["probe_tab"] = "Edit"
    at.run()
    assert not at.exception and not at.warning, [w.value for w in at.warning]
    assert at.multiselect(key="edit_methods").value == ["rank-one", "memit"]
    assert at.selectbox(key="edit_person").value == people[2] and at.selectbox(key="edit_place").value == "Berlin"
