"""A lesson's handout as one self-contained HTML file: captured slides (plain values, below) in, HTML text out; and
the zip of its figures and tables. Nothing here runs a page or knows Streamlit: `ui.handout` runs each slide's page
headlessly and turns what the page drew into these blocks, so every figure, caption and table is the page's own.

The file makes no network request when opened: plotly.js is embedded once (the installed plotly package's copy,
`plotly.offline.get_plotlyjs()`), its charts are drawn from their figure JSON with MathJax typesetting off, Markdown
images are not rendered (no image is fetched by URL), no fonts come from the web, and a Content-Security-Policy
forbids every fetch (`connect-src`, `img-src` and `font-src` allow only data: and blob: URLs the page makes itself).

Text a person or a page wrote is never HTML: notes are escaped text (whitespace kept), page Markdown is rendered by
markdown-it-py with raw HTML off (it is escaped), images off and links kept only for http(s) targets (rel=noopener);
Streamlit's own Markdown directives (`:green[...]`, `:violet-badge[...]`, `:material/icon:`) are reduced to their
text. Markdown and not plain text because the pages write it with backslash escapes (core.text.markdown_escape) and
bold/code marks: shown raw, a caption would read `data\\/knowledge\\/wiki\\.txt`.
"""

from __future__ import annotations

import hashlib
import html
import io
import os
import re
import tempfile
import time
import zipfile
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode, urlsplit

import orjson

MAX_TABLE_ROWS = 500  # rows a handout's table holds (the zip's CSV holds them all); the page scrolls a box of ~10
TEXT_STYLES = ("title", "header", "subheader", "markdown", "caption", "text", "code", "latex",
               "info", "warning", "error", "success")
MARKDOWN_STYLES = ("title", "header", "subheader", "markdown", "caption", "info", "warning", "error", "success")
NETWORK_TRACES = {"scattergeo", "choropleth", "scattermapbox", "choroplethmapbox", "densitymapbox", "scattermap",
                  "choroplethmap", "densitymap"}  # map tiles and topojson come from the web: not drawn offline


class HandoutError(ValueError):
    """A handout that cannot be made as asked; str() is one sentence for the person."""


# --- what a page drew, as plain values ------------------------------------------------------------------------

@dataclass(frozen=True)
class Chart:
    spec: dict[str, Any]  # plotly figure JSON: data, layout, and the page's chart config under "config"

    @property
    def traces(self) -> int:
        return len(self.spec.get("data") or [])


@dataclass(frozen=True)
class Text:
    style: str  # one of TEXT_STYLES
    text: str


@dataclass(frozen=True)
class Table:
    frame: Any  # a pandas DataFrame, as the page gave it (columns already labelled and ordered as shown)
    index: bool = False  # the page shows the frame's index as its first column


@dataclass(frozen=True)
class Metric:
    label: str
    value: str
    delta: str = ""


@dataclass(frozen=True)
class Setting:
    """A widget's current value where it says what is shown (the sentence, the layer): a small caption."""

    label: str
    value: str


@dataclass(frozen=True)
class Columns:
    columns: tuple[tuple[float, tuple], ...]  # (weight, blocks) per column


@dataclass(frozen=True)
class Section:
    """An expander (closed or open, as on the page) or the tab the page shows (`others`: the tabs not shown)."""

    kind: str  # "expander" | "tab"
    label: str
    blocks: tuple
    expanded: bool = True
    others: tuple[str, ...] = ()


Block = Chart | Text | Table | Metric | Setting | Columns | Section


@dataclass(frozen=True)
class FileHash:
    name: str
    sha256: str | None = None
    note: str = ""  # "matches the file here", "not in this folder", ...


