"""The handout (python -m ui.handout): a lesson over tiny checkpoints -> one HTML file whose slides are what the pages
drew (same figures, same numbers), with plotly.js once, notes as text, one sentence for a slide that cannot be drawn,
live links to http(s) servers only, and the lesson file never written over."""

from __future__ import annotations

import base64
import html
import json
import re
from pathlib import Path
from urllib.parse import quote, urlencode

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from bench.tiny_checkpoints import tiny_checkpoint_folder
from core.io import handout as ho
from core.io.checkpoint import read_metadata
from core.io.lessons import Lesson, Slide, save_lesson
from core.lens.export import export
from core.lens.history.records import history_from_metadata, to_csv
from tests.conftest import ROOT
from ui import handout as runner

TEXT = "Ada was in London."  # under 20 tokens: drawn whole (core.lens.attention.WHOLE_UP_TO)
ATTENTION = {"model": "tiny-lm", "text": TEXT, "view": "single", "layer": "1", "head": "2"}
CURVES = {"model": "tiny-lm", "runs": "tiny-lm", "metric": "loss", "x": "step", "smoothing": "0"}
NOTES = "Look at the diagonal.\n    <script>alert(1)</script> & more\n\nlast line"
SERVER = "http://teach.example:8501"


def lesson() -> Lesson:
    """`${m}` in the attention slide: filled by the command's --set (the lesson's own value names no model here)."""
    return Lesson(title="Tiny <tour>", variables={"m": "not-this-one"}, slides=(
        Slide("attention", {**ATTENTION, "model": "${m}"}, "One head", NOTES),
        Slide("curves", CURVES, "The loss", "Falls."),
        Slide("probe", {"model": "nobody-here"}, "A model that is not here"),
        Slide("nowhere", {}, "A page that is not here"),
        Slide("attention", {**ATTENTION, "view": "model"}, "Every head"),
    ))


@pytest.fixture(scope="module")
def made(tmp_path_factory) -> dict:
    """The handout of `lesson()` over tiny checkpoints, made once for the module by the command's own function."""
    folder = tmp_path_factory.mktemp("handout")
    checkpoints = tiny_checkpoint_folder(folder / "ckpts")
    path = save_lesson(lesson(), folder / "tiny.lesson.yaml")
    lines = []
    written = runner.make_handout(path, folder / "out" / "tiny.html", server=SERVER + "/", checkpoints=checkpoints,
                                  overrides=runner._overrides(["m=tiny-lm"]),
                                  progress=lambda n, total, s: lines.append((n, total, s.title)))
    text = written["html"].read_text(encoding="utf-8")
    return {"html": text, "checkpoints": checkpoints, "lesson": path, "lines": lines, "folder": folder}


def section(text: str, number: int) -> str:
    found = re.search(rf'<section class="slide" id="slide-{number}">(.*?)</section>', text, re.S)
    assert found, number
    return found.group(1)


def specs(text: str, number: int) -> list[dict]:
    """The figure JSON each chart of slide `number` is drawn from, in order."""
    return [json.loads(s) for s in re.findall(
        rf'<script type="application/json" class="chart-spec" data-for="chart-{number:02d}-\d\d">(.*?)</script>',
        text, re.S)]


def array(value) -> np.ndarray:
    if isinstance(value, dict):  # plotly's typed array {dtype, bdata, shape}
        data = np.frombuffer(base64.b64decode(value["bdata"]), dtype=np.dtype(value["dtype"]))
        return data.reshape([int(n) for n in str(value.get("shape", len(data))).split(",")])
    return np.array([[np.nan if v is None else v for v in row] for row in value], dtype=float)


def page_charts(monkeypatch, checkpoints: Path, page: str, state: dict) -> list[dict]:
    """What the page itself draws in its main area at this state, run as tests/test_attention_page.py runs it."""
    monkeypatch.setenv("ATTENTION_LAB_CHECKPOINTS", str(checkpoints))
    at = AppTest.from_file(str(ROOT / "pages" / f"{page}.py"), default_timeout=60)
    for key, value in state.items():
        at.query_params[key] = value
    at.run()
    assert not at.exception
    sidebar = {id(c) for c in at.sidebar.get("plotly_chart")}
    return [json.loads(c.proto.spec) for c in at.main.get("plotly_chart") if id(c) not in sidebar]


