"""Every upload and path box, given the wrong one of each format people bring (issue 41: a LABEL<TAB>TEXT file on
the probe's Dev set tab scored "0%" with no word). Each box says in one sentence what it expected and what it
found, and nothing is computed from the file.

The boxes (`grep -rn "file_uploader\\|text_input" pages/`): the probe's questions upload; Open your model's params,
corpus and checkpoint uploads and its two folder boxes; the curves page's upload and folder box. The other
text_inputs are sentences, names and a token search, not files.
"""

from __future__ import annotations

import io
import json
import pickle
import re
from pathlib import Path

import pytest
import torch
from safetensors.torch import save as safetensors_bytes
from streamlit.testing.v1 import AppTest

from core.data.world import generate_world, write_world
from core.io import formats
from core.io.folders import ALLOWED_DIRS_ENV
from core.lens.probe import corpus
from tests.conftest import ROOT, save_tiny_checkpoint
from tests.test_convert import CORPUS, mingpt_state_dict


def _torch_bytes(obj) -> bytes:
    buffer = io.BytesIO()
    torch.save(obj, buffer)
    return buffer.getvalue()


# kind -> (file name, bytes): one of each format the app knows, built here
SAMPLES: dict[str, tuple[str, bytes]] = {
    "questions": ("birth_dev.tsv", b"Where was Ada Lovelace born?\tLondon\nWhere was Alan Turing born?\tLondon\n"
                                    b"Where was Marie Curie born?\tWarsaw\n"),
    "questions-only": ("birth_test_inputs.tsv", b"Where was Ada Lovelace born?\nWhere was Alan Turing born?\n"
                                                b"Where was Marie Curie born?\n"),
    "classification": ("speeches.tsv", b"0\tWe choose to go to the moon.\n1\tAsk not what your country can do.\n"
                                       b"0\tI have a dream.\n1\tTear down this wall.\n" * 3),
    "text": ("wiki.txt", CORPUS.encode()),
    "jsonl": ("run.log.jsonl", b'{"step": 1, "split": "train", "metric": "loss", "value": 2.0}\n'
                               b'{"step": 2, "split": "train", "metric": "loss", "value": 1.5}\n'),
    "safetensors": ("model.safetensors", safetensors_bytes({"w": torch.zeros(2, 2)})),
    "torch": ("model.pt", _torch_bytes({"w": torch.zeros(2, 2)})),
    "pickle": ("model.pkl", pickle.dumps({"w": [0.0, 1.0]}, protocol=4)),
    "binary": ("junk.bin", bytes(range(256)) * 8),
    "empty": ("empty.tsv", b""),
}


def wrong_for(accepted: set[str]) -> list[str]:
    return [kind for kind in SAMPLES if kind not in accepted]


def told(sentences: list[str], kind: str, expected: str) -> bool:
    """One sentence names what the box expected and what the file is."""
    found = formats.KINDS[kind]
    return any(expected in s and found in s for s in sentences)


def shown(elements) -> list[str]:
    return [re.sub(r"\\(.)", r"\1", e.value) for e in elements]


def test_each_sample_is_sniffed_as_what_it_is():
    for kind, (_, data) in SAMPLES.items():
        assert formats.sniff(data).kind == kind, kind
    # the bundled CS224N-style files too
    knowledge = ROOT / "data" / "knowledge"
    assert formats.sniff((knowledge / "birth_dev.tsv").read_bytes()).kind == "questions"
    assert formats.sniff((knowledge / "birth_test_inputs.tsv").read_bytes()).kind == "questions-only"
    assert formats.sniff((knowledge / "wiki.txt").read_bytes()).kind == "text"
    assert formats.sniff((knowledge / "names_train.tsv").read_bytes()).kind == "classification"
    assert formats.sniff((ROOT / "checkpoints" / "lm-char.safetensors").read_bytes()[:4096]).kind == "safetensors"


# --- the probe's Dev set upload ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def small_world(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("world")
    write_world(generate_world(5, n_people=60, n_dev=12, n_test=0), folder)
    return folder


def test_the_probe_dev_upload_tells_every_wrong_format(monkeypatch, tiny_checkpoints, small_world):
    monkeypatch.setenv("ATTENTION_LAB_CHECKPOINTS", str(tiny_checkpoints))
    monkeypatch.setenv(corpus.WORLD_ENV, str(small_world))
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    at.run()
    at.switch_page("pages/probe.py")
    at.session_state["probe_tab"] = "Dev set"
    at.run()
    at.radio(key="probe_dev_source").set_value("upload").run()
    for kind in wrong_for({"questions"}):
        _, data = SAMPLES[kind]
        at.file_uploader(key="probe_upload").upload(f"{kind}.tsv", data).run()  # the box takes .tsv and .txt
        assert not at.exception, [e.message for e in at.exception]
        errors = shown(at.error)
        assert told(errors, kind, "is not a questions file with answers"), (kind, errors)
        assert not at.get("plotly_chart") and not any("Right answers" in m.value for m in at.markdown), kind
    name, data = SAMPLES["questions"]
    at.file_uploader(key="probe_upload").upload(name, data).run()
    assert not at.error and at.get("plotly_chart")  # the right file is evaluated


# --- Open your model: three uploads, two folder boxes -----------------------------------------------------


def _open_model(monkeypatch, checkpoints: Path, allowed: Path | None = None) -> AppTest:
    monkeypatch.setenv("ATTENTION_LAB_CHECKPOINTS", str(checkpoints))
    if allowed is not None:
        monkeypatch.setenv(ALLOWED_DIRS_ENV, str(allowed))
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.switch_page("pages/open_model.py")
    at.run()
    assert not at.exception, [e.message for e in at.exception]
    return at