@dataclass(frozen=True)
class CapturedSlide:
    number: int
    title: str
    notes: str = ""
    page: str = ""  # the page's name in the lesson
    page_title: str = ""  # as the app's navigation names it
    link: str | None = None  # the live view on the author's server
    models: tuple[FileHash, ...] = ()  # the checkpoints the slide names, or the sidebar's model (note says so)
    data: tuple[FileHash, ...] = ()
    blocks: tuple = ()
    problem: str | None = None  # one sentence: why this slide could not be drawn
    seconds: float = 0.0


@dataclass(frozen=True)
class Handout:
    title: str
    slides: tuple[CapturedSlide, ...]
    made: str = field(default_factory=lambda: time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()))
    server: str | None = None
    checkpoints: str = ""


# --- walking the blocks: figures and tables in order ---------------------------------------------------------

def walk(blocks: Sequence) -> Iterator:
    """Every block in the order the page shows them, columns and sections entered."""
    for block in blocks:
        yield block
        if isinstance(block, Columns):
            for _, inner in block.columns:
                yield from walk(inner)
        elif isinstance(block, Section):
            yield from walk(block.blocks)


def numbered(slide: CapturedSlide, kind: type) -> list[tuple[str, Any]]:
    """(stem, block) for each chart or table of a slide: slide-NN-figure-MM, slide-NN-table-MM."""
    word = "figure" if kind is Chart else "table"
    found = [b for b in walk(slide.blocks) if isinstance(b, kind)]
    return [(f"slide-{slide.number:02d}-{word}-{n:02d}", block) for n, block in enumerate(found, 1)]


# --- links, hashes, files -------------------------------------------------------------------------------------

def server_url(text: str) -> str:
    """The author's server for the live links: http(s)://host[:port][/path], anything else refused."""
    text = (text or "").strip()
    try:
        parts = urlsplit(text)
        parts.port  # noqa: B018 - raises on a port that is not a number
    except ValueError:
        raise HandoutError(f"The server {text[:80]!r} is not a URL; give one like http://host:8501.") from None
    if parts.scheme not in ("http", "https") or not parts.hostname or parts.query or parts.fragment \
            or any(c.isspace() or c in "\"'<>`\\" for c in text):
        raise HandoutError(f"The server {text[:80]!r} must be an http:// or https:// address like "
                           "http://host:8501.")
    return text.rstrip("/")


def live_link(server: str, url_path: str, state: Mapping[str, str]) -> str:
    query = urlencode(dict(state), quote_via=quote)
    return f"{server}/{url_path}" + (f"?{query}" if query else "")


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def write_atomically(path: Path, data: bytes, never_over: Sequence[Path] = ()) -> Path:
    """`data` into `path` by a temporary file renamed, refusing to write over any of `never_over` (the lesson)."""
    path = Path(path)
    for other in never_over:
        if Path(other).resolve() == path.resolve():
            raise HandoutError(f"{path.name} is the lesson file itself; the handout is never written over it.")
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}-", suffix=".tmp")
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(data)
        os.chmod(temporary, 0o644)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return path


def zip_bytes(files: Mapping[str, bytes | str]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name, content in files.items():
            archive.writestr(name, content.encode("utf-8") if isinstance(content, str) else content)
    return buffer.getvalue()


def table_files(handout: Handout) -> dict[str, str]:
    """slide-NN-table-MM.csv for every table (core.io.tables.table_csv: no cell reads as a formula)."""
    from core.io.tables import table_csv

    out = {}
    for slide in handout.slides:
        for stem, table in numbered(slide, Table):
            frame = table.frame.reset_index() if table.index else table.frame
            out[f"{stem}.csv"] = table_csv(frame)
    return out


# --- text -----------------------------------------------------------------------------------------------------

_DIRECTIVE = re.compile(r":(?:red|orange|yellow|green|blue|violet|gray|grey|rainbow|primary)(?:-badge|-background)?"
                        r"\[((?:[^\[\]]|\[[^\[\]]*\])*)\]")
_ICON = re.compile(r":material/[a-z0-9_]+:\s?")


def _markdown():
    from markdown_it import MarkdownIt

    md = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False}).enable("table")
    md.enable("strikethrough")
    md.disable("image")  # an image by URL would be fetched when the file is opened

    def link_open(renderer, tokens, idx, options, env):
        href = str(tokens[idx].attrGet("href") or "")
        kept = re.match(r"https?://", href) is not None  # a page's relative link leads nowhere from a file
        env.setdefault("links", []).append(kept)
        return f'<a href="{html.escape(href, quote=True)}" rel="noopener noreferrer">' if kept else "<span>"

    def link_close(renderer, tokens, idx, options, env):
        stack = env.get("links") or [False]
        return "</a>" if stack.pop() else "</span>"

    md.add_render_rule("link_open", link_open)
    md.add_render_rule("link_close", link_close)
    return md


