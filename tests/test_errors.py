"""The error-analysis core (core/lens/errors) and its command, on the bundled checkpoints and tiny files."""

from __future__ import annotations

import math
import re

import numpy as np
import pandas as pd
import pytest
import torch
import torch.nn.functional as F

from core.io import checkpoint as ckpt
from core.lens.errors import classify, inputs, lm, slices
from core.lens.errors.cli import main as errors_main
from core.lens.lm_eval import score_ids
from core.train.cli import main as train_main
from tests.conftest import ROOT

CKPT = ROOT / "checkpoints"
NAMES_TEST = ROOT / "data" / "knowledge" / "names_test.tsv"
PA2 = ROOT.parent / "shared" / "pa2"


@pytest.fixture(scope="module")
def names_pretrained():
    return ckpt.load(CKPT / "names-pretrained.safetensors")


@pytest.fixture(scope="module")
def names_result(names_pretrained):
    source = inputs.read_eval_path(NAMES_TEST)
    pairs = inputs.classifier_pairs(source, names_pretrained.labels)
    return classify.score_classifier(names_pretrained.model, names_pretrained.tokenizer, names_pretrained.labels,
                                     pairs, "names-pretrained", source.name)


def last_line_with(text: str, start: str) -> str:
    return next(line for line in reversed(text.splitlines()) if line.startswith(start))


# --- the command equals the trainer's evaluation ------------------------------------------------------------

def test_the_command_prints_core_train_evaluates_line_for_a_classifier(capsys):
    assert train_main(["evaluate", "--reading_params_path", str(CKPT / "names-pretrained.safetensors"),
                       "--eval_corpus_path", str(NAMES_TEST)]) == 0
    trainer = last_line_with(capsys.readouterr().out, "names_test.tsv:")
    assert errors_main([str(CKPT / "names-pretrained.safetensors"), "--eval", str(NAMES_TEST)]) == 0
    ours = capsys.readouterr().out
    assert last_line_with(ours, "names_test.tsv:") == trainer  # accuracy and loss to 4 decimals, lines
    assert "names-pretrained gets 163 of 200 right (81.5%)" in ours


def test_the_command_prints_core_train_evaluates_perplexity_for_a_language_model(tmp_path, capsys):
    text = tmp_path / "held.txt"  # the last 60 biographies: several windows and a partial tail
    text.write_text("\n".join((ROOT / "data" / "knowledge" / "wiki.txt").read_text().splitlines()[-60:]) + "\n")
    model = str(CKPT / "lm-learned.safetensors")
    assert train_main(["evaluate", "--reading_params_path", model, "--eval_corpus_path", str(text)]) == 0
    trainer = last_line_with(capsys.readouterr().out, "held.txt:")
    out = tmp_path / "tokens.csv"
    assert errors_main([model, "--eval", str(text), "--tokens", "-o", str(out)]) == 0
    assert last_line_with(capsys.readouterr().out, "held.txt:") == trainer
    table = pd.read_csv(out)
    loaded = ckpt.load(model)
    total, count = score_ids(loaded.model, loaded.tokenizer.encode(text.read_text()))
    assert len(table) == count  # one row per scored piece
    assert table["loss"].sum() == pytest.approx(total, rel=1e-6)


def test_the_command_prints_core_train_evaluates_accuracy_for_a_birthplace_model(tmp_path, capsys):
    dev = tmp_path / "dev.tsv"
    dev.write_text("\n".join((ROOT / "data" / "knowledge" / "birth_dev.tsv").read_text().splitlines()[:12]) + "\n")
    model = str(CKPT / "birth-vanilla-pretrained.safetensors")
    assert train_main(["evaluate", "--reading_params_path", model, "--eval_corpus_path", str(dev)]) == 0
    trainer = last_line_with(capsys.readouterr().out, "Correct:")
    assert errors_main([model, "--eval", str(dev)]) == 0
    assert last_line_with(capsys.readouterr().out, "Correct:") == trainer


# --- the classifier's table -----------------------------------------------------------------------------------

