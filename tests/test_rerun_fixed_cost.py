"""Issue 45 (fixed): what every rerun of every page pays, done once. app.py wraps no function in a cache on a rerun
(ui/app_shell.py holds what it does once per process), the Attention page's default sentence is made once per
loaded model, ui.page_state reads a state class's fields once, and the step slider asks no cache for a
checkpoint without a snapshot file. Each counts the work on reruns and a second session, then changes what the
cached thing depends on (another model, a link's value, a snapshot file written beside the checkpoint) and checks
that the page follows."""

from __future__ import annotations

import ast
import dataclasses
import sys

import streamlit
from streamlit.testing.v1 import AppTest

import ui.training_steps
from core.io import checkpoint as ckpt
from core.lens import attention as av
from tests.conftest import ROOT
from tests.test_attention_page import assert_no_exception, open_page
from tests.test_training_steps_pages import add_snapshots
from ui import APP_PAGES


class Counting:
    """A stand-in for st.cache_resource / st.cache_data that counts the functions wrapped through it."""

    def __init__(self, real) -> None:
        self.real, self.calls = real, 0

    def __call__(self, *args, **kwargs):
        self.calls += 1
        return self.real(*args, **kwargs)

    def __getattr__(self, name: str):
        return getattr(self.real, name)


def test_a_rerun_of_app_py_wraps_no_function_in_a_cache(monkeypatch, tiny_checkpoints):
    """A function decorated in app.py's body was wrapped anew on every run (Streamlit reads its source to key the
    cache); ui/app_shell.py is imported once. The page list and the page still come out the same."""
    monkeypatch.setenv("ATTENTION_LAB_CHECKPOINTS", str(tiny_checkpoints))
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60).run()
    assert_no_exception(at)
    wrapped = {name: Counting(getattr(streamlit, name)) for name in ("cache_resource", "cache_data")}
    for name, counter in wrapped.items():
        monkeypatch.setattr(streamlit, name, counter)
    at.run()
    at.run()
    assert_no_exception(at)
    assert {name: c.calls for name, c in wrapped.items()} == {"cache_resource": 0, "cache_data": 0}
    assert at.title[0].value == "Attention Lab" and at.session_state["app_ran"]
    second = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60).run()  # another browser
    assert_no_exception(second)
    assert wrapped["cache_resource"].calls == 0 and second.sidebar.selectbox(key="picker_model").options


def test_no_page_file_wraps_a_function_in_a_cache_on_its_reruns():
    """A page file's body is the script Streamlit reruns: its cached functions live in modules it imports
    (ui/page_caches.py). A decorator st.cache_resource / st.cache_data anywhere in a page file is found here."""
    def cache_decorators(file: str) -> list[str]:
        tree = ast.parse((ROOT / file).read_text(), file)
        return [f"{file}:{node.lineno} {node.name}" for node in ast.walk(tree)
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) for d in node.decorator_list
                if "cache_resource" in ast.unparse(d) or "cache_data" in ast.unparse(d)]

    found = [hit for page in APP_PAGES for hit in cache_decorators(page.file)] + cache_decorators("app.py")
    assert found == []


def test_the_default_sentence_is_made_once_per_model_and_follows_a_new_one(monkeypatch, tiny_checkpoints):
    made = []
    real = av.default_sentence
    monkeypatch.setattr(av, "default_sentence", lambda task, tokenizer: made.append(task) or real(task, tokenizer))
    at = open_page(monkeypatch, tiny_checkpoints, model="tiny-lm")
    at.run()
    at.run()
    assert made == ["lm"]  # three runs of one model: tokenized once
    assert at.text_area(key="attn_text").value == real("lm", ckpt.load(tiny_checkpoints / "tiny-lm.safetensors")
                                                        .tokenizer)
    open_page(monkeypatch, tiny_checkpoints, model="tiny-lm")  # a second session on the same model
    assert made == ["lm"]
    at.sidebar.selectbox(key="picker_model").select("tiny-birthplace").run()  # the untouched default follows
    assert_no_exception(at)
    other = ckpt.load(tiny_checkpoints / "tiny-birthplace.safetensors")
    assert made == ["lm", "birthplace"]
    assert at.text_area(key="attn_text").value == real("birthplace", other.tokenizer)


def test_the_url_codec_reads_a_state_class_once_and_still_follows_a_link(monkeypatch, tiny_checkpoints):
    read = []
    real = dataclasses.fields

    def fields(cls_or_state):
        if sys._getframe(1).f_globals.get("__name__") == "ui.page_state":
            read.append(cls_or_state)
        return real(cls_or_state)

    at = open_page(monkeypatch, tiny_checkpoints, model="tiny-lm", text="Ada was born in Paris.")
    monkeypatch.setattr(dataclasses, "fields", fields)
    at.run()
    at.run()
    assert_no_exception(at)
    assert read == []  # restore, bind and the URL: no field list rebuilt
    at.query_params["head"] = "1"  # a link with another head: read, and the widget follows it
    at.run()
    assert_no_exception(at)
    assert at.selectbox(key="attn_head").value == 1 and at.text_area(key="attn_text").value == "Ada was born in Paris."


def test_no_snapshot_file_asks_no_cache_and_a_new_one_brings_the_slider(monkeypatch, tiny_checkpoints):
    asked = []
    real = ui.training_steps.cached_snapshots
    monkeypatch.setattr(ui.training_steps, "cached_snapshots", lambda *args: asked.append(args[0]) or real(*args))
    at = open_page(monkeypatch, tiny_checkpoints, model="tiny-lm", text="Ada was born in Paris.")
    at.run()
    at.run()
    assert asked == [] and not at.select_slider  # no file beside the checkpoint: nothing read, nothing asked
    add_snapshots(tiny_checkpoints / "tiny-lm.safetensors")  # written while the page is open
    at.run()
    assert_no_exception(at)
    assert asked and at.select_slider(key="attn_step").value == 30  # the slider, at the checkpoint's own step