_MD = None


def markdown_html(text: str, inline: bool = False) -> str:
    """A page's Markdown as safe HTML (raw HTML escaped, no images, http(s) links only)."""
    global _MD
    if _MD is None:
        _MD = _markdown()
    source = _ICON.sub("", _DIRECTIVE.sub(r"\1", text))
    return _MD.renderInline(source, {}) if inline else _MD.render(source, {})


def cell_text(value) -> str:
    """A table cell as the page shows it: empty for missing, floats to 4 significant digits, whole ones with
    thousands separators."""
    if value is None:
        return ""
    if isinstance(value, float):
        if value != value:
            return ""
        if value.is_integer() and abs(value) < 1e15:
            return f"{value:,.0f}"
        return f"{value:,.1f}" if abs(value) >= 1000 else f"{value:.4g}"
    try:
        import pandas as pd

        if pd.isna(value) is True:
            return ""
    except (TypeError, ValueError):
        pass
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):
        try:
            return cell_text(value.item())
        except (TypeError, ValueError):
            pass
    return str(value)


def _escape(text: str) -> str:
    return html.escape(str(text), quote=True)


def _json_for_script(value: Any) -> str:
    """JSON that cannot end its <script> element (`<`, `>`, `&` as \\u escapes, valid inside JSON strings)."""
    text = orjson.dumps(value, option=orjson.OPT_SERIALIZE_NUMPY).decode("utf-8")
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


# --- HTML -----------------------------------------------------------------------------------------------------

CSP = ("default-src 'none'; script-src 'unsafe-inline' 'unsafe-eval'; style-src 'unsafe-inline'; "
       "img-src data: blob:; font-src data:; connect-src 'none'; base-uri 'none'; form-action 'none'")