def test_plotly_js_is_embedded_once_and_nothing_is_fetched(made):
    from plotly.offline import get_plotlyjs

    text = made["html"]
    assert text.count(get_plotlyjs()[:2000]) == 1
    assert text.count("<script>") == 2  # plotly.js, then the drawing script; the figures are JSON, not scripts
    assert "cdn." not in text.split("<script>")[0] and "<img" not in text and "<link" not in text
    assert "Content-Security-Policy" in text and "connect-src 'none'" in text


def test_one_chart_div_per_chart_the_page_drew_with_the_pages_figure(made, monkeypatch):
    for number, (page, state) in enumerate((("attention", ATTENTION), ("curves", CURVES)), 1):
        drawn = page_charts(monkeypatch, made["checkpoints"], page, state)
        body = section(made["html"], number)
        assert len(re.findall(r'<div class="chart" id="chart-', body)) == len(drawn) == len(specs(made["html"], number))
        for ours, theirs in zip(specs(made["html"], number), drawn, strict=True):
            assert ours["data"] == theirs["data"] and ours["layout"] == theirs["layout"]
        traces = re.findall(r'data-traces="(\d+)"', body)
        assert [int(t) for t in traces] == [len(s["data"]) for s in drawn]


def test_notes_are_escaped_text_with_their_whitespace(made):
    body = section(made["html"], 1)
    assert "<script>alert(1)" not in made["html"]
    assert html.escape(NOTES, quote=True) in body  # indentation and blank line kept (shown pre-wrap)
    assert "&lt;script&gt;alert(1)&lt;/script&gt; &amp; more" in body
    assert "Tiny &lt;tour&gt;" in made["html"]


def test_a_missing_model_or_page_is_one_sentence_and_the_other_slides_render(made):
    model = section(made["html"], 3)
    assert "names the model &#x27;nobody-here&#x27;, which is not in the checkpoints folder" in model
    assert 'class="chart"' not in model
    page = section(made["html"], 4)
    assert "names the page &#x27;nowhere&#x27;, which this app does not have." in page
    assert specs(made["html"], 1) and specs(made["html"], 2)
    assert [(n, t) for n, t, _ in made["lines"]] == [(n, 5) for n in range(1, 6)]


def test_attention_heatmap_equals_the_exported_weights(made, tmp_path):
    """Parity: the page's heatmap in the handout holds the weights core.lens.export writes (float32, not rounded:
    the figure carries them unrounded, so they agree to the last bit here)."""
    run = export(made["checkpoints"] / "tiny-lm.safetensors", TEXT, tmp_path / "a.npz")
    saved = np.load(tmp_path / "a.npz")
    (fig,) = specs(made["html"], 1)
    z = array(fig["data"][0]["z"])
    meta = fig["data"][0]["meta"]
    assert (meta[0] if isinstance(meta, list) else meta)["positions"] == list(range(len(run.tokens)))
    weights, allowed = saved["attention"][1, 2], saved["allowed"]
    assert z.shape == weights.shape == (len(run.tokens), len(run.tokens))
    np.testing.assert_allclose(z[allowed], weights[allowed], rtol=0, atol=1e-6)
    assert np.isnan(z[~allowed]).all()
    assert np.abs(z[allowed] - weights[allowed]).max() == 0


def test_the_model_views_maps_equal_the_exported_weights_of_every_head(made, tmp_path):
    export(made["checkpoints"] / "tiny-lm.safetensors", TEXT, tmp_path / "a.npz")
    saved = np.load(tmp_path / "a.npz")
    (fig,) = specs(made["html"], 5)
    maps = [t for t in fig["data"] if t.get("type") == "heatmap"]
    layers, heads = saved["attention"].shape[:2]
    assert len(maps) == layers * heads
    allowed = saved["allowed"]
    for k, trace in enumerate(maps):  # layer by layer, head by head (the grid's reading order)
        z = array(trace["z"])
        np.testing.assert_allclose(z[allowed], saved["attention"][divmod(k, heads)][allowed], rtol=0, atol=1e-6)


