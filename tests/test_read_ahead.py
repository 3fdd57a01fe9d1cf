"""Issue 45, item 3: with "Where from" open, a new name's reading and causal trace are read ahead on a worker
thread while the page computes the models' answers, and the page takes them instead of computing them again;
what it draws is the same as without reading ahead."""

from __future__ import annotations

import json
import threading
from concurrent.futures import Future

import pytest

from tests.test_where_from_page import bundled_one, open_probe, small_world  # noqa: F401
from ui import where_from_view


@pytest.fixture
def computed(monkeypatch) -> list[tuple[str, str]]:
    """(what, the thread it ran on) for every reading and trace computed."""
    done: list[tuple[str, str]] = []
    for name in ("_reading", "_trace"):
        real = getattr(where_from_view, name)

        def wrapper(*args, _real=real, _name=name, **kwargs):
            done.append((_name, threading.current_thread().name))
            return _real(*args, **kwargs)
        monkeypatch.setattr(where_from_view, name, wrapper)
    return done


def test_a_new_name_is_read_ahead_on_the_worker_and_the_page_takes_it(monkeypatch, bundled_one, small_world,  # noqa: F811
                                                                        computed):
    at = open_probe(monkeypatch, bundled_one, small_world, tab="ask", name="Michelle Lefort", wf="1")
    computed.clear()
    at.text_input(key="probe_ask").input("Quirinus Aheadsworth").run()  # a name no other test asks
    assert not at.exception, [e.message for e in at.exception]
    assert sorted(what for what, _ in computed) == ["_reading", "_trace"]  # each once: the page took them
    assert all(thread.startswith("where-from-ahead") for _, thread in computed), computed
    computed.clear()
    at.text_input(key="probe_ask").input("Quirinus Aheadsworth").run()  # nothing new: nothing read ahead
    at.text_input(key="probe_ask").input("Michelle Lefort").run()  # seen before: its caches answer
    assert not at.exception and computed == []


def test_the_view_closed_reads_nothing_ahead(monkeypatch, bundled_one, small_world, computed):  # noqa: F811
    at = open_probe(monkeypatch, bundled_one, small_world, tab="ask", name="Michelle Lefort")
    at.text_input(key="probe_ask").input("Quirinus Closedworth").run()
    assert not at.exception and computed == []


def test_what_is_drawn_read_ahead_is_what_is_drawn_without(monkeypatch, bundled_one, small_world):  # noqa: F811
    name = "Quirinus Sameworth"
    at = open_probe(monkeypatch, bundled_one, small_world, tab="ask", name="Michelle Lefort", wf="1", wf_samples="3")
    at.text_input(key="probe_ask").input(name).run()
    ahead = [json.loads(c.proto.spec) for c in at.get("plotly_chart")]
    where_from_view.cached_reading.clear()
    where_from_view.cached_trace.clear()
    with where_from_view._LOCK:
        where_from_view._COMPUTED.clear()
    monkeypatch.setattr(where_from_view, "read_ahead", lambda *args, **kwargs: None)
    at.text_input(key="probe_ask").input("Michelle Lefort").run()
    at.text_input(key="probe_ask").input(name).run()
    assert not at.exception
    now = [json.loads(c.proto.spec) for c in at.get("plotly_chart")]
    assert len(ahead) == len(now) >= 6 and ahead == now


def test_a_reading_not_started_is_taken_back_and_computed_on_the_page(monkeypatch):
    waiting = Future()  # never started: cancel() takes it back
    monkeypatch.setitem(where_from_view._PENDING, ("trace", "k"), waiting)
    assert where_from_view._ahead_or_now(("trace", "k"), lambda: "now") == "now"
    assert waiting.cancelled() and ("trace", "k") not in where_from_view._PENDING
    failed = Future()
    failed.set_running_or_notify_cancel()
    failed.set_exception(ValueError("no name"))
    monkeypatch.setitem(where_from_view._PENDING, ("trace", "e"), failed)
    with pytest.raises(ValueError, match="no name"):  # its exception is the page's, as if computed there
        where_from_view._ahead_or_now(("trace", "e"), lambda: "now")
    submitted = []
    monkeypatch.setattr(where_from_view._AHEAD, "submit", lambda f: submitted.append(f) or Future())
    where_from_view._start(("trace", "k"), lambda: None)  # computed (and cached) already: not again
    assert submitted == []
