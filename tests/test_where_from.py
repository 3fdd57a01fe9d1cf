"""core.lens.where_from: logit lens, direct attribution, causal tracing, input attribution, the dev-set averages
and the command. The references below are written with plain torch forward hooks on the model's modules; they
import nothing of where_from's code."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from core.io.checkpoint import load
from core.lens import where_from as wf
from core.lens.where_from import cli, dev_set
from core.model.tokenizer import CharTokenizer
from tests.conftest import tiny_model

ROOT = Path(__file__).resolve().parents[1]
BUNDLED = ROOT / "checkpoints" / "birth-vanilla-pretrained.safetensors"
DEV = ROOT / "data" / "knowledge" / "birth_dev.tsv"
CHARS = CharTokenizer.from_corpus("Where was Ada Lovelace Alan Turing Bob Smith born? London Paris")


@pytest.fixture(scope="module")
def bundled():
    return load(BUNDLED)


@pytest.fixture(scope="module")
def dev_pairs():
    return [tuple(line.split("\t")) for line in DEV.read_text(encoding="utf-8").splitlines() if line.strip()]


def small():
    return tiny_model(CHARS.vocab_size, block_size=48, n_embd=32, n_head=4, n_layer=2)


# --- the logit lens and direct attribution -----------------------------------------------------------


def test_the_logit_lens_last_row_is_the_models_own_output(bundled, dev_pairs):
    for question, truth in dev_pairs[:5]:
        q = wf.read_question(bundled.model, bundled.tokenizer, question, truth)
        rec = wf.record(bundled.model, q)
        lens = wf.logit_lens(bundled.model, bundled.tokenizer, rec, q.answer_id)
        own = torch.softmax(rec.logits[0].double(), -1)  # (T, V)
        np.testing.assert_allclose(lens.probs_last[-1], own[-1].numpy(), atol=1e-5)
        np.testing.assert_allclose(lens.answer_prob[-1], own[:, q.answer_id].numpy(), atol=1e-5)
        assert lens.top_ids[-1].tolist() == own.argmax(-1).tolist()
        assert lens.answer_rank.min() >= 1 and lens.layers == ["embeddings", "after layer 0", "after layer 1"]
        row = lens.first_top_layer
        assert (row is None) == ("never" in lens.sentence())


def test_attribution_adds_up_to_the_answer_logit_for_every_dev_question(bundled, dev_pairs):
    assert len(dev_pairs) == 200
    for question, truth in dev_pairs:
        q = wf.read_question(bundled.model, bundled.tokenizer, question, truth)
        rec = wf.record(bundled.model, q)
        attribution = wf.direct_attribution(bundled.model, rec, q.answer_id)
        assert abs(attribution.total - attribution.logit) < 1e-4, question
        assert abs(sum(attribution.by_layer().values()) - attribution.logit) < 1e-4
        assert attribution.logit == pytest.approx(float(rec.logits[0, -1, q.answer_id]))


def test_every_dev_name_is_found_even_where_a_letter_is_two_byte_pieces(bundled, dev_pairs):
    for question, truth in dev_pairs:
        q = wf.read_question(bundled.model, bundled.tokenizer, question, truth)
        assert q.name_positions, question
        assert q.raw[q.name_positions[0]] == q.name[:len(q.raw[q.name_positions[0]])]
        assert q.raw[q.name_positions[-1] + 1] == " "  # the name ends where the question goes on
    q = wf.read_question(bundled.model, bundled.tokenizer, "Where was Nela \u0160vecov\u00e1 born?", "Prague")
    assert [q.raw[p] for p in q.name_positions] == ["N", "ela", "\u0160", "\u0160", "v", "ec", "ov\u00e1"]


def test_the_name_and_the_answer_are_found_in_the_question(bundled):
    q = wf.read_question(bundled.model, bundled.tokenizer, "Where was Michelle Lefort born?", "Paris")
    assert "".join(q.raw[p] for p in range(q.name_positions[0], q.name_positions[-1] + 1)) == "Michelle Lefort"
    assert q.raw[-1] == "\u2047" and q.answer_piece == "Paris" and not q.own_answer
    fabricated = wf.read_question(bundled.model, bundled.tokenizer, "Where was Mara Dunn born?")
    with torch.no_grad():
        logits, _ = bundled.model(torch.tensor([fabricated.ids]))
    assert fabricated.own_answer and fabricated.answer_id == int(logits[0, -1].argmax())
    assert "own first piece" in fabricated.note and "guess" in fabricated.note
    with pytest.raises(wf.WhereFromError):
        wf.read_question(bundled.model, bundled.tokenizer, "   ")


# --- causal tracing ----------------------------------------------------------------------------------


def test_causal_tracing_properties(bundled):
    model, tok = bundled.model, bundled.tokenizer
    q = wf.read_question(model, tok, "Where was Michelle Lefort born?", "Paris")
    rec = wf.record(model, q)
    clean_p = float(torch.softmax(rec.logits[0, -1].double(), -1)[q.answer_id])
    intact = wf.causal_trace(model, tok, q, rec, corruption="none")
    for kind in wf.KINDS:
        possible = ~intact.impossible
        assert (intact.recovered(kind)[possible] == 1).all()
        np.testing.assert_allclose(intact.scores[kind][possible], intact.clean, atol=1e-6)
        np.testing.assert_allclose(intact.scores[kind][possible], clean_p, atol=1e-5)  # fused vs explicit softmax
    noisy = wf.causal_trace(model, tok, q, rec, corruption="noise", samples=4, seed=7)
    assert noisy.clean == pytest.approx(clean_p, abs=1e-5) and noisy.corrupted < noisy.clean
    assert noisy.scores["residual"][-1, -1] == pytest.approx(noisy.clean, abs=1e-6)  # the final state: all of it
    assert noisy.recovered("residual")[-1, -1] == pytest.approx(1.0, abs=1e-5)
    assert noisy.impossible[-1, :-1].all() and not noisy.impossible[:, -1].any() and not noisy.impossible[0].any()
    for kind in wf.KINDS:
        assert (noisy.effect(kind)[noisy.impossible] == 0).all()
        assert (noisy.recovered(kind)[noisy.impossible] == 0).all()
    again = wf.causal_trace(model, tok, q, rec, corruption="noise", samples=4, seed=7)
    other = wf.causal_trace(model, tok, q, rec, corruption="noise", samples=4, seed=8)
    for kind in wf.KINDS:
        np.testing.assert_array_equal(again.scores[kind], noisy.scores[kind])
    assert not np.array_equal(other.scores["residual"], noisy.scores["residual"])
    assert "brings back the most" in noisy.sentence()
    json.dumps(noisy.to_json())  # JSON-ready


def test_a_name_swap_needs_a_name_of_as_many_pieces(bundled, dev_pairs):
    model, tok = bundled.model, bundled.tokenizer
    names = [wf.question.name_from_question(qq) for qq, _ in dev_pairs]
    q = wf.read_question(model, tok, "Where was Michelle Lefort born?", "Paris")
    swapped = wf.causal_trace(model, tok, q, corruption="swap", swap_names=names, samples=3)
    assert swapped.metric == "logit difference" and len(swapped.swapped_names) == 3
    assert "Michelle Lefort" not in swapped.swapped_names
    for name in swapped.swapped_names:
        other = wf.read_question(model, tok, f"Where was {name} born?", "Paris")
        assert len(other.ids) == len(q.ids) and len(other.name_positions) == len(q.name_positions)
    assert swapped.scores["residual"][-1, -1] == pytest.approx(swapped.clean, abs=1e-5)
    with pytest.raises(wf.WhereFromError, match="swap in"):
        wf.causal_trace(model, tok, q, corruption="swap", swap_names=["Bo"])


def _reference_grids(model, ids, names, answer, noise_rows):
    """Plain torch hooks: one forward per (sample, kind, layer, position), restoring one clean output."""
    blocks = list(model.blocks)
    modules = {"residual": blocks, "attention": [b.attn for b in blocks], "MLP": [b.mlp for b in blocks]}
    idx = torch.tensor([ids])
    clean = {kind: [] for kind in modules}
    handles = [m.register_forward_hook(lambda _m, _i, out, kind=kind: clean[kind].append(
        (out[0] if isinstance(out, tuple) else out).detach().clone())) for kind, ms in modules.items() for m in ms]
    with torch.no_grad():
        clean_p = torch.softmax(model(idx)[0][0, -1].double(), -1)[answer].item()
    for h in handles:
        h.remove()

    def run(sample, restore=None):
        def noised(_m, _i, out):
            return out + noise_rows[sample]

        hooks = [model.tok_emb.register_forward_hook(noised)]
        if restore is not None:
            kind, layer, t = restore

            def patch(_m, _i, out):
                value = out[0] if isinstance(out, tuple) else out
                value = value.clone()
                value[0, t] = clean[kind][layer][0, t]
                return (value,) + tuple(out[1:]) if isinstance(out, tuple) else value

            hooks.append(modules[kind][layer].register_forward_hook(patch))
        with torch.no_grad():
            p = torch.softmax(model(idx)[0][0, -1].double(), -1)[answer].item()
        for h in hooks:
            h.remove()
        return p

    S, L, T = noise_rows.shape[0], len(blocks), len(ids)
    corrupted = np.mean([run(s) for s in range(S)])
    grids = {kind: np.array([[np.mean([run(s, (kind, layer, t)) for s in range(S)]) for t in range(T)]
                             for layer in range(L)]) for kind in modules}
    return clean_p, corrupted, grids


@pytest.mark.parametrize("group_rows", [1, 10**9], ids=["from each row's first restored piece", "whole batch"])
def test_causal_trace_matches_an_independent_reference_written_with_forward_hooks(monkeypatch, group_rows):
    from core.lens.where_from import tracing

    monkeypatch.setattr(tracing, "GROUP_ROWS", group_rows)  # 1: every row goes on from its first restored piece
    model = small()
    q = wf.read_question(model, CHARS, "Where was Ada Lovelace born?", "London")
    assert len(q.name_positions) == len("AdaLovelace")
    samples, seed, noise = 2, 3, 3.0
    product = wf.causal_trace(model, CHARS, q, corruption="noise", samples=samples, seed=seed, noise=noise)
    # the documented protocol, re-implemented: N(0, 1) draws from a seeded generator, times noise x the std of
    # the name pieces' token embeddings, added to those pieces' token embeddings
    names = q.name_positions
    std = model.tok_emb.weight[torch.tensor([q.ids[p] for p in names])].detach().float().std()
    draws = torch.randn(samples, len(names), model.config.n_embd, generator=torch.Generator().manual_seed(seed))
    noise_rows = torch.zeros(samples, 1, len(q.ids), model.config.n_embd)
    noise_rows[:, 0, names] = draws * noise * std
    clean, corrupted, grids = _reference_grids(model, q.ids, names, q.answer_id, noise_rows)
    assert product.clean == pytest.approx(clean, abs=1e-6) and product.corrupted == pytest.approx(corrupted, abs=1e-6)
    for kind in wf.KINDS:
        np.testing.assert_allclose(product.scores[kind], grids[kind], atol=1e-5)
        # the cells greyed out really cannot matter: the reference finds no effect there either
        assert np.abs(grids[kind][product.impossible] - corrupted).max() < 1e-6


def test_attribution_matches_an_independent_reference_written_with_forward_hooks():
    model = small()
    q = wf.read_question(model, CHARS, "Where was Alan Turing born?", "London")
    merged, mlp, final = [], [], []
    handles = [b.attn.proj.register_forward_pre_hook(lambda _m, args: merged.append(args[0][0, -1].double()))
               for b in model.blocks]
    handles += [b.mlp.register_forward_hook(lambda _m, _i, out: mlp.append(out[0, -1].double())) for b in model.blocks]
    handles.append(model.ln_f.register_forward_pre_hook(lambda _m, args: final.append(args[0][0, -1].double())))
    idx = torch.tensor([q.ids])
    with torch.no_grad():
        logits, _ = model(idx)
        embedded = model.pos.embed(model.tok_emb(idx), 0)[0, -1].double()
    for h in handles:
        h.remove()
    gamma, beta = model.ln_f.weight.detach().double(), model.ln_f.bias.detach().double()
    w = model.head.unembed.weight[q.answer_id].detach().double()
    x = final[0]
    scale = torch.sqrt(x.var(unbiased=False) + model.ln_f.eps)

    def share(c):
        return float(((c - c.mean()) * gamma / scale) @ w)

    expected = [share(embedded)]
    hs = model.config.n_embd // model.config.n_head
    for layer, block in enumerate(model.blocks):
        W = block.attn.proj.weight.detach().double()
        expected += [share(merged[layer][h * hs:(h + 1) * hs] @ W[:, h * hs:(h + 1) * hs].T)
                     for h in range(model.config.n_head)]
        expected += [share(block.attn.proj.bias.detach().double()), share(mlp[layer])]
    expected.append(float(beta @ w))
    product = wf.direct_attribution(model, wf.record(model, q), q.answer_id)
    np.testing.assert_allclose(product.values, expected, atol=1e-5)
    assert sum(expected) == pytest.approx(float(logits[0, -1, q.answer_id]), abs=1e-4)


# --- input attribution --------------------------------------------------------------------------------


def test_integrated_gradients_are_complete_and_gradient_x_input_is_the_first_order_term(bundled):
    q = wf.read_question(bundled.model, bundled.tokenizer, "Where was Michelle Lefort born?", "Paris")
    salience = wf.input_attribution(bundled.model, q, steps=30)
    assert salience.integrated_gradients.shape == (len(q.ids),) == salience.gradient_x_input.shape
    total = salience.log_prob - salience.baseline_log_prob
    assert abs(salience.completeness_gap) < 0.05 * max(1.0, abs(total))  # midpoint rule, 30 steps
    with torch.no_grad():
        logits, _ = bundled.model(torch.tensor([q.ids]))
    assert salience.log_prob == pytest.approx(float(torch.log_softmax(logits[0, -1].double(), -1)[q.answer_id]),
                                              abs=1e-5)
    again = wf.input_attribution(bundled.model, q, steps=30)
    np.testing.assert_array_equal(again.integrated_gradients, salience.integrated_gradients)
    assert all(p.grad is None for p in bundled.model.parameters())  # nothing accumulated into the shared model


# --- Hugging Face GPT-2 ---------------------------------------------------------------------------------


def test_a_gpt2_folder_logit_lens_and_attribution_match_transformers_hidden_states(tmp_path):
    pytest.importorskip("transformers")
    from tests.hf_models import gpt2_folder

    loaded = load_hf(gpt2_folder(tmp_path / "gpt2"))
    model, tok = loaded.model, loaded.tokenizer
    ids = tok.encode("Hello world, the cat sat on the mat")
    rec = wf.question.trace(model, ids, activations=True)
    answer = int(rec.logits[0, -1].argmax())
    lens = wf.logit_lens(model, tok, rec, answer)
    inner = model.inner
    final_in = []
    handle = inner.transformer.ln_f.register_forward_pre_hook(lambda _m, args: final_in.append(args[0][0]))
    with torch.no_grad():
        out = inner(input_ids=torch.tensor([ids]), output_hidden_states=True)
    handle.remove()
    hidden = list(out.hidden_states[:-1]) + [final_in[0][None]]  # the last entry of HF's is after ln_f
    ln, W = inner.transformer.ln_f, inner.lm_head.weight
    with torch.no_grad():
        expected = [torch.softmax((ln(h[0]) @ W.T).double(), -1) for h in hidden]
    for row, probs in enumerate(expected):
        np.testing.assert_allclose(lens.answer_prob[row], probs[:, answer].numpy(), atol=1e-5)
    np.testing.assert_allclose(lens.probs_last[-1], torch.softmax(out.logits[0, -1].double(), -1).numpy(), atol=1e-5)
    attribution = wf.direct_attribution(model, rec, answer)
    assert attribution.total == pytest.approx(float(out.logits[0, -1, answer]), abs=1e-4)
    # each block's share from transformers' own streams: what block l added, through the frozen LayerNorm
    x = hidden[-1][0, -1].double()
    scale = torch.sqrt(x.var(unbiased=False) + ln.eps)
    w = W[answer].detach().double() * ln.weight.detach().double() / scale

    def share(c):
        return float((c - c.mean()) @ w)

    by_layer = attribution.by_layer()
    assert by_layer["embeddings"] == pytest.approx(share(hidden[0][0, -1].double()), abs=1e-5)
    for layer in range(len(hidden) - 1):
        added = (hidden[layer + 1] - hidden[layer])[0, -1].double()
        assert by_layer[f"attention {layer}"] + by_layer[f"MLP {layer}"] == pytest.approx(share(added), abs=1e-5)
    assert wf.patchable(model)  # a pre-norm decoder: causal tracing patches it (tests/test_hf_families.py)


def load_hf(folder):
    from core.io.hf import load_folder

    return load_folder(folder)


# --- the dev set, kept; the command --------------------------------------------------------------------


def test_averages_are_computed_once_and_kept_beside_the_checkpoint(tmp_path, bundled, dev_pairs):
    checkpoint = tmp_path / BUNDLED.name
    shutil.copy(BUNDLED, checkpoint)
    questions = tmp_path / "birth_dev.tsv"
    questions.write_text("".join(f"{q}\t{t}\n" for q, t in dev_pairs[:6]), encoding="utf-8")
    loaded = load(checkpoint)
    seen = []
    first, kept = dev_set.kept_averages(checkpoint, loaded, questions, samples=2, progress=lambda d, n: seen.append(d))
    assert not kept and seen[-1] == 6 and first.traced + sum(first.skipped.values()) == 6
    assert dev_set.sidecar_path(checkpoint).is_file()
    again, kept = dev_set.kept_averages(checkpoint, loaded, questions, samples=2)
    assert kept and again.to_json() == json.loads(json.dumps(first.to_json()))
    assert set(first.groups) >= {"all"} and first.groups["all"].count == first.traced
    grid = first.grid("all", "residual")
    assert grid.shape == (2, len(wf.POSITION_CLASSES))
    questions.write_text(questions.read_text(encoding="utf-8") + f"{dev_pairs[7][0]}\t{dev_pairs[7][1]}\n",
                         encoding="utf-8")
    assert dev_set.read_kept(checkpoint, loaded.model, questions.read_text(encoding="utf-8"),
                             dev_set.options_key("noise", None, 3.0, 2, 0)) is None  # other questions: stale


def test_position_classes_follow_rome():
    assert dev_set.position_classes([4, 5, 6], 10) == [[0, 1, 2, 3], [4], [5], [6], [7, 8], [9]]
    assert dev_set.position_classes([2], 4) == [[0, 1], [2], [], [2], [], [3]]
    grid = np.arange(20, dtype=float).reshape(2, 10)
    classed = dev_set.classed(grid, [4, 5, 6])
    assert classed[0, 0] == 1.5 and classed[1, 5] == 19 and np.isfinite(classed).all()


def test_the_command_writes_one_json_line_per_question(tmp_path, capsys):
    questions = tmp_path / "q.tsv"
    questions.write_text("Where was Michelle Lefort born?\tParis\nWhere was Mara Dunn born?\n", encoding="utf-8")
    out = tmp_path / "out.jsonl"
    assert cli.main([str(BUNDLED), "--questions", str(questions), "-o", str(out), "--samples", "2"]) == 0
    lines = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert [line["question"] for line in lines] == ["Where was Michelle Lefort born?", "Where was Mara Dunn born?"]
    first = lines[0]
    assert first["causal_trace"]["corruption"] == "noise" and first["causal_trace"]["samples"] == 2
    assert first["causal_trace"]["seed"] == 0 and first["causal_trace"]["noise"] == 3.0
    assert set(first["causal_trace"]["recovered"]) == set(wf.KINDS)
    pieces = first["attribution"]["pieces"]
    assert abs(sum(p["logit contribution"] for p in pieces) - first["attribution"]["logit"]) < 1e-4
    assert lines[1]["traces_own_answer"] is True
    capsys.readouterr()


@pytest.mark.parametrize("content, expected", [(b"", "is empty"), (b"\xff\xfe\x00", "not UTF-8"),
                                               ("Where was \u2047 born?".encode(), "reserved")])
def test_a_bad_question_file_is_one_sentence(tmp_path, capsys, content, expected):
    bad = tmp_path / "bad.tsv"
    bad.write_bytes(content)
    assert cli.main([str(BUNDLED), "--questions", str(bad)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error:") and expected in err and "Traceback" not in err and err.count("\n") == 0
    assert cli.main([str(BUNDLED), "--questions", str(tmp_path / "missing.tsv")]) == 2
    assert "does not exist" in capsys.readouterr().err


def test_a_bert_folder_records_its_residual_stream_and_refuses_the_lens_in_one_sentence(tmp_path):
    pytest.importorskip("transformers")
    from tests.hf_models import bert_folder

    loaded = load_hf(bert_folder(tmp_path / "bert"))
    ids = loaded.tokenizer.encode("the cat sat on the mat")
    rec = wf.question.trace(loaded.model, ids, activations=True)
    acts = rec.activations
    with torch.no_grad():
        hidden = loaded.model.inner(input_ids=torch.tensor([ids]), output_hidden_states=True).hidden_states
    assert acts.resid_pre.shape == (2, len(ids), 16) and acts.head_out is None and acts.final_scale is None
    np.testing.assert_allclose(acts.resid_post[-1], hidden[-1][0].numpy(), atol=1e-6)
    np.testing.assert_allclose(acts.resid_pre[0], hidden[0][0].numpy(), atol=1e-6)
    with pytest.raises(wf.WhereFromError, match="BERT"):
        wf.logit_lens(loaded.model, loaded.tokenizer, rec, 5)


def test_a_tiny_total_effect_is_called_out():
    note = wf.tracing.weak_effect_note("probability", 0.016, 0.014)
    assert "shares of almost nothing" in note and "+0.002" in note
    assert wf.tracing.weak_effect_note("probability", 0.78, 0.03) == ""
    assert wf.tracing.weak_effect_note("logit difference", 12.3, -14.1) == ""


@pytest.mark.parametrize("against", [0, 1, 3, 4, 7])
def test_the_attribution_sentence_counts_and_names_the_same_heads(against):
    """Issue 41: "4 head(s) push against it (L1 H0, L1 H1, L1 H2)" listed three of four."""
    heads = [f"L{i // 4} H{i % 4}" for i in range(8)]
    values = np.array([0.5] * (8 - against) + [-0.1 * (k + 1) for k in range(against)] + [1.0])
    attribution = wf.Attribution(names=heads + ["MLP 0"], kinds=["head"] * 8 + ["MLP"], layers=[0] * 9,
                                 values=values, logit=float(values.sum()), answer_piece="x", position=-1)
    sentence = attribution.sentence()
    pushing = [h for h, v in zip(heads, values) if v < 0]
    if not pushing:
        assert "push" not in sentence
        return
    match = re.search(r"; (\d+) heads? push(?:es)? against it(?:, the strongest (\d+) of them (.+)| \((.+)\))\.$",
                      sentence)
    assert match, sentence
    count, shown_count, partial, full = match.groups()
    named = (partial or full).replace(" and ", ", ").split(", ")
    assert int(count) == len(pushing) and set(named) <= set(pushing)
    assert len(named) == (int(shown_count) if shown_count else len(pushing)), sentence
    strongest = sorted(pushing, key=lambda h: values[heads.index(h)])[:len(named)]
    assert named == strongest  # the strongest push first


def test_a_grid_that_cannot_teach_says_so_and_the_threshold_is_what_the_constant_says(bundled, dev_pairs):
    """tracing.LOCALISED_SHARE's comment, measured: with noise on the name (the page's 10 draws) no single state
    brings back 10% for the probe's opening question or for Nela Švecová, and a name swap does for her."""
    truths = dict(dev_pairs)
    names = [q.removeprefix("Where was ").removesuffix(" born?") for q, _ in dev_pairs]

    def trace(person: str, corruption: str) -> wf.CausalTrace:
        question = f"Where was {person} born?"
        q = wf.read_question(bundled.model, bundled.tokenizer, question, truths[question])
        return wf.causal_trace(bundled.model, bundled.tokenizer, q, corruption=corruption, swap_names=names)

    opening = trace(names[0], "noise")
    assert opening.best_share < wf.tracing.LOCALISED_SHARE and opening.total_effect > 0.3
    lesson = opening.lesson()
    assert lesson.startswith(f"No single restored state brings back more than {opening.best_share:.0%} of the "
                             f"{opening.total_effect:.3f} the corruption took away")
    # the one cell the grid draws dark is named as left out, and it is the final state restoring all of it
    assert lesson.endswith("restoring it brings back all of it, so it is left out.)")
    assert opening.recovered("residual")[-1, -1] == pytest.approx(1.0, abs=1e-6)
    nela = trace("Nela Švecová", "noise")
    assert nela.best_share < wf.tracing.LOCALISED_SHARE and nela.lesson() is not None
    swapped = trace("Nela Švecová", "swap")
    assert swapped.best_share > 0.5 and swapped.lesson() is None  # the view that teaches
    assert trace("Jeanette Pedersen", "noise").lesson() is None
    # too little effect to share: said as such, with the numbers
    weak = wf.CausalTrace(tokens=["a", "b"], name_positions=[0], answer_piece="x", corruption="noise",
                          metric="probability", noise=3.0, noise_std=1.0, seed=0, samples=1, window=1,
                          swapped_names=[], clean=0.016, corrupted=0.014, corrupted_answer="y",
                          scores={k: np.full((2, 2), 0.015) for k in wf.KINDS}, impossible=np.zeros((2, 2), bool))
    assert weak.lesson().startswith("The corruption moves the answer's probability by only +0.002 (0.016 clean, "
                                    "0.014 corrupted): there is too little effect to share out")