def _added(at: AppTest) -> list:
    return list(at.session_state["uploaded_checkpoints"]) if "uploaded_checkpoints" in at.session_state else []


def test_open_model_uploads_tell_every_wrong_format(monkeypatch, tiny_checkpoints):
    at = _open_model(monkeypatch, tiny_checkpoints)
    params = _torch_bytes(mingpt_state_dict("vanilla"))
    for kind in wrong_for({"torch", "pickle"}):  # the params box, beside a right corpus
        name, data = SAMPLES[kind]
        at.file_uploader(key="upload_params").upload(name, data)
        at.file_uploader(key="upload_corpus").upload("wiki.txt", CORPUS.encode(), "text/plain")
        at.run()
        at.button(key="convert_params").click().run()
        assert not at.exception, [e.message for e in at.exception]
        errors = shown(at.error)
        assert told(errors, kind, "is not a minGPT params file") or (kind == "empty" and "empty" in errors[0]), \
            (kind, errors)
        assert not _added(at)
    for kind in wrong_for({"text"}):  # the corpus box, beside right params
        name, data = SAMPLES[kind]
        at.file_uploader(key="upload_params").upload("vanilla.params", params)
        at.file_uploader(key="upload_corpus").upload(name, data)
        at.run()
        at.button(key="convert_params").click().run()
        errors = shown(at.error)
        assert told(errors, kind, "is not a pretraining corpus") or (kind == "empty" and "empty" in errors[0]), \
            (kind, errors)
        assert not _added(at)
    at.session_state["open_model_tab"] = "Attention Lab checkpoint"
    for kind in wrong_for({"safetensors"}):  # the checkpoint box (it takes .safetensors names only)
        _, data = SAMPLES[kind]
        at.file_uploader(key="upload_checkpoint").upload(f"{kind}.safetensors", data)
        at.run()
        at.button(key="add_checkpoint").click().run()
        errors = shown(at.error)
        assert told(errors, kind, "is not an Attention Lab checkpoint") or (kind == "empty" and "empty" in errors[0]), \
            (kind, errors)
        assert not _added(at)


@pytest.fixture
def allowed(tmp_path) -> Path:
    """An allowed folder holding one file of each format (typed into the folder boxes)."""
    folder = tmp_path / "allowed"
    folder.mkdir()
    for kind, (name, data) in SAMPLES.items():
        (folder / f"{kind}-{name}").write_bytes(data)
    return folder


def test_folder_boxes_say_what_a_file_is(monkeypatch, tiny_checkpoints, allowed):
    at = _open_model(monkeypatch, tiny_checkpoints, allowed)
    at.session_state["open_model_tab"] = "Hugging Face"
    at.run()
    for kind, (name, _) in SAMPLES.items():
        path = str(allowed / f"{kind}-{name}")
        at.text_input(key="hf_folder").set_value(path).run()
        at.button(key="add_hf").click().run()
        assert not at.exception, [e.message for e in at.exception]
        errors = shown(at.error)
        assert any("is a file" in e and formats.KINDS[kind] in e and "not a folder" in e for e in errors), \
            (kind, errors)
        assert not _added(at)
    # the save folder: a file typed there is told when a model is added
    at.session_state["open_model_tab"] = "Attention Lab checkpoint"
    good = save_tiny_checkpoint(allowed / "sub" / "good.safetensors", "lm").read_bytes()
    at.text_input(key="open_model_folder").set_value(str(allowed / "text-wiki.txt")).run()
    at.file_uploader(key="upload_checkpoint").upload("good.safetensors", good)
    at.run()
    at.button(key="add_checkpoint").click().run()
    assert any("is a file" in e and formats.KINDS["text"] in e for e in shown(at.error)), shown(at.error)
    assert not _added(at)


# --- the curves page: upload and folder box ---------------------------------------------------------------


def test_curves_upload_and_folder_tell_every_wrong_format(monkeypatch, tiny_checkpoints, allowed):
    monkeypatch.setenv("ATTENTION_LAB_CHECKPOINTS", str(tiny_checkpoints))
    monkeypatch.setenv(ALLOWED_DIRS_ENV, str(allowed))
    at = AppTest.from_file(str(ROOT / "pages" / "curves.py"), default_timeout=60)
    at.run()
    assert not at.exception, [e.message for e in at.exception]
    before = list(at.multiselect(key="curves_runs").options)
    for kind in wrong_for({"safetensors", "jsonl"}):
        data = SAMPLES[kind][1]
        for filename in (f"{kind}.jsonl", f"{kind}.safetensors"):  # by content (the box takes these names)
            at.file_uploader(key="curves_files").upload(filename, data).run()
            assert not at.exception, [e.message for e in at.exception]
            errors = shown(at.sidebar.error)
            assert any(f"{filename} is not a" in e and formats.KINDS[kind] in e for e in errors), \
                (kind, filename, errors)
            assert list(at.multiselect(key="curves_runs").options) == before  # no run made of it
    for kind, (name, _) in SAMPLES.items():
        at.text_input(key="curves_folder").set_value(str(allowed / f"{kind}-{name}")).run()
        warnings = shown(at.sidebar.warning) + shown(at.warning)
        assert any("is a file" in w and formats.KINDS[kind] in w for w in warnings), (kind, warnings)


def test_a_refusal_is_one_sentence_naming_what_was_expected_and_found():
    sentence = formats.refusal(SAMPLES["classification"][1], {"questions"}, "a questions file", "speeches.tsv")
    assert sentence.startswith("speeches.tsv is not a questions file: it is a classification file")
    assert sentence.count(". ") == 0 and sentence.endswith(".")
    assert formats.refusal(SAMPLES["questions"][1], {"questions"}, "a questions file") is None
    assert json.loads(SAMPLES["jsonl"][1].splitlines()[0])["metric"] == "loss"
