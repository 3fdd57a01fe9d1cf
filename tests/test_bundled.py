"""Every bundled checkpoint loads, and re-evaluating it reproduces the final metric stored in it."""

import pytest
import torch

from core.io import checkpoint as ckpt
from core.train.bundle import RECIPES, reevaluate
from tests.conftest import ROOT

BUNDLED = [r for r in RECIPES if r.bundled]


def _path(name):
    return ROOT / "checkpoints" / f"{name}.safetensors"


def test_every_bundled_checkpoint_is_present():
    missing = [r.name for r in BUNDLED if not _path(r.name).exists()]
    assert not missing, f"run `make checkpoints`; missing: {missing}"


def test_bundled_checkpoints_fit_the_size_budget():
    # every checkpoint under checkpoints/, training-step snapshot files included (issue 28: 80 MB in all); a
    # run in progress's .resume and .log.jsonl files are not bundled
    # (nor the knowledge grid's temporary files in checkpoints/grid/, which git ignores)
    folder = ROOT / "checkpoints"
    total = sum(p.stat().st_size for p in folder.rglob("*.safetensors") if folder / "grid" not in p.parents)
    assert total <= 80 * 1000 * 1000


@pytest.mark.parametrize("recipe", BUNDLED, ids=lambda r: r.name)
def test_bundled_checkpoint_reproduces_its_stored_metric(recipe):
    loaded = ckpt.load(_path(recipe.name))
    assert loaded.history, "a bundled checkpoint carries its training history"
    stored = loaded.metadata["metrics"]
    measured = reevaluate(recipe.name)
    for key, value in measured.items():
        assert key in stored
        assert value == pytest.approx(stored[key], abs=1e-4), key
    if loaded.task == "lm" and loaded.config.causal:
        assert loaded.model.generate(torch.tensor([[2, 3]]), 5).shape == (1, 7)


def _stored(name):
    return ckpt.read_metadata(_path(name))["metrics"]


def test_the_bundled_birthplace_family_knows_what_issue_27_asks():
    """The bars, on the numbers each file stores (the test above re-measures every one of them)."""
    vanilla, synth, scratch = (_stored(n) for n in ("birth-vanilla-pretrained", "birth-synthesizer-pretrained",
                                                    "birth-vanilla-scratch"))
    prior, baseline = vanilla["val_country_prior_accuracy"], vanilla["val_baseline_accuracy"]
    assert vanilla["val_accuracy"] >= 0.80 and vanilla["val_accuracy"] >= 3 * prior
    assert synth["val_accuracy"] >= 3 * baseline
    assert scratch["val_accuracy"] <= prior + 0.10
    assert _stored("wiki-vanilla-pretrained")["dev_memorised"] >= 0.85
    dev = ckpt.read_metadata(_path("birth-vanilla-pretrained"))["eval_corpus_path"]
    assert sum(1 for line in (ROOT / dev).read_text(encoding="utf-8").splitlines() if line.strip()) >= 200


def _accuracy_by_epoch(name, split):
    history = ckpt.load(_path(name)).history
    rows = [r for r in history if r["split"] == split and r["metric"] == "accuracy"]
    return {r["epoch"]: r["value"] for r in rows}


def test_the_bundled_names_pair_shows_what_pretraining_is_for():
    """Issue 36: the same model and pieces, one from the birthplace family's pretrained LM and one from fresh
    weights: the pretrained one is ahead from its first epoch and stays ahead (numbers the history stores;
    the parametrized test above re-measures the final ones on names_test.tsv)."""
    pre, scratch = (ckpt.load(_path(n)) for n in ("names-pretrained", "names-scratch"))
    assert pre.metadata["pretrained_from"] == "wiki-vanilla-pretrained.safetensors"
    assert scratch.metadata["pretrained_from"] == ""
    assert pre.config == scratch.config and pre.tokenizer.to_dict() == scratch.tokenizer.to_dict()
    assert pre.metadata["trainer"] == scratch.metadata["trainer"]  # same epochs, rates and seed
    base = ckpt.load(_path("wiki-vanilla-pretrained"))
    assert pre.tokenizer.to_dict()["spec"] == base.tokenizer.to_dict()["spec"]
    test = {n: _accuracy_by_epoch(n, "val") for n in ("names-pretrained", "names-scratch")}
    train = {n: _accuracy_by_epoch(n, "train") for n in ("names-pretrained", "names-scratch")}
    epochs = sorted(test["names-pretrained"])
    assert epochs == sorted(test["names-scratch"]) == list(range(1, len(epochs) + 1)) and len(epochs) >= 3
    assert all(sorted(train[n]) == epochs for n in train)  # train accuracy after every epoch too
    for n in test:
        assert test[n][epochs[-1]] == pytest.approx(_stored(n)["val_accuracy"], abs=1e-9)
    first, last = epochs[0], epochs[-1]
    assert test["names-pretrained"][first] >= test["names-scratch"][first] + 0.25
    assert test["names-pretrained"][last] >= test["names-scratch"][last] + 0.20
    # names the corpus never mentions: the pretrained model has only the names' look left, as scratch has
    assert _stored("names-pretrained")["fabricated_accuracy"] < _stored("names-pretrained")["val_accuracy"] - 0.1