@pytest.mark.parametrize("corruption", ["noise", "swap"])
def test_the_shared_question_start_is_read_once_and_changes_nothing(bundled, monkeypatch, corruption):
    # causal_trace reads the pieces before the name once (shared_start) and every row goes on from their keys and
    # values; the grids equal those of the full batch, where every row reads the whole question
    from core.lens.where_from import tracing

    q = wf.read_question(bundled.model, bundled.tokenizer, "Where was Lise Meitner born?", "Vienna")
    names = ["Lisa Meitner", "Lise Meltner", "Lore Meitner", "Lise Heitner"]
    assert tracing.shared_start(bundled.model, q.name_positions, corruption, len(q.ids)) == q.name_positions[0] > 3
    shared = wf.causal_trace(bundled.model, bundled.tokenizer, q, corruption=corruption, samples=3, swap_names=names)
    monkeypatch.setattr(tracing, "shared_start", lambda *args: 0)
    full = wf.causal_trace(bundled.model, bundled.tokenizer, q, corruption=corruption, samples=3, swap_names=names)
    assert shared.clean == pytest.approx(full.clean, rel=1e-5, abs=1e-6)  # float32 logits of ~8 (swap)
    for kind in wf.KINDS:
        np.testing.assert_allclose(shared.scores[kind], full.scores[kind], rtol=1e-5, atol=1e-5)
    for kind, rows in full.summary.items():
        assert shared.summary[kind] == pytest.approx(rows, rel=1e-4)  # shares of a small total effect


