"""Length extrapolation: one number per (variant, length, protocol), exact protocols, honest n/a."""

import hashlib
import math
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from core.data.datasets import LanguageModelDataset
from core.io import checkpoint
from core.io.loaded import CheckpointInfo, LoadedCheckpoint
from core.lens.extrapolation.plan import planned_work, run_extrapolation, text_scorer
from core.lens.extrapolation.report import (
    extrapolation_rows,
    extrapolation_summary,
    format_extrapolation_table,
    recorded_val_loss,
    reproduction_note,
)
from core.lens.extrapolation.scoring import (
    EXTRAPOLATION_FACTORS,
    EXTRAPOLATION_PROTOCOLS,
    ExtrapolationError,
    LengthScore,
    VariantExtrapolation,
    dev_text_from_metadata,
    score_length,
    token_stream,
)
from core.model.tokenizer import CharTokenizer
from core.train.extrapolation import main, parse_factors
from core.train.trainer import evaluate_loss
from tests.conftest import tiny_model

TEXT = ("Ada Lovelace was born in London . Alan Turing was born in Maida Vale . "
        "Grace Hopper was born in New York . ") * 2
SCHEMES = ("learned", "sinusoidal", "alibi", "rope")
TOKENIZER = CharTokenizer.from_corpus(TEXT)


def variant(positional: str, block_size: int = 8):
    return tiny_model(TOKENIZER.vocab_size, positional=positional, block_size=block_size, n_layer=2)


def naive_sliding_loss(model, ids: torch.Tensor, length: int) -> float:
    """The definition, one token at a time: predict ids[t+1] from ids[max(0, t-L+1) .. t]."""
    total = 0.0
    for t in range(ids.numel() - 1):
        logits, _ = model(ids[max(0, t - length + 1): t + 1].view(1, -1))
        total += F.cross_entropy(logits[0, -1:].double(), ids[t + 1: t + 2]).item()
    return total / (ids.numel() - 1)


@pytest.mark.parametrize("positional", SCHEMES)
def test_sliding_window_equals_the_naive_per_token_loop(positional):
    model = variant(positional)
    ids, _ = token_stream(TOKENIZER, TEXT, max_tokens=40)
    assert ids.numel() == 41
    for length in (3, 8) + (() if positional == "learned" else (16,)):
        score = score_length(model, ids, length, "sliding", batch_size=7)
        assert score.tokens == 40 and score.applicable
        assert score.windows == 1 + max(0, 40 - length)
        assert score.loss == pytest.approx(naive_sliding_loss(model, ids, length), abs=1e-6)


def test_windows_at_the_block_size_is_the_trainers_validation_loss():
    model = variant("alibi")
    ids, _ = token_stream(TOKENIZER, TEXT)
    score = score_length(model, ids, 8, "windows", batch_size=3)
    expected = evaluate_loss(model, LanguageModelDataset(TEXT, TOKENIZER, 8), batch_size=5)
    assert score.loss == pytest.approx(expected["loss"], abs=1e-6)
    assert score.tokens == (len(TEXT) - 1) // 8 * 8
    # the per-position curve averages to the same loss (every position is scored once per window)
    assert sum(score.position_loss) / 8 == pytest.approx(score.loss, abs=1e-9)


