"""The stored-versus-extractable 2x2 (core.lens.probe.dev_set), its figure, and the grid's table."""

from __future__ import annotations

import json

import pytest

from core.figures.probe import knowledge_grids
from core.lens.probe.dev_set import CELLS, knowledge_table
from core.lens.probe.evaluation import BirthplaceResult
from core.train import knowledge_grid

QUESTIONS = [f"Where was Person {i} born?" for i in range(6)]
RESULT = BirthplaceResult(predictions=["London", "Paris", "Rome", "Oslo", "Bern", "Lima"],
                          targets=["London", "Paris", "Turin", "Oslo", "Graz", "Quito"], baseline_place="London")


def test_counts_cross_memorised_with_answered_and_add_up_to_the_people():
    table = knowledge_table(QUESTIONS, RESULT, [True, True, True, False, None, False])
    counts = table.counts
    assert counts.loc["memorised"].tolist() == [2, 1]  # answered, wrong
    assert counts.loc["not memorised"].tolist() == [1, 2]  # a person without a document counts here
    assert int(counts.values.sum()) == len(QUESTIONS)
    assert table.cell("not memorised", "answered")["name"].tolist() == ["Person 3"]
    assert table.cell("memorised", "wrong").to_dict("records") == [
        {"name": "Person 2", "truth": "Turin", "prediction": "Rome"}]
    assert set(table.people["cell"]) <= set(CELLS.values()) and table.pretrained


def test_a_model_without_pretraining_stored_nothing():
    table = knowledge_table(QUESTIONS, RESULT, None)
    assert not table.pretrained
    assert table.counts.loc["memorised"].tolist() == [0, 0]
    assert table.counts.loc["not memorised"].tolist() == [3, 3]
    with pytest.raises(ValueError, match="flags"):
        knowledge_table(QUESTIONS, RESULT, [True])


def test_the_figure_shows_each_models_counts_and_shares():
    tables = {"a": knowledge_table(QUESTIONS, RESULT, [True] * 6).counts,
              "b": knowledge_table(QUESTIONS, RESULT, None).counts}
    fig = knowledge_grids(tables, title="t")
    assert [t.type for t in fig.data] == ["heatmap", "heatmap"]
    assert fig.data[0].z.tolist() == [[3, 3], [0, 0]] and fig.data[1].z.tolist() == [[0, 0], [3, 3]]
    assert fig.data[0].text[0][0] == "3<br>50%" and fig.layout.annotations[1].text == "b"
    assert list(fig.data[0].y) == ["memorised", "not memorised"] and list(fig.data[0].x) == ["answered", "wrong"]


def test_grid_table_and_refusals(tmp_path, capsys):
    row = {**json.loads(json.dumps(knowledge_grid.Row("x").__dict__, default=lambda o: o.__dict__)),
           "pretrain_minutes": 9.25, "finetune_minutes": 0.5, "final_loss": 0.1234, "memorised": 190,
           "people": 200, "dev": 200, "accuracy": 0.855, "best_finetune_accuracy": 0.87, "baseline": 0.02,
           "country_prior": 0.2, "params": 1, "vocab": 2000, "threads": 1}
    line = knowledge_grid.table([row]).splitlines()[-1]
    assert "| `x` | BPE 2,000 (2,000) | lm | 2x128, 64 | 60 | 9.2 + 0.5 | 0.123 | 190/200 | 85.5% (87.0%)" in line
    (tmp_path / "grid.jsonl").write_text(json.dumps(row) + "\n")
    assert knowledge_grid.main(["--out", str(tmp_path), "--table"]) == 0
    assert "190/200" in capsys.readouterr().out
    assert knowledge_grid.main(["--out", str(tmp_path), "--rows", "nope"]) == 2
    assert "unknown row" in capsys.readouterr().err