def test_rows_go_on_from_their_first_restored_piece_and_change_nothing(bundled, monkeypatch):
    # ROME's 10 noise samples: each group of rows that first restores at one position goes on from there with its
    # sample's keys and values before it (restored_logits); the grids equal those of the whole batch
    from core.lens.where_from import tracing

    q = wf.read_question(bundled.model, bundled.tokenizer, "Where was Lise Meitner born?", "Vienna")
    T, shared = len(q.ids), q.name_positions[0]
    passes = []
    real = bundled.model.hidden_states
    monkeypatch.setattr(bundled.model, "hidden_states", lambda idx, **kw: passes.append(idx.shape) or real(idx, **kw))
    grouped = wf.causal_trace(bundled.model, bundled.tokenizer, q)
    runs = [tuple(shape) for shape in passes[-(T - shared) - 2:]]
    passes.clear()
    monkeypatch.setattr(tracing, "GROUP_ROWS", 10**9)
    monkeypatch.setattr(tracing, "CHUNK_TOKENS", 10**9)  # one pass, not passes of CHUNK_TOKENS positions
    whole = wf.causal_trace(bundled.model, bundled.tokenizer, q)
    rows = passes[-1][0]  # the whole batch: every row reads every piece after the shared start
    assert tuple(passes[-1]) == (rows, T - shared) and rows > 300
    # the shared start; the unrestored rows (10 samples and the clean question) whole; then one pass per first
    # restored position, each one piece shorter than the last; every row of the batch in exactly one of them
    assert runs[:2] == [(1, shared), (11, T - shared)]
    assert [length for _, length in runs[2:]] == list(range(T - shared, 0, -1))
    assert 11 + sum(n for n, _ in runs[2:]) == rows
    assert sum(n * length for n, length in runs[1:]) < 0.6 * rows * (T - shared)  # pieces computed
    assert grouped.clean == pytest.approx(whole.clean, abs=1e-6)
    assert grouped.corrupted == pytest.approx(whole.corrupted, abs=1e-6)
    for kind in wf.KINDS:
        np.testing.assert_allclose(grouped.scores[kind], whole.scores[kind], atol=1e-5)
    for kind, shares in whole.summary.items():
        assert grouped.summary[kind] == pytest.approx(shares, rel=1e-4, abs=1e-5)


