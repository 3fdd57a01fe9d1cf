"""The write-up lesson (lessons/write-up.lesson.yaml) made into a report's handout by one command, from a student's
own files: a nanoGPT ckpt.pt (converted by the lab's converter), its TensorBoard run (torch's SummaryWriter) and two
test files. Each figure is checked against an independent reference: the attention maps against nanoGPT's forward
written from its description (tests/test_nanogpt.py), the loss curve against the values written, the perplexity
per file against `python -m core.train evaluate`'s scorer."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
import torch

from core.io.checkpoint import load
from core.io.convert import main as convert
from core.lens.lm_eval import score_file
from tests.conftest import ROOT
from tests.test_nanogpt import CHARS, meta_pkl, nanogpt_ckpt, reference_forward, write_ckpt

WRITE_UP = ROOT / "lessons" / "write-up.lesson.yaml"
SENTENCE = "Speak, speak. All: hear me."
STEPS = list(range(0, 400, 8))


def _slides(text: str) -> dict[int, str]:
    return {int(n): body for n, body in re.findall(r'<section class="slide" id="slide-(\d+)">(.*?)</section>', text,
                                                    re.S)}


def _specs(text: str, number: int) -> list[dict]:
    return [json.loads(s) for s in re.findall(
        rf'<script type="application/json" class="chart-spec" data-for="chart-{number:02d}-\d\d">(.*?)</script>',
        text, re.S)]


def _z(value) -> np.ndarray:
    return np.array([[np.nan if v is None else v for v in row] for row in value], dtype=float)


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    pytest.importorskip("tensorboard", reason="the optional TensorBoard extra is not installed "
                                              "(pip install -r requirements-tensorboard.txt)")
    from torch.utils.tensorboard import SummaryWriter

    from ui import handout

    home = tmp_path_factory.mktemp("student")
    models, tests = home / "models", home / "tests"
    models.mkdir()
    tests.mkdir()
    ckpt = nanogpt_ckpt(bias=False, prefix="_orig_mod.")  # as train.py saves it with compile=True
    write_ckpt(home / "ckpt.pt", ckpt)
    (home / "meta.pkl").write_bytes(meta_pkl(CHARS))
    assert convert(["nanogpt", str(home / "ckpt.pt"), "--meta", str(home / "meta.pkl"), "-o",
                    str(models / "shakespeare.safetensors")]) == 0
    writer = SummaryWriter(str(models / "runs" / "shakespeare"))
    for step in STEPS:
        writer.add_scalar("train/loss", 3.0 - step / 200 + 0.05 * np.sin(step), step)
    writer.close()
    (tests / "test_a.txt").write_text("First Citizen:\nSpeak, speak.\n")
    (tests / "test_b.txt").write_text("All:\nBefore we proceed any further, hear me speak.\n")
    out = home / "report" / "report.html"
    out.parent.mkdir()
    code = handout.main([str(WRITE_UP), "-o", str(out), "--checkpoints", str(models), "--allow", str(tests),
                         "--set", "model=shakespeare", "--set", "run=models/runs/shakespeare",
                         "--set", f"sentence={SENTENCE}", "--set", "source=folder", "--set", f"folder={tests}",
                         "--set", "files=test_a.txt,test_b.txt"])
    assert code == 0
    return {"html": out.read_text(encoding="utf-8"), "ckpt": ckpt, "models": models, "tests": tests}


def test_every_layer_and_head_equals_nanogpts_own_forward(report):
    ids = torch.tensor([[CHARS.index(c) for c in SENTENCE]])
    _, reference = reference_forward(report["ckpt"]["model"], ids)  # (layers, 1, heads, T, T)
    (fig,) = _specs(report["html"], 1)
    maps = [t for t in fig["data"] if t.get("type") == "heatmap"]
    layers, _, heads, T, _ = reference.shape
    assert len(maps) == layers * heads
    if len(maps[0]["x"]) < T:
        assert f"({len(maps[0]['x'])} of {T})" in _slides(report["html"])[1]
    causal = np.tril(np.ones((T, T), dtype=bool))
    for k, trace in enumerate(maps):  # layer by layer, head by head; the model view draws a window of positions
        shown = np.arange(len(trace["x"]))  # the first positions: the slide says how many of how many
        z = _z(trace["z"])
        expected = reference[k // heads, 0, k % heads].numpy()[np.ix_(shown, shown)]
        assert z.shape == expected.shape and shown[0] == 0 and len(shown) >= min(T, 16)
        window = causal[np.ix_(shown, shown)]
        np.testing.assert_allclose(z[window], expected[window], rtol=0, atol=1e-5)


def test_the_loss_curve_is_the_runs_own_points(report):
    figures = _specs(report["html"], 3)
    raw = [t for t in figures[0]["data"] if (t.get("meta") or [{}])[0].get("kind") == "raw"]
    assert len(raw) == 1
    written = [3.0 - s / 200 + 0.05 * np.sin(s) for s in STEPS]
    assert list(raw[0]["x"]) == STEPS
    np.testing.assert_allclose(raw[0]["y"], written, rtol=1e-6)  # TensorBoard stores float32


def test_perplexity_per_test_file_is_what_evaluate_prints(report):
    loaded = load(report["models"] / "shakespeare.safetensors")
    expected = {p.name: score_file(loaded.model, loaded.tokenizer, p).perplexity
                for p in sorted(report["tests"].iterdir())}
    body = _slides(report["html"])[5]
    cells = {}
    for row in re.findall(r"<tr>(.*?)</tr>", body, re.S):
        values = [re.sub(r"<[^>]+>", "", v).strip() for v in re.findall(r"<t[dh][^>]*>(.*?)</t[dh]>", row, re.S)]
        name = next((v for v in values if v in expected), None)
        if name and name not in cells:  # the documents table comes first (then the surprising pieces)
            cells[name] = values
    assert set(cells) == set(expected)
    header = next(re.sub(r"<[^>]+>", "", h).strip() for h in re.findall(r"<th[^>]*>(.*?)</th>", body, re.S)
                  if "perplexity" in h)
    assert header
    for name, ppl in expected.items():
        shown = [float(v.replace(",", "")) for v in cells[name] if re.fullmatch(r"[0-9.,e+-]+", v)]
        assert any(abs(v - ppl) <= 1e-3 * ppl for v in shown), (name, ppl, cells[name])


def test_slides_for_what_the_student_lacks_say_so_and_the_rest_render(report):
    slides = _slides(report["html"])
    assert len(slides) == 6
    for number in (4, 6):  # the classifier and the birthplace model the lesson names by default are not here
        said = ("not in the checkpoints folder", "not available here")  # a model the slide names; a run
        assert any(s in slides[number] for s in said), number
    for number in (1, 2, 3):
        assert _specs(report["html"], number), number
    assert "shakespeare" in slides[1] and re.search(r"sha256", slides[1])


def test_the_write_up_of_a_hugging_face_model_and_its_trainer_run(tmp_path, monkeypatch):
    """The same command on a Hugging Face GPT-2 folder and its Trainer output folder (transformers' own writers):
    the attention maps equal transformers' eager attention, the loss and accuracy by epoch the Trainer's log."""
    from tests.conftest import require_hf_extra

    require_hf_extra()
    from streamlit.testing.v1 import AppTest

    from tests.hf_models import gpt2_folder, reference_attention
    from tests.test_history_sources import write_trainer_folder
    from ui import handout

    models = tmp_path / "models"
    models.mkdir()
    folder = gpt2_folder(models / "gpt2-tiny")
    log = write_trainer_folder(models / "trainer-out")
    monkeypatch.setenv("ATTENTION_LAB_CHECKPOINTS", str(models))
    at = AppTest.from_file(str(ROOT / "pages" / "curves.py"), default_timeout=60)
    at.run()
    run = next(n for n in at.multiselect(key="curves_runs").options if "trainer-out" in n)
    model = next(n for n in at.selectbox(key="picker_model").options if "gpt2-tiny" in n)
    out = tmp_path / "report.html"
    sentence = "the cat sat on the mat."
    assert handout.main([str(WRITE_UP), "-o", str(out), "--checkpoints", str(models), "--set", f"model={model}",
                         "--set", f"run={run}", "--set", f"classifier={run}", "--set", f"sentence={sentence}"]) == 0
    text = out.read_text(encoding="utf-8")

    loaded = load(folder)
    ids = loaded.tokenizer.encode(sentence)
    reference, _ = reference_attention(folder, ids)  # (layers, heads, T, T)
    (fig,) = _specs(text, 1)
    maps = [t for t in fig["data"] if t.get("type") == "heatmap"]
    layers, heads, T, _ = reference.shape
    assert len(maps) == layers * heads
    causal = np.tril(np.ones((T, T), dtype=bool))
    for k, trace in enumerate(maps):
        n = len(trace["x"])
        z, expected = _z(trace["z"]), reference[k // heads, k % heads].numpy()[:n, :n]
        np.testing.assert_allclose(z[causal[:n, :n]], expected[causal[:n, :n]], rtol=0, atol=1e-5)

    train = [(e["step"], e["loss"]) for e in log if "loss" in e]
    raw = [t for t in _specs(text, 3)[0]["data"] if (t.get("meta") or [{}])[0].get("kind") == "raw"
           and (t.get("meta") or [{}])[0].get("split") == "train"]
    assert [(x, round(y, 6)) for x, y in zip(raw[0]["x"], raw[0]["y"], strict=True)] == \
        [(s, round(v, 6)) for s, v in train]
    accuracy = {int(e["epoch"]): e["eval_accuracy"] for e in log if "eval_accuracy" in e}  # epochs 1 and 2
    body = _slides(text)[4]
    for epoch, value in accuracy.items():
        assert re.search(rf"<td[^>]*>{epoch}</td>\s*<td[^>]*>[^<]*</td>\s*<td[^>]*>{value:g}</td>", body) or \
            re.search(rf"<td[^>]*>{epoch}</td>(\s*<td[^>]*>[^<]*</td>)*?\s*<td[^>]*>{value:g}</td>", body), epoch