STYLE = """
:root { --ink: #1f2430; --muted: #5c6370; --line: #d9dce3; --accent: #3b5bdb; }
* { box-sizing: border-box; }
body { margin: 0; font: 16px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", sans-serif;
       color: var(--ink); background: #f3f4f7; }
main { max-width: 1280px; margin: 0 auto; padding: 16px; }
.slide, .cover { background: #fff; border: 1px solid var(--line); border-radius: 8px; padding: 20px 28px;
                 margin: 0 0 24px; }
.cover h1 { font-size: 2.1em; margin: 0.2em 0; }
.cover .meta { color: var(--muted); }
.toc ol { columns: 2; column-gap: 40px; padding-left: 1.4em; }
.toc li { break-inside: avoid; margin: 2px 0; }
.toc .page { color: var(--muted); font-size: 0.85em; }
.slide > header { display: flex; align-items: baseline; gap: 14px; border-bottom: 2px solid var(--accent);
                  margin-bottom: 10px; }
.slide > header h2 { margin: 0 0 6px; font-size: 1.5em; flex: 1; }
.slide > header .where { color: var(--muted); font-size: 0.85em; white-space: nowrap; }
.notes { white-space: pre-wrap; background: #fff8e1; border-left: 4px solid #f2b600; padding: 8px 12px;
         margin: 8px 0 12px; font-size: 0.95em; }
.problem { background: #fdecea; border-left: 4px solid #d93025; padding: 10px 14px; margin: 10px 0; }
.content { font-size: 0.95em; }
.content h1 { font-size: 1.35em; margin: 0.3em 0; }
.content h3 { font-size: 1.15em; margin: 0.7em 0 0.3em; }
.content h4 { font-size: 1.02em; margin: 0.6em 0 0.3em; }
.content p { margin: 0.35em 0; }
.caption { color: var(--muted); font-size: 0.86em; }
.caption p { margin: 0.2em 0; }
pre.code { background: #f6f8fa; border: 1px solid var(--line); border-radius: 4px; padding: 6px 10px;
           white-space: pre-wrap; word-break: break-word; font-size: 0.85em; margin: 6px 0; }
pre.text { white-space: pre-wrap; font: inherit; margin: 4px 0; }
.callout { border-radius: 4px; padding: 8px 12px; margin: 6px 0; }
.callout p { margin: 0.2em 0; }
.callout.info { background: #e8f0fe; } .callout.warning { background: #fef7e0; }
.callout.error { background: #fdecea; } .callout.success { background: #e6f4ea; }
.settings { color: var(--muted); font-size: 0.82em; margin: 4px 0; display: flex; flex-wrap: wrap; gap: 4px 14px; }
.settings .setting b { font-weight: 600; color: var(--ink); }
.setting .value { white-space: pre-wrap; }
.row { display: flex; gap: 16px; align-items: flex-start; }
.row > .col { min-width: 0; }
.chart { width: 100%; margin: 4px 0; }
.table-wrap { max-height: 420px; overflow: auto; border: 1px solid var(--line); border-radius: 4px; margin: 6px 0; }
table { border-collapse: collapse; font-size: 0.82em; width: max-content; min-width: 100%; }
th, td { border-bottom: 1px solid #eceef2; padding: 3px 8px; text-align: left; vertical-align: top; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
th { position: sticky; top: 0; background: #f6f7f9; font-weight: 600; }
.table-note { color: var(--muted); font-size: 0.78em; margin: 0 0 6px; }
.metric { display: inline-block; margin: 6px 24px 6px 0; }
.metric .label { color: var(--muted); font-size: 0.85em; }
.metric .value { font-size: 1.7em; }
.metric .delta { font-size: 0.85em; color: #188038; }
details.section { border: 1px solid var(--line); border-radius: 4px; padding: 4px 10px; margin: 6px 0; }
details.section > summary { cursor: pointer; font-weight: 600; }
.tab-label { font-weight: 600; border-bottom: 2px solid var(--accent); display: inline-block; margin: 8px 0 4px; }
.tab-label .others { color: var(--muted); font-weight: 400; font-size: 0.85em; }
.provenance { border-top: 1px solid var(--line); margin-top: 14px; padding-top: 6px; color: var(--muted);
              font-size: 0.78em; }
.provenance code { font-size: 0.95em; word-break: break-all; }
.provenance a { color: var(--accent); }
@page { size: A4 landscape; margin: 10mm; }
@media print {
  body { background: #fff; font-size: 13px; }
  main { max-width: none; padding: 0; }
  .slide, .cover { border: none; border-radius: 0; margin: 0; padding: 0; break-after: page; break-inside: avoid;
                   overflow: hidden; }
  .slide:last-of-type { break-after: auto; }
  .table-wrap { max-height: 260px; overflow: hidden; }
  th { position: static; }
  .modebar-container { display: none !important; }
}
"""

