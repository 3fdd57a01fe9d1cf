"""Editing one birthplace (core.lens.edit): the rank-one update against an independent reference, undo is
bitwise, no file on disk changes, the scorecard is a direct re-evaluation, a place of several pieces is written
whole, and bad input is one sentence."""

from __future__ import annotations

import copy
import hashlib
import shutil
from pathlib import Path

import pytest
import torch
from torch import nn

from core.io.checkpoint import load, read_metadata
from core.lens.edit import cli
from core.lens.edit.key_statistics import CACHE_ENV, cache_dir, compute_key_statistics, key_statistics
from core.lens.edit.methods import (
    METHODS,
    EditError,
    EditOptions,
    EditRequest,
    Site,
    check_editable,
    edit,
    edit_together,
)
from core.lens.edit.scorecard import GROUPS, Reference, namesakes, score
from core.lens.edit.weights import EDITS_KEY, EditedModel, save_edited
from core.lens.probe.corpus import WORLD_CITIES, load_probe_data
from core.lens.probe.evaluation import predict_birthplaces
from core.model.tokenizer import MASK_CHAR

ROOT = Path(__file__).resolve().parents[1]
BUNDLED = ROOT / "checkpoints" / "birth-vanilla-pretrained.safetensors"
SYNTHESIZER = ROOT / "checkpoints" / "birth-synthesizer-pretrained.safetensors"
WORLD = ROOT / "data" / "knowledge"
PERSON = "Michelle Lefort"  # dev, answered Paris by the bundled model


@pytest.fixture(scope="module")
def bundled():
    return load(BUNDLED)


@pytest.fixture(scope="module")
def data():
    return load_probe_data(WORLD)


@pytest.fixture(scope="module")
def corpus() -> str:
    lines = (WORLD / "wiki.txt").read_text(encoding="utf-8").splitlines()
    return "\n".join(lines[:600])  # enough documents for a well-conditioned C, a second to compute


@pytest.fixture(scope="module")
def stats(bundled, corpus):
    return compute_key_statistics(bundled.model, bundled.tokenizer, corpus)


@pytest.fixture(scope="module")
def reference(bundled, data):
    return Reference.of(bundled.model, bundled.tokenizer, data)


def state(model) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def same_bits(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) and a[k].dtype == b[k].dtype for k in a)


# --- the rank-one update, against a reference written here ------------------------------------------------


def reference_key(model, tokenizer, question: str, layer: int) -> torch.Tensor:
    """The GELU output of the layer's MLP at the prompt's last position, read with a plain forward hook."""
    kept = {}
    handle = model.blocks[layer].mlp[1].register_forward_hook(lambda _m, _i, out: kept.update(key=out))
    with torch.no_grad():
        model(torch.tensor([tokenizer.encode(question + MASK_CHAR)]))
    handle.remove()
    return kept["key"][0, -1].double()


def reference_moment(model, tokenizer, corpus: str, layer: int) -> torch.Tensor:
    """E[k k^T] over every position of every document, one document at a time."""
    keys = []
    handle = model.blocks[layer].mlp[1].register_forward_hook(lambda _m, _i, out: keys.append(out[0].double()))
    with torch.no_grad():
        for line in corpus.splitlines():
            ids = tokenizer.encode(line)[: model.config.block_size]
            if ids:
                model(torch.tensor([ids]))
    handle.remove()
    stacked = torch.cat(keys)  # (N, d_ff)
    return stacked.T @ stacked / stacked.size(0)