def test_the_confusion_matrix_sums_to_the_examples_and_its_diagonal_to_the_right_ones(names_result):
    confusion = names_result.confusion()
    assert int(confusion.values.sum()) == names_result.count == 200
    assert int(np.trace(confusion.values)) == names_result.right == int(names_result.frame["right"].sum())
    assert list(confusion.index) == list(confusion.columns) == names_result.labels
    gold, predicted = "United States", "United Kingdom"
    cell = classify.filter_examples(names_result.frame, gold=[gold], predicted=[predicted])
    assert len(cell) == confusion.at[gold, predicted]


def test_the_table_is_the_models_own_softmax_and_loss(names_pretrained, names_result):
    """An independent reading: one example at a time, unpadded (PAD never reaches a real position)."""
    for number in (0, 7, 42):
        row = names_result.frame.loc[number]
        ids = names_pretrained.tokenizer.encode(row["text"])
        with torch.no_grad():
            logits, _ = names_pretrained.model(torch.tensor([ids]))
        probs = torch.softmax(logits[0].double(), -1)
        gold = names_pretrained.labels.index(row["gold"])
        assert row["p(gold)"] == pytest.approx(float(probs[gold]), abs=1e-5)
        assert row["loss"] == pytest.approx(-math.log(float(probs[gold])), abs=1e-4)
        assert row["predicted"] == names_pretrained.labels[int(probs.argmax())]


def test_the_caption_names_the_most_common_mistake_counted_from_the_table(names_result):
    wrong = names_result.frame[~names_result.frame["right"]]
    pair, k = max(wrong.groupby(["gold", "predicted"]).size().items(), key=lambda item: item[1])
    caption = names_result.caption()
    assert caption.startswith(f"names-pretrained gets {names_result.right} of 200 right (")
    assert f"its most common mistake is {pair[1]} for {pair[0]} ({k} times" in caption


def test_slice_counts_equal_a_pandas_filter(names_result):
    frame = names_result.frame
    by_gold = slices.by_column(frame, "gold", names_result.labels)
    for row in by_gold.itertuples():
        members = frame[frame["gold"] == row.slice]
        assert row.count == len(members)
        assert row.right == int(members["right"].sum())
    assert by_gold["count"].sum() == len(frame)
    by_length = slices.by_length(frame)
    assert by_length["count"].sum() == len(frame)
    three_four = by_length[by_length["slice"] == "3-4 pieces"].iloc[0]
    assert three_four["count"] == int(frame["pieces"].between(3, 4).sum())
    hyphen = slices.by_pattern(frame, r"-", regex=True)
    assert hyphen["count"].iloc[0] == int(frame["text"].str.contains("-", regex=False).sum())
    word = slices.by_pattern(frame, "van")  # a whole word, any case
    assert word["count"].iloc[0] == int(frame["text"].str.contains(r"(?<!\w)van(?!\w)", case=False).sum())
    assert word["count"].sum() == len(frame)


def test_a_bad_regular_expression_is_one_sentence(names_result):
    with pytest.raises(slices.SliceError, match=r"is not a valid regular expression") as caught:
        slices.by_pattern(names_result.frame, "(unclosed", regex=True)
    assert "\n" not in str(caught.value)
    assert slices.by_pattern(names_result.frame, "(unclosed", regex=False)["count"].sum() == 200  # as plain text


def test_wilson_interval_matches_the_quadratic_it_solves():
    """Wilson's interval: the p with (p_hat - p)^2 = z^2 p (1 - p) / n, solved as a quadratic here."""
    z = slices.Z95
    for right, n in ((0, 5), (3, 3), (7, 20), (163, 200)):
        p_hat = right / n
        a, b, c = 1 + z * z / n, -(2 * p_hat + z * z / n), p_hat * p_hat
        root = math.sqrt(b * b - 4 * a * c)
        low, high = slices.wilson_interval(right, n)
        assert low == pytest.approx((-b - root) / (2 * a), abs=1e-12)
        assert high == pytest.approx((-b + root) / (2 * a), abs=1e-12)
    assert all(math.isnan(v) for v in slices.wilson_interval(0, 0))


def test_integrated_gradients_add_up_to_the_class_log_probability_change(names_pretrained, names_result):
    row = names_result.frame.loc[0]
    salience = classify.class_attribution(names_pretrained.model, names_pretrained.tokenizer,
                                          names_pretrained.labels, row["text"], row["gold"], steps=64)
    assert salience.log_prob == pytest.approx(math.log(row["p(gold)"]), abs=1e-5)  # the table's probability
    change = salience.log_prob - salience.baseline_log_prob
    assert abs(change) > 1.0  # something to attribute
    assert abs(salience.completeness_gap) < 0.02 * abs(change)
    assert len(salience.tokens) == len(names_pretrained.tokenizer.encode(row["text"]))


