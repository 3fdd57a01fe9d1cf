"""Extrapolation scores recorded in a checkpoint: the same numbers a fresh computation gives, read back only
for the text and the weights they were measured on, never trusted when damaged, and shown by the page on
its first visit."""

import hashlib
import json
import math

import pytest
import torch
from streamlit.testing.v1 import AppTest

from core.io import checkpoint
from core.lens.extrapolation.recorded import RECORD_KEY, covers, record, recorded_scores
from core.lens.extrapolation.report import REPRODUCTION_TOLERANCE
from core.lens.extrapolation.scoring import (
    DEFAULT_LIMITS,
    EXTRAPOLATION_FACTORS,
    EXTRAPOLATION_PROTOCOLS,
    dev_text_from_metadata,
    score_length,
)
from core.model.tokenizer import CharTokenizer
from core.train.extrapolation import main
from tests.conftest import ROOT, tiny_model

TEXT = ("Ada Lovelace was born in London . Alan Turing was born in Maida Vale . "
        "Grace Hopper was born in New York . ") * 12
TOKENIZER = CharTokenizer.from_corpus(TEXT)
BUNDLED = [ROOT / "checkpoints" / f"lm-{p}.safetensors" for p in ("learned", "sinusoidal", "alibi", "rope")]


def family(folder, schemes=("learned", "alibi")):
    """Tiny LMs with block 8 on a corpus they record (dev split: the last half)."""
    folder.mkdir(exist_ok=True)
    corpus = folder / "corpus.txt"
    corpus.write_text(TEXT, encoding="utf-8")
    data = [{"path": str(corpus), "sha256": hashlib.sha256(corpus.read_bytes()).hexdigest()}]
    paths = []
    for scheme in schemes:
        torch.manual_seed(len(paths))
        model = tiny_model(TOKENIZER.vocab_size, positional=scheme, block_size=8, n_layer=2)
        paths.append(checkpoint.save(folder / f"lm-{scheme}.safetensors", model, TOKENIZER, "lm", data=data,
                                     extra={"val_fraction": "0.5"}))
    return paths


def dev(path) -> str:
    return dev_text_from_metadata(checkpoint.read_metadata(path)).text


def test_recorded_scores_are_what_a_fresh_computation_gives(tmp_path):
    path = family(tmp_path, ("alibi",))[0]
    before = checkpoint.load(path)
    run = record(path)
    after = checkpoint.load(path)
    for name, tensor in before.model.state_dict().items():  # tensors unchanged, metadata kept
        assert torch.equal(tensor, after.model.state_dict()[name])
    assert {k: v for k, v in after.metadata.items() if k != RECORD_KEY} == \
        {k: v for k, v in before.metadata.items()}
    scores = recorded_scores(after.metadata, dev(path), after.model)
    assert covers(scores, 8, EXTRAPOLATION_FACTORS, EXTRAPOLATION_PROTOCOLS,
                     DEFAULT_LIMITS["windows"], DEFAULT_LIMITS["sliding"])
    assert len(scores) == 2 * len(EXTRAPOLATION_FACTORS) + 1  # + the whole-split check
    # an independent computation of three units: the stream cut by hand, score_length called directly
    ids = torch.tensor(TOKENIZER.encode(dev(path)))
    for protocol, factor, cap in (("windows", 1.0, None), ("windows", 2.0, 4096), ("sliding", 0.5, 512)):
        length = round(8 * factor)
        fresh = score_length(after.model, ids if cap is None else ids[: cap + 1], length, protocol, factor)
        stored = scores[(protocol, length, cap)]
        assert stored.loss == pytest.approx(fresh.loss, abs=1e-9) and stored.tokens == fresh.tokens
        assert (stored.position_loss is None) == (fresh.position_loss is None)
    assert run.checks["lm-alibi"] == pytest.approx(scores[("windows", 8, None)].loss, abs=1e-12)