def test_the_rank_one_change_has_rank_one_and_maps_the_key_to_the_new_value(bundled, corpus, stats):
    model, tokenizer = bundled.model, bundled.tokenizer
    layer = 1
    moment = reference_moment(model, tokenizer, corpus, layer)
    assert torch.allclose(stats.moments[layer].double(), moment, rtol=1e-4, atol=1e-6)
    delta = edit(model, tokenizer, "rank-one", EditRequest(PERSON, "Berlin"), Site(layer, "last"), stats)
    name = f"blocks.{layer}.mlp.2.weight"
    change = delta.change(name).double()
    assert list(delta.after) == [name] and delta.record["updates"] == 1
    singular = torch.linalg.svdvals(change)
    assert singular[1] < 1e-5 * singular[0]  # rank one (float32 rounding aside)
    key = reference_key(model, tokenizer, f"Where was {PERSON} born?", layer)
    ridge = 1e-4 * moment.diagonal().mean() * torch.eye(moment.size(0), dtype=torch.float64)
    c_inv_k = torch.linalg.solve(moment + ridge, key)
    # the closed form: dW = (v - W k) (C^-1 k)^T / (k^T C^-1 k), where v - W k = dW k (the key maps to v)
    value_change = change @ key
    assert torch.allclose(change, torch.outer(value_change, c_inv_k) / (key @ c_inv_k), atol=1e-6, rtol=1e-3)
    # ... and the new value is what the question needs: the edited model answers the new place
    edited = EditedModel.copy_of(model)
    edited.apply(delta)
    weight_after = edited.model.blocks[layer].mlp[2].weight.double()
    weight_before = model.blocks[layer].mlp[2].weight.double()
    assert torch.allclose(weight_after @ key, weight_before @ key + value_change, atol=1e-4)
    assert predict_birthplaces(edited.model, tokenizer, [f"Where was {PERSON} born?"]) == ["Berlin"]
    # a key C^-1-orthogonal to the edited one reads exactly what it read before
    other = torch.randn(key.size(0), dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    other = other - (other @ c_inv_k) / (key @ c_inv_k) * key
    assert torch.allclose(change @ other, torch.zeros_like(change @ other), atol=1e-6)


@pytest.mark.parametrize("method", list(METHODS))
def test_an_edit_never_writes_the_model_it_reads_and_undo_is_bitwise(bundled, stats, method):
    model, tokenizer = bundled.model, bundled.tokenizer
    original = state(model)
    session = EditedModel.copy_of(model)
    first = edit(session.model, tokenizer, method, EditRequest(PERSON, "Berlin"), Site(1, "last"), stats)
    assert same_bits(state(model), original) and same_bits(state(session.model), original)
    session.apply(first)
    assert not same_bits(state(session.model), original)
    second = edit(session.model, tokenizer, method, EditRequest("Jeanette Pedersen", "Madrid"), Site(0, "subject"),
                  stats)
    session.apply(second)
    assert [r["method"] for r in session.records] == [method, method]
    session.undo()
    session.undo()
    assert session.undo() is None
    assert same_bits(state(session.model), original)
    assert same_bits(state(model), original)  # the shared model was never touched


def test_no_file_on_disk_changes_and_the_statistics_are_kept_by_the_checkpoints_hash(tmp_path, bundled, corpus,
                                                                                    data, reference, monkeypatch):
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    copy_path = tmp_path / "model.safetensors"
    shutil.copy(BUNDLED, copy_path)
    watched = [copy_path, *sorted(p for p in (ROOT / "checkpoints").glob("*") if p.is_file()),
               *sorted(WORLD.glob("*"))]

    def hashes() -> dict[Path, str]:
        return {p: hashlib.sha256(p.read_bytes()).hexdigest() for p in watched}

    before = hashes()
    model, tokenizer = bundled.model, bundled.tokenizer
    stats = key_statistics(copy_path, model, tokenizer, corpus)
    kept = list(cache_dir().iterdir())
    assert len(kept) == 1 and hashlib.sha256(copy_path.read_bytes()).hexdigest()[:16] in kept[0].name
    again = key_statistics(copy_path, model, tokenizer, corpus)  # read back, not recomputed
    assert all(torch.equal(a, b) for a, b in zip(stats.moments, again.moments))
    session = EditedModel.copy_of(model)
    for method in METHODS:
        session.apply(edit(session.model, tokenizer, method, EditRequest(PERSON, "Berlin"), Site(1, "last"), stats))
        score(model, session.model, tokenizer, data, EditRequest(PERSON, "Berlin"), reference)
    while session.undo():
        pass
    assert hashes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cache", "model.safetensors"]  # nothing beside it


def test_a_foreign_file_where_the_statistics_would_go_is_never_overwritten(tmp_path, bundled, corpus, monkeypatch):
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    copy_path = tmp_path / "model.safetensors"
    shutil.copy(BUNDLED, copy_path)
    key_statistics(copy_path, bundled.model, bundled.tokenizer, corpus)
    (kept,) = (tmp_path / "cache").iterdir()
    kept.write_bytes(b"a user's own file")
    stats = key_statistics(copy_path, bundled.model, bundled.tokenizer, corpus)
    assert kept.read_bytes() == b"a user's own file" and len(stats.moments) == 2


# --- the scorecard -----------------------------------------------------------------------------------------


def test_the_scorecard_is_a_direct_re_evaluation_of_the_edited_model(bundled, stats, data, reference):
    model, tokenizer = bundled.model, bundled.tokenizer
    request = EditRequest(PERSON, "Berlin")
    session = EditedModel.copy_of(model)
    session.apply(edit(session.model, tokenizer, "finetune", request, Site(1, "last"), stats))
    card = score(model, session.model, tokenizer, data, request, reference)
    question = f"Where was {PERSON} born?"
    assert card.answer_after == predict_birthplaces(session.model, tokenizer, [question])[0]
    assert card.efficacy == (card.answer_after == "Berlin")
    assert card.original_place == "Paris" and card.answer_before == "Paris"
    dev = card.groups[GROUPS[0]]
    assert len(dev.names) == 199 and PERSON not in dev.names
    questions = [f"Where was {n} born?" for n in dev.names]
    after = predict_birthplaces(session.model, tokenizer, questions)
    before = predict_birthplaces(model, tokenizer, questions)
    assert dev.after == after and dev.before == before
    assert dev.unchanged == sum(a == b for a, b in zip(after, before))
    same_place = list(card.groups.values())[2]
    assert same_place.label == "born in Paris" and same_place.names
    assert all(t == "Paris" for t in same_place.truths)
    assert same_place.after == predict_birthplaces(session.model, tokenizer,
                                                  [f"Where was {n} born?" for n in same_place.names])
    # the forms: the person's own documents cut before Paris, counted only where the model wrote Paris before
    assert card.forms and all(f.prompt.endswith("born in ") and f.place == "Paris" for f in card.forms)
    assert str(len(card.counted_forms)) in card.generalisation_sentence()
    assert {f.place for f in card.rest} >= {"Bristol"}  # she died in Bristol (wiki.txt)
    assert card.probabilities["new place after"] > card.probabilities["new place before"]


def test_namesakes_share_a_name_part_of_three_or_more_characters(data):
    found = namesakes(data, PERSON)
    assert found and all(({"Michelle", "Lefort"} & set(n.split())) for n in found) and PERSON not in found


def test_a_place_of_several_pieces_is_written_whole(bundled, stats):
    model, tokenizer = bundled.model, bundled.tokenizer
    # 'New Orleans' for a dev person after whose 'New' the model goes on with ' York' by itself: the later pieces
    # must be written too (the last layer at the last position reaches the first piece only)
    person, place = "Apolonia Zadworny", "New Orleans"
    assert len(tokenizer.encode(place)) == 3 and place in WORLD_CITIES
    for method, site in (("rank-one", Site(1, "last")), ("rank-one", Site(0, "subject")), ("finetune", Site(1)),
                         ("memit", Site(1, "last"))):
        delta = edit(model, tokenizer, method, EditRequest(person, place), site, stats)
        session = EditedModel.copy_of(model)
        session.apply(delta)
        assert predict_birthplaces(session.model, tokenizer, [f"Where was {person} born?"]) == [place], (method, site)
        if method == "rank-one" and site.layer == 1:
            assert delta.record["updates"] == 2  # a second rank-one update wrote 'Orleans' where it is predicted
        if method == "memit":
            assert delta.record["keys"] == 2  # 'Orleans' got its own key, solved together with the first
    question = f"Where was {PERSON} born?"
    long_place = "Newcastle upon Tyne"  # five pieces, the model's own continuation after 'Newcastle'
    for method in ("rank-one", "memit"):
        session = EditedModel.copy_of(model)
        session.apply(edit(model, tokenizer, method, EditRequest(PERSON, long_place), Site(1, "last"), stats))
        assert predict_birthplaces(session.model, tokenizer, [question]) == [long_place]


def test_memit_edits_several_facts_in_one_update(bundled, stats):
    model, tokenizer = bundled.model, bundled.tokenizer
    requests = [EditRequest(PERSON, "Berlin"), EditRequest("Jeanette Pedersen", "Madrid")]
    delta = edit_together(model, tokenizer, requests, Site(1, "last"), stats, EditOptions())
    assert delta.record["layers"] == [0, 1] and len(delta.record["facts"]) == 2
    session = EditedModel.copy_of(model)
    session.apply(delta)
    assert predict_birthplaces(session.model, tokenizer, [r.question for r in requests]) == ["Berlin", "Madrid"]


def test_the_edited_model_is_saved_with_every_edit_in_its_metadata(tmp_path, bundled, stats):
    session = EditedModel.copy_of(bundled.model)
    session.apply(edit(session.model, bundled.tokenizer, "rank-one", EditRequest(PERSON, "Berlin"), Site(1), stats))
    out = tmp_path / "edited.safetensors"
    save_edited(out, session, bundled.tokenizer, bundled.metadata, BUNDLED.name)
    meta = read_metadata(out)
    import json
    edits = json.loads(meta[EDITS_KEY])
    assert [(e["name"], e["new_place"], e["method"]) for e in edits] == [(PERSON, "Berlin", "rank-one")]
    assert meta["edited_from"] == BUNDLED.name and meta["data"] == bundled.metadata["data"]
    reloaded = load(out)
    assert same_bits(state(reloaded.model), state(session.model))


# --- bad input ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name, place, expected", [
    ("", "Berlin", "Type the name"),
    ("   ", "Berlin", "Type the name"),
    (PERSON, "", "Choose the new birthplace"),
    (PERSON, "Atlantis", "not a place this world knows"),
    (PERSON, f"Ber{MASK_CHAR}lin", "cannot be part"),
])
def test_bad_requests_are_one_sentence(bundled, stats, name, place, expected):
    known = sorted(set(WORLD_CITIES))
    with pytest.raises(EditError, match=expected) as info:
        edit(bundled.model, bundled.tokenizer, "rank-one", EditRequest(name, place), Site(1), stats, None, known)
    assert str(info.value).count(". ") == 0 and "\n" not in str(info.value)


