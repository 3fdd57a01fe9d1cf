"""AppTest for the two teaching pages: they render with no checkpoints, at extreme settings, and with
the tiny fixture checkpoints, and show the numbers the core computes."""

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from core.lens import playground as pg
from core.lens.anatomy import references
from tests.conftest import ROOT

PLAYGROUND = str(ROOT / "pages/playground.py")
ANATOMY = str(ROOT / "pages/anatomy.py")


def ok(at: AppTest) -> AppTest:
    assert not at.exception, [e.message for e in at.exception]
    return at


def page(monkeypatch, folder, path) -> AppTest:
    monkeypatch.setenv("ATTENTION_LAB_CHECKPOINTS", str(folder))
    at = AppTest.from_file(path, default_timeout=60)
    return ok(at.run())


def editor_key(at: AppTest, table: str) -> str:
    return next(d.key for d in at.data_editor if d.key.startswith(f"pg_{table}_"))


def weights_table(at: AppTest):
    return next(d.value for d in at.dataframe if d.editing_mode == "read_only" and "k_0" in d.value.columns
                and (d.value.sum(axis=1).round(6) == 1).all())


def test_both_pages_are_in_the_app_and_render_without_checkpoints(monkeypatch, tmp_path):
    monkeypatch.setenv("ATTENTION_LAB_CHECKPOINTS", str(tmp_path / "none"))
    at = ok(AppTest.from_file(str(ROOT / "app.py"), default_timeout=60).run())
    for path, title in (("pages/playground.py", "Attention playground"), ("pages/anatomy.py", "Model anatomy")):
        ok(at.switch_page(path).run())
        assert at.title[0].value == title
    guide = " ".join(m.value for m in ok(at.switch_page("pages/home.py").run()).markdown)
    assert "Attention playground" in guide and "Model anatomy" in guide


def test_playground_default_select_puts_almost_all_weight_on_v0(monkeypatch, tmp_path):
    at = page(monkeypatch, tmp_path, PLAYGROUND)
    assert at.selectbox(key="pg_preset").value == "select"
    weights = weights_table(at)
    assert weights.loc["q_0", "k_0"] > 0.99
    assert "plain dot products" in " ".join(c.value for c in at.caption)


@pytest.mark.parametrize("preset", [name for name in pg.PRESETS if name != "select"])
def test_every_preset_renders_at_the_largest_sizes(monkeypatch, tmp_path, preset):
    at = page(monkeypatch, tmp_path, PLAYGROUND)
    at.selectbox(key="pg_preset").select(preset)
    at.slider(key="pg_n").set_value(8)
    at.slider(key="pg_d").set_value(8)
    ok(at.run())
    assert len(at.data_editor) == 3
    if preset == "average-two":
        weights = weights_table(at)
        assert abs(weights.loc["q_0", "k_0"] - 0.5) < 1e-3 and abs(weights.loc["q_0", "k_1"] - 0.5) < 1e-3


def test_playground_extremes_small_sizes_beta_and_scaling(monkeypatch, tmp_path):
    at = page(monkeypatch, tmp_path, PLAYGROUND)
    for n, d, beta, scaled in ((1, 1, 0.0, False), (8, 1, 50.0, True), (8, 3, 50.0, False), (1, 8, 0.0, True)):
        at.slider(key="pg_n").set_value(n)
        at.slider(key="pg_d").set_value(d)
        at.slider(key="pg_beta").set_value(beta)
        at.toggle(key="pg_scaled").set_value(scaled)
        ok(at.run())
    at.slider(key="pg_n").set_value(8)
    at.slider(key="pg_d").set_value(3)
    ok(at.run())
    assert any("least squares" in w.value for w in at.warning)  # n > d: only approximate


def test_playground_all_zero_keys_and_empty_cells(monkeypatch, tmp_path):
    at = page(monkeypatch, tmp_path, PLAYGROUND)
    at.selectbox(key="pg_preset").select("blank")
    ok(at.run())
    weights = weights_table(at)
    assert np.allclose(weights, 1 / 3)  # all-zero K: uniform
    # Seed edits the way the browser sends them: a key row zeroed out and an emptied query cell.
    at.selectbox(key="pg_preset").select("select")
    ok(at.run())
    at.session_state[editor_key(at, "K")] = {
        "edited_rows": {i: {"x0": 0.0, "x1": 0.0, "x2": 0.0} for i in range(3)},
        "added_rows": [], "deleted_rows": []}
    at.session_state[editor_key(at, "Q")] = {"edited_rows": {0: {"x1": None}}, "added_rows": [],
                                             "deleted_rows": []}
    ok(at.run())
    assert np.allclose(weights_table(at), 1 / 3)
    assert any("count as 0" in w.value for w in at.warning)


