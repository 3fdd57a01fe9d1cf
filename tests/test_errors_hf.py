"""Errors on Hugging Face folders (core.lens.errors through core.io.hf): every piece's loss and rank against
transformers' own cross-entropy, one tiny random folder per family the lab reads; ...ForSequenceClassification
folders' probabilities against transformers' softmax, their labels matched by name, a CSV with text and label
columns, integrated gradients through the input embeddings; the command on a folder; the bad inputs."""

from __future__ import annotations

import pytest

pytest.importorskip("transformers", reason="the optional Hugging Face extra is not installed")

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
import transformers  # noqa: E402

from bench.hf_folders import (  # noqa: E402
    DECODER_CONFIGS,
    GPT_TEXT,
    bert_folder,
    decoder_folder,
    gpt2_folder,
    sentencepiece_tokenizer,
)
from core.io.checkpoint import load  # noqa: E402
from core.lens.errors import classify, cli, inputs, lm  # noqa: E402

TEXT = "\n".join(GPT_TEXT[:4])
LABELS = {0: "NEGATIVE", 1: "POSITIVE"}


def reference_losses(folder, ids: list[int], window: int) -> tuple[np.ndarray, np.ndarray]:
    """transformers' own model, its own logits, torch's cross-entropy: each piece after the first, predicted in
    windows of `window` pieces that each start afresh."""
    model = transformers.AutoModelForCausalLM.from_pretrained(folder, local_files_only=True,
                                                              attn_implementation="eager").eval()
    losses, ranks = [], []
    with torch.no_grad():
        for start in range(0, len(ids) - 1, window):
            chunk = torch.tensor([ids[start: start + window + 1]])
            logits = model(chunk[:, :-1]).logits[0].float()
            target = chunk[0, 1:]
            losses.append(F.cross_entropy(logits, target, reduction="none").double().numpy())
            ranks.append(((logits > logits.gather(-1, target[:, None])).sum(-1) + 1).numpy())
    return np.concatenate(losses), np.concatenate(ranks)


@pytest.mark.parametrize("family", ["gpt2", *DECODER_CONFIGS])
def test_every_pieces_loss_and_rank_are_transformers_own(family, tmp_path):
    folder = tmp_path / family
    gpt2_folder(folder) if family == "gpt2" else decoder_folder(folder, family)
    loaded = load(folder)
    text = TEXT * 3  # longer than some families' positions: scored in windows
    result = lm.score_lm(loaded.model, loaded.tokenizer, [("test.txt", text)], family)
    ids = result.ids["test.txt"]
    want_loss, want_rank = reference_losses(folder, ids, result.window)
    np.testing.assert_allclose(result.tokens["loss"].to_numpy(), want_loss, rtol=1e-4, atol=1e-5)
    np.testing.assert_array_equal(result.tokens["rank"].to_numpy(), want_rank)
    assert set(result.tokens["bucket"]) <= set(lm.BUCKETS) and len(result.surprising(5)) == 5
    if len(ids) - 1 > result.window:
        assert f"scored in windows of {result.window:,} pieces" in result.caption()


def test_two_language_models_on_one_file_and_two_that_do_not_share_a_tokenizer(tmp_path):
    base, tuned, other = (decoder_folder(tmp_path / "base", "llama", seed=0),
                          decoder_folder(tmp_path / "tuned", "llama", seed=1), gpt2_folder(tmp_path / "gpt2"))
    scored = [lm.score_lm(load(f).model, load(f).tokenizer, [("t.txt", TEXT)], f.name) for f in (base, tuned, other)]
    comparison = lm.compare_lms(scored[0], scored[1])
    assert len(comparison.tokens) == len(scored[0].tokens) and "base" in comparison.caption()
    with pytest.raises(lm.LanguageModelError, match="do not share a tokenizer"):
        lm.compare_lms(scored[0], scored[2])


def _bert_classifier(path):
    bert_folder(path, "BertForSequenceClassification")
    config = transformers.AutoConfig.from_pretrained(path)
    config.id2label, config.label2id = LABELS, {v: k for k, v in LABELS.items()}
    config.save_pretrained(path)
    return path


