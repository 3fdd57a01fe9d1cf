"""Issue 45: the Attention page's views that change alone are fragments. A change of the chosen view's own widgets
(the query·key view's query token) or of the "Where the next piece comes from" toggle reruns that part alone, as
the browser asks it to, and not the page's model work: the sidebar's picker and the run of the sentence (a trace
lookup, or a forward pass) are not asked again.

Each change is rerun as the browser sends it (tests/test_where_from_fragment.py's `browser_rerun`): only the
fragment the changed widget's element carried, or the whole page when it is in none (then the counts say so)."""

from __future__ import annotations

import dataclasses
import functools
import json

import pytest

import ui.model_picker
import ui.shared_caches
from core.lens import query_key as qk
from core.lens import where_from as wf
from tests.test_attention_page import assert_no_exception, open_page
from tests.test_where_from_fragment import browser_rerun, counting, fragment_of, sent  # noqa: F401


@dataclasses.dataclass
class Calls:
    page: int = 0  # the page's own per-run work: the sidebar's picker and the run of the sentence
    decompose: int = 0  # the query·key view's work: one query's scores taken apart
    lens: int = 0  # the next piece's logit lens computed (a cache miss)


@pytest.fixture
def counted(monkeypatch) -> Calls:
    calls = Calls()
    count = functools.partial(counting, calls)
    # the page imports these by name on each run of its script, so the counting ones are what it calls
    monkeypatch.setattr(ui.shared_caches, "attention_run", count(ui.shared_caches.attention_run, "page"))
    monkeypatch.setattr(ui.model_picker, "checkpoint_picker",
                        count(ui.model_picker.checkpoint_picker, "page"))
    monkeypatch.setattr(qk, "decompose", count(qk.decompose, "decompose"))
    monkeypatch.setattr(wf, "logit_lens", count(wf.logit_lens, "lens"))
    return calls


def titles(at) -> list[str]:
    return [json.loads(c.proto.spec)["layout"]["title"]["text"] for c in at.get("plotly_chart")]


def test_a_new_query_token_reruns_the_query_key_view_alone(monkeypatch, tiny_checkpoints, counted, sent):  # noqa: F811
    at = open_page(monkeypatch, tiny_checkpoints, model="tiny-lm", view="qk", text="Ada was born in Paris.")
    assert counted.page == 2 and counted.decompose == 1  # a whole run: picker, run, view
    fragment = fragment_of(sent, "attn_token")
    assert fragment, "the query·key view is not in a fragment"
    browser_rerun(monkeypatch, at, fragment, lambda: at.selectbox(key="attn_token").select(3))
    assert counted.page == 2, "a new query token reran the page's picker and run"
    assert counted.decompose == 2  # the view took the new query apart
    assert any("q_3" in t for t in titles(at)), titles(at)  # what the rerun sent: the view at the new query
    assert at.query_params["token"] in ("3", ["3"])  # the link follows the view's widgets
    assert at.selectbox(key="attn_key").value is not None


def test_the_model_views_focus_button_leaves_the_fragment_for_the_page(monkeypatch, tiny_checkpoints, counted,
                                                                        sent):  # noqa: F811
    """'Open layer L, head H as a single head' changes the View choice, drawn outside the view's fragment: the
    click must rerun the whole page (a fragment's rerun alone would leave the model view on screen)."""
    at = open_page(monkeypatch, tiny_checkpoints, model="tiny-lm", view="model", layer="1", head="1")
    fragment = fragment_of(sent, "attn_focus_single")
    assert fragment, "the model view is not in a fragment"
    browser_rerun(monkeypatch, at, fragment, lambda: at.button(key="attn_focus_single").click())
    assert at.radio(key="attn_view").value == "single"
    assert any(t.startswith("tiny-lm · Layer 1, head 1 · ") for t in titles(at)), titles(at)


def test_the_next_piece_toggle_reruns_its_view_alone(monkeypatch, tiny_checkpoints, counted, sent):  # noqa: F811
    at = open_page(monkeypatch, tiny_checkpoints, model="tiny-lm", text="Ada was born in Paris.")
    assert counted.page == 2 and counted.lens == 0 and len(at.get("plotly_chart")) == 1
    fragment = fragment_of(sent, "wf_next_open")
    assert fragment, "'Where the next piece comes from' is not in a fragment"
    browser_rerun(monkeypatch, at, fragment, lambda: at.toggle(key="wf_next_open").set_value(True))
    assert counted.page == 2, "opening the next piece's view reran the page's picker and run"
    assert counted.lens == 1
    assert any("next" in t and t.endswith("piece by layer") for t in titles(at)), titles(at)  # the logit lens
    assert at.query_params["wf"] in ("1", ["1"])
    browser_rerun(monkeypatch, at, fragment_of(sent, "wf_next_open"),
                  lambda: at.toggle(key="wf_next_open").set_value(False))
    assert counted.page == 2 and not at.get("plotly_chart")  # closed: the fragment's charts gone, nothing else ran
    at.run()  # a whole run afterwards: the page as before, with the view closed
    assert_no_exception(at)
    assert counted.page == 4 and len(at.get("plotly_chart")) == 1