def test_playground_runs_the_second_tab_only_when_open_and_keeps_both_tabs_values(monkeypatch, tmp_path):
    """A visit draws the first tab and computes nothing of the second (issue 45: a page switch costs one tab);
    flipping between the tabs keeps the first tab's edited table and the second tab's sliders."""
    calls = []
    experiment = pg.noisy_keys_experiment
    monkeypatch.setattr(pg, "noisy_keys_experiment", lambda *a: calls.append(a) or experiment(*a))
    at = page(monkeypatch, tmp_path, PLAYGROUND)
    assert at.data_editor and not any("setup" in d.value.columns for d in at.dataframe)
    assert not calls and not [s for s in at.slider if s.key.startswith("heads_")]
    before = weights_table(at)
    at.session_state[editor_key(at, "K")] = {"edited_rows": {i: {"x0": 0.0, "x1": 0.0, "x2": 0.0} for i in range(3)},
                                             "added_rows": [], "deleted_rows": []}
    ok(at.run())
    edited = weights_table(at)
    assert np.allclose(edited, 1 / 3) and not np.allclose(before, edited)  # all-zero K: uniform
    at.session_state["pg_tab"] = "One head vs two heads"
    ok(at.run())
    assert any("setup" in d.value.columns for d in at.dataframe)
    ok(at.slider(key="heads_n").set_value(6).run())
    at.session_state["pg_tab"] = "Attention by hand"
    ok(at.run())
    assert not [s for s in at.slider if s.key.startswith("heads_")]
    assert np.allclose(weights_table(at), edited)  # the edit is still there
    at.session_state["pg_tab"] = "One head vs two heads"
    ok(at.run())
    assert at.slider(key="heads_n").value == 6  # and the slider too


def test_two_heads_extremes(monkeypatch, tmp_path):
    monkeypatch.setenv("ATTENTION_LAB_CHECKPOINTS", str(tmp_path))
    at = AppTest.from_file(PLAYGROUND, default_timeout=60)
    at.session_state["pg_tab"] = "One head vs two heads"
    ok(at.run())
    summary = next(d.value for d in at.dataframe if "setup" in d.value.columns)
    single = summary[(summary.quantity == "weight on v_a") & (summary.setup == "one head")]["std"].item()
    two = summary[(summary.quantity == "weight on v_a") & (summary.setup == "two heads")]["std"].item()
    assert single > two
    settings = [(8, 8, 0.0, 0.0, 10), (8, 8, 1.0, 50.0, 5000), (2, 2, 0.0, 50.0, 10), (2, 8, 1.0, 0.0, 5000)]
    for n, d, alpha, beta, samples in settings:
        at.slider(key="heads_n").set_value(n)
        at.slider(key="heads_d").set_value(d)
        at.slider(key="heads_alpha").set_value(alpha)
        at.slider(key="heads_beta").set_value(beta)
        at.slider(key="heads_samples").set_value(samples)
        ok(at.run())
    at.slider(key="heads_n").set_value(8)
    at.slider(key="heads_d").set_value(2)
    ok(at.run())
    assert any("n ≤ d" in w.value for w in at.warning)


@pytest.mark.parametrize("preset", list(references.COURSE_PRESETS))
def test_anatomy_presets_without_checkpoints(monkeypatch, tmp_path, preset):
    at = page(monkeypatch, tmp_path / "none", ANATOMY)
    assert at.selectbox(key="anatomy_source").options == [references.COURSE_PRESETS[p].label
                                                          for p in references.COURSE_PRESETS]
    at.selectbox(key="anatomy_source").set_value(preset)
    ok(at.run())
    stated = references.COURSE_PRESETS[preset].stated_parameters
    if stated is not None:
        assert at.metric[0].value == f"{stated:,}"
        assert any(f"states {stated:,} parameters; the count matches" in c.value for c in at.caption)
    table = at.dataframe[0].value
    assert (table["formula = count"] == "✓").all()
    assert table["parameters"].sum() == int(at.metric[0].value.replace(",", ""))


def test_anatomy_masks_with_empty_long_and_odd_input(monkeypatch, tmp_path):
    at = page(monkeypatch, tmp_path / "none", ANATOMY)
    for text, length in (("", 1), ("<script>x</script> " * 20, 48), ("hi", 48), ("x", 1)):
        at.text_input(key="anatomy_text").set_value(text)
        at.slider(key="anatomy_length").set_value(length)
        ok(at.run())
    at.text_input(key="anatomy_text").set_value("")
    ok(at.run())
    assert any("empty" in w.value for w in at.warning)


def test_anatomy_of_each_tiny_checkpoint(monkeypatch, tiny_checkpoints, tmp_path):
    from tests.conftest import save_tiny_checkpoint

    save_tiny_checkpoint(tiny_checkpoints / "tiny-synth.safetensors", "lm", attention="synthesizer")
    save_tiny_checkpoint(tiny_checkpoints / "tiny-sinusoidal.safetensors", "lm", positional="sinusoidal")
    at = page(monkeypatch, tiny_checkpoints, ANATOMY)
    for name in ("tiny-lm", "tiny-synth", "tiny-sinusoidal", "tiny-classifier"):
        at.sidebar.selectbox(key="picker_model").select(name)
        ok(at.run())
        assert at.selectbox(key="anatomy_source").value == "selected checkpoint"
        table = at.dataframe[0].value
        assert (table["formula = count"] == "✓").all()
        assert any("add up to the model's total" in c.value for c in at.caption)
        assert table["parameters"].sum() == int(at.metric[0].value.replace(",", ""))
        if name == "tiny-sinusoidal":
            assert table.set_index("module").loc["pos", "parameters"] == 0
    at.text_input(key="anatomy_text").set_value("Ada zzz")  # classifier: word tokenizer, unknown word
    ok(at.run())
    assert any("not in the vocabulary" in w.value for w in at.warning)


def test_least_squares_helper_follows_edited_keys_and_sizes(monkeypatch, tmp_path):
    at = page(monkeypatch, tmp_path, PLAYGROUND)
    at.selectbox(key="pg_solve_index").select(2)
    ok(at.run())
    assert "weight 0.99" in " ".join(c.value for c in at.caption)  # 3 independent keys: exact
    at.slider(key="pg_n").set_value(2)  # index 2 no longer exists
    ok(at.run())
    assert at.selectbox(key="pg_solve_index").options == ["0", "1"]