def _distilbert_classifier(path):
    from bench.hf_folders import BERT_VOCAB

    tokenizer = transformers.BertTokenizer(vocab={w: i for i, w in enumerate(BERT_VOCAB)})
    config = transformers.DistilBertConfig(vocab_size=len(BERT_VOCAB), dim=16, n_layers=2, n_heads=2, hidden_dim=32,
                                           max_position_embeddings=40, id2label=LABELS,
                                           label2id={v: k for k, v in LABELS.items()})
    torch.manual_seed(0)
    transformers.DistilBertForSequenceClassification(config).save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


def _llama_classifier(path):
    tokenizer = sentencepiece_tokenizer()
    config = transformers.AutoConfig.for_model("llama", vocab_size=len(tokenizer), id2label=LABELS,
                                               label2id={v: k for k, v in LABELS.items()},
                                               architectures=["LlamaForSequenceClassification"],
                                               **DECODER_CONFIGS["llama"])
    torch.manual_seed(0)
    transformers.LlamaForSequenceClassification(config).save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


CLASSIFIERS = {"bert": _bert_classifier, "distilbert": _distilbert_classifier, "llama": _llama_classifier}
PAIRS_TSV = ("positive\tthe cat sat on the mat .\nnegative\ta dog ran\nPOSITIVE\tthe cat\n"
             "negative\tthe dog sat on a mat .")


@pytest.fixture(params=list(CLASSIFIERS))
def classifier(request, tmp_path):
    return CLASSIFIERS[request.param](tmp_path / request.param)


def test_a_classifiers_probabilities_are_transformers_softmax(classifier):
    loaded = load(classifier)
    assert loaded.task == "classify" and loaded.labels == ["NEGATIVE", "POSITIVE"]
    source = inputs.decode_eval(PAIRS_TSV.encode(), "test.tsv")
    pairs = inputs.classifier_pairs(source, loaded.labels)  # 'positive', 'negative' matched by name
    assert [label for label, _ in pairs] == ["POSITIVE", "NEGATIVE", "POSITIVE", "NEGATIVE"]
    result = classify.score_classifier(loaded.model, loaded.tokenizer, loaded.labels, pairs, "m", "test.tsv")
    reference = transformers.AutoModelForSequenceClassification.from_pretrained(classifier, local_files_only=True)
    tokenizer = transformers.AutoTokenizer.from_pretrained(classifier, local_files_only=True)
    for row, (_, text) in enumerate(pairs):  # one text at a time: no padding at all
        with torch.no_grad():
            logits = reference.eval()(**tokenizer(text, return_tensors="pt")).logits[0].double()
        want = torch.softmax(logits, -1).numpy()
        np.testing.assert_allclose(result.probabilities[row], want, rtol=1e-5, atol=1e-6)
        assert result.frame["predicted"].iloc[row] == loaded.labels[int(want.argmax())]
    again = classify.predict_text(loaded.model, loaded.tokenizer, loaded.labels, pairs[0][1])
    np.testing.assert_allclose(again.to_numpy(), result.probabilities[0], rtol=1e-5, atol=1e-6)


def test_integrated_gradients_through_the_input_embeddings_add_up(classifier):
    loaded = load(classifier)
    attribution = classify.class_attribution(loaded.model, loaded.tokenizer, loaded.labels, "the cat sat on the mat",
                                             "POSITIVE", steps=64)
    assert len(attribution.tokens) == len(loaded.tokenizer.encode("the cat sat on the mat"))
    moved = abs(attribution.log_prob - attribution.baseline_log_prob)
    assert abs(attribution.completeness_gap) < 0.02 * max(1.0, moved)


def test_a_csv_with_text_and_label_columns(tmp_path):
    loaded = load(_bert_classifier(tmp_path / "bert"))
    csv = 'label,text,id\npositive,"the cat, the mat",1\nNEGATIVE,a dog ran,2\n'
    pairs = inputs.classifier_pairs(inputs.decode_eval(csv.encode(), "export.csv"), loaded.labels)
    assert pairs == [("POSITIVE", "the cat, the mat"), ("NEGATIVE", "a dog ran")]


