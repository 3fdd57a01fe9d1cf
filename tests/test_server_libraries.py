"""The two libraries the server runs faster with are installed and picked up (issue 45): plotly encodes chart
JSON with orjson, and Streamlit runs its event loop on uvloop. Both are optional to their hosts, which fall back
silently, so a missing pin would cost every rerun without failing anything else."""
from __future__ import annotations

import os
import sys
from pathlib import Path

import plotly.io as pio
import pytest

from ui import APP_PAGES

ROOT = Path(__file__).resolve().parent.parent


def test_plotly_encodes_chart_json_with_orjson():
    import orjson

    assert pio.json.config.default_engine == "auto"  # "auto": orjson whenever it imports
    fig = {"data": [{"type": "heatmap", "z": [[0.25, 0.5], [0.75, 1.0]]}], "layout": {}}
    assert pio.to_json(fig, engine="auto") == pio.to_json(fig, engine="orjson")
    assert orjson.__version__


@pytest.mark.skipif(sys.platform == "win32", reason="uvloop does not support Windows; Streamlit uses asyncio's loop")
def test_streamlit_runs_its_server_loop_on_uvloop():
    from streamlit.web import bootstrap

    factory = bootstrap._get_uvloop_loop_factory()  # what bootstrap.run asks before it starts the server's loop
    assert factory is not None
    loop = factory()
    try:
        assert type(loop).__module__.startswith("uvloop")
    finally:
        loop.close()


def test_the_server_collects_garbage_on_its_own_thresholds():
    """ui.app_shell (imported once per server process by app.py) sets the collector's thresholds for many
    sessions: Python's default (700, 10, 10) spent ~10% of the lecture hall's server CPU in full collections."""
    import gc

    from ui import app_shell

    assert gc.get_threshold() == app_shell.GC_THRESHOLDS
    young, middle, old = app_shell.GC_THRESHOLDS
    assert young > 700 and old > 10


def test_after_a_first_visit_the_collection_and_the_warm_up_run_off_the_script_thread():
    """settled() returns at once; its thread imports what the other pages' first visits import, builds the app's
    plotly template, and freezes what is alive (issue 52, item 5: these were part of each page's first visit)."""
    import gc
    import sys
    import threading

    import plotly.io as pio

    from core.figures.common import APP_TEMPLATE
    from ui import app_shell

    before = {t.ident for t in threading.enumerate()}
    app_shell.settled.clear()
    assert app_shell.settled(12345) == 12345
    started = [t for t in threading.enumerate() if t.ident not in before and t.name == "settle-after-first-visit"]
    for thread in started:
        thread.join(300)
    assert started and not any(t.is_alive() for t in started)
    assert all(name in sys.modules for name in app_shell.WARM_MODULES)
    assert APP_TEMPLATE in pio.templates
    assert gc.get_freeze_count() > 0
    gc.unfreeze()


FIRST_VISITS = """
import os, sys
from streamlit.testing.v1 import AppTest
from ui import APP_PAGES, app_shell
at = AppTest.from_file("app.py", default_timeout=600).run()
app_shell.warm_up()
for page in APP_PAGES[1:]:
    before = set(sys.modules)
    at.query_params.clear()  # a sidebar click clears the URL: each page opens on its own default model
    at.switch_page(page.file).run()
    assert not at.exception, (page.file, at.exception)
    print(page.file, *sorted(m for m in set(sys.modules) - before if m.startswith("core.") or m == "tokenizers"))
"""


def test_after_the_warm_up_no_pages_first_visit_imports_a_core_module(tmp_path):
    """Each page's first visit after Home imports only its own ui modules: the core modules and libraries they load
    were imported by the warm-up while Home was read (WARM_MODULES; the probe's first visit paid ~60 ms for them)."""
    import subprocess

    out = subprocess.run([sys.executable, "-c", FIRST_VISITS], cwd=ROOT, capture_output=True, text=True, timeout=600,
                         env={**os.environ, "ATTENTION_LAB_CHECKPOINTS": str(ROOT / "checkpoints")})
    assert out.returncode == 0, out.stderr[-2000:]
    imported = {line.split()[0]: line.split()[1:] for line in out.stdout.splitlines() if line.strip()}
    assert len(imported) == len(APP_PAGES) - 1 and not any(imported.values()), imported  # every page after Home
