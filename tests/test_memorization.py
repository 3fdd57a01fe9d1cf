from core.lens.probe.evaluation import document_completion_prompts, memorization_rate
from core.model.tokenizer import CharTokenizer
from tests.conftest import tiny_model

CORPUS = ("Ada Lovelace. Ada Lovelace was a writer born in London .\n"
          "Paris Hilton. Paris Hilton was born in New York .\n"
          "Bo Li. Bo Li is a painter .\n")
PAIRS = [("Where was Ada Lovelace born?", "London"), ("Where was Paris Hilton born?", "New York"),
         ("Where was Bo Li born?", "Oslo"), ("Where was Nobody born?", "Rome")]


def test_prompts_cut_each_document_just_before_its_place():
    assert document_completion_prompts(CORPUS, PAIRS) == [
        ("Ada Lovelace. Ada Lovelace was a writer born in ", "London"),
        ("Paris Hilton. Paris Hilton was born in ", "New York"),
    ]


def test_memorization_rate_counts_exact_greedy_completions():
    tok = CharTokenizer.from_corpus(CORPUS)
    model = tiny_model(tok.vocab_size, block_size=64)
    hits, total = memorization_rate(model, tok, CORPUS, PAIRS)
    assert total == 2 and hits == 0  # an untrained model memorises nothing
