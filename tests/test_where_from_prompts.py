"""Causal tracing of any prompt (core.lens.where_from.prompts): a subject marked by its text or its pieces, the
model's own next piece or a typed target, on this lab's models and Hugging Face folders; the command's JSON; the
bad inputs, one sentence each."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from core.io.checkpoint import load
from core.lens import where_from as wf
from core.lens.where_from import cli, prompts
from core.model.tokenizer import CharTokenizer
from tests.conftest import require_hf_extra, tiny_model

ROOT = Path(__file__).resolve().parents[1]
BUNDLED = ROOT / "checkpoints" / "birth-vanilla-pretrained.safetensors"
KNOWN_LAYER = 2


class Loaded:  # what the page and the command pass: a model, its tokenizer, its task
    def __init__(self, model, tokenizer, task="lm"):
        self.model, self.tokenizer, self.task = model, tokenizer, task


def only_one_mlp(model, layer: int, mlps) -> None:
    """Every MLP but `layer`'s writes exactly 0 into the stream: the answer can pass through no other MLP."""
    with torch.no_grad():
        for i, mlp_out in enumerate(mlps):
            if i != layer:
                for p in mlp_out.parameters():
                    p.zero_()


@pytest.fixture(scope="module")
def llama(tmp_path_factory):
    require_hf_extra()
    import transformers

    from bench.hf_folders import decoder_folder

    folder = decoder_folder(tmp_path_factory.mktemp("hf") / "llama", "llama", num_hidden_layers=4)
    model = transformers.AutoModelForCausalLM.from_pretrained(folder, local_files_only=True)
    only_one_mlp(model, KNOWN_LAYER, [block.mlp.down_proj for block in model.model.layers])
    model.save_pretrained(folder)
    return load(folder)


def ours():
    chars = CharTokenizer.from_corpus("the cat sat on a mat. A dog ran in the park")
    torch.manual_seed(1)
    model = tiny_model(chars.vocab_size, block_size=48, n_embd=32, n_head=4, n_layer=4)
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() == 2:
                p.normal_(0.0, 0.3)
    only_one_mlp(model, KNOWN_LAYER, [block.mlp[2] for block in model.blocks])
    return Loaded(model.eval(), chars)


@pytest.mark.parametrize("which", ["ours", "llama"])
def test_an_answer_that_passes_through_one_known_mlp_is_restored_at_that_layer(which, request):
    loaded = ours() if which == "ours" else request.getfixturevalue("llama")
    prompt, subject = ("the cat sat on a mat", "cat") if which == "ours" else ("the cat sat on the mat", "cat")
    q, ct = prompts.trace_prompt(loaded, prompt, subject, samples=4, seed=0)
    assert q.name == "cat" and q.own_answer and q.marked
    assert [q.raw[p].strip() for p in q.name_positions] in (["cat"], ["c", "a", "t"], ["▁cat"])
    effect = ct.effect("MLP")  # the MLP outputs restored one (layer, position) at a time
    others = np.delete(effect, KNOWN_LAYER, axis=0)
    assert np.abs(others).max() < 1e-6  # no other MLP writes anything, so restoring one changes nothing
    shares = ct.recovered("MLP")
    assert abs(ct.total_effect) > 1e-3
    layer, _ = np.unravel_index(int(np.nanargmax(np.abs(shares))), shares.shape)
    assert layer == KNOWN_LAYER and np.nanmax(shares[KNOWN_LAYER]) > 0.05
    # the residual stream restored at the last layer's last position is the clean run itself
    assert ct.recovered("residual")[-1, -1] == pytest.approx(1.0, abs=1e-4)


def test_a_typed_target_is_its_first_piece_after_the_prompt(llama):
    q = wf.read_prompt(llama.model, llama.tokenizer, "the cat sat on the", "cat", "mat")
    whole = llama.tokenizer.encode("the cat sat on the mat")
    assert q.answer_id == whole[len(q.ids)] and not q.own_answer and "'mat'" in q.note


def test_a_subject_marked_by_its_pieces(llama):
    by_text = wf.read_prompt(llama.model, llama.tokenizer, "the cat sat on the mat", "cat")
    span = (by_text.name_positions[0], by_text.name_positions[-1] + 1)
    by_pieces = wf.read_prompt(llama.model, llama.tokenizer, "the cat sat on the mat", span)
    assert by_pieces.name_positions == by_text.name_positions and by_pieces.answer_id == by_text.answer_id


def test_the_chunked_passes_change_nothing(llama, monkeypatch):
    from core.lens.where_from import tracing

    whole = prompts.trace_prompt(llama, "the cat sat on the mat", "cat", samples=3)[1]
    seen = []
    monkeypatch.setattr(tracing, "CHUNK_TOKENS", 7)  # one row of 7 positions a pass
    chunked = prompts.trace_prompt(llama, "the cat sat on the mat", "cat", samples=3,
                                   progress=lambda done, total: seen.append((done, total)))[1]
    for kind in wf.KINDS:
        np.testing.assert_allclose(chunked.scores[kind], whole.scores[kind], rtol=1e-5, atol=1e-6)
    assert len(seen) > 10 and seen[-1][0] == seen[-1][1] and [d for d, _ in seen] == sorted(d for d, _ in seen)


def test_a_swap_replaces_the_subject_with_another_of_as_many_pieces(llama):
    q, ct = prompts.trace_prompt(llama, "the cat sat on the mat", "cat", corruption="swap", samples=2,
                                 swap_subjects=["dog", "cat", "zebra crossing"])
    assert ct.swapped_names == ["dog"] and ct.metric == "logit difference"


