"""Issue 45: what a rerun of the probe's Ask tab does again, and what it does not.

- A new name reruns the Ask tab alone (a fragment): the sidebar, the title and the tabs are not sent again.
- The verdicts, the answers table and the name's evidence are derived once per answers (ui.page_caches.
  example_answers): a rerun that changes only a view (the candidates' number, the attention view, the model for
  the details) derives none of them again. The namesake search behind the verdicts runs once per name, not once
  per model (core.lens.probe.corpus.verdicts).
"""

from __future__ import annotations

import dataclasses
import functools
import shutil

from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

import ui.probe_views
from core.lens.probe import answers, corpus
from tests.test_probe_page import TWO_MODELS, models, open_page, small_world  # noqa: F401
from tests.test_where_from_fragment import browser_rerun, counting, fragment_of, sent  # noqa: F401
from tests.test_where_from_page import KNOWLEDGE, bundled_one, open_probe, param  # noqa: F401

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


def new_elements(messages: list[ForwardMsg]) -> list[tuple[tuple[int, ...], str]]:
    """(delta path, element type) of every element a run sent."""
    return [(tuple(m.metadata.delta_path), m.delta.new_element.WhichOneof("type")) for m in messages
            if m.HasField("delta") and m.delta.WhichOneof("type") == "new_element"]


def test_a_new_name_reruns_the_ask_tab_alone(monkeypatch, bundled_one, sent):  # noqa: F811
    """The Ask tab is a fragment: a name typed in the browser reruns the tab, not the sidebar, the title and the
    tabs (each element sent is drawn again by the browser); the link follows the name, and the tab shows it."""
    at = open_probe(monkeypatch, bundled_one, KNOWLEDGE, tab="ask", name="Michelle Lefort", wf="1", wf_samples="1")
    whole = new_elements(sent)
    assert any(path[0] == 1 for path, _ in whole) and ((0, 0), "heading") in whole  # the sidebar, the title
    fragment = fragment_of(sent, "probe_ask")
    assert fragment and fragment == fragment_of(sent, "probe_focus")  # the name and its model: one fragment
    browser_rerun(monkeypatch, at, fragment, lambda: at.text_input(key="probe_ask").input("Lise Meitner"))
    part = new_elements(sent)
    assert not any(path[0] == 1 for path, _ in part), "the sidebar was sent again"
    assert all(len(path) > 3 for path, _ in part), "elements outside the Ask tab were sent again"
    assert len(part) <= len(whole) - 8, (len(part), len(whole))
    assert [kind for _, kind in part].count("plotly_chart") == 6  # candidates, attention and the four views'
    assert param(at, "name") == "Lise Meitner"  # the link follows the name
    assert any("Where was Lise Meitner born" in m.value.replace("\\", "") for m in at.markdown)
    focus_then = at.selectbox(key="probe_focus").value
    browser_rerun(monkeypatch, at, fragment, lambda: at.radio(key="probe_ask_view").set_value("heads"))
    assert at.selectbox(key="probe_focus").value == focus_then and param(at, "name") == "Lise Meitner"


def corpus_caption(at) -> str:
    return next(c.value for c in at.caption if c.value.startswith("Corpus")).replace("\\", "")


def test_a_focus_model_of_another_world_reruns_the_whole_page(monkeypatch, models, small_world, sent,  # noqa: F811
                                                             tmp_path):
    """The page reads the focus model's world (its training corpus): a focus chosen inside the Ask tab's fragment
    that reads another world reruns the page, so the corpus, the candidates and the caption are that world's."""
    other = tmp_path / "other_world"
    shutil.copytree(small_world, other)
    real = corpus.world_dir

    def by_focus(trained_on=()):  # the synthesizer model "trained on" the other world
        import streamlit as st
        return other if st.session_state.get("probe_focus") == "tiny-birthplace-synth" else real(trained_on)
    at = open_page(monkeypatch, models, small_world)
    monkeypatch.setattr(corpus, "world_dir", by_focus)
    at.selectbox(key="probe_focus").set_value("tiny-birthplace")
    at.run()
    assert str(small_world) in corpus_caption(at)
    fragment = fragment_of(sent, "probe_focus")
    browser_rerun(monkeypatch, at, fragment, lambda: at.selectbox(key="probe_focus").set_value("tiny-birthplace"))
    assert not any(path[0] == 1 for path, _ in new_elements(sent))  # the same world: the tab alone
    browser_rerun(monkeypatch, at, fragment,
                  lambda: at.selectbox(key="probe_focus").set_value("tiny-birthplace-synth"))
    assert any(path[0] == 1 for path, _ in new_elements(sent)), "another world, but only the tab reran"
    assert str(other) in corpus_caption(at)  # the page's caption names the other world
    assert at.selectbox(key="probe_focus").value == "tiny-birthplace-synth"


def test_the_answers_table_is_sent_as_streamlit_converted_its_frame(monkeypatch, models, small_world):  # noqa: F811
    """The kept answers table goes to the browser converted once (ui.browser_tables.arrow_table): the same
    element, byte for byte, as when Streamlit converted the frame on every run."""
    at = open_page(monkeypatch, models, small_world)
    at.text_input(key="probe_ask").input("Quentin Tablesworth").run()
    kept = [d.proto.SerializeToString() for d in at.dataframe]
    monkeypatch.setattr(ui.probe_views, "arrow_table", lambda frame: frame)  # the frame, as before
    at.run()
    assert not at.exception
    assert [d.proto.SerializeToString() for d in at.dataframe] == kept and len(kept) == 1
