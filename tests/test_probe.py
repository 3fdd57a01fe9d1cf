"""core.lens.probe (evaluation, questions, corpus, candidates, answers, dev_set, fabricated) and the probe figures:
candidates, confidence, corpus evidence, the dev analysis on the one BirthplaceResult, fabricated names, uploads.

A tiny birthplace model is finetuned once per module on a tiny generated world (a few seconds), so the
decoders and the candidate ranking are checked on a model that gives real, confident answers.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from core.data.datasets import DataError, NameDataset, parse_tsv_pairs
from core.data.world import fabricate_names, generate_world, write_world
from core.figures import probe as viz
from core.io.tables import table_csv
from core.lens.probe import answers, corpus, dev_set, fabricated, questions
from core.lens.probe.evaluation import (
    BirthplaceResult,
    evaluate_birthplaces,
    predict_birthplaces,
    predict_birthplaces_one_by_one,
)
from core.model.config import ModelConfig
from core.model.tokenizer import MASK_CHAR, PAD_CHAR, CharTokenizer
from core.model.transformer import Transformer
from core.text import MASK_LABEL, visible_token
from tests.conftest import tiny_model

BLOCK = 56


class TrainedWorld:
    def __init__(self, folder: Path) -> None:
        write_world(generate_world(3, n_people=100, n_dev=20, n_test=0), folder)
        self.data = corpus.load_probe_data(folder)
        self.tokenizer = CharTokenizer.from_corpus((folder / corpus.CORPUS_FILE).read_text(encoding="utf-8"))
        self.train = self.data.train_pairs
        self.dev = self.data.dev_pairs
        torch.manual_seed(0)
        config = ModelConfig(vocab_size=self.tokenizer.vocab_size, block_size=BLOCK, n_layer=2, n_head=2,
                             n_embd=32, dropout=0.0)
        self.model = Transformer(config)
        dataset = NameDataset(self.train, self.tokenizer, BLOCK)
        x = torch.stack([dataset[i][0] for i in range(len(dataset))])
        y = torch.stack([dataset[i][1] for i in range(len(dataset))])
        optimizer = torch.optim.AdamW(self.model.parameters(), lr=1e-2, weight_decay=0.0)
        self.model.train()
        for _ in range(200):  # full batch: the 80 training questions are memorised
            _, loss = self.model(x, y)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
        self.model.eval()


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> TrainedWorld:
    return TrainedWorld(tmp_path_factory.mktemp("world"))


# --- decoding and candidates on a trained model ---------------------------------------------------


def test_batched_cached_predictions_equal_the_one_by_one_uncached_loop(world):
    questions = [q for q, _ in world.train[:40]] + [q for q, _ in world.dev]
    batched = predict_birthplaces(world.model, world.tokenizer, questions)
    assert batched == predict_birthplaces_one_by_one(world.model, world.tokenizer, questions)
    truths = [a for _, a in world.train[:40]]
    assert sum(p == t for p, t in zip(batched, truths)) >= 30  # really trained: most answers memorised
    assert len({len(q) for q in questions}) > 5  # several length groups were batched


def test_candidate_probabilities_sum_to_one_and_rank_the_greedy_answer_first(world):
    questions = [q for q, _ in world.train[:30]]
    greedy = predict_birthplaces(world.model, world.tokenizer, questions)
    confidences = answers.answer_probabilities(world.model, world.tokenizer, questions, greedy)
    checked = 0
    for question, answer, confidence in zip(questions, greedy, confidences):
        ranking = answers.rank_candidates(world.model, world.tokenizer, question, world.data.labels)
        assert math.isclose(ranking.probabilities.sum(), 1.0, rel_tol=1e-9)
        assert list(ranking.log_probs) == sorted(ranking.log_probs, reverse=True)
        assert sorted(ranking.places + ranking.skipped) == sorted(world.data.labels)
        assert all(len(question) + len(p) + 1 > BLOCK for p in ranking.skipped)  # too long for one pass
        assert 0 < ranking.mass <= 1.0 + 1e-9
        if answer in ranking.places:
            checked += 1
            assert ranking.places[0] == answer
            # the candidate score of the greedy answer is the greedy answer's probability
            assert math.isclose(math.exp(ranking.log_probs[0]), confidence, rel_tol=1e-4)
    assert checked >= 20


def test_ask_takes_a_place_answers_confidence_from_the_ranking_and_rescores_any_other(world):
    labels = world.data.labels
    question = world.train[0][0]
    asked = answers.ask(world.model, world.tokenizer, question, labels)
    assert asked.answer in asked.ranking.places  # a memorised place: scored by the ranking
    separate = answers.answer_probabilities(world.model, world.tokenizer, [question], [asked.answer])[0]
    assert math.isclose(asked.confidence, separate, rel_tol=1e-5)
    others = [p for p in labels if p != asked.answer]  # the answer is no candidate now: its own pass
    alone = answers.ask(world.model, world.tokenizer, question, others)
    assert alone.answer == asked.answer and alone.answer not in alone.ranking.places
    assert math.isclose(alone.confidence, separate, rel_tol=1e-9)


def test_candidate_log_prob_matches_a_direct_computation_and_batching(world):
    question = world.dev[0][0]
    ranking = answers.rank_candidates(world.model, world.tokenizer, question, world.data.labels)
    split = answers.rank_candidates(world.model, world.tokenizer, question, world.data.labels, batch_size=7)
    assert split.places == ranking.places
    np.testing.assert_allclose(split.log_probs, ranking.log_probs, rtol=1e-5, atol=1e-5)
    place = ranking.places[3]
    prompt = world.tokenizer.encode(question + MASK_CHAR)
    ids = prompt + world.tokenizer.encode(place + MASK_CHAR)
    with torch.no_grad():
        logits, _ = world.model(torch.tensor([ids[:-1]]))
    log_probs = torch.log_softmax(logits[0], dim=-1)
    direct = sum(float(log_probs[t - 1, ids[t]]) for t in range(len(prompt), len(ids)))
    assert math.isclose(ranking.log_probs[3], direct, rel_tol=1e-5)


@pytest.mark.parametrize("overrides", [{}, {"attention": "synthesizer"}, {"positional": "rope"},
                                       {"positional": "alibi"}, {"positional": "sinusoidal"}])
def test_one_shared_prompt_read_once_scores_as_a_full_pass_per_candidate(overrides):
    """rank_candidates reads the question once and reuses its keys and values for every place: each
    score must equal an independent full pass over question + place, for every attention and scheme."""
    tokenizer = CharTokenizer.from_corpus("Where was Ada born? London Paris Newcastle upon Tyne Rome")
    model = tiny_model(tokenizer.vocab_size, block_size=48, **overrides)
    question = "Where was Ada born?"
    places = ["London", "Paris", "Rome", "Newcastle upon Tyne", "L"]
    ranking = answers.rank_candidates(model, tokenizer, question, places, batch_size=2)
    assert sorted(ranking.places) == sorted(places)
    prompt = tokenizer.encode(question + MASK_CHAR)
    for place, score in zip(ranking.places, ranking.log_probs):
        ids = prompt + tokenizer.encode(place + MASK_CHAR)
        with torch.no_grad():
            logits, _ = model(torch.tensor([ids[:-1]]))
        log_probs = torch.log_softmax(logits[0], dim=-1)
        direct = sum(float(log_probs[t - 1, ids[t]]) for t in range(len(prompt), len(ids)))
        assert math.isclose(score, direct, rel_tol=1e-4, abs_tol=1e-4), place


def test_candidates_too_long_for_the_model_are_skipped_not_an_error():
    tokenizer = CharTokenizer.from_corpus("Where was Ada born? London Newcastle upon Tyne")
    model = tiny_model(tokenizer.vocab_size, block_size=32)
    places = ["London", "Newcastle upon Tyne"]
    ranking = answers.rank_candidates(model, tokenizer, "Where was Ada born?", places)
    assert ranking.places == ["London"] and ranking.skipped == ["Newcastle upon Tyne"]
    assert ranking.probabilities.tolist() == [1.0]
    long = answers.rank_candidates(model, tokenizer, "Where was Ada born? " * 3, ["London"])
    assert long.places == [] and long.probabilities.size == 0 and long.mass == 0.0
    assert np.isnan(answers.answer_probabilities(model, tokenizer, ["Where was Ada born? " * 3], ["London"])[0])


def test_answer_attention_is_the_last_row_over_the_prompt(world):
    question = world.dev[1][0]
    attention = answers.answer_attention(world.model, world.tokenizer, question)
    ids = world.tokenizer.encode(question + MASK_CHAR)
    with torch.no_grad():
        _, full = world.model.run_with_attention(torch.tensor([ids]))
    assert attention.weights.shape == (2, 2, len(ids)) and attention.cut == 0
    np.testing.assert_allclose(attention.weights, full[:, 0, :, -1, :].numpy(), rtol=1e-6)
    np.testing.assert_allclose(attention.weights.sum(-1), 1.0, rtol=1e-5)
    assert attention.tokens[-1] == MASK_LABEL and attention.layer_means.shape == (2, len(ids))
    cut = answers.answer_attention(world.model, world.tokenizer, "x" * 70)
    assert cut.cut == 71 - BLOCK and len(cut.tokens) == BLOCK


def frame_matches(dev: dev_set.DevAnalysis) -> bool:
    """The per-question table says what the evaluation says: same predictions, truths, hits."""
    frame = dev.frame
    return (frame["prediction"].tolist() == dev.result.predictions and frame["truth"].tolist() == dev.result.targets
            and frame["correct"].tolist() == dev.result.hits and int(frame["correct"].sum()) == dev.result.correct)


def test_birthplace_result_derives_every_count_from_the_answers():
    result = BirthplaceResult(predictions=["London", "Paris", "Rome"], targets=["London", "London", "Rome"],
                              baseline_place="London")
    assert result.hits == [True, False, True] and result.correct == 2 and result.total == 3
    assert result.baseline_correct == 2 and result.accuracy == pytest.approx(2 / 3)
    assert result.baseline_accuracy == pytest.approx(2 / 3)
    assert "Correct: 2 out of 3: 66.67%" in result.summary()
    empty = BirthplaceResult([], [], "London")
    assert empty.accuracy == 0.0 and empty.baseline_accuracy == 0.0
    with pytest.raises(ValueError, match="2 predictions for 1 questions"):
        BirthplaceResult(["a", "b"], ["a"], "a")


def test_dev_analysis_agrees_with_the_assignment_evaluation(world):
    progress = []
    baseline = world.data.baseline_place
    dev = dev_set.analyse_dev(world.model, world.tokenizer, world.dev, world.data.index, world.data.labels,
                               baseline, progress=lambda done, total: progress.append(done))
    result = evaluate_birthplaces(world.model, world.tokenizer, world.dev, baseline_place=baseline)
    assert dev.result == result  # one result type: the analysis holds the assignment's own evaluation
    assert dev.result.accuracy == result.accuracy and dev.result.baseline_accuracy == result.baseline_accuracy
    assert frame_matches(dev)
    assert progress[-1] == len(world.dev)
    frame = dev.frame
    assert list(frame.columns) == list(dev_set.ANALYSIS_COLUMNS) and len(frame) == len(world.dev)
    assert frame["confidence"].between(0, 1).all()
    assert frame["in_corpus"].all() and frame["truth_in_document"].all()  # every dev person has a document
    assert set(frame["category"]) <= {"retrieved", "wrong despite evidence"}


# --- evidence on a hand-made corpus -----------------------------------------------------------------

CORPUS = "\n".join([
    "Ada Lovelace. Ada Lovelace was born in London and worked in Paris .",
    "Alan Turing. Alan Turing was born in Maida Vale and studied in Cambridge .",
    "Paris Hilton. Paris Hilton was born in New York .",
    "A letter about John F. Kennedy, who was born in Brookline, sent from Newcastle upon Tyne .",
    "",
])
PLACES = ["London", "Paris", "Cambridge", "New York", "Brookline", "Newcastle", "Newcastle upon Tyne", "Rome"]


@pytest.fixture
def index() -> corpus.CorpusIndex:
    return corpus.CorpusIndex.build(CORPUS, PLACES)


def test_index_finds_names_by_leading_key_and_by_substring(index):
    assert index.names == {"Ada Lovelace", "Alan Turing", "Paris Hilton", "A letter about John F"}
    assert index.documents_about("Ada  Lovelace") == [0]
    assert index.documents_about("John F. Kennedy") == [3]  # fallback: a name with '. ' inside
    assert index.documents_about("Ada") == [0]  # whole words
    assert index.documents_about("Lovelac") == []
    assert index.documents_about("Al") == []  # too short to mean anything
    evidence = index.evidence("John F. Kennedy", "Brookline")
    assert evidence.places == ["Brookline", "Newcastle upon Tyne"]  # the longest place wins
    assert evidence.truth_mentioned is True
    # the name is blanked: 'Paris' in 'Paris Hilton' is not a mention of the city
    assert index.evidence("Paris Hilton").places == ["New York"]


@pytest.mark.parametrize("question, truth, prediction, category", [
    ("Where was Ada Lovelace born?", "London", "London", "retrieved"),
    ("Where was Ada Lovelace born?", "London", "Paris", "wrong despite evidence"),
    ("Where was Grace Hopper born?", "London", "London", "correct by prior"),
    ("Where was Alan Turing born?", "Rome", "Rome", "correct by prior"),
    ("Where was Grace Hopper born?", "New York", "London", "unseen name"),
    ("Where was Alan Turing born?", "Rome", "Cambridge", "wrong, no evidence"),
])
def test_evidence_categories(index, question, truth, prediction, category):
    dev = dev_set.analyse_predictions([(question, truth)], [prediction], [0.5], index, ["London", "Paris"],
                                       "London")
    row = dev.frame.iloc[0]
    assert row["category"] == category
    assert row["correct"] == (truth == prediction)


def test_analysis_columns_say_what_the_document_holds(index):
    pairs = [("Where was Ada Lovelace born?", "London"), ("Where was Alan Turing born?", "Maida Vale"),
             ("Where was Grace Hopper born?", "New York")]
    dev = dev_set.analyse_predictions(pairs, ["Paris", "Maida Vale", "Rome"], [0.9, 0.4, 0.2], index,
                                       ["London", "Paris"], "London")
    frame = dev.frame
    assert frame["truth_in_document"].tolist() == [True, True, False]  # 'Maida Vale' is not a known place
    assert frame["prediction_in_document"].tolist() == [True, False, False]
    assert frame["prediction_is_label"].tolist() == [True, False, False]
    assert frame["in_corpus"].tolist() == [True, True, False]
    assert frame["category"].tolist() == ["wrong despite evidence", "retrieved", "unseen name"]
    assert dev.result.accuracy == pytest.approx(1 / 3) and dev.result.baseline_accuracy == pytest.approx(1 / 3)
    assert frame_matches(dev)
    summary = dev_set.category_summary(frame).set_index("category")
    assert summary.loc["retrieved", "count"] == 1 and summary.loc["correct by prior", "count"] == 0
    assert summary["share"].sum() == pytest.approx(1.0)
    assert summary.loc["unseen name", "mean_confidence"] == pytest.approx(0.2)
    assert len(dev_set.filter_analysis(frame, "wrong")) == 2
    assert len(dev_set.filter_analysis(frame, categories=["retrieved"])) == 1
    assert len(dev_set.filter_analysis(frame, confidence=(0.3, 1.0))) == 2
    assert len(dev_set.filter_analysis(frame, place="Rome")) == 1
    table = dev_set.comparison_table({"m": dev}, {"m": "not pretrained"})
    assert table["model"].tolist() == ["m", "baseline: always 'London'"]
    assert table.loc[0, "correct"] == 1 and table.loc[0, "retrieved"] == 1 and table.loc[1, "correct"] == 1
    comparison = dev_set.compare({"m": dev}, {"m": {"pretrained_from": ""}})  # what the Dev set tab shows
    pd.testing.assert_frame_equal(comparison.table, table)
    pd.testing.assert_frame_equal(comparison.categories["m"], dev_set.category_summary(frame))
    reliability = dev_set.reliability_table(frame["confidence"], frame["correct"])
    pd.testing.assert_frame_equal(comparison.reliability["m"], reliability)
    assert comparison.calibration == {"m": dev_set.expected_calibration_error(reliability)}


def test_pretraining_label_reads_the_metadata():
    recorded = {"pretrained_from": "wiki.safetensors"}
    assert dev_set.pretraining_label("birth-x", recorded) == "pretrained (wiki.safetensors)"
    assert dev_set.pretraining_label("birth-x", {"pretrained_from": ""}) == "not pretrained"
    assert dev_set.pretraining_label("birth-scratch", {}) == "not pretrained"
    assert dev_set.pretraining_label("converted", {}) == "not recorded"


# --- fabricated names ----------------------------------------------------------------------------------


def test_fabricated_names_are_absent_from_corpus_and_train_file(world):
    folder = world.data.folder
    corpus_text = (folder / corpus.CORPUS_FILE).read_text(encoding="utf-8")
    train_text = (folder / corpus.TRAIN_FILE).read_text(encoding="utf-8")
    locales = ["fr_FR", "de_DE", "pl_PL"]
    people = fabricated.fabricated_people(60, locales, 0, world.data.index, world.data.train_names)
    assert len(people) == 60 and len({n for n, _ in people}) == 60
    assert [loc for _, loc in people[:3]] == ["fr_FR", "de_DE", "pl_PL"]
    for name, _ in people:
        assert name not in corpus_text and name not in train_text


def test_fabricated_names_skip_a_name_mentioned_inside_another_document():
    first = fabricate_names(5, ["it_IT"], 7)[0][0]
    corpus_text = f"Someone Else. Someone Else was born in Rome and married {first} in Milan .\n"
    index = corpus.CorpusIndex.build(corpus_text, ["Rome", "Milan"])
    assert first not in index.names  # the leading-name keys alone would not exclude it
    people = fabricated.fabricated_people(5, ["it_IT"], 7, index, set())
    assert first not in [n for n, _ in people] and len(people) == 5


def test_fabricated_people_refuse_bad_requests(world):
    for n, locales in ((0, ["fr_FR"]), (fabricated.MAX_FABRICATED + 1, ["fr_FR"]), (5, []), (5, ["xx_XX"])):
        with pytest.raises(ValueError):
            fabricated.fabricated_people(n, locales, 0, world.data.index, set())


def test_strategy_numbers():
    locales = ["fr_FR", "fr_FR", "de_DE", "de_DE"]
    predictions = {"m": ["Paris", "London", "Berlin", "London"]}
    assert fabricated.home_country_share(locales, predictions["m"]) == 0.5
    train_places = ["Paris", "London", "London", "Berlin"]
    assert fabricated.expected_home_share(["fr_FR", "de_DE"], train_places) == pytest.approx(0.25)
    summary = fabricated.strategy_summary(locales, predictions, ["Paris", "London"]).iloc[0]
    assert summary["most common answer"] == "London" and summary["its share"] == 0.5
    assert summary["distinct answers"] == 3 and summary["share that are training labels"] == 0.75
    shares = fabricated.place_shares(predictions, ["Paris", "London", "London", "Rome"])
    assert list(shares.columns) == ["training labels", "m"]
    assert shares.loc["London", "training labels"] == 0.5 and shares.loc["London", "m"] == 0.5
    assert shares.sum().tolist() == pytest.approx([1.0, 1.0])
    counts = fabricated.locale_place_counts(locales, predictions["m"])
    assert counts.columns[0] == "London" and counts.loc["fr_FR", "Paris"] == 1 and counts.values.sum() == 4
    frame = fabricated.fabricated_frame([("Jean Dupont", "fr_FR")], {"m": ["Paris"]})
    assert frame.iloc[0].tolist() == ["Jean Dupont", "fr_FR", "France", "Paris"]
    people = [(f"Person {i}", loc) for i, loc in enumerate(locales)]
    found = fabricated.strategy(people, predictions, train_places)  # what the Fabricate tab shows
    pd.testing.assert_frame_equal(found.summary, fabricated.strategy_summary(locales, predictions, train_places))
    assert found.chance == fabricated.expected_home_share(locales, train_places)
    assert found.frame["m"].tolist() == predictions["m"] and list(found.frame["locale"]) == locales
    pd.testing.assert_frame_equal(found.shares, fabricated.place_shares(predictions, train_places))
    pd.testing.assert_frame_equal(found.locale_counts["m"], counts)


# --- reliability ---------------------------------------------------------------------------------------


def test_reliability_table_counts_and_accuracy_per_bin():
    confidence = [0.05, 0.15, 0.95, 0.92, float("nan"), 1.0]
    table = dev_set.reliability_table(confidence, [False, False, True, False, True, True], n_bins=10)
    assert table["count"].tolist() == [1, 1, 0, 0, 0, 0, 0, 0, 0, 3]
    assert table.loc[9, "accuracy"] == pytest.approx(2 / 3)
    assert np.isnan(table.loc[5, "accuracy"])
    assert table.loc[0, "low"] == 0.0 and table.loc[9, "high"] == 1.0
    ece = dev_set.expected_calibration_error(table)
    expected = (0.05 + 0.15 + 3 * abs(2 / 3 - (0.95 + 0.92 + 1.0) / 3)) / 5
    assert ece == pytest.approx(expected)


# --- what the user types or uploads ------------------------------------------------------------------


def test_probe_input_reads_a_name_or_a_question():
    assert questions.read_probe_input("  Ada   Lovelace ") == questions.ProbeInput("Where was Ada Lovelace born?",
                                                                                 "Ada Lovelace")
    assert questions.read_probe_input("where was Ada Lovelace born").name == "Ada Lovelace"
    for typed in ("Where was Ada Lovelace born?", "Where was Ada Lovelace born??", "Ada Lovelace?",
                  f"where  was Ada Lovelace born {MASK_CHAR}", "Where was Ada Lovelace born？", "Ada Lovelace"):
        assert questions.read_probe_input(typed) == questions.ProbeInput("Where was Ada Lovelace born?", "Ada Lovelace")
    for bad in ("", "   ", "x" * 400, f"Ada{MASK_CHAR} Lovelace", "???", f"Ada{PAD_CHAR}"):
        result = questions.read_probe_input(bad)
        assert result.problem and result.problem.endswith(".") and "\n" not in result.problem


def test_unknown_characters_are_named_once_for_every_model():
    tokenizer = CharTokenizer.from_corpus("abc ")
    wider = CharTokenizer.from_corpus("abcz ")
    assert questions.unknown_characters(["abz", "cy z"], tokenizer) == ["z", "y"]
    same = questions.unknown_summary(["abŚ", "cŚ a"], {"m1": tokenizer, "m2": tokenizer, "m3": tokenizer})
    assert same.count("Ś") == 1 and "(m1, m2 and m3) have never seen 'Ś' (U+015A)" in same and "PAD" in same
    mixed = questions.unknown_summary(["abz", "Śa"], {"m1": tokenizer, "m2": wider})
    assert "'z' (U+007A) (m1); 'Ś' (U+015A) (m1 and m2)" in mixed and "\n" not in mixed
    one = questions.unknown_summary(["abz"], {"m1": tokenizer})
    assert one.startswith("m1 has never seen 'z'") and "it reads it as PAD" in one
    assert questions.unknown_summary(["abc"], {"m1": tokenizer}) is None
    many = questions.unknown_summary(["".join(chr(0x400 + i) for i in range(20))], {"m1": tokenizer}, limit=5)
    assert "and 15 more" in many


def test_the_appended_mask_is_shown_as_a_labelled_marker():
    assert [visible_token(t) for t in ["a", "?", MASK_CHAR]] == ["a", "?", MASK_LABEL]
    assert MASK_LABEL == "MASK" and MASK_CHAR not in MASK_LABEL


@pytest.mark.parametrize("data, fragment", [
    (b"", "empty"),
    (b"\n\n", "an empty file"),
    (b"Where was Ada born? London\n", "it is plain text, 1 line"),
    (b"Where was Ada born?\tLondon\nWhere was Alan born? Maida Vale\n", "Line 2"),
    (os.urandom(5 * 1024 * 1024), "MB"),
    (b"\xff\xfe\x00junk" * 100, "not UTF-8"),
    ("Where was Ada born?\tLon\u2047don\n".encode(), "reserved"),
    (b"Where was Ada born?\t \n", "empty question or answer"),
])
def test_bad_question_files_give_one_sentence(data, fragment):
    result = questions.read_question_file(data, "upload.tsv")
    assert result.pairs == [] and fragment in result.problem
    assert result.problem.endswith(".") and "\n" not in result.problem


def test_a_good_question_file_with_unknown_characters_is_read():
    text = "\ufeffWhere was Zoë born?\tLondon\r\n\nWhere was Ada born?\tParis\n"
    result = questions.read_question_file(text.encode())
    assert result.problem is None
    assert result.pairs == [("Where was Zoë born?", "London"), ("Where was Ada born?", "Paris")]
    tokenizer = CharTokenizer.from_corpus("Where was Ada born? London Paris Z")
    assert questions.unknown_characters([q for q, _ in result.pairs], tokenizer) == ["ë"]


def test_exports():
    assert questions.predictions_text(["London", "", "Paris"]) == "London\n\nParis\n"
    csv = table_csv(pd.DataFrame({"name": ["=cmd()", "Ada"], "n": [1, 2]}))
    assert csv == "name,n\n'=cmd(),1\nAda,2\n"
    assert parse_tsv_pairs("a\tb") == [("a", "b")]


def test_world_dir_follows_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv(corpus.WORLD_ENV, str(tmp_path))
    assert corpus.world_dir() == tmp_path
    assert corpus.world_stamp(tmp_path) == (0.0, 0.0, 0.0)  # absent files
    (tmp_path / corpus.CORPUS_FILE).write_text("Ada. Ada was born in London .\n", encoding="utf-8")
    assert corpus.world_stamp(tmp_path)[0] == (tmp_path / corpus.CORPUS_FILE).stat().st_mtime
    with pytest.raises(DataError, match="missing"):
        corpus.load_probe_data()


# --- figures -------------------------------------------------------------------------------------------


def test_candidate_bars_mark_greedy_and_truth_and_escape_labels():
    places = ["<b>X</b>", "London", "Paris"]
    fig = viz.candidate_bars(places, [0.6, 0.3, 0.1], greedy="<b>X</b>", truth="London")
    bar = fig.data[0]
    assert list(bar.x) == [0.6, 0.3, 0.1]
    assert list(bar.marker.color) == [viz.PROBE_GREEDY_COLOR, viz.PROBE_TRUTH_COLOR, viz.ALLOWED_COLOR]
    ticks = list(fig.layout.yaxis.ticktext)
    assert ticks[0] == "&lt;b&gt;X&lt;/b&gt; (greedy)" and ticks[1] == "London (true)"


def test_probe_heatmaps_and_bars_carry_the_numbers():
    weights = np.array([[0.5, 0.25, 0.25], [0.0, 0.0, 1.0]])
    fig = viz.answer_attention_heatmap(weights, ["<", " ", MASK_CHAR], ["layer 0", "layer 1"])
    np.testing.assert_array_equal(np.asarray(fig.data[0].z), weights)
    assert list(fig.layout.xaxis.ticktext) == ["&lt;", "␣", "MASK"]  # the MASK is labelled on every page
    margin = fig.layout.margin  # two rows (a 2-layer model) still leave the colour bar room for its ticks
    assert fig.layout.height - margin.t - margin.b >= 100
    shares = pd.DataFrame({"training labels": [0.5, 0.5], "m": [1.0, 0.0]}, index=["London", "Paris"])
    fig = viz.place_share_bars(shares)
    assert [t.name for t in fig.data] == ["training labels", "m"] and list(fig.data[1].y) == [1.0, 0.0]
    counts = pd.DataFrame([[2, 0], [1, 1]], index=["fr_FR", "de_DE"], columns=["Paris", "Berlin"])
    np.testing.assert_array_equal(np.asarray(viz.locale_place_heatmap(counts).data[0].z), counts.values)


def test_reliability_and_category_figures(index):
    table = dev_set.reliability_table([0.1, 0.9, 0.95], [False, True, False], n_bins=2)
    fig = viz.reliability_figure({"a": table, "b": table})
    assert [t.type for t in fig.data] == ["bar", "bar", "scatter"]
    assert list(fig.data[0].y) == [0.0, 0.5] and list(fig.data[0].text) == ["n=1", "n=2"]
    dev = dev_set.analyse_predictions([("Where was Ada Lovelace born?", "London"),
                                        ("Where was Grace Hopper born?", "Rome")], ["London", "London"],
                                       [0.9, 0.3], index, ["London"], "London")
    summaries = {"a": dev_set.category_summary(dev.frame)}
    fig = viz.category_share_bars(summaries)
    assert [t.meta["category"] for t in fig.data] == list(corpus.CATEGORIES)
    assert sum(t.x[0] for t in fig.data) == pytest.approx(1.0)
    fig = viz.confidence_by_category(dev.frame)
    assert {t.meta["category"]: list(t.y) for t in fig.data} == {"retrieved": [0.9], "unseen name": [0.3]}


def test_answers_frame_ranks_the_truth():
    ranking = answers.CandidateRanking("q", ["London", "Paris"], np.log([0.3, 0.1]))
    frame = answers.answers_frame({"m": answers.ProbeAnswer("q", "Lond", 0.2, ranking)}, truth="Paris")
    row = frame.iloc[0]
    assert row["greedy answer"] == "Lond" and not row["correct"] and not row["answer is a training label"]
    assert row["rank of the truth"] == "2 of 2" and row["probability on the candidate list"] == pytest.approx(0.4)
    unranked = answers.answers_frame({"m": answers.ProbeAnswer("q", "Lond", 0.2, ranking)}, truth="Oslo")
    assert unranked.iloc[0]["rank of the truth"] == "not a candidate"  # never "None" in a cell
    no_truth = answers.answers_frame({"m": answers.ProbeAnswer("q", "Paris", 0.2, ranking)})
    assert "correct" not in no_truth and "rank of the truth" not in no_truth  # no column of blanks
    assert list(no_truth.columns) == ["model", "greedy answer", "confidence", "answer is a training label",
                                      "probability on the candidate list"]


def test_continuation_log_probs_edge_cases():
    tokenizer = CharTokenizer.from_corpus("Where was Ada born? London")
    model = tiny_model(tokenizer.vocab_size, block_size=32)
    scores = answers.continuation_log_probs(model, tokenizer, ["Ada", "", "Ada"], ["", "London", "London"])
    assert scores[0] == 0.0 and np.isnan(scores[1]) and scores[2] < 0
    with pytest.raises(ValueError, match="causal"):
        answers.continuation_log_probs(tiny_model(tokenizer.vocab_size, causal=False), tokenizer, ["a"], ["b"])


def test_candidate_percentages_sit_beside_the_bars_in_a_readable_font():
    fig = viz.candidate_bars(["London", "Paris"], [0.995, 0.005])
    bar = fig.data[0]
    assert list(bar.text) == ["99.5%", "0.5%"] and bar.textposition == "outside"
    assert bar.textfont.size >= 12 and fig.layout.xaxis.range[1] > 1.0  # room for "99.5%" right of the bar


def test_a_verdict_says_retrieved_borrowed_or_made_up_from_the_documents():
    text = ("Ada Lovelace. Ada Lovelace was born in London and worked in Paris .\n"
            "Karl Dunn. Karl Dunn was born in Leeds .\n"
            "Mia Rossi. Mia Rossi is an artist .")
    index = corpus.CorpusIndex.build(text, ["London", "Paris", "Leeds", "Rome"])
    assert corpus.verdict(index, "Ada Lovelace", "Paris") == corpus.Verdict("retrieved")
    assert corpus.verdict(index, "Zed Dunn", "Leeds") == corpus.Verdict("borrowed", "Karl Dunn")  # the surname
    assert corpus.verdict(index, "Ada Quill", "London") == corpus.Verdict("borrowed", "Ada Lovelace")  # first name
    assert corpus.verdict(index, "Zed Quill", "Leeds") == corpus.Verdict("made up")  # shares no name part
    assert corpus.verdict(index, "Mia Rossi", "Rome") == corpus.Verdict("made up")  # her document names no place
    assert corpus.verdict(index, "Al Dunn", "Rome") == corpus.Verdict("made up")  # Karl Dunn's names Leeds, not Rome
    line = corpus.verdict_sentence("m", "Zed Dunn", "Leeds", corpus.Verdict("borrowed", "Karl Dunn"), False)
    assert line == ("m answers Leeds, but no document mentions Zed Dunn: Leeds comes from the document about Karl "
                    "Dunn, who shares a part of the name.")
    ranking = answers.CandidateRanking("q", ["Leeds"], np.array([-0.1]))
    frame = answers.answers_frame({"m": answers.ProbeAnswer("q", "Leeds", 0.9, ranking)}, verdicts={"m": "borrowed"})
    assert list(frame.columns[:3]) == ["model", "greedy answer", "verdict"] and frame.at[0, "verdict"] == "borrowed"


def test_fit_name_cuts_a_name_to_what_every_model_reads_with_the_longest_candidate():
    from core.lens.probe.evaluation import context_length
    from core.lens.probe.questions import fit_name

    tokenizer = CharTokenizer.from_corpus("Ada Lovelace. Where was born? Rome Newcastle upon Tyne")
    torch.manual_seed(0)
    model = Transformer(ModelConfig(vocab_size=tokenizer.vocab_size, block_size=64, n_layer=1, n_head=2,
                                    n_embd=16, dropout=0.0)).eval()
    readers = {"m": (tokenizer, context_length(model))}
    places = ["Rome", "Newcastle upon Tyne"]
    assert fit_name("Ada Lovelace", readers, places).note is None
    long_name = "Ada Lovelace " * 10
    fitted = fit_name(long_name, readers, places)
    question = questions.question_for(fitted.name) + MASK_CHAR
    room = len(tokenizer.encode(question)) + len(tokenizer.encode("Newcastle upon Tyne" + MASK_CHAR)) - 1
    assert room <= 64 and long_name.startswith(fitted.name) and not fitted.name.endswith(" Love")
    assert fitted.note.endswith(f"its first {len(fitted.name)} characters: {fitted.name}")
    ranked = answers.rank_candidates(model, tokenizer, questions.question_for(fitted.name), places)
    assert sorted(ranked.places) == sorted(places) and not ranked.skipped  # every candidate scored
    assert not answers.rank_candidates(model, tokenizer, questions.question_for(long_name), places).places
    # a model too small for the question files' names does not cut every name
    assert fit_name(long_name, readers, places, usual=60).note is None


def test_a_long_names_attention_strip_labels_at_most_a_strips_worth_ending_at_the_mask():
    # issue 41: for a long name every one of 38 keys was labelled and the browser's turned labels overlapped
    tokens = list("Where was Maximilian von Hohenzollern born?") + [MASK_CHAR]
    weights = np.full((2, len(tokens)), 1.0 / len(tokens))
    fig = viz.answer_attention_heatmap(weights, tokens, ["layer 0", "layer 1"])
    ticks = list(fig.layout.xaxis.tickvals)
    assert len(ticks) <= viz.STRIP_LABELS and ticks[-1] == len(tokens) - 1 and fig.layout.xaxis.ticktext[-1] == "MASK"
    step = ticks[1] - ticks[0]
    assert all(b - a == step for a, b in zip(ticks, ticks[1:])) and step > 1
    assert f"one in {step} labelled" in fig.layout.xaxis.title.text and fig.layout.xaxis.tickangle == -90