def test_a_learned_table_records_its_honest_not_applicable(tmp_path):
    path = family(tmp_path, ("learned",))[0]
    record(path)
    loaded = checkpoint.load(path)
    scores = recorded_scores(loaded.metadata, dev(path), loaded.model)
    long = scores[("windows", 32, 4096)]
    assert not long.applicable and math.isnan(long.loss) and "no positions past 8" in long.reason


def test_other_text_or_other_weights_get_no_recorded_numbers(tmp_path):
    path = family(tmp_path, ("alibi",))[0]
    record(path)
    loaded = checkpoint.load(path)
    assert recorded_scores(loaded.metadata, dev(path) + " ", loaded.model) == {}
    with torch.no_grad():
        next(loaded.model.parameters()).add_(1e-3)  # as if trained further with the old metadata copied
    assert recorded_scores(loaded.metadata, dev(path), loaded.model) == {}


@pytest.mark.parametrize("damage", [
    "not json", "[]", '{"version": 99}', "1e999999",
    lambda r: {**r, "scores": "many"},
    lambda r: {**r, "scores": [{**r["scores"][0], "protocol": "stride"}]},
    lambda r: {**r, "scores": [{**r["scores"][0], "length": -3}]},
    lambda r: {**r, "scores": [{**r["scores"][0], "loss": "low"}]},
    lambda r: {**r, "scores": [{**r["scores"][0], "loss": float("nan"), "reason": None}]},
    lambda r: {**r, "scores": [{**r["scores"][0], "position_loss": [1.0]}]},
    lambda r: {**r, "scores": [{**r["scores"][0], "tokens": True, "cap": "all"}]},
    lambda r: {**r, "scores": [7]},
], ids=["text", "list", "version", "huge-number", "scores-str", "protocol", "length", "loss-str", "nan-loss",
        "positions", "types", "entry-int"])
def test_a_damaged_record_is_ignored_not_an_error(tmp_path, damage):
    path = family(tmp_path, ("alibi",))[0]
    record(path)
    loaded = checkpoint.load(path)
    raw = loaded.metadata[RECORD_KEY]
    damaged = damage if isinstance(damage, str) else json.dumps(damage(json.loads(raw)))
    assert recorded_scores({**loaded.metadata, RECORD_KEY: damaged}, dev(path), loaded.model) == {}
    assert recorded_scores({RECORD_KEY: 5}, dev(path), loaded.model) == {}


def test_update_metadata_refuses_what_describes_the_tensors(tmp_path):
    path = family(tmp_path, ("rope",))[0]
    with pytest.raises(checkpoint.CheckpointError, match="describes the tensors"):
        checkpoint.update_metadata(path, {"config": "{}"})
    (tmp_path / "plain.safetensors").write_bytes(b"\x02\x00\x00\x00\x00\x00\x00\x00{}")
    with pytest.raises(checkpoint.CheckpointError, match="no Attention Lab metadata"):
        checkpoint.update_metadata(tmp_path / "plain.safetensors", {"note": "x"})