def test_a_bad_site_is_one_sentence(bundled, stats):
    with pytest.raises(EditError, match="no layer 5"):
        edit(bundled.model, bundled.tokenizer, "rank-one", EditRequest(PERSON, "Berlin"), Site(5), stats)
    with pytest.raises(EditError, match="position class"):
        edit(bundled.model, bundled.tokenizer, "rank-one", EditRequest(PERSON, "Berlin"), Site(1, "first"), stats)


def test_the_synthesizer_has_mlps_and_is_edited_like_any_model():
    synthesizer = load(SYNTHESIZER)
    check_editable(synthesizer.model)
    corpus = "\n".join((WORLD / "wiki.txt").read_text(encoding="utf-8").splitlines()[:300])
    stats = compute_key_statistics(synthesizer.model, synthesizer.tokenizer, corpus)
    session = EditedModel.copy_of(synthesizer.model)
    session.apply(edit(session.model, synthesizer.tokenizer, "rank-one", EditRequest(PERSON, "Berlin"), Site(1),
                       stats))
    assert predict_birthplaces(session.model, synthesizer.tokenizer, [f"Where was {PERSON} born?"]) == ["Berlin"]


def test_a_model_without_mlps_is_refused_in_one_sentence(bundled):
    stripped = copy.deepcopy(bundled.model)
    stripped.blocks[0].mlp = nn.Identity()
    with pytest.raises(EditError, match="Block 0 has no MLP"):
        check_editable(stripped)
    with pytest.raises(EditError, match="Hugging Face folder"):
        check_editable(nn.Linear(2, 2))