def test_the_induction_recipes_three_seeds_are_bundled_as_histories():
    """Issue 53: "Our own bundled recipes were run at three seeds: show them so." The seed runs' histories (their
    weights are not kept) are one band on the curves page; seed 0 is the bundled run's own trajectory."""
    from core.lens.history.bands import seed_groups
    from core.lens.history.records import read_checkpoint_history, read_seed_history, seed_history_runs

    runs = {run: path for run, path in seed_history_runs(ROOT / "checkpoints") if run.startswith("induction")}
    assert set(runs) == {f"induction-seed{s}" for s in (0, 1, 2)}
    assert seed_groups(runs) == {"induction (seeds)": sorted(runs)}
    frames = {run: read_seed_history(path, run).frame for run, path in runs.items()}
    bundled = read_checkpoint_history(_path("induction")).frame
    assert frames["induction-seed0"][["step", "split", "metric", "value"]].equals(
        bundled[["step", "split", "metric", "value"]])
    for frame in frames.values():
        assert set(frame["split"]) == {"train", "val"} and frame["step"].max() == 1500


def test_the_measured_induction_seeds_meet_issue_54s_numbers():
    """checkpoints/induction.seeds.json (`python -m core.train.bundle --only induction-seed0 induction-seed1
    induction-seed2`): at every seed, within <= 20% of the run the repeated-token loss falls from >= 2.0 to <= 0.8,
    the best layer-1 induction score rises from < 0.4 to >= 0.8 and the best layer-0 previous-token score at least
    doubles; the README's table is the file's."""
    import json

    from core.train.bundle import INDUCTION, INDUCTION_SEEDS, induction_met, induction_table

    seeds = json.loads((ROOT / "checkpoints" / "induction.seeds.json").read_text())
    assert sorted(seeds) == [str(s) for s in INDUCTION_SEEDS]
    for seed, m in seeds.items():
        assert induction_met(m), (seed, m)
        assert m["start"] <= m["step"] <= m["end"] and m["steps"] == 1500
    assert induction_table() in (ROOT / "checkpoints" / "README.md").read_text()
    assert ckpt.load(_path("induction")).config.n_head == INDUCTION.n_head


def test_the_names_pairs_three_seeds_are_kept_as_histories_and_are_the_readmes_table():
    """Issue 53 ("our own bundled recipes were run at three seeds: show them so"): names-pretrained and names-scratch
    at seeds 0, 1, 2 (`python -m core.train.bundle --only names-pretrained-seed0 ... names-scratch-seed2`), their
    histories kept (weights not). Seed 0 is the bundled pair's own run, and the checkpoints README's table of the
    three seeds (test accuracy after epoch 1 -> after epoch 6, written by hand) is what the histories hold."""
    import re

    from core.lens.history.bands import seed_groups
    from core.lens.history.records import read_checkpoint_history, read_seed_history, seed_history_runs

    runs = {run: path for run, path in seed_history_runs(ROOT / "checkpoints") if run.startswith("names-")}
    assert seed_groups(runs) == {f"{name} (seeds)": [f"{name}-seed{s}" for s in (0, 1, 2)]
                                 for name in ("names-pretrained", "names-scratch")}

    def accuracy(frame, epoch: int) -> float:
        row = frame[(frame["split"] == "val") & (frame["metric"] == "accuracy") & (frame["epoch"] == epoch)]
        return float(row["value"].iloc[-1])

    readme = (ROOT / "checkpoints" / "README.md").read_text()
    for name, row in (("names-pretrained", "from `wiki-vanilla-pretrained`, `--pooling last`"),
                      ("names-scratch", "fresh weights, `--pooling last`")):
        bundled = read_checkpoint_history(_path(name)).frame
        frames = [read_seed_history(runs[f"{name}-seed{s}"], f"{name}-seed{s}").frame for s in (0, 1, 2)]
        columns = ["step", "split", "metric", "value"]
        assert frames[0][columns].reset_index(drop=True).equals(bundled[columns].reset_index(drop=True))
        (line,) = [line for line in readme.splitlines() if line.startswith(f"| {row} |")]
        table = [tuple(float(v) / 100 for v in pair) for pair in re.findall(r"([\d.]+)% -> ([\d.]+)%", line)]
        assert table == [(accuracy(f, 1), accuracy(f, 6)) for f in frames], (name, line)