def test_curves_points_equal_the_history_csv(made):
    frame = history_from_metadata(read_metadata(made["checkpoints"] / "tiny-lm.safetensors"), "tiny-lm").frame
    lines = to_csv(frame).decode().splitlines()
    header = lines[0].split(",")
    rows = [dict(zip(header, line.split(","), strict=True)) for line in lines[1:]]
    drawn = {}
    for trace in specs(made["html"], 2)[0]["data"]:
        meta = trace.get("meta")
        meta = meta[0] if isinstance(meta, list) else meta
        if meta and meta.get("kind") == "raw":
            drawn[meta["split"]] = list(zip(trace["x"], trace["y"], strict=True))
    for split in ("train", "val"):
        expected = [(float(r["step"]), float(r["value"])) for r in rows
                    if r["split"] == split and r["metric"] == "loss"]
        assert drawn[split] == expected


def test_each_slide_says_its_model_data_and_live_link(made):
    body = section(made["html"], 1)
    sha = ho.sha256_file(made["checkpoints"] / "tiny-lm.safetensors")
    assert "Model <b>tiny-lm</b>" in body and sha in body
    link = SERVER + "/attention?" + urlencode(ATTENTION, quote_via=quote)
    assert f'<a href="{html.escape(link, quote=True)}" rel="noopener noreferrer">' in body
    assert f"<b>Sentence:</b> <span class=\"value\">{html.escape(TEXT, quote=True)}</span>" in body
    assert "Model <b>nobody-here</b>" in section(made["html"], 3)


@pytest.mark.parametrize("server", ["javascript:alert(1)", "ftp://host/x", "file:///etc/passwd", "host:8501",
                                    "http://", "http://host:port", 'http://host/"onmouseover="x', ""])
def test_the_server_must_be_http_or_https(server):
    with pytest.raises(ho.HandoutError, match="http"):
        ho.server_url(server)


def test_good_servers_are_kept_without_a_trailing_slash():
    assert ho.server_url(" https://lab.example.org/app/ ") == "https://lab.example.org/app"
    assert ho.server_url("http://127.0.0.1:8501") == "http://127.0.0.1:8501"


