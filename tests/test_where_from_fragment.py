"""Issue 45: the probe's "Where from" view is a fragment. A change of its options (samples, seed, corruption) reruns
that view alone, as the browser asks it to, and not the probe page's answers; its figures are kept as sent.

AppTest reruns the whole script on every widget change, so the rerun here is the one the browser sends: the
fragment id carried by the changed widget's element (none when the widget is not inside a fragment: then the whole
page reruns, and the counts below say so)."""

from __future__ import annotations

import dataclasses
import functools
import json

import pytest
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg
from streamlit.testing.v1 import AppTest, local_script_runner

import ui.probe_views
import ui.training_steps
from core.figures import where_from as viz
from core.lens import where_from as wf
from tests.conftest import ROOT
from tests.test_where_from_page import KNOWLEDGE, MODEL, bundled_one, open_probe, small_world  # noqa: F401


@dataclasses.dataclass
class Calls:
    page: int = 0  # the probe page's per-run model views: the three models' answers, the answers by step
    traces: int = 0  # causal traces computed (cache misses): the view's own model work
    figures: int = 0  # the view's figures built (lens, attribution, causal trace, salience)


def counting(calls, function, field: str):
    """`function`, adding one to `calls.<field>` on every call (the fragment tests' counters)."""
    def wrapper(*args, **kwargs):
        setattr(calls, field, getattr(calls, field) + 1)
        return function(*args, **kwargs)
    return wrapper


@pytest.fixture
def counted(monkeypatch) -> Calls:
    calls = Calls()
    count = functools.partial(counting, calls)
    monkeypatch.setattr(ui.probe_views, "show_example", count(ui.probe_views.show_example, "page"))
    monkeypatch.setattr(ui.training_steps, "show_answers_by_step",
                        count(ui.training_steps.show_answers_by_step, "page"))
    monkeypatch.setattr(wf, "causal_trace", count(wf.causal_trace, "traces"))
    for name in ("logit_lens_heatmap", "attribution_bars", "causal_trace_panels", "salience_chips"):
        monkeypatch.setattr(viz, name, count(getattr(viz, name), "figures"))
    return calls


@pytest.fixture
def sent(monkeypatch) -> list[ForwardMsg]:
    """Every message of the last run, as the browser receives them."""
    kept: list[ForwardMsg] = []
    parse = local_script_runner.parse_tree_from_messages

    def keeping(messages):
        kept[:] = list(messages)
        return parse(messages)
    monkeypatch.setattr(local_script_runner, "parse_tree_from_messages", keeping)
    return kept


def fragment_of(messages: list[ForwardMsg], widget_key: str) -> str:
    """The fragment id the browser sends back when this widget changes ('' outside any fragment)."""
    for msg in messages:
        element = msg.delta.new_element if msg.HasField("delta") else None
        if element is not None and element.WhichOneof("type"):
            proto = getattr(element, element.WhichOneof("type"))
            if widget_key in getattr(proto, "id", ""):
                return msg.delta.fragment_id
    raise AssertionError(f"no widget {widget_key} was sent")


def browser_rerun(monkeypatch, at: AppTest, fragment_id: str, change) -> None:
    """`change` (a widget's set_value) rerun as the browser asks: only that fragment when the widget is in one."""
    real = local_script_runner.RerunData
    if fragment_id:
        def scoped(**fields):  # AppTest's runner starts with an empty request, then the run's: both scoped
            return real(**fields, fragment_id_queue=[fragment_id])
        monkeypatch.setattr(local_script_runner, "RerunData", scoped)
    change().run()
    monkeypatch.setattr(local_script_runner, "RerunData", real)
    assert not at.exception, [e.message for e in at.exception]