@pytest.mark.parametrize(("prompt", "subject", "says"), [
    ("the cat sat on the mat", "dog", "'dog' is not in the prompt"),
    ("", "cat", "Type a prompt"),
    ("the cat sat on the mat", (3, 99), "not in the prompt's"),
])
def test_bad_prompts_say_one_sentence(llama, prompt, subject, says):
    with pytest.raises(wf.WhereFromError, match=says):
        wf.read_prompt(llama.model, llama.tokenizer, prompt, subject)


def test_a_subject_cut_off_by_the_context_says_so():
    loaded = ours()
    long = "the cat sat " + "on a mat " * 10  # more pieces than the model's 48 positions
    with pytest.raises(wf.WhereFromError, match="lies before the last 48 pieces"):
        wf.read_prompt(loaded.model, loaded.tokenizer, long, "cat")


def test_the_commands_json_is_the_pages_grid(llama, tmp_path):
    from ui import where_from_prompt

    folder = str(llama.path)
    lines = tmp_path / "prompts.tsv"
    lines.write_text("the cat sat on the mat\tcat\nthe cat sat on the\tcat\tmat\nA dog ran\tzebra\n"
                     "no subject\n", encoding="utf-8")
    out = tmp_path / "out.jsonl"
    assert cli.main([folder, "--prompts", str(lines), "-o", str(out), "--samples", "3"]) == 0
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert [r["line"] for r in rows] == [1, 2, 3, 4]
    assert "'zebra' is not in the prompt" in rows[2]["problem"] and "no subject" in rows[3]["problem"]
    for row, target in zip(rows[:2], [None, "mat"]):
        span = (row["subject positions"][0], row["subject positions"][-1] + 1)  # as the page marks it
        q, ct = where_from_prompt.prompt_trace(llama, row["prompt"], span, target, "noise", 3, 0)
        grids = row["causal trace"]
        assert row["subject positions"] == q.name_positions and grids["sentence"] == ct.sentence()
        for kind in wf.KINDS:
            np.testing.assert_allclose(grids["scores"][kind], ct.scores[kind], atol=2e-6)
            np.testing.assert_allclose(grids["recovered"][kind], ct.recovered(kind), atol=2e-6)


def test_the_command_traces_a_birthplace_prompt_as_the_page_reads_it(tmp_path):
    lines = tmp_path / "p.tsv"
    lines.write_text("Where was Lise Meitner born?\tLise Meitner\tVienna\n", encoding="utf-8")
    out = tmp_path / "out.jsonl"
    assert cli.main([str(BUNDLED), "--prompts", str(lines), "-o", str(out), "--samples", "2"]) == 0
    row = json.loads(out.read_text(encoding="utf-8"))
    assert row["tokens"][-1] == "MASK" and row["target piece"] == "V"  # the typed '?' gets the MASK


def test_the_command_refuses_a_bad_file_or_model_in_one_sentence(tmp_path, capsys, llama):
    empty = tmp_path / "empty.tsv"
    empty.write_text("\n\n", encoding="utf-8")
    assert cli.main([str(llama.path), "--prompts", str(empty)]) == 2
    assert cli.main([str(llama.path), "--prompts", str(tmp_path / "missing.tsv")]) == 2
    good = tmp_path / "good.tsv"
    good.write_text("the cat\tcat\n", encoding="utf-8")
    assert cli.main(["no-such-org/no-such-model", "--prompts", str(good)]) == 2
    err = capsys.readouterr().err
    assert "is empty" in err and "does not exist" in err and "Traceback" not in err
    assert len([line for line in err.splitlines() if line.startswith("error:")]) == 3


def test_the_attention_page_traces_the_typed_sentence(monkeypatch, llama, tmp_path):
    from tests.test_attention_page import assert_no_exception, open_page

    models = tmp_path / "models"
    models.mkdir()
    (models / "llama").symlink_to(llama.path, target_is_directory=True)
    at = open_page(monkeypatch, models, model="llama", text="the cat sat on the mat", wf="1")
    assert at.select_slider(key="wf_prompt_subject").value == ("1: ␣the", "1: ␣the")  # the first piece after <s>
    at.select_slider(key="wf_prompt_subject").set_value(("2: ␣cat", "2: ␣cat"))
    at.number_input(key="wf_prompt_samples").set_value(3)
    at.button(key="wf_prompt_run").click().run()
    assert_no_exception(at)
    _, ct = prompts.trace_prompt(llama, "the cat sat on the mat", (2, 3), samples=3, seed=0)
    shown = " ".join(m.value for m in at.markdown).replace("\\", "")
    assert ct.sentence() in shown
    at.select_slider(key="wf_prompt_subject").set_value(("5: ␣the", "6: ␣mat")).run()  # not traced yet: asks
    assert ct.sentence() not in " ".join(m.value for m in at.markdown).replace("\\", "")
    assert at.button(key="wf_prompt_run")


def test_a_model_the_lab_cannot_split_keeps_its_one_sentence(tmp_path):
    require_hf_extra()
    from bench.hf_folders import decoder_folder

    bloom = load(decoder_folder(tmp_path / "bloom", "bloom"))
    with pytest.raises(wf.WhereFromError, match="has none to patch"):
        prompts.trace_prompt(bloom, "the cat sat on the mat", "cat", samples=1)


def test_the_pages_first_subject_is_the_name_a_question_asks_about():
    loaded = load(BUNDLED)
    prompt = prompts.as_read(loaded, "Where was Ada Lovelace born?")
    first, end = prompts.subject_guess(loaded.tokenizer, prompt)
    assert "".join(loaded.tokenizer.tokenize(prompt).tokens[first:end]) == "Ada Lovelace"
    assert prompts.subject_guess(loaded.tokenizer, "the cat sat on the mat") is None