# Every chart drawn from its JSON; `fitForPrint(width, height)` fits each slide to one printed page (the PDF maker
# calls it with the page's size in CSS pixels; a person printing from a browser gets a zoom from beforeprint).
SCRIPT = """
(function () {
  var drawn = [];
  document.querySelectorAll('script.chart-spec').forEach(function (s) {
    var div = document.getElementById(s.getAttribute('data-for'));
    var fig = JSON.parse(s.textContent);
    var config = Object.assign({}, fig.config || {}, {responsive: true, typesetMath: false, showLink: false,
                                                      showSendToCloud: false, showEditInChartStudio: false});
    drawn.push(Plotly.newPlot(div, fig.data || [], fig.layout || {}, config).catch(function (e) {
      div.textContent = 'This chart could not be drawn (' + e + ').';
    }));
  });
  Promise.all(drawn).then(function () { window.handoutReady = true; document.body.setAttribute('data-ready', '1'); });
  // A slide taller than its page is split into two side-by-side columns first (a landscape page is wide; Chromium
  // prints CSS multi-column boxes across pages, so the blocks are moved into two flex columns), then zoomed to fit.
  function resize(root) {
    return Promise.all(Array.from(root.querySelectorAll('.js-plotly-plot')).map(function (d) {
      return Plotly.Plots.resize(d);
    }));
  }
  function blocksOf(s) {  // the box whose blocks are split: the content, or the tab that holds most of it
    var box = s.querySelector('.content');
    for (;;) {
      var tab = box && Array.from(box.children).find(function (c) {
        return c.classList.contains('tab') && c.getBoundingClientRect().height > box.getBoundingClientRect().height / 2;
      });
      if (!tab) { return box; }
      box = tab;
    }
  }
  function split(s) {
    var box = blocksOf(s);
    if (!box || box.children.length < 2) { return false; }
    var kids = Array.from(box.children), heights = kids.map(function (k) { return k.getBoundingClientRect().height; });
    var total = heights.reduce(function (a, b) { return a + b; }, 0), row = document.createElement('div');
    row.className = 'row print-split';
    var left = document.createElement('div'), right = document.createElement('div'), above = 0;
    left.className = right.className = 'col';
    left.style.flex = right.style.flex = '1 1 0';
    kids.forEach(function (k, i) { (above + heights[i] / 2 <= total / 2 || i === 0 ? left : right).appendChild(k);
                                   above += heights[i]; });
    row.appendChild(left); row.appendChild(right); box.appendChild(row);
    return true;
  }
  function unsplit(s) {
    s.querySelectorAll('.print-split').forEach(function (row) {
      var box = row.parentNode;
      row.querySelectorAll(':scope > .col').forEach(function (col) {
        while (col.firstChild) { box.insertBefore(col.firstChild, row); }
      });
      row.remove();
    });
  }
  function zoomToFit(s, width, height) {
    var z = Math.min(1, height / Math.max(s.scrollHeight, 1), width / Math.max(s.scrollWidth, 1));
    s.style.zoom = z < 1 ? String(Math.floor(z * 1000) / 1000) : '';
  }
  // The PDF maker's: split and zoom, charts redrawn to their columns before it prints.
  window.fitForPrint = async function (width, height) {
    window.printFitted = true;
    var slides = Array.from(document.querySelectorAll('.slide, .cover'));
    slides.forEach(function (s) { s.style.zoom = ''; unsplit(s); });
    await resize(document);
    for (const s of slides) {
      if (s.classList.contains('slide') && s.scrollHeight > height * 1.25 && split(s)) { await resize(s); }
      zoomToFit(s, width, height);
    }
    return slides.length;
  };
  // A person printing from the browser: zoom only (the print starts before a chart could be redrawn).
  window.addEventListener('beforeprint', function () {
    if (window.printFitted) { return; }
    document.querySelectorAll('.slide, .cover').forEach(function (s) { s.style.zoom = ''; zoomToFit(s, 1047, 700); });
  });
  window.addEventListener('afterprint', function () {
    if (window.printFitted) { return; }
    document.querySelectorAll('.slide, .cover').forEach(function (s) { s.style.zoom = ''; });
  });
})();
"""


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) or (
        hasattr(value, "dtype") and getattr(value.dtype, "kind", "") in "iuf")


