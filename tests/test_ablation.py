"""The recipe ablation runs each row from the same weights and reports what it measured."""

import math

from core.train.ablation import ROWS, Preset, run_row, table
from core.train.recipes import ModelShape

CORPUS = "\n".join(f"Person {c}{c}. Person {c}{c} was born in Town{c} ." for c in "abcdefgh")
PAIRS = [(f"Where was Person {c}{c} born?", f"Town{c}") for c in "abcdefgh"]
TINY = Preset(documents=0, epochs=5, batch_size=4,  # 10 steps: two logged losses
              shape=ModelShape(n_layer=1, n_head=2, n_embd=16, block_size=48, dropout=0.0))


def test_rows_differ_only_in_what_they_ablate():
    a = run_row(CORPUS, PAIRS, TINY, "cs224n", "cosine", "cpu")
    b = run_row(CORPUS, PAIRS, TINY, "cs224n", "cosine", "cpu")
    c = run_row(CORPUS, PAIRS, TINY, "mingpt", "cosine", "cpu")
    assert a["final_loss"] == b["final_loss"]  # same weights, same batches: deterministic
    assert a["final_loss"] != c["final_loss"]
    assert a["people"] == 8 and 0 <= a["memorised"] <= 8
    assert all(math.isfinite(a[k]) for k in ("final_loss", "embedding_rms", "residual_rms"))
    text = table([a, c], {(d, s): label for label, d, s in ROWS})
    assert text.count("\n") == 3 and "| cs224n | cosine |" in text


def test_the_cli_refuses_bad_input_with_one_sentence(tmp_path, capsys):
    from core.train.ablation import main

    assert main(["--world", str(tmp_path / "missing")]) == 2
    assert main(["--only", "9"]) == 2
    assert main(["--epochs", "-3"]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 3 and all(line.startswith("error: ") and line.endswith(".") for line in lines)