def test_an_edited_example_is_re_predicted_as_the_table_predicts(names_pretrained, names_result):
    row = names_result.frame.loc[3]
    again = classify.predict_text(names_pretrained.model, names_pretrained.tokenizer, names_pretrained.labels,
                                  row["text"])
    assert again[row["gold"]] == pytest.approx(row["p(gold)"], abs=1e-6)
    edited = classify.predict_text(names_pretrained.model, names_pretrained.tokenizer, names_pretrained.labels,
                                   "Giuseppe Rossi")
    assert edited.sum() == pytest.approx(1.0)
    assert edited.idxmax() == "Italy"


def test_two_classifiers_two_by_two_and_disagreements(names_result):
    scratch = ckpt.load(CKPT / "names-scratch.safetensors")
    pairs = list(zip(names_result.frame["gold"], names_result.frame["text"], strict=True))
    other = classify.score_classifier(scratch.model, scratch.tokenizer, scratch.labels, pairs, "names-scratch")
    comparison = classify.compare_classifiers(names_result, other)
    table = comparison.table()
    assert int(table.values.sum()) == 200
    assert int(table.loc["right"].sum()) == names_result.right and int(table["right"].sum()) == other.right
    differ = comparison.disagreements()
    assert len(differ) == int((names_result.frame["predicted"] != other.frame["predicted"]).sum())
    assert (differ["names-pretrained"] != differ["names-scratch"]).all()


def test_the_reliability_table_and_ece_have_one_home():
    from core.lens.probe import dev_set

    assert dev_set.reliability_table is slices.reliability_table
    assert dev_set.expected_calibration_error is slices.expected_calibration_error


# --- bad files: one sentence each, nothing lost ------------------------------------------------------------

BAD_FILES = {
    "empty": (b"", "is empty"),
    "blank": (b"\n \n", "is empty"),
    "one column": (b"France\tTristan Lecoq\nItaly Marco Rossi\n", "Line 2 of bad.tsv has no tab"),
    "unknown labels": (b"France\tTristan Lecoq\nAtlantis\tNemo\n", "label(s) this checkpoint does not know"),
    "swapped columns": (b"Tristan Lecoq\tFrance\nMarco Rossi\tItaly\n", "has the text first and the label second"),
    "binary junk": (bytes(range(256)) * 4, "binary file"),
    "latin-1": ("France\tFrançois".encode("latin-1"), "is not UTF-8 text"),
    "birthplace questions": (b"Where was Tristan Lecoq born?\tParis\nWhere was Marco Rossi born?\tRome\n",
                             "bad.tsv is a birthplace questions file ('Where was NAME born?<TAB>PLACE')"),
    "long unknown labels": (b"The Democratic Republic of Somewhere Else\tNemo\n",
                            "('The Democratic Republic of Somewhere…', first on line 1)"),
}