def test_labels_that_match_none_are_named_in_one_sentence(tmp_path):
    loaded = load(_bert_classifier(tmp_path / "bert"))
    source = inputs.decode_eval(b"cat\tthe cat\ndog\ta dog\n", "animals.tsv")
    with pytest.raises(inputs.EvalFileError) as caught:
        inputs.classifier_pairs(source, loaded.labels)
    message = str(caught.value)
    assert "'cat'" in message and "'dog'" in message and "none of the file's labels matches" in message
    assert message.endswith("it knows NEGATIVE, POSITIVE.") and message.replace("animals.tsv", "").count(".") == 1


def test_numbered_labels_match_the_trainers_default_names():
    assert inputs.match_labels(["0", "1", "7"], ["LABEL_0", "LABEL_1"]) == {"0": "LABEL_0", "1": "LABEL_1"}
    assert inputs.match_labels(["0"], ["NEGATIVE", "POSITIVE"]) == {}


def test_the_command_on_folders(tmp_path, capsys):
    bert = _bert_classifier(tmp_path / "bert")
    eval_file = tmp_path / "test.tsv"
    eval_file.write_text(PAIRS_TSV, encoding="utf-8")
    out = tmp_path / "out.csv"
    assert cli.main([str(bert), "--eval", str(eval_file), "-o", str(out), "--compare",
                     str(_distilbert_classifier(tmp_path / "distil"))]) == 0
    assert out.read_text(encoding="utf-8").count("\n") == 5
    llama = decoder_folder(tmp_path / "llama", "llama")
    text = tmp_path / "text.txt"
    text.write_text(TEXT, encoding="utf-8")
    assert cli.main([str(llama), "--eval", str(text), "--tokens", "-o", str(tmp_path / "tokens.csv")]) == 0
    animals = tmp_path / "animals.tsv"
    animals.write_text("cat\tthe cat\n", encoding="utf-8")
    assert cli.main([str(bert), "--eval", str(animals)]) == 2
    captured = capsys.readouterr()
    assert "perplexity" in captured.out and "accuracy" in captured.out
    assert "'cat'" in captured.err and "Traceback" not in captured.err


def test_the_errors_page_on_a_hugging_face_classifier_and_a_csv(monkeypatch, tmp_path):
    from streamlit.testing.v1 import AppTest

    from core.io.folders import ALLOWED_DIRS_ENV
    from tests.conftest import ROOT

    models, files = tmp_path / "models", tmp_path / "files"
    files.mkdir()
    loaded = load(_bert_classifier(models / "bert"))
    (files / "export.csv").write_text('text,label\n"the cat, the mat",positive\na dog ran,NEGATIVE\n'
                                      "the cat sat on the mat .,negative\n", encoding="utf-8")
    monkeypatch.setenv("ATTENTION_LAB_CHECKPOINTS", str(models))
    monkeypatch.setenv(ALLOWED_DIRS_ENV, str(files))
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    for key, value in {"model": "bert", "err_source": "folder", "err_folder": str(files)}.items():
        at.query_params[key] = value
    at.run()
    at.switch_page("pages/errors.py")
    at.run()
    assert not at.exception, [e.message for e in at.exception]
    pairs = inputs.classifier_pairs(inputs.read_eval_path(files / "export.csv"), loaded.labels)
    result = classify.score_classifier(loaded.model, loaded.tokenizer, loaded.labels, pairs, "bert", "export.csv")
    assert result.caption() in " ".join(m.value for m in at.markdown).replace("\\", "")


@pytest.mark.parametrize("family", ["gpt2", "llama"])
def test_lines_are_documents_on_a_hugging_face_tokenizer(family, tmp_path):
    # LLaMA's tokenizer reads a line alone differently (<s>, the word-start mark): its pieces' character offsets
    # say which line each is in
    folder = gpt2_folder(tmp_path / family) if family == "gpt2" else decoder_folder(tmp_path / family, family)
    loaded = load(folder)
    text = "\n".join(GPT_TEXT[:4]) + "\n"
    result = lm.score_lm(loaded.model, loaded.tokenizer, [("t.txt", text)], family)
    assert not result.one_document_per_file and list(result.documents["text"]) == GPT_TEXT[:4]
    by_line = result.tokens.groupby("document")["loss"].mean()
    np.testing.assert_allclose(result.documents["loss"].to_numpy(), by_line.to_numpy())
    second = result.tokens[result.tokens["document"] == 1]["piece"]
    assert "".join(second).replace("␣", " ").strip() == GPT_TEXT[1] + "⏎"  # a line's pieces, its newline last