def table_html(table: Table) -> str:
    frame = table.frame
    total = len(frame)
    shown = frame.head(MAX_TABLE_ROWS)
    names = [str(c) for c in shown.columns]
    head = "".join(f"<th>{_escape(n)}</th>" for n in ([str(shown.index.name or "")] if table.index else []) + names)
    rows = []
    for index, row in zip(shown.index, shown.itertuples(index=False, name=None), strict=True):
        cells = ([f"<td>{_escape(cell_text(index))}</td>"] if table.index else []) + [
            f'<td class="num">{_escape(cell_text(v))}</td>' if _is_number(v) else f"<td>{_escape(cell_text(v))}</td>"
            for v in row]
        rows.append("<tr>" + "".join(cells) + "</tr>")
    note = f"{total:,} row" + ("" if total == 1 else "s")
    if total > MAX_TABLE_ROWS:
        note += f"; the first {MAX_TABLE_ROWS:,} here, every row in the zip's CSV"
    return (f'<div class="table-wrap"><table><thead><tr>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table>'
            f'</div><p class="table-note">{_escape(note)}</p>')


class _Renderer:
    def __init__(self) -> None:
        self.specs: list[str] = []

    def blocks(self, slide: CapturedSlide, blocks: Sequence, counter: list[int]) -> str:
        out: list[str] = []
        settings: list[Setting] = []

        def flush() -> None:
            if settings:
                items = "".join(f'<span class="setting"><b>{_escape(s.label)}:</b> '
                                f'<span class="value">{_escape(s.value)}</span></span>' for s in settings)
                out.append(f'<div class="settings">{items}</div>')
                settings.clear()

        for block in blocks:
            if isinstance(block, Setting):
                settings.append(block)
                continue
            flush()
            out.append(self.block(slide, block, counter))
        flush()
        return "".join(out)

    def block(self, slide: CapturedSlide, block, counter: list[int]) -> str:
        if isinstance(block, Chart):
            counter[0] += 1
            div = f"chart-{slide.number:02d}-{counter[0]:02d}"
            kinds = {str(t.get("type", "scatter")) for t in block.spec.get("data") or []}
            if kinds & NETWORK_TRACES:
                return (f'<p class="problem">This chart draws a map whose tiles come from the web; it is left out '
                        f'of the offline handout ({_escape(", ".join(sorted(kinds & NETWORK_TRACES)))}).</p>')
            self.specs.append(f'<script type="application/json" class="chart-spec" data-for="{div}">'
                              f"{_json_for_script(block.spec)}</script>")
            return f'<div class="chart" id="{div}" data-traces="{block.traces}"></div>'
        if isinstance(block, Text):
            style = block.style if block.style in TEXT_STYLES else "text"
            if style == "code":
                return f'<pre class="code">{_escape(block.text)}</pre>'
            if style in ("text", "latex"):
                return f'<pre class="text">{_escape(block.text)}</pre>'
            if style in ("title", "header", "subheader"):
                tag = {"title": "h1", "header": "h3", "subheader": "h4"}[style]
                return f"<{tag}>{markdown_html(block.text, inline=True)}</{tag}>"
            if style == "caption":
                return f'<div class="caption">{markdown_html(block.text)}</div>'
            if style in ("info", "warning", "error", "success"):
                return f'<div class="callout {style}">{markdown_html(block.text)}</div>'
            return f'<div class="markdown">{markdown_html(block.text)}</div>'
        if isinstance(block, Table):
            return table_html(block)
        if isinstance(block, Metric):
            delta = f'<div class="delta">{_escape(block.delta)}</div>' if block.delta else ""
            return (f'<div class="metric"><div class="label">{_escape(block.label)}</div>'
                    f'<div class="value">{_escape(block.value)}</div>{delta}</div>')
        if isinstance(block, Columns):
            cols = "".join(f'<div class="col" style="flex: {float(weight):.4g} 1 0">'
                           f"{self.blocks(slide, inner, counter)}</div>" for weight, inner in block.columns)
            return f'<div class="row">{cols}</div>'
        if isinstance(block, Section):
            inner = self.blocks(slide, block.blocks, counter)
            if block.kind == "tab":
                others = (f' <span class="others">(tab; the others: {_escape(", ".join(block.others))})</span>'
                          if block.others else "")
                return f'<div class="tab"><div class="tab-label">{_escape(block.label)}{others}</div>{inner}</div>'
            opened = " open" if block.expanded else ""
            return (f'<details class="section"{opened}><summary>{_escape(block.label)}</summary>{inner}'
                    f"</details>")
        return ""