def test_the_command_prints_the_scores_and_refuses_bad_input_in_one_sentence(tmp_path, capsys):
    edits = tmp_path / "edits.tsv"
    edits.write_text(f"{PERSON}\tBerlin\nJeanette Pedersen\tMadrid\n", encoding="utf-8")
    checkpoint = tmp_path / "model.safetensors"
    shutil.copy(BUNDLED, checkpoint)
    assert cli.main([str(checkpoint), "--edits", str(edits), "--method", "finetune"]) == 0
    out = capsys.readouterr().out
    assert "finetuning (FT-L): 2 edits" in out and "specificity, other dev people" in out
    assert cli.main([str(checkpoint), "--edits", str(edits), "--together"]) == 0
    assert "MEMIT, 2 facts in one update" in capsys.readouterr().out
    folder = tmp_path / "hf"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    bad_file = tmp_path / "bad.tsv"
    bad_file.write_text("just a name\n", encoding="utf-8")
    unknown = tmp_path / "unknown.tsv"
    unknown.write_text(f"{PERSON}\tAtlantis\n", encoding="utf-8")
    for argv, expected in [([str(folder), "--random", "2"], "Hugging Face folder"),
                           ([str(checkpoint), "--edits", str(bad_file)], "expected NAME<TAB>NEW PLACE"),
                           ([str(checkpoint), "--edits", str(unknown)], "not a place this world knows"),
                           ([str(checkpoint), "--random", "5000"], "asks for more"),
                           ([str(checkpoint), "--random", "2", "--together"], "--together edits")]:
        assert cli.main(argv) == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith("error:") and expected in err and "\n" not in err


# --- the methods side by side, the traced site, the sweep --------------------------------------------------------