def test_windows_equal_a_naive_loop_over_windows():
    model = variant("rope")
    ids, _ = token_stream(TOKENIZER, TEXT, max_tokens=50)
    score = score_length(model, ids, 12, "windows")
    losses = []
    for k in range(50 // 12):
        logits, _ = model(ids[12 * k: 12 * k + 12].view(1, -1))
        losses.append(F.cross_entropy(logits[0].double(), ids[12 * k + 1: 12 * k + 13], reduction="none"))
    assert score.loss == pytest.approx(torch.cat(losses).mean().item(), abs=1e-6)
    assert score.position_loss == pytest.approx(torch.stack(losses).mean(0).tolist(), abs=1e-6)


def in_memory(name: str, model) -> tuple[CheckpointInfo, LoadedCheckpoint]:
    """A model as the runner takes it, without a file."""
    return CheckpointInfo(Path(f"{name}.safetensors"), name, 0, 0.0), LoadedCheckpoint(model, TOKENIZER, {}, Path())


def test_one_number_per_variant_length_and_protocol_and_learned_stops_at_its_table():
    ids, _ = token_stream(TOKENIZER, TEXT, max_tokens=60)
    progress_calls = []
    run = run_extrapolation([in_memory(f"tiny-{p}", variant(p)) for p in SCHEMES], ids.numel() - 1,
                               EXTRAPOLATION_FACTORS, EXTRAPOLATION_PROTOCOLS, {}, False, text_scorer(TEXT),
                               lambda fraction, what: progress_calls.append((fraction, what)))
    results = run.variants
    assert [r.name for r in results] == [f"tiny-{p}" for p in SCHEMES] and not run.checked
    for result in results:
        assert len(result.scores) == len(EXTRAPOLATION_FACTORS) * len(EXTRAPOLATION_PROTOCOLS)
        keys = {(s.protocol, s.factor) for s in result.scores}
        assert len(keys) == len(result.scores)
        assert [s.length for s in result.scores[:6]] == [4, 8, 12, 16, 24, 32]
    learned = results[0]
    for s in learned.scores:
        if s.length <= 8:
            assert s.applicable and math.isfinite(s.loss)
        else:  # never a clamped number: not applicable, with the reason
            assert not s.applicable and math.isnan(s.loss) and math.isnan(s.perplexity)
            assert s.reason.startswith("no positions past 8") and s.tokens == 0
    for result in results[1:]:
        assert all(s.applicable and math.isfinite(s.perplexity) for s in result.scores)
    fractions = [f for f, _ in progress_calls]
    assert fractions == sorted(fractions) and fractions[-1] == 1.0  # moves within units, ends at the total
    assert len(progress_calls) > len(SCHEMES) * 12 + 1
    rows = extrapolation_rows(results)
    assert len(rows) == 4 * 12 and {r["variant"] for r in rows} == {"learned", "sinusoidal", "ALiBi", "RoPE"}
    table = format_extrapolation_table(results)
    assert "n/a = learned: no positions past 8" in table and table.count("n/a") >= 8


def test_a_length_longer_than_the_text_is_not_applicable_for_windows_but_fine_for_sliding():
    model = variant("alibi")
    ids, _ = token_stream(TOKENIZER, TEXT, max_tokens=10)
    assert not score_length(model, ids, 16, "windows").applicable
    sliding = score_length(model, ids, 16, "sliding")
    assert sliding.applicable and sliding.tokens == 10 and sliding.windows == 1


def test_the_summary_is_generated_from_the_numbers():
    def fake(name, positional, ppl, max_length=None):
        scores = [LengthScore("sliding", f, int(8 * f), math.log(p) if p else math.nan, 10, 1,
                                 None if p else "no positions past 8") for f, p in ppl.items()]
        return VariantExtrapolation(name, positional, 8, max_length, scores)

    variants = [fake("a", "learned", {1.0: 5.0, 4.0: None}, 8), fake("b", "sinusoidal", {1.0: 4.0, 4.0: 9.0}),
                fake("c", "alibi", {1.0: 4.5, 4.0: 4.2})]
    text = " ".join(extrapolation_summary(variants))
    assert "at 4x the training length (32 tokens), dev perplexity: ALiBi 4.200, sinusoidal 9.000" in text
    assert "lowest: ALiBi" in text
    assert "no number for learned at 4x (no positions past 8)" in text
    assert "sinusoidal 4.000 -> 9.000 (+125.0%)" in text and "ALiBi 4.500 -> 4.200 (-6.7%)" in text
    variants[2].scores[1].loss = math.log(10.0)  # if ALiBi were worse, the page would say so
    assert "lowest: sinusoidal" in " ".join(extrapolation_summary(variants))


def test_dev_text_is_the_training_validation_split(tmp_path):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text(TEXT, encoding="utf-8")
    sha = hashlib.sha256(corpus.read_bytes()).hexdigest()
    meta = {"data": [{"path": str(corpus), "sha256": sha}], "val_fraction": "0.25"}
    dev = dev_text_from_metadata(meta, "m")
    assert dev.text == TEXT[int(len(TEXT) * 0.75):] and dev.notes == []
    assert "the last 25%" in dev.source
    corpus.write_text(TEXT + "x", encoding="utf-8")
    assert "has changed" in dev_text_from_metadata(meta, "m").notes[0]
    with pytest.raises(ExtrapolationError, match="not on this machine"):
        dev_text_from_metadata({"data": [{"path": str(tmp_path / "gone.txt")}]}, "m")
    with pytest.raises(ExtrapolationError, match="records no training corpus"):
        dev_text_from_metadata({}, "m")


def test_bad_settings_are_one_sentence():
    assert parse_factors("0.5, 1,2x") == [0.5, 1.0, 2.0]
    for bad in ("", "a", "-1", "0", "nan"):
        with pytest.raises(ExtrapolationError):
            parse_factors(bad)
    with pytest.raises(ExtrapolationError, match="fewer than two tokens"):
        token_stream(TOKENIZER, "A")
    encoder = tiny_model(TOKENIZER.vocab_size, causal=False)
    with pytest.raises(ExtrapolationError, match="not a causal language model"):
        score_length(encoder, torch.tensor([2, 3, 4]), 2, "sliding")


def _save_lm(path, positional, corpus=None):
    model = variant(positional)
    data = [{"path": str(corpus), "sha256": hashlib.sha256(corpus.read_bytes()).hexdigest()}] \
        if corpus else []
    return checkpoint.save(path, model, TOKENIZER, "lm", data=data, extra={"val_fraction": "0.5"})


def test_cli_prints_one_row_per_checkpoint_and_na_for_the_learned_table(tmp_path, capsys):
    corpus = tmp_path / "wiki.txt"
    corpus.write_text(TEXT, encoding="utf-8")
    paths = [str(_save_lm(tmp_path / f"lm-{p}.safetensors", p, corpus)) for p in ("learned", "alibi")]
    assert main(["extrapolation", *paths, "--lengths", "0.5,1,2", "--max-tokens", "40"]) == 0
    out = capsys.readouterr().out
    assert "windows protocol" in out and "sliding protocol" in out
    assert "predictions from the last 50% of" in out
    learned_rows = [line for line in out.splitlines() if line.startswith("learned ")]
    assert len(learned_rows) == 2 and all(row.split()[-1] == "n/a" for row in learned_rows)
    alibi_rows = [line for line in out.splitlines() if line.startswith("ALiBi ")]
    assert all(len([float(v) for v in row.split()[1:]]) == 3 for row in alibi_rows)

    text_file = tmp_path / "other.txt"
    text_file.write_text("Ada was born in London . " * 4, encoding="utf-8")
    json_file = tmp_path / "out.json"
    assert main(["extrapolation", paths[1], "--text", str(text_file), "--protocols", "sliding",
                    "--lengths", "1", "--json", str(json_file)]) == 0
    assert "the whole of" in capsys.readouterr().out and json_file.exists()


def test_cli_refuses_what_it_cannot_evaluate(tmp_path, capsys):
    path = tmp_path / "lm.safetensors"
    _save_lm(path, "rope")
    assert main(["extrapolation", str(path)]) == 2
    assert "records no training corpus" in capsys.readouterr().err
    assert main(["extrapolation", str(path), "--text", str(tmp_path / "missing.txt")]) == 2
    assert main(["extrapolation", str(path), "--text", str(path), "--protocols", "stride"]) == 2
    assert "Unknown protocol" in capsys.readouterr().err


def test_reproduction_note_flags_weights_that_do_not_give_back_the_recorded_loss():
    assert reproduction_note("m", 1.2462530, 1.2462531) is None
    assert reproduction_note("m", None, 2.0) is None
    note = reproduction_note("lm-sinusoidal", 2.2822, 2.9520)
    assert note.startswith("lm-sinusoidal: its weights give a dev loss of 2.9520")
    assert "training recorded 2.2822" in note
    assert recorded_val_loss({"metrics": {"val_loss": 1.5}}) == 1.5
    assert recorded_val_loss({"metrics": {"val_loss": "x"}}) is None and recorded_val_loss({}) is None


def test_cli_checks_the_recorded_dev_loss(tmp_path, capsys):
    corpus = tmp_path / "wiki.txt"
    corpus.write_text(TEXT, encoding="utf-8")
    model = variant("rope")
    dev, _ = token_stream(TOKENIZER, TEXT[int(len(TEXT) * 0.5):])
    true_loss = score_length(model, dev, 8, "windows").loss
    data = [{"path": str(corpus), "sha256": hashlib.sha256(corpus.read_bytes()).hexdigest()}]
    for name, recorded in (("good", true_loss), ("stale", true_loss + 1)):
        checkpoint.save(tmp_path / f"{name}.safetensors", model, TOKENIZER, "lm", data=data,
                        metrics={"val_loss": recorded}, extra={"val_fraction": "0.5"})
    assert main(["extrapolation", str(tmp_path / "good.safetensors"), str(tmp_path / "stale.safetensors"),
                    "--lengths", "1", "--protocols", "windows", "--max-tokens", "20"]) == 0
    out = capsys.readouterr().out
    assert f"gives {true_loss:.4f}, the dev loss training recorded" in out
    assert f"stale: its weights give a dev loss of {true_loss:.4f}" in out


def test_run_extrapolation_checks_the_weights_give_back_trainings_dev_loss(tmp_path):
    text = "Ada Lovelace was born in London . Alan Turing was born in Maida Vale . " * 2
    tokenizer = CharTokenizer.from_corpus(text)
    full, _ = token_stream(tokenizer, text)
    for name, positional in [("a", "learned"), ("b", "alibi")]:
        model = tiny_model(tokenizer.vocab_size, positional=positional, block_size=8)
        true_loss = score_length(model, full, 8, "windows").loss
        recorded = true_loss if name == "a" else true_loss + 0.5  # b: as if the code changed since
        checkpoint.save(tmp_path / f"{name}.safetensors", model, tokenizer, "lm",
                        metrics={"val_loss": recorded})
    infos = checkpoint.list_checkpoints(tmp_path)
    models = [(info, checkpoint.load(info.path)) for info in infos]
    calls, fractions = [], []

    def score(info, loaded, max_tokens, unit, progress):
        calls.append((info.name, unit.protocol, unit.length, max_tokens))
        ids, _ = token_stream(loaded.tokenizer, text, max_tokens)
        return score_length(loaded.model, ids, unit.length, unit.protocol, unit.factor)

    run = run_extrapolation(models, len(text), [2.0, 1.0], ["windows", "sliding"],
                               {"windows": 100, "sliding": 30}, True, score, lambda f, _: fractions.append(f))
    assert run.checked and len(run.problems) == 1 and run.problems[0].startswith("b: its weights give")
    assert ("a", "windows", 8, None) in calls and ("a", "sliding", 16, 30) in calls
    assert [len(v.scores) for v in run.variants] == [4, 4]
    learned = run.variants[0]
    assert [(s.protocol, s.length) for s in learned.scores] == [("windows", 8), ("windows", 16),
                                                               ("sliding", 8), ("sliding", 16)]  # shortest first
    assert set(run.checks) == {"a", "b"} and abs(run.checks["a"] - infos[0].metadata["metrics"]["val_loss"]) < 1e-6
    assert not learned.score("sliding", 2.0).applicable and learned.score("sliding", 1.0).tokens == 30
    assert fractions == sorted(fractions) and fractions[-1] == 1.0
    unchecked = run_extrapolation(models, len(text), [1.0], ["windows"], {"windows": 50}, False, score)
    assert not unchecked.checked and unchecked.problems == []


def test_planned_work_counts_the_token_positions_a_run_reads():
    # windows: whole windows only; sliding: L for the first window, then L per further prediction
    assert planned_work(64, [1.0], ["windows"], {"windows": 1000}, 5000) == (1000 // 64) * 64
    assert planned_work(64, [4.0], ["sliding"], {"sliding": 512}, 5000) == 256 + (512 - 256) * 256
    assert planned_work(64, [4.0], ["sliding"], {"sliding": None}, 300) == 256 + 44 * 256
    assert planned_work(64, [2.0], ["sliding"], {"sliding": 512}, 5000, max_length=64) == 0


def test_the_documented_command_runs_from_the_train_side():
    """`python -m core.train.extrapolation ...` (checkpoints/README.md) is a command, not a silent import."""
    import subprocess
    import sys

    from tests.conftest import ROOT

    result = subprocess.run([sys.executable, "-m", "core.train.extrapolation", "--help"], cwd=ROOT,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0 and "usage: python -m core.train.extrapolation" in result.stdout, result.stderr
    assert "record" in result.stdout and "extrapolation" in result.stdout


@pytest.mark.parametrize("protocol", EXTRAPOLATION_PROTOCOLS)
def test_the_spread_from_predictions_scored_matches_a_naive_computation(protocol):
    # issue 41: the table shows how far the number moves with which predictions are scored
    import statistics

    model = variant("alibi")
    ids, _ = token_stream(TOKENIZER, TEXT, max_tokens=96)
    score = score_length(model, ids, 8, protocol, batch_size=5)
    losses = []  # every scored prediction's loss in text order, one at a time (the protocols' definitions)
    if protocol == "windows":
        for k in range(96 // 8):
            logits, _ = model(ids[8 * k: 8 * k + 8].view(1, -1))
            losses += F.cross_entropy(logits[0].double(), ids[8 * k + 1: 8 * k + 9], reduction="none").tolist()
    else:
        for t in range(96):
            logits, _ = model(ids[max(0, t - 7): t + 1].view(1, -1))
            losses.append(F.cross_entropy(logits[0, -1:].double(), ids[t + 1: t + 2]).item())
    n = len(losses)
    bounds = [n * k // 8 for k in range(9)]  # 8 consecutive parts, sizes differing by at most one
    parts = [statistics.fmean(losses[a:b]) for a, b in zip(bounds, bounds[1:])]
    assert score.part_losses == pytest.approx(parts, abs=1e-6)
    error = statistics.stdev(parts) / math.sqrt(8)
    low, high = score.spread()
    assert low == pytest.approx(math.exp(statistics.fmean(losses) - 2 * error), rel=1e-6)
    assert high == pytest.approx(math.exp(statistics.fmean(losses) + 2 * error), rel=1e-6)
    assert low < score.perplexity < high
    rows = extrapolation_rows([VariantExtrapolation("v", "alibi", 8, None, [score])])
    assert rows[0]["perplexity ±2 s.e. (8 parts)"] == f"{low:.4g}–{high:.4g}"