def test_record_cli_says_what_it_stored_and_refuses_in_one_line(tmp_path, capsys):
    path = family(tmp_path, ("rope",))[0]
    assert main(["record", str(path), "--device", "cpu"]) == 0
    out = capsys.readouterr().out
    assert "lm-rope: recorded 12 scores (12 applicable) and the 1x check (dev loss" in out
    checkpoint.save(tmp_path / "bare.safetensors", tiny_model(TOKENIZER.vocab_size), TOKENIZER, "lm")
    assert main(["record", str(tmp_path / "bare.safetensors")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "records no training corpus" in err


def open_extrapolation_tab(folder, monkeypatch) -> AppTest:
    from ui.page_state import POSITIONAL_SECTION_TITLES

    monkeypatch.setenv("ATTENTION_LAB_CHECKPOINTS", str(folder))
    at = AppTest.from_file(str(ROOT / "pages" / "positional.py"), default_timeout=120)
    at.session_state["pos_tab"] = POSITIONAL_SECTION_TITLES["extrapolation"]
    at.run()
    assert not at.exception, at.exception
    return at


def test_the_page_shows_recorded_results_before_any_click(tmp_path, monkeypatch):
    paths = family(tmp_path / "family", ("learned", "alibi", "rope", "sinusoidal"))
    at = open_extrapolation_tab(tmp_path / "family", monkeypatch)
    assert not at.table, "nothing recorded yet: results wait for the button"
    for path in paths:
        record(path)
    at = open_extrapolation_tab(tmp_path / "family", monkeypatch)
    table = at.table[-1].value
    assert len(table) == 4 * 2 * len(EXTRAPOLATION_FACTORS)
    captions = [c.value for c in at.caption]
    assert any(c.startswith("All 52 results were read from the checkpoints") for c in captions)  # 4 x (12 + 1)
    assert any(c.startswith("Checked: at 1x over the whole dev split") for c in captions)
    # other settings: the recorded units are read, the new ones computed, and the caption counts both
    at.multiselect(key="pos_factors").set_value([1.0, 2.0])
    at.number_input(key="pos_max_sliding").set_value(100)
    at.button[0].click().run()
    assert not at.exception, at.exception
    captions = [c.value for c in at.caption]
    assert any(c.startswith("12 of 20 results were read from the checkpoints' records; this run read about")
               for c in captions), captions


@pytest.mark.skipif(not all(p.exists() for p in BUNDLED), reason="the bundled LM set is not trained yet")
@pytest.mark.parametrize("path", BUNDLED, ids=lambda p: p.stem)
def test_every_bundled_lm_carries_the_pages_default_run(path):
    loaded = checkpoint.load(path)
    scores = recorded_scores(loaded.metadata, dev(path), loaded.model)
    block = loaded.config.block_size
    assert covers(scores, block, EXTRAPOLATION_FACTORS, EXTRAPOLATION_PROTOCOLS,
                     DEFAULT_LIMITS["windows"], DEFAULT_LIMITS["sliding"]), \
        "re-run: python -m core.train.extrapolation record checkpoints/lm-*.safetensors"
    ids = torch.tensor(loaded.tokenizer.encode(dev(path))[: DEFAULT_LIMITS["windows"] + 1])
    fresh = score_length(loaded.model, ids, block, "windows", 1.0)
    # recorded where `make checkpoints` ran (CUDA when present): equal within the trainer check's tolerance
    assert scores[("windows", block, DEFAULT_LIMITS["windows"])].loss == pytest.approx(
        fresh.loss, abs=REPRODUCTION_TOLERANCE)


def _stored_losses(scheme: str, protocol: str) -> dict[float, float]:
    raw = checkpoint.read_metadata(ROOT / "checkpoints" / f"lm-{scheme}.safetensors")["extrapolation"]
    record = json.loads(raw) if isinstance(raw, str) else raw
    return {e["factor"]: e["loss"] for e in record["scores"] if e["protocol"] == protocol and e["cap"] is not None}


@pytest.mark.skipif(not all(p.exists() for p in BUNDLED), reason="the bundled LM set is not trained yet")
def test_the_stored_runs_show_what_the_longer_than_trained_tab_teaches():
    """Issue 36: the piece-level family keeps the lesson: learned positions stop at the training length,
    sinusoidal ones degrade past it, ALiBi holds (every number is one the page shows on its first visit;
    the test above re-measures one per file)."""
    for protocol in ("windows", "sliding"):
        learned, sinusoidal, alibi = (_stored_losses(s, protocol) for s in ("learned", "sinusoidal", "alibi"))
        assert math.isfinite(learned[1.0]) and all(math.isnan(v) for f, v in learned.items() if f > 1)
        assert all(sinusoidal[f] > sinusoidal[1.0] + 1.0 for f in (1.5, 2.0, 3.0, 4.0))
        assert all(alibi[f] < alibi[1.0] + 0.05 for f in (1.5, 2.0, 3.0, 4.0))