def test_the_comparison_sentence_names_the_method_that_kept_the_neighbours(bundled, stats, data, reference):
    from core.lens.edit.scorecard import comparison_rows, comparison_sentence

    model, tokenizer = bundled.model, bundled.tokenizer
    request = EditRequest(PERSON, "Berlin")
    found = {}
    for method, site in (("rank-one", Site(1)), ("finetune", Site(0))):
        session = EditedModel.copy_of(model)
        session.apply(edit(model, tokenizer, method, request, site, stats))
        found[method] = score(model, session.model, tokenizer, data, request, reference)
    rates = {m: c.groups[GROUPS[0]].rate for m, c in found.items()}
    best = max(rates, key=rates.get)
    sentence = comparison_sentence(found)
    assert sentence.startswith(f"{best} keeps the neighbours best: {rates[best]:.1%}")
    worst = min(rates, key=rates.get)
    assert f"{worst} {rates[worst]:.1%}" in sentence
    from core.lens.edit.scorecard import generalisation_sentence

    said = generalisation_sentence(found)  # under a table of several methods, a count for each, by name
    counted = found["rank-one"].counted_forms
    assert counted  # this person's corpus sentences count, so each method's count is said
    for method, card in found.items():
        assert f"{method} {sum(f.after_ok for f in card.counted_forms)}" in said, said
    assert said.startswith(f"{len(counted)} of the {len(found['rank-one'].forms)} corpus sentences")
    rows = comparison_rows(found)
    unchanged = next(r for r in rows if r["measure"] == f"unchanged: {GROUPS[0]}")
    group = found[best].groups[GROUPS[0]]
    assert unchanged[best] == f"{rates[best]:.1%} ({group.unchanged}/{group.total})"


def test_the_traced_site_is_the_mlp_cell_the_causal_trace_restores_most(bundled):
    from core.lens.edit.sites import CLEAR_SHARE, traced_site
    from core.lens.where_from import causal_trace, read_question

    model, tokenizer = bundled.model, bundled.tokenizer
    question = f"Where was {PERSON} born?"
    found = traced_site(model, tokenizer, question, "Paris")
    grid = causal_trace(model, tokenizer, read_question(model, tokenizer, question, "Paris")).recovered("MLP")
    assert found.share == pytest.approx(grid[1, -1]) and found.share >= CLEAR_SHARE
    assert found.site == Site(1, "last") and "63%" in found.sentence()
    # a question whose trace restores almost nothing anywhere points nowhere, and says so
    weak = traced_site(model, tokenizer, "Where was Salomé Quintanilla Guijarro born?", "Salamanca")
    assert not weak.clear and weak.site == Site(1, "last") and "too little to point at a site" in weak.sentence()


def test_the_sweep_scores_every_reachable_site_and_its_sentence_reads_its_arrays(bundled, stats, data, reference):
    import numpy as np

    from core.lens.edit.sites import sweep, sweep_requests

    requests = sweep_requests(data, reference.answers, 2, seed=0)
    found = sweep(bundled.model, bundled.tokenizer, data, stats, requests, samples=2)
    assert found.efficacy.shape == (2, 2) and found.impossible.tolist() == [[False, False], [False, True]]
    assert np.isnan(found.efficacy[1, 1]) and np.isfinite(found.efficacy[~found.impossible]).all()
    best = found.best_edit_site()
    i, j = best.layer, found.positions.index(best.position)
    assert f"efficacy {found.efficacy[i, j]:.0%}" in found.sentence()
    assert ("also where the causal trace" in found.sentence()) == (best == found.traced_site())


def test_the_cache_folder_is_the_users_and_two_checkpoint_folders_never_collide(tmp_path, bundled, corpus,
                                                                                monkeypatch):
    assert cache_dir({CACHE_ENV: "/srv/edit"}) == Path("/srv/edit")
    assert cache_dir({"XDG_CACHE_HOME": "/x"}) == Path("/x/attention-lab/edit-statistics")
    assert cache_dir({}) == Path.home() / ".cache" / "attention-lab" / "edit-statistics"
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    first, second = tmp_path / "a" / "model.safetensors", tmp_path / "b" / "model.safetensors"
    for path in (first, second):
        path.parent.mkdir()
        shutil.copy(BUNDLED, path)
    original = second.read_bytes()
    second.write_bytes(original[:-8] + bytes(8))  # another model under the same name in another folder
    key_statistics(first, bundled.model, bundled.tokenizer, corpus)
    key_statistics(second, bundled.model, bundled.tokenizer, corpus)
    assert len(list((tmp_path / "cache").iterdir())) == 2  # one file each, neither over the other
    assert sorted(p.name for p in first.parent.iterdir()) == ["model.safetensors"]