def test_where_from_options_rerun_the_view_alone(monkeypatch, bundled_one, small_world, counted, sent):  # noqa: F811
    at = open_probe(monkeypatch, bundled_one, small_world, tab="ask", name="Michelle Lefort", wf="1", wf_samples="2")
    assert counted.page == 2 and counted.traces == 1 and counted.figures == 4  # a whole run: answers and view
    fragment = fragment_of(sent, "wf_ask_samples")
    browser_rerun(monkeypatch, at, fragment, lambda: at.number_input(key="wf_ask_samples").set_value(3))
    assert counted.traces == 2, "the view did not trace with the new number of samples"
    assert counted.page == 2, "changing a 'Where from' option reran the probe page's answers"
    captions = " ".join(c.value for c in at.caption)
    assert "3 sample" in captions and "2 sample" not in captions  # what the rerun sent: the view with its new trace
    assert at.query_params["wf_samples"] in ("3", ["3"])  # the option is still in the link
    assert counted.figures == 5  # the new trace's figure; the lens, attribution and salience as kept

    browser_rerun(monkeypatch, at, fragment_of(sent, "wf_ask_open"),
                  lambda: at.toggle(key="wf_ask_open").set_value(False))
    assert counted.page == 2 and not at.get("plotly_chart")  # closed, and the answers not asked again
    browser_rerun(monkeypatch, at, fragment_of(sent, "wf_ask_open"),
                  lambda: at.toggle(key="wf_ask_open").set_value(True))
    assert len(at.get("plotly_chart")) == 4 and counted.figures == 5  # opened again: every figure as kept
    assert counted.page == 2 and counted.traces == 2


def test_the_dev_average_offer_leaves_the_fragment_for_its_tab(monkeypatch, tmp_path, counted, sent):
    """The offer of the dev-set average switches the probe's tab: clicked inside the fragment it must rerun the
    whole page (a fragment's rerun alone would leave the Ask tab on screen)."""
    folder = tmp_path / "kept"
    folder.mkdir()
    for suffix in (".safetensors", ".where_from.json"):
        (folder / f"{MODEL}{suffix}").symlink_to(ROOT / "checkpoints" / f"{MODEL}{suffix}")
    at = open_probe(monkeypatch, folder, KNOWLEDGE, tab="ask", wf="1")  # the first dev person: a grid that
    key = "wf_ask_teach__open_dev_average"  # teaches little, so the offer is made
    fragment = fragment_of(sent, key)
    assert fragment  # the offer is drawn inside the fragment
    browser_rerun(monkeypatch, at, fragment, lambda: at.button(key=key).click())
    assert at.session_state["probe_tab"] == "Dev set"
    drawn = {t.key: t.value for t in at.toggle}
    assert drawn.get("wf_dev_open") is True, drawn  # the Dev set tab drawn: the whole page ran


def test_the_dev_average_options_rerun_the_view_alone(monkeypatch, tmp_path, sent):
    """On the Dev set tab, choosing other people for the averaged grids reruns that view, not the tab's
    analyses of every dev question."""
    folder = tmp_path / "kept"
    folder.mkdir()
    for suffix in (".safetensors", ".where_from.json"):
        (folder / f"{MODEL}{suffix}").symlink_to(ROOT / "checkpoints" / f"{MODEL}{suffix}")
    analyses = []
    analysis = ui.probe_views.cached_analysis
    monkeypatch.setattr(ui.probe_views, "cached_analysis",
                        lambda *args, **kwargs: analyses.append(1) or analysis(*args, **kwargs))
    at = open_probe(monkeypatch, folder, KNOWLEDGE, tab="dev", wf="1")
    assert len(analyses) == 1  # one model's analysis of the dev questions, on the whole run
    groups = at.selectbox(key="wf_dev_group").options
    assert len(groups) > 1, groups
    other = groups[1]
    browser_rerun(monkeypatch, at, fragment_of(sent, "wf_dev_group"),
                  lambda: at.selectbox(key="wf_dev_group").set_value(other.split(" (")[0]))
    assert len(analyses) == 1, "choosing the people reran the Dev set tab's analyses"
    titles = [json.loads(c.proto.spec)["layout"]["title"]["text"] for c in at.get("plotly_chart")]
    assert any(other.split(" (")[0] in t and "mean over people" in t for t in titles), titles
