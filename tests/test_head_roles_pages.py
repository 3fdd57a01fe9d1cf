"""Head roles on the pages (AppTest): the Attention page's maps, sentence and model-view hover; a records file's
three roles and its one sentence; the Training curves page's roles at every kept step and the phase sentence."""

from __future__ import annotations

import numpy as np
from streamlit.testing.v1 import AppTest

from core.io import checkpoint as ckpt
from core.lens import heads
from core.lens import records as rec
from core.train.recipes import ModelShape, train_induction
from core.train.trainer import TrainerConfig
from tests.conftest import ROOT, save_tiny_checkpoint
from tests.test_attention_page import array, charts
from tests.test_records import softmax_maps
from tests.test_records_page import open_records


def _meta(trace: dict) -> dict:
    meta = trace.get("meta")  # for_browser sends a meta object as a one-item list (core/figures/browser.py)
    meta = meta[0] if isinstance(meta, list) and meta else meta
    return meta if isinstance(meta, dict) else {}


def _no_exception(at: AppTest) -> None:
    assert not at.exception, [e.message for e in at.exception]


def test_the_attention_page_maps_each_role_names_the_strongest_heads_and_hovers_them(monkeypatch, tmp_path):
    path = save_tiny_checkpoint(tmp_path / "ckpts" / "tiny-lm.safetensors", "lm")
    monkeypatch.setenv("ATTENTION_LAB_CHECKPOINTS", str(tmp_path / "ckpts"))
    at = AppTest.from_file(str(ROOT / "pages" / "attention.py"), default_timeout=90)
    at.query_params["view"] = "model"
    at.run()
    _no_exception(at)
    before = len(charts(at))
    at.toggle(key="attn_roles_on").set_value(True).run()
    _no_exception(at)
    figures = charts(at)
    assert len(figures) == before + 1
    roles_fig = next(f for f in figures if _meta(f["data"][0]).get("role"))
    loaded = ckpt.load(path)
    expected = heads.head_roles(loaded.model, loaded.tokenizer, stderr=heads.DEFAULT_STDERR)
    for trace in roles_fig["data"]:
        np.testing.assert_allclose(array(trace["z"]), expected.scores[_meta(trace)["role"]], atol=1e-6)
    assert any(expected.sentence() in m.value.replace("\\", "") for m in at.markdown)
    model_view = figures[0]  # drawn first, with each head's role on its hover
    layer, head = 0, 0
    found = expected.role_of(layer, head)
    said = f"{found[0]} head ({found[1]:.2f})" if found else "no clear role"
    assert said in model_view["data"][0]["hovertemplate"]


def test_a_records_file_gets_the_roles_that_need_no_probe_and_one_sentence(monkeypatch, tmp_path):
    save_tiny_checkpoint(tmp_path / "ckpts" / "tiny-lm.safetensors", "lm")
    maps = softmax_maps(2, 1, 3, 5, 5, causal=True).numpy()
    path = rec.save_attention(tmp_path / "mine.npz", [["a", "b", "c", "d", "e"]], list(maps))
    at = open_records(monkeypatch, tmp_path / "ckpts", [path])
    at.toggle(key="rec_roles_on").set_value(True).run()
    _no_exception(at)
    assert any("Induction and duplicate-token scores need" in i.value for i in at.info)
    roles_fig = next(f for f in charts(at) if _meta(f["data"][0]).get("role"))
    assert [_meta(t)["role"] for t in roles_fig["data"]] == list(heads.NO_DESIGNED_INPUT)
    expected = heads.roles_from_attention(maps[:, 0])
    np.testing.assert_allclose(array(roles_fig["data"][0]["z"]), expected.scores["previous-token"], atol=1e-6)


def test_the_curves_page_scores_every_kept_step_and_locates_the_change(monkeypatch, tmp_path):
    folder = tmp_path / "ckpts"
    shape = ModelShape(n_layer=2, n_head=2, n_embd=16, block_size=16, dropout=0.0)
    config = TrainerConfig(max_epochs=3, batch_size=8, learning_rate=3e-3, weight_decay=0.0, decay="mingpt",
                           lr_decay=False, log_every=1, snapshots=3, snapshot_spacing="linear", device="cpu")
    train_induction(str(folder / "induction-tiny.safetensors"), shape, config, segment=(3, 6), epoch_rows=32)
    monkeypatch.setenv("ATTENTION_LAB_CHECKPOINTS", str(folder))
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=90)
    at.query_params["runs"] = "induction-tiny"
    at.run()
    at.switch_page("pages/curves.py").run()
    _no_exception(at)
    assert at.toggle(key="curves_roles_on").value, "on by default for an induction run"
    panel = next(f for f in charts(at) if any(_meta(t).get("kind") == "roles" for t in f["data"]))
    lines = [t for t in panel["data"] if _meta(t).get("kind") == "roles"]
    assert len(lines) == len(heads.ROLES) * 2
    assert list(lines[0]["x"]) == [0, 4, 8, 12]  # the kept steps, then the checkpoint's own
    said = [m.value for m in at.markdown if "The loss" in m.value]
    assert said and ("falls fastest at step" in said[0] or "never falls" in said[0])
