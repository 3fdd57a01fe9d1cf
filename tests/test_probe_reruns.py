"""Issue 45: what a rerun of the probe's Ask tab does again, and what it does not.

- The verdicts, the answers table and the name's evidence are derived once per answers (pages.page_caches.
  example_answers): a rerun that changes only a view (the candidates' number, the attention view, the model for
  the details) derives none of them again. The namesake search behind the verdicts runs once per name, not once
  per model (core.lens.probe.corpus.verdicts).
"""

from __future__ import annotations

import dataclasses
import functools

from core.lens.probe import answers, corpus
from tests.test_probe_page import TWO_MODELS, models, open_page, small_world  # noqa: F401
from tests.test_where_from_fragment import counting

TEXT = ("Ada Lovelace. Ada Lovelace was born in London and worked in Paris .\n"
        "Karl Dunn. Karl Dunn was born in Leeds .\n"
        "Ada Quill. Ada Quill was born in Rome .\n"
        "Mia Rossi. Mia Rossi is an artist .")
PLACES = ["London", "Paris", "Leeds", "Rome", "Oslo"]


def test_verdicts_of_several_answers_are_each_answers_verdict_with_one_namesake_search(monkeypatch):
    index = corpus.CorpusIndex.build(TEXT, PLACES)
    cases = {"Ada Lovelace": ["Paris", "Leeds", "Rome", "Paris", ""], "Zed Dunn": ["Leeds", "Oslo", "London"],
             "Ada Dunn": ["Rome", "Leeds", "London", "Oslo"], "Zed Quill": ["Rome", "Oslo"], "Mia Rossi": ["Rome"]}
    expected = {name: {a: corpus.verdict(index, name, a) for a in found} for name, found in cases.items()}
    searches = []
    real = corpus.namesakes
    monkeypatch.setattr(corpus, "namesakes", lambda *args: searches.append(args) or real(*args))
    for name, found in cases.items():
        searches.clear()
        judged = corpus.verdicts(index, name, found)
        assert judged == expected[name] and list(judged) == list(dict.fromkeys(found))
        for answer, one in judged.items():  # the fields the equality leaves out: the sentence reads them
            assert (one.sources, one.namesakes) == (expected[name][answer].sources, expected[name][answer].namesakes)
        assert len(searches) <= 1, name
    assert corpus.verdicts(index, "Ada Lovelace", ["Paris"]) == {"Paris": corpus.Verdict("retrieved")}
    searches.clear()
    corpus.verdicts(index, "Ada Lovelace", ["Paris", "London"])  # both retrieved: no namesake is looked for
    assert searches == []
    labels = {name: {a: v.label for a, v in expected[name].items()} for name in cases}
    assert labels["Zed Dunn"] == {"Leeds": "borrowed", "Oslo": "made up", "London": "made up"}
    assert labels["Ada Dunn"]["Rome"] == "borrowed" and labels["Ada Dunn"]["London"] == "borrowed"


@dataclasses.dataclass
class Derived:
    verdicts: int = 0
    tables: int = 0
    evidence: int = 0


def test_a_view_rerun_derives_no_verdict_table_or_evidence_again(monkeypatch, models, small_world):  # noqa: F811
    at = open_page(monkeypatch, models, small_world)
    calls = Derived()
    count = functools.partial(counting, calls)
    monkeypatch.setattr(corpus, "verdicts", count(corpus.verdicts, "verdicts"))
    monkeypatch.setattr(answers, "answers_frame", count(answers.answers_frame, "tables"))
    monkeypatch.setattr(corpus.CorpusIndex, "evidence", count(corpus.CorpusIndex.evidence, "evidence"))
    at.text_input(key="probe_ask").input("Quentin Rerunsworth").run()  # a name no other test asks: a cache miss
    assert not at.exception
    assert calls == Derived(1, 1, 1)
    table = at.dataframe[0].value
    assert sorted(table["model"]) == TWO_MODELS and "verdict" in table
    shown = [m.value for m in at.markdown if "-badge[" in m.value and "Prompt" not in m.value]
    focus = at.selectbox(key="probe_focus").value
    at.radio(key="probe_ask_view").set_value("heads").run()
    at.selectbox(key="probe_focus").set_value(next(m for m in TWO_MODELS if m != focus)).run()
    if any(s.key == "probe_ask_k" for s in at.slider):  # the candidates fit this model's context
        at.slider(key="probe_ask_k").set_value(4).run()
    assert not at.exception
    assert calls == Derived(1, 1, 1)  # three reruns, nothing derived again
    assert at.dataframe[0].value.equals(table)
    at.selectbox(key="probe_focus").set_value(focus).run()
    assert [m.value for m in at.markdown if "-badge[" in m.value and "Prompt" not in m.value] == shown
    at.text_input(key="probe_ask").input("Quentin Rerunsworth-Two").run()  # a new name derives again
    assert calls == Derived(2, 2, 2)