@pytest.mark.parametrize("case", list(BAD_FILES))
def test_a_bad_classifier_file_is_one_sentence(case, tmp_path, capsys, names_pretrained):
    raw, expected = BAD_FILES[case]
    path = tmp_path / "bad.tsv"
    path.write_bytes(raw)
    with pytest.raises(inputs.EvalFileError, match=re.escape(expected)) as caught:
        inputs.classifier_pairs(inputs.decode_eval(raw, "bad.tsv"), names_pretrained.labels)
    assert "\n" not in str(caught.value) and str(caught.value).endswith(".")
    out = tmp_path / "out.csv"
    out.write_text("kept")
    assert errors_main([str(CKPT / "names-pretrained.safetensors"), "--eval", str(path), "-o", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "\n" not in err and expected in err
    assert out.read_text() == "kept" and path.read_bytes() == raw  # nothing lost or overwritten


def test_a_50_mb_file_is_refused_before_it_is_read(tmp_path, capsys):
    big = tmp_path / "big.tsv"
    with open(big, "wb") as fh:
        fh.truncate(50 * 1024 * 1024)  # sparse: 50 MB without writing them
    assert errors_main([str(CKPT / "names-pretrained.safetensors"), "--eval", str(big)]) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"error: big.tsv is 50 MB; evaluation files up to {inputs.MAX_EVAL_MB} MB are read."
    with pytest.raises(inputs.EvalFileError, match="50 MB"):
        inputs.decode_eval(b"x" * (50 * 1024 * 1024), "big.tsv")


def test_the_command_never_overwrites_an_existing_table(tmp_path, capsys):
    out = tmp_path / "out.csv"
    out.write_text("mine")
    assert errors_main([str(CKPT / "names-pretrained.safetensors"), "--eval", str(NAMES_TEST), "-o", str(out)]) == 2
    assert "already exists" in capsys.readouterr().err
    assert out.read_text() == "mine"


def test_a_formula_in_an_example_is_quoted_in_the_csv(tmp_path, capsys, names_pretrained):
    path = tmp_path / "hostile.tsv"
    path.write_text("France\t=HYPERLINK(\"http://x\")\n")
    out = tmp_path / "out.csv"
    assert errors_main([str(CKPT / "names-pretrained.safetensors"), "--eval", str(path), "-o", str(out)]) == 0
    assert "'=HYPERLINK" in out.read_text()


# --- language models ----------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def lm_learned():
    return ckpt.load(CKPT / "lm-learned.safetensors")


def test_token_losses_and_ranks_match_a_plain_reading_of_each_window(lm_learned):
    text = "\n".join((ROOT / "data" / "knowledge" / "wiki.txt").read_text().splitlines()[-5:])
    ids = lm_learned.tokenizer.encode(text)
    scores = lm.score_tokens(lm_learned.model, ids)
    window = lm_learned.model.config.block_size
    assert len(ids) > window + 2  # two windows at least
    for start in range(0, len(ids) - 1, window):
        chunk = torch.tensor([ids[start: start + window + 1]])
        with torch.no_grad():
            logits, _ = lm_learned.model(chunk[:, :-1])
        log_probs = F.log_softmax(logits[0].double(), -1)
        targets = chunk[0, 1:]
        for j in sorted({0, 1, len(targets) - 1} & set(range(len(targets)))):
            k = start + j
            assert scores.loss[k] == pytest.approx(-float(log_probs[j, targets[j]]), abs=1e-4)
            assert scores.rank[k] == int((log_probs[j] > log_probs[j, targets[j]]).sum()) + 1
            assert scores.block_position[k] == j
    assert lm.bucket_of(1) == "top 1" and lm.bucket_of(10) == "top 10" and lm.bucket_of(11) == "top 100"
    assert lm.bucket_of(101) == "beyond"


def test_documents_are_lines_and_their_pieces_add_up_to_the_file(lm_learned):
    lines = (ROOT / "data" / "knowledge" / "wiki.txt").read_text().splitlines()[:6]
    text = "\n".join(lines[:3]) + "\n\n" + "\n".join(lines[3:]) + "\n"  # a blank line between documents
    result = lm.score_lm(lm_learned.model, lm_learned.tokenizer, [("six.txt", text)], "lm-learned")
    docs = result.documents
    assert list(docs["text"]) == lines
    tokens = result.tokens
    for row in docs.itertuples():
        members = tokens[(tokens["document"] == row.document) & tokens["loss"].notna()]
        assert row._4 == len(members)  # tokens scored
        assert row.loss == pytest.approx(members["loss"].mean())
    assert docs["tokens scored"].sum() <= result.files[0].tokens_scored  # the newlines belong to no document
    shares = result.bucket_shares()
    assert shares.sum() == pytest.approx(1.0)
    worst = result.surprising(3)
    assert worst["loss"].iloc[0] == pytest.approx(tokens["loss"].max())


def test_two_language_models_compared_piece_by_piece(lm_learned):
    alibi = ckpt.load(CKPT / "lm-alibi.safetensors")
    text = "\n".join((ROOT / "data" / "knowledge" / "wiki.txt").read_text().splitlines()[-4:])
    a = lm.score_lm(lm_learned.model, lm_learned.tokenizer, [("t.txt", text)], "lm-learned")
    b = lm.score_lm(alibi.model, alibi.tokenizer, [("t.txt", text)], "lm-alibi")
    comparison = lm.compare_lms(a, b)
    n = len(comparison.tokens)
    better = comparison.tokens["better"].value_counts()
    assert better.sum() == n == int(a.tokens["loss"].notna().sum())
    assert f"lm-learned gives the true piece the higher probability on {better.get('lm-learned', 0):,}" in (
        comparison.caption())
    by_position = comparison.by_position()
    assert by_position["count"].sum() == n


def test_a_classifier_is_not_scored_as_a_language_model(names_pretrained):
    with pytest.raises(lm.LanguageModelError, match="left-to-right language model"):
        lm.score_lm(names_pretrained.model, names_pretrained.tokenizer, [("a.txt", "some text here")])


@pytest.mark.skipif(not (PA2 / "test_LM_obama.txt").is_file(), reason="the PA2 speeches are not in ../shared/pa2/")
def test_pa2_speakers_are_one_row_per_file(lm_learned, capsys):
    files = [str(PA2 / f"test_LM_{s}.txt") for s in ("obama", "hbush")]
    assert train_main(["evaluate", "--reading_params_path", str(CKPT / "lm-learned.safetensors"),
                       *[x for f in files for x in ("--eval_corpus_path", f)]]) == 0
    trainer = [line for line in capsys.readouterr().out.splitlines() if line.startswith("test_LM_")]
    assert errors_main([str(CKPT / "lm-learned.safetensors"), "--eval", *files, "--documents", "file"]) == 0
    ours = [line for line in capsys.readouterr().out.splitlines() if line.startswith("test_LM_")]
    assert ours == trainer and len(ours) == 2


def test_the_readmes_error_commands_parse_and_the_classifier_one_runs_as_written(tmp_path, monkeypatch, capsys):
    import shlex

    from core.lens.errors.cli import build_parser

    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    commands = [line.strip() for line in readme.splitlines() if line.strip().startswith("python -m core.lens.errors ")]
    assert len(commands) >= 2
    for command in commands:
        build_parser().parse_args(shlex.split(command)[3:])  # every documented flag exists
    classifier = next(c for c in commands if "names-pretrained" in c)
    monkeypatch.chdir(tmp_path)
    for folder in ("checkpoints", "data"):
        (tmp_path / folder).symlink_to(ROOT / folder)
    assert errors_main(shlex.split(classifier)[3:]) == 0
    assert "names-scratch gets" in capsys.readouterr().out
    assert len(pd.read_csv(tmp_path / "names-errors.csv")) == 200


def test_the_confusion_figure_draws_the_table_and_its_clicks_name_the_cell(names_result):
    from core.figures.errors import confusion_matrix

    confusion = names_result.confusion()
    fig = confusion_matrix(confusion.values, names_result.labels)
    heat, cells = fig.data
    n = len(names_result.labels)
    assert (np.asarray(heat.z) ** 2).sum() == pytest.approx(200)  # signed square roots of the counts
    assert (np.diag(np.asarray(heat.z)) >= 0).all() and (np.asarray(heat.z)[~np.eye(n, dtype=bool)] <= 0).all()
    for i in (0, 5, n * n - 1):  # the point a click returns names its cell
        gold, predicted, count = cells.customdata[i]
        assert (gold, predicted) == (names_result.labels[i // n], names_result.labels[i % n])
        assert count == confusion.at[gold, predicted]


def test_the_caption_uses_a_top_k_smaller_than_the_vocabulary(tmp_path, lm_learned):
    """Issue 63: "outside its top 100 for 0%" for a model of 64 pieces, where a top 100 holds every piece."""
    from bench.tiny_checkpoints import save_tiny_checkpoint

    tiny = ckpt.load(save_tiny_checkpoint(tmp_path / "tiny-lm.safetensors"))
    vocab = tiny.config.vocab_size
    assert 10 < vocab < 100
    result = lm.score_lm(tiny.model, tiny.tokenizer, [("t.txt", "the cat sat on the mat\n" * 3)], "tiny-lm")
    beyond_ten = float((result.tokens.dropna(subset=["loss"])["rank"] > 10).mean())
    assert "top 100" not in result.caption()
    assert f"outside its top 10 (of {vocab} pieces) for {beyond_ten:.0%}" in result.caption()
    big = lm.score_lm(lm_learned.model, lm_learned.tokenizer, [("t.txt", "The cat sat on the mat.\n" * 3)], "lm")
    assert "and outside its top 100 for " in big.caption()