def _file_line(what: str, item: FileHash) -> str:
    digest = f" sha256 <code>{_escape(item.sha256)}</code>" if item.sha256 else ""
    note = f" ({_escape(item.note)})" if item.note else ""
    return f"<div>{what} <b>{_escape(item.name)}</b>{digest}{note}</div>"


def slide_html(slide: CapturedSlide, total: int, renderer: _Renderer) -> str:
    where = f"Slide {slide.number} of {total}" + (f" · {_escape(slide.page_title or slide.page)}"
                                                  if slide.page else "")
    parts = [f'<section class="slide" id="slide-{slide.number}">',
             f'<header><h2>{_escape(slide.title)}</h2><span class="where">{where}</span></header>']
    if slide.notes.strip():
        parts.append(f'<div class="notes">{_escape(slide.notes.strip(chr(10)))}</div>')
    if slide.problem:
        parts.append(f'<p class="problem">{_escape(slide.problem)}</p>')
    else:
        parts.append(f'<div class="content">{renderer.blocks(slide, slide.blocks, [0])}</div>')
    prov = []
    for item in slide.models:
        prov.append(_file_line("Model", item))
    for item in slide.data:
        prov.append(_file_line("Data", item))
    if slide.link:
        prov.append(f'<div>Live view: <a href="{_escape(slide.link)}" rel="noopener noreferrer">'
                    f"{_escape(slide.link)}</a></div>")
    if prov:
        parts.append(f'<footer class="provenance">{"".join(prov)}</footer>')
    parts.append("</section>")
    return "".join(parts)


def cover_html(handout: Handout) -> str:
    items = "".join(f'<li><a href="#slide-{s.number}">{_escape(s.title)}</a> '
                    f'<span class="page">{_escape(s.page_title or s.page)}'
                    f'{" — not drawn" if s.problem else ""}</span></li>' for s in handout.slides)
    server = f" · live views on {_escape(handout.server)}" if handout.server else ""
    return (f'<section class="cover" id="contents"><h1>{_escape(handout.title)}</h1>'
            f'<p class="meta">An Attention Lab handout · {len(handout.slides)} slides · made {_escape(handout.made)}'
            f"{server}</p><nav class=\"toc\"><h3>Contents</h3><ol>{items}</ol></nav></section>")


def render_html(handout: Handout, plotly_js: str | None = None) -> str:
    """The whole handout: one file, plotly.js embedded once, no network request when opened."""
    if plotly_js is None:
        from plotly.offline import get_plotlyjs

        plotly_js = get_plotlyjs()
    plotly_js = plotly_js.replace("</script", "<\\/script")
    renderer = _Renderer()
    total = len(handout.slides)
    body = "".join(slide_html(s, total, renderer) for s in handout.slides)
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            f'<meta name="generator" content="Attention Lab handout">'
            f"<title>{_escape(handout.title)}</title><style>{STYLE}</style></head>"
            f"<body><main>{cover_html(handout)}{body}</main>"
            f'{"".join(renderer.specs)}'
            f'<script>{plotly_js}</script><script>{SCRIPT}</script></body></html>\n')
