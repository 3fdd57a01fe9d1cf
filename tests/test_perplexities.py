"""One quantity on three pages (issue 63 item 7): lm-learned's held-out perplexity is 2.678 on Training curves,
2.637 on Errors and 2.7876 on the positional page's 1x row. Each number is reproduced here from what it scores,
and each page says in one sentence what its number is and why the others differ."""

from __future__ import annotations

import math

import pytest
from streamlit.testing.v1 import AppTest

from core.data.datasets import LanguageModelDataset
from core.io import checkpoint as ckpt
from core.lens import perplexities as pp
from core.lens.errors import inputs, lm
from tests.conftest import ROOT

APP = str(ROOT / "app.py")
WIKI = ROOT / "data" / "knowledge" / "wiki.txt"


@pytest.fixture(scope="module")
def learned():
    return ckpt.load(ROOT / "checkpoints" / "lm-learned.safetensors")


def said(at: AppTest) -> str:
    return " ".join(e.value for e in [*at.caption, *at.markdown]).replace("\\", "")


def test_the_three_numbers_come_from_what_each_page_scores(learned):
    dev = pp.trainer_dev("lm-learned", learned.metadata, learned.history)
    assert dev.epoch == 40 and f"{dev.perplexity:.4g}" == "2.678" and dev.file == "wiki.txt" and dev.block == 128
    text = WIKI.read_text(encoding="utf-8")
    split, skipped = pp.trainer_split(text, dev.fraction)
    trainer = LanguageModelDataset(split, learned.tokenizer, dev.block)  # the trainer's own held-out windows
    windows, predictions = pp.window_predictions(len(trainer.ids), dev.block)
    assert (windows, predictions) == (len(trainer), len(trainer) * dev.block) == (161, 20_608)
    held_out = inputs.read_bundled(inputs.bundled_files(ROOT / "data", "lm", learned.metadata)[0])
    assert held_out.text == split[skipped:] and skipped > 0  # Errors leaves the cut line out
    errors = lm.score_lm(learned.model, learned.tokenizer, [(held_out.name, held_out.text)], "lm-learned")
    assert f"{errors.perplexity:.4g}" == "2.637"
    sentence = pp.errors_sentence(dev, errors.perplexity, 20_659, len(trainer.ids), skipped)
    assert sentence.startswith("This 2.637 scores the whole lines of the last 10% of wiki.txt")
    assert f"scores 20,608 predictions of the same part in 161 whole windows: it begins with the last {skipped} " \
           "characters of a line cut in two" in sentence
    assert f"its last {len(trainer.ids) - 1 - 20_608} pieces fill no window" in sentence
    positional = pp.positional_sentence([pp.AtOne(dev, 2.7876237, 4096, 32, dev.perplexity)])
    assert positional.startswith("At 1x (windows of 128) the table's numbers (lm-learned 2.7876) score only the "
                                 "first 4,096 predictions (32 windows) of the dev split, the last 10% of wiki.txt")
    assert "each gives back the trainer's last-epoch value on Training curves: lm-learned 2.6780." in positional
    assert "(40; its lowest, 2.383, was after epoch 21)" in pp.curves_sentence(dev)


def test_not_a_language_model_with_a_held_out_split_has_no_sentence():
    names = ckpt.load(ROOT / "checkpoints" / "names-pretrained.safetensors")
    assert pp.trainer_dev("names-pretrained", names.metadata, names.history) is None
    assert pp.trainer_dev("x", {"task": "lm", "val_fraction": "0", "data": [{"path": "a"}]}, []) is None


def test_each_page_says_what_its_number_is(monkeypatch):
    monkeypatch.setenv("ATTENTION_LAB_CHECKPOINTS", str(ROOT / "checkpoints"))
    at = AppTest.from_file(APP, default_timeout=180)
    at.query_params.update(runs="lm-learned", metric="perplexity")
    at.run()
    at.switch_page("pages/curves.py")
    at.run()
    assert not at.exception, [e.message for e in at.exception]
    assert "lm-learned's held-out perplexity 2.678 (loss 0.9851) is the trainer's after its last epoch (40" in said(at)
    at = AppTest.from_file(APP, default_timeout=180)
    at.query_params.update(model="lm-learned")
    at.run()
    at.switch_page("pages/errors.py")
    at.run()
    assert not at.exception, [e.message for e in at.exception]
    assert "This 2.637 scores the whole lines of the last 10% of wiki.txt" in said(at)
    assert "The trainer's 2.678 (Training curves, epoch 40) scores 20,608 predictions" in said(at)
    page = AppTest.from_file(str(ROOT / "pages" / "positional.py"), default_timeout=300)
    page.session_state["pos_tab"] = "Longer than trained"
    page.run()
    assert not page.exception, page.exception
    assert "lm-learned 2.7876" in said(page) and "score only the first 4,096 predictions (32 windows)" in said(page)
    assert "each gives back the trainer's last-epoch value on Training curves" in said(page)
    assert math.isfinite(float(page.table[-1].value.reset_index()["perplexity"].iloc[0]))
