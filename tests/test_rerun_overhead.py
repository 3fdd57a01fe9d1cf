"""Issue 45: what every rerun of a page does not redo. A rerun that changes nothing sends the browser no query string
(ui.page_state.set_params), and the Attention page's tables of a shared run (the sanity checks, the model's output)
are made once per run, not on every rerun (ui.shared_caches.derived)."""

from __future__ import annotations

from core.lens import attention as av
from tests.test_attention_page import assert_no_exception, open_page
from tests.test_where_from_fragment import sent  # noqa: F401


def query_strings(messages) -> list[str]:
    return [m.page_info_changed.query_string for m in messages if m.WhichOneof("type") == "page_info_changed"]


def test_a_rerun_that_changes_nothing_sends_no_query_string(monkeypatch, tiny_checkpoints, sent):  # noqa: F811
    at = open_page(monkeypatch, tiny_checkpoints, model="tiny-lm", text="Ada was born in Paris.")
    assert query_strings(sent)  # the first run writes the page's state into the URL
    at.run()  # (this one adds the window of tokens the first run's view chose: a long input)
    at.run()
    assert_no_exception(at)
    assert query_strings(sent) == []  # the URL holds it already
    at.selectbox(key="attn_head").select(2).run()
    assert [q for q in query_strings(sent) if "head=2" in q]  # a change still reaches the URL
    assert at.query_params["head"] in ("2", ["2"])


def test_a_runs_tables_are_made_once(monkeypatch, tiny_checkpoints):
    checks = []
    real = av.sanity_checks
    monkeypatch.setattr(av, "sanity_checks", lambda run: checks.append(run) or real(run))
    at = open_page(monkeypatch, tiny_checkpoints, model="tiny-lm", text="Grace was born in Rome.")
    at.run()
    at.run()
    assert_no_exception(at)
    assert len(checks) == 1  # three reruns of one run: its sanity checks computed once
    sanity = [t.value.reset_index() for t in at.table if t.value.index.name == "check"][0]
    assert sanity["result"].tolist() == ["pass", "pass", "pass"]  # and still drawn, from the kept table
    assert any("next #1" in d.value.columns for d in at.dataframe)  # the output table too