def test_the_attribution_sentence_names_the_charts_bars_in_the_charts_order():
    """The walk-through read "Largest: embeddings +0.38, MLP 1 +0.03, attention 0 -0.02" beside a chart with no
    'attention 0' bar (per-layer sums) and L1 H1 at +0.06. The sentence now names the three bars largest in
    absolute value, as the chart draws them, top to bottom, and quotes the piece as the chart labels it."""
    from core.figures.where_from import attribution_bars

    names = ["embeddings", "L0 H0", "L0 H1", "L1 H0", "L1 H1", "MLP 0", "MLP 1", "final LayerNorm bias"]
    kinds = ["embeddings", "head", "head", "head", "head", "MLP", "MLP", "LayerNorm bias"]
    values = np.array([0.38, -0.012, -0.011, 0.004, 0.06, 0.001, 0.03, -0.05])
    attribution = wf.Attribution(names=names, kinds=kinds, layers=[None, 0, 0, 1, 1, 0, 1, None], values=values,
                                 logit=float(values.sum()), answer_piece="\n", position=-1)
    sentence = attribution.sentence()
    fig = attribution_bars(names, values, attribution.logit, "\n")
    drawn = [fig.layout.yaxis.ticktext[int(y)] for y in fig.data[0].y]  # the bars, top to bottom
    largest = sorted(names, key=lambda n: -abs(values[names.index(n)]))[:3]
    in_chart_order = [n for n in drawn if n in largest]
    assert in_chart_order == ["embeddings", "L1 H1", "final LayerNorm bias"]
    listed = ", ".join(f"{n} {values[names.index(n)]:+.2f}" for n in in_chart_order)
    assert f"Largest bars, top to bottom: {listed}" in sentence, sentence
    assert "attention 0" not in sentence and "'⏎'" in sentence and "\\n" not in sentence
