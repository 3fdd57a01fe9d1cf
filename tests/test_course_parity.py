"""bench.course_parity: the course recipe beside the assignment's own code.

The assignment's code is not in this repository (it is the course's), so the reference side runs a stand-in
run.py written here that speaks as the real one does: its tqdm description, its "Correct: X out of Y" line.
The project's side runs for real, on a few lines of data/world laid out as the course's files.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from bench import course_parity as cp

ROOT = Path(__file__).resolve().parent.parent
WORLD = ROOT / "data" / "world"

STAND_IN_RUN = '''
import sys, random
random.seed(0)
import torch
import trainer  # the reference's own modules are found beside run.py
function = sys.argv[1]
seed = torch.initial_seed()
if function == "pretrain":
    config = trainer.TrainerConfig(max_epochs=650, num_workers=4)
    for epoch in range(config.max_epochs):
        sys.stderr.write(f"\\repoch {epoch + 1} iter 22: train loss {1 / (epoch + 1):.5f}. lr 6.0e-03")
    sys.stderr.write("\\n")
    open(sys.argv[sys.argv.index("--writing_params_path") + 1], "w").write(str(seed))
elif function == "finetune":
    open(sys.argv[sys.argv.index("--writing_params_path") + 1], "w").write(str(seed))
else:
    print("Correct: {} out of 500.0: x%".format(100.0 + seed))
'''
STAND_IN_TRAINER = '''
class TrainerConfig:
    def __init__(self, **kwargs):
        for k, v in kwargs.items():
            setattr(self, k, v)
'''


def course_files(folder: Path, documents: int = 40, questions: int = 12) -> Path:
    """A few of data/world's lines under the course's file names (the vocabulary is the corpus's)."""
    folder.mkdir(parents=True, exist_ok=True)
    wiki = WORLD.joinpath("wiki.txt").read_text().split("\n")[:documents]
    (folder / "wiki.txt").write_text("\n".join(wiki))
    chars = set("\n".join(wiki))
    for name, n in (("birth_places_train.tsv", 2 * questions), ("birth_dev.tsv", questions)):
        lines = [line for line in WORLD.joinpath(name).read_text().splitlines(keepends=True)
                 if set(line.rstrip("\n").replace("\t", "")) <= chars]
        assert len(lines) >= n, name
        (folder / name).write_text("".join(lines[:n]))
    return folder


def stand_in_reference(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "run.py").write_text(STAND_IN_RUN)
    (folder / "trainer.py").write_text(STAND_IN_TRAINER)
    for name in ("model.py", "dataset.py", "utils.py"):
        (folder / name).write_text("")
    return folder


def test_progress_reads_both_sides_logs(tmp_path):
    ours = cp.Chain("ours", 0, tmp_path / "ours.log")
    ours.log.write_text("epoch 1/650  train loss 3.3970  0.5 s\nepoch 2/650    0.4 s\n"
                        "epoch 3/650  train loss 2.5000  0.4 s\n### stage finetune 1.0\nepoch 1/10  train loss 0.2\n")
    assert cp.progress(ours) == (3, 2.5)
    theirs = cp.Chain("assignment", 0, tmp_path / "theirs.log")
    theirs.log.write_text("\repoch 7 iter 3: train loss 1.50000. lr 6e-03"
                          "\repoch 8 iter 0: train loss 1.25000. lr 6e-03")
    assert cp.progress(theirs) == (7, 1.25)  # tqdm names the epoch it is in: 7 are done
    assert cp.progress(cp.Chain("ours", 0, tmp_path / "missing.log")) == (0, None)


def test_reference_side_runs_run_py_unchanged_with_torch_seeded(tmp_path):
    course = course_files(tmp_path / "course")
    reference = stand_in_reference(tmp_path / "reference")
    out = tmp_path / "out"
    done = subprocess.run([sys.executable, "-m", "bench.course_parity", "--course", str(course), "--reference",
                           str(reference), "--seeds", "3", "5", "--sides", "assignment", "--out", str(out)],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    summary = json.loads((out / "course_parity.json").read_text())
    by_seed = {c["seed"]: c for c in summary["chains"]}
    for seed in (3, 5):
        chain = by_seed[seed]
        assert chain["side"] == "assignment" and chain["stopped"] == "" and chain["returncode"] == 0
        assert chain["pretrain_epochs"] == 650 and chain["last_pretrain_loss"] == pytest.approx(1 / 650, abs=1e-5)
        # torch's global seed was set before run.py ran: the weights file holds it, the score shows it
        assert (out / "work" / f"assignment-s{seed}.pretrain.params").read_text() == str(seed)
        assert chain["dev_correct"] == 100 + seed and chain["dev_total"] == 500
    assert "assignment-s3" in done.stdout and "assignment-s5" in done.stdout


def test_missing_course_file_is_one_sentence(tmp_path):
    reference = stand_in_reference(tmp_path / "reference")
    done = subprocess.run([sys.executable, "-m", "bench.course_parity", "--course", str(tmp_path / "nothing"),
                           "--reference", str(reference), "--out", str(tmp_path / "out")],
                          cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert done.stderr.startswith("Missing: ") and "wiki.txt" in done.stderr and "Traceback" not in done.stderr


@pytest.mark.slow
def test_our_side_runs_the_three_stages_on_course_shaped_files(tmp_path):
    course = course_files(tmp_path / "course")
    out = tmp_path / "out"
    done = subprocess.run([sys.executable, "-m", "bench.course_parity", "--course", str(course), "--reference",
                           str(stand_in_reference(tmp_path / "reference")), "--seeds", "0", "--sides", "ours",
                           "--out", str(out), "--smoke-epochs", "1"],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    (chain,) = json.loads((out / "course_parity.json").read_text())["chains"]
    assert chain["returncode"] == 0 and chain["pretrain_epochs"] == 1
    assert set(chain["minutes"]) == {"pretrain", "finetune", "evaluate"}
    assert chain["dev_total"] == 12 and 0 <= chain["dev_correct"] <= 12
    predictions = (out / "work" / "ours-s0.dev.predictions").read_text().splitlines()
    assert len(predictions) == 12


def test_a_pair_that_cannot_end_by_the_deadline_is_stopped(tmp_path):
    """The watcher stops every chain still running at the deadline, and says so in the summary."""
    course = course_files(tmp_path / "course")
    reference = stand_in_reference(tmp_path / "reference")
    (reference / "run.py").write_text("import time\ntime.sleep(120)\n")
    out = tmp_path / "out"
    done = subprocess.run([sys.executable, "-m", "bench.course_parity", "--course", str(course), "--reference",
                           str(reference), "--seeds", "0", "--sides", "assignment", "--out", str(out),
                           "--deadline", "3"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    (chain,) = json.loads((out / "course_parity.json").read_text())["chains"]
    assert chain["stopped"].startswith("deadline") and "dev_accuracy" not in chain