def test_the_command_refuses_a_bad_server_in_one_sentence(made, capsys):
    out = made["folder"] / "refused.html"
    assert runner.main([str(made["lesson"]), "-o", str(out), "--server", "javascript:alert(1)"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and err.count("\n") == 0 and "http" in err
    assert not out.exists()


def test_the_lesson_file_is_never_written_over(made, tmp_path):
    lesson_file = tmp_path / "lesson.html"  # a lesson is read by content, whatever its name
    lesson_file.write_bytes(made["lesson"].read_bytes())
    before = lesson_file.read_bytes()
    assert runner.main([str(lesson_file), "-o", str(lesson_file), "--checkpoints", str(made["checkpoints"])]) == 2
    assert lesson_file.read_bytes() == before
    with pytest.raises(ho.HandoutError, match="never written over"):
        ho.write_atomically(lesson_file, b"x", never_over=[tmp_path / "." / "lesson.html"])
    assert lesson_file.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["lesson.html"]  # no temporary file left


def test_a_page_that_raises_is_one_sentence(tmp_path, monkeypatch):
    script = tmp_path / "broken.py"
    script.write_text("raise RuntimeError('boom\\nsecond line')\n")
    import ui

    monkeypatch.setattr(ui, "page_by_name", lambda name: ui.AppPage(str(script), "Broken", ""))
    folder = runner.Folder(tiny_checkpoint_folder(tmp_path / "ckpts"))
    handout = runner.capture(Lesson("t", (Slide("broken", {}), Slide("broken", {"model": "tiny-lm"}))),
                             folder.path, None)
    for slide in handout.slides:
        assert slide.problem == ("The Broken page stopped with an error for this slide (RuntimeError; the terminal "
                                 "that made the handout shows the traceback).")
    assert "boom" not in ho.render_html(handout, plotly_js="")  # the message stays in the terminal


def test_page_markdown_is_safe_html():
    out = ho.markdown_html("**Bold** <img src=x onerror=alert(1)> ![a](http://e.example/a.png) "
                           "[js](javascript:alert(1)) [rel](/curves) [ok](https://e.example) :green-badge[yes] "
                           "data\\/knowledge :material/home: x")
    assert "<strong>Bold</strong>" in out and "&lt;img src=x" in out
    assert "<img" not in out and "javascript:" not in out.replace("[js](javascript:alert(1))", "")
    assert '<a href="https://e.example" rel="noopener noreferrer">ok</a>' in out
    assert "<span>rel</span>" in out and "yes" in out and "data/knowledge" in out and "material" not in out


def test_tables_are_escaped_and_their_csv_guards_formulas():
    import pandas as pd

    frame = pd.DataFrame({"name": ["<b>x</b>", "=1+1"], "p": [0.123456, 1840.0]})
    slide = ho.CapturedSlide(1, "t", blocks=(ho.Table(frame),))
    text = ho.render_html(ho.Handout("t", (slide,)), plotly_js="")
    assert "&lt;b&gt;x&lt;/b&gt;" in text and "<b>x</b>" not in text
    assert '<td class="num">0.1235</td>' in text and '<td class="num">1,840</td>' in text
    assert ho.table_files(ho.Handout("t", (slide,))) == {"slide-01-table-01.csv": "name,p\n<b>x</b>,0.123456\n"
                                                                                  "'=1+1,1840.0\n"}


@pytest.mark.parametrize("pair", ["model", "=x"])
def test_set_must_be_name_equals_value(pair):
    with pytest.raises(ho.HandoutError, match="NAME=VALUE"):
        runner._overrides([pair])


def test_provenance_is_the_checkpoints_the_state_names_else_the_sidebars(tmp_path):
    folder = runner.Folder(tiny_checkpoint_folder(tmp_path / "ckpts"))
    picked = folder.infos["tiny-birthplace"]
    models, _ = runner.provenance(Slide("curves", {"runs": "tiny-lm,tiny-classifier,gone", "metric": "loss"}),
                                  picked, folder)
    assert [(m.name, m.sha256) for m in models] == [
        (n, ho.sha256_file(folder.path / f"{n}.safetensors")) for n in ("tiny-lm", "tiny-classifier")]
    models, _ = runner.provenance(Slide("playground", {}), picked, folder)
    assert [(m.name, m.note) for m in models] == [("tiny-birthplace", "the sidebar's model")]


def test_data_files_are_checked_against_the_files_here():
    path = "data/world/" + sorted(p.name for p in (ROOT / "data" / "world").iterdir() if p.is_file())[0]
    sha = ho.sha256_file(ROOT / path)
    found = runner._data_files({"data": [{"path": path, "sha256": sha}, {"path": path, "sha256": "0" * 64},
                                         {"path": "data/none.txt", "sha256": "1" * 64}, "junk"]})
    assert [(f.name, f.sha256, f.note) for f in found] == [
        (path, sha, "the file here matches"), (path, "0" * 64, "the file here differs"),
        ("data/none.txt", "1" * 64, "recorded at training; not found here")]


SINK = '''
import numpy as np
import pandas as pd
import streamlit as st

st.title("Sink <page>")
st.sidebar.markdown("SIDEBAR-ONLY")
st.text_area("Sentence", "The <cat> sat.")
st.button("Press me")
st.toggle("Off toggle")
st.toggle("On toggle", value=True)
a, b = st.columns([2, 1])
a.markdown("**left** <i>raw</i>")
b.metric("Loss", "0.25", "-0.1")
c, d = st.columns(2)
c.selectbox("Layer", [0, 1], index=1, format_func=lambda v: f"layer {v}")
d.radio("View", ["one", "two"], index=0)
one, two = st.tabs(["First", "Second"])
one.caption("in the first tab")
two.caption("in the second tab")
with st.expander("Closed box"):
    st.dataframe(pd.DataFrame({"x": [1.5, 2.0]}), hide_index=True)
with st.expander("Open box", expanded=True):
    st.code("print('<hi>')")
st.divider()
st.image(np.zeros((4, 4, 3), dtype=np.uint8))
st.warning("Careful & <b>bold</b>")
'''


def test_what_a_page_draws_becomes_escaped_blocks_in_order(tmp_path, monkeypatch):
    script = tmp_path / "sink.py"
    script.write_text(SINK)
    import ui

    monkeypatch.setattr(ui, "page_by_name", lambda name: ui.AppPage(str(script), "Sink", ""))
    folder = runner.Folder(tiny_checkpoint_folder(tmp_path / "ckpts"))
    slide = runner.capture_slide(1, Slide("sink", {}), folder, None)
    assert slide.problem is None
    kinds = [type(b).__name__ for b in slide.blocks]
    assert kinds == ["Text", "Setting", "Setting", "Columns", "Setting", "Setting", "Section", "Section", "Section",
                     "Text", "Text", "Text"]
    text = ho.render_html(ho.Handout("t", (slide,)), plotly_js="")
    body = section(text, 1)
    assert "SIDEBAR-ONLY" not in body and "Press me" not in body and "Off toggle" not in body
    assert "<b>On toggle:</b> <span class=\"value\">on</span>" in body
    assert "<b>Sentence:</b> <span class=\"value\">The &lt;cat&gt; sat.</span>" in body
    assert "<b>Layer:</b> <span class=\"value\">layer 1</span>" in body and "<b>View:</b>" in body
    assert ('<div class="col" style="flex: 0.6667 1 0"><div class="markdown"><p><strong>left</strong> '
            '&lt;i&gt;raw') in body
    assert '<div class="label">Loss</div><div class="value">0.25</div><div class="delta">-0.1</div>' in body
    assert "in the first tab" in body and "in the second tab" not in body  # the tab the page shows, only
    assert "First <span class=\"others\">(tab; the others: Second)</span>" in body
    assert '<details class="section"><summary>Closed box</summary>' in body and '<td class="num">1.5</td>' in body
    assert '<details class="section" open><summary>Open box</summary><pre class="code">print(&#x27;&lt;hi&gt;' in body
    assert "<hr />" in body and "(The page shows an image here; it is not in the handout.)" in body
    assert '<div class="callout warning"><p>Careful &amp; &lt;b&gt;bold&lt;/b&gt;</p>\n</div>' in body
    assert "Sink &lt;page&gt;" in body


def test_without_chromium_one_sentence_and_the_html_and_tables_are_still_written(tmp_path, monkeypatch, capsys):
    import zipfile

    monkeypatch.setenv("CHROMIUM", str(tmp_path / "no-chromium"))
    lesson_file = save_lesson(Lesson("By hand", (Slide("playground", {}, "Attention by hand"),)),
                              tmp_path / "p.lesson.yaml")
    written = runner.make_handout(lesson_file, tmp_path / "p.html", pdf=True, want_zip=True,
                                  checkpoints=tiny_checkpoint_folder(tmp_path / "ckpts"))
    assert set(written) == {"html", "zip"} and not (tmp_path / "p.pdf").exists()
    assert capsys.readouterr().err.strip() == (f"note: No Chromium at {tmp_path / 'no-chromium'} (apt-get install "
                                               "chromium, or set CHROMIUM), so no PDF or images were made.")
    with zipfile.ZipFile(written["zip"]) as archive:
        names = archive.namelist()
    tables = written["html"].read_text(encoding="utf-8").count('<div class="table-wrap">')
    assert tables and sorted(n for n in names if n.endswith(".csv")) == [
        f"slide-01-table-{n:02d}.csv" for n in range(1, tables + 1)]
    assert not [n for n in names if n.endswith((".png", ".svg"))]
