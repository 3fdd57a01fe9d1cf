"""`python -m core.lens.export`: the attention page's numbers as .npz/.csv for any model the app opens."""

from __future__ import annotations

import numpy as np
import pytest

from core.io.checkpoint import load
from core.lens import attention as av
from core.lens.export import main
from tests.test_attention_page import array, assert_no_exception, charts, drawn, model_attention, open_page

TEXT = "Ada was born in London."


@pytest.mark.parametrize("name", ["tiny-lm", "tiny-birthplace", "tiny-classifier"])
def test_export_equals_the_model_and_the_core_call_the_page_makes(tiny_checkpoints, tmp_path, name, capsys):
    out = tmp_path / "out.npz"
    assert main([str(tiny_checkpoints / f"{name}.safetensors"), TEXT, "-o", str(out), "--csv"]) == 0
    assert capsys.readouterr().out.strip().endswith(f"; {tmp_path / 'out.csv'}")
    data = np.load(out)
    attention, allowed = model_attention(tiny_checkpoints, name, ids=data["ids"].tolist())
    np.testing.assert_array_equal(data["attention"], attention)
    np.testing.assert_array_equal(data["allowed"], allowed)
    loaded = load(tiny_checkpoints / f"{name}.safetensors")
    run = av.run_attention(loaded.model, loaded.tokenizer, loaded.task, TEXT, loaded.labels)
    assert data["tokens"].tolist() == run.tokens and data["attention"].dtype == np.float32
    assert (tmp_path / "out.csv").read_text() == av.attention_csv(run.attention, run.tokens)


def test_export_and_page_agree(tiny_checkpoints, tmp_path, monkeypatch):
    out = tmp_path / "lm.npz"
    assert main([str(tiny_checkpoints / "tiny-lm.safetensors"), TEXT, "-o", str(out)]) == 0
    data = np.load(out)
    at = open_page(monkeypatch, tiny_checkpoints, model="tiny-lm", text=TEXT, layer="1", head="2")
    assert_no_exception(at)
    (fig,) = charts(at)
    z, p = array(fig["data"][0]["z"]), drawn(fig)  # past av.WHOLE_UP_TO tokens the page draws a window
    shown = ~np.isnan(z)
    np.testing.assert_array_equal(z[shown], data["attention"][1, 2][np.ix_(p, p)][shown])
    np.testing.assert_array_equal(shown, data["allowed"][np.ix_(p, p)])


@pytest.mark.parametrize("args,message", [
    (["missing.safetensors", TEXT, "-o", "o.npz"], "does not exist"),
    (["{ckpt}", "   ", "-o", "o.npz"], "Type a sentence"),
    (["{ckpt}", TEXT, "-o", "o.txt"], "must end in .npz"),
    (["{folder}", TEXT, "-o", "o.npz"], "config.json is not readable JSON"),
])
def test_bad_inputs_are_one_sentence(tiny_checkpoints, tmp_path, monkeypatch, capsys, args, message):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "folder").mkdir()
    (tmp_path / "folder" / "config.json").write_text("{")
    paths = {"{ckpt}": str(tiny_checkpoints / "tiny-lm.safetensors"), "{folder}": "folder"}
    assert main([paths.get(a, a) for a in args]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and err.startswith("error: ")
