from pathlib import Path

from streamlit.testing.v1 import AppTest

from tests.conftest import ROOT
from ui import APP_PAGES

APP = str(ROOT / "app.py")


def _run(monkeypatch, folder):
    monkeypatch.setenv("ATTENTION_LAB_CHECKPOINTS", str(folder))
    at = AppTest.from_file(APP, default_timeout=60)
    at.run()
    assert not at.exception, [e.message for e in at.exception]
    return at


def test_shell_without_checkpoints_says_how_to_make_them(monkeypatch, tmp_path):
    at = _run(monkeypatch, tmp_path / "none")
    texts = " ".join(i.value for i in at.info) + " ".join(w.value for w in at.warning)
    assert "make checkpoints" in texts


def test_shell_with_checkpoints_offers_them_and_shows_a_card(monkeypatch, tiny_checkpoints):
    at = _run(monkeypatch, tiny_checkpoints)
    picker = at.sidebar.selectbox(key="picker_model")
    assert picker.options == ["tiny-birthplace", "tiny-classifier", "tiny-lm"]
    picker.select("tiny-lm").run()
    assert not at.exception
    assert at.query_params["model"] in ("tiny-lm", ["tiny-lm"])
    assert not at.sidebar.text  # the card is drawn when opened (a closed one costs every rerun nothing)
    at.session_state["model_card_open"] = True
    at.run()
    card = " ".join(t.value for t in at.sidebar.text)
    assert "language model" in card and "alibi" not in card and "learned" in card


def test_model_in_url_is_preselected(monkeypatch, tiny_checkpoints):
    monkeypatch.setenv("ATTENTION_LAB_CHECKPOINTS", str(tiny_checkpoints))
    at = AppTest.from_file(APP, default_timeout=60)
    at.query_params["model"] = "tiny-classifier"
    at.run()
    assert at.sidebar.selectbox(key="picker_model").value == "tiny-classifier"


def test_app_py_navigates_over_the_one_page_list(monkeypatch, tiny_checkpoints):
    """ui/__init__.py's APP_PAGES is the one page list: app.py's st.Page objects are built from it, every
    file exists, and the URL paths the tests and benchmarks derive are the ones Streamlit serves (the
    browser tests compare the sidebar's labels with the titles)."""
    from ui import APP_PAGES

    assert sum(p.default for p in APP_PAGES) == 1 and len({p.url_path for p in APP_PAGES}) == len(APP_PAGES)
    assert all((ROOT / p.file).is_file() for p in APP_PAGES)
    monkeypatch.setenv("ATTENTION_LAB_CHECKPOINTS", str(tiny_checkpoints))
    at = AppTest.from_file(APP, default_timeout=60).run()
    assert not at.exception and at.session_state["app_ran"]  # app.py marks the session it ran in
    titles = {at.title[0].value}
    for page in APP_PAGES[1:3]:  # each listed file opens (AppTest then runs the page file alone)
        at.switch_page(page.file).run()
        assert not at.exception
        titles.add(at.title[0].value)
    assert len(titles) == 3


def test_the_one_hidden_streamlit_option_the_app_reads_still_means_apptest():
    """ui.leave_legacy_multipage_mode reads Streamlit's hidden option global.appTest (through
    streamlit.config.get_option, which AppTest patches) to leave alone a page file that AppTest runs without
    app.py. If a Streamlit upgrade renames or drops it, or sets it another way, this fails (get_option
    raises on an unknown key) before a shared link on a fresh server does."""
    from streamlit import config as st_config

    def show_option():
        import streamlit as st
        from streamlit import config as st_config

        st.text(repr(st_config.get_option("global.appTest")))

    at = AppTest.from_function(show_option).run()
    assert [t.value for t in at.text] == ["True"]
    assert st_config.get_option("global.appTest") is False


def test_a_page_run_by_apptest_alone_stays_on_its_page(monkeypatch, tiny_checkpoints):
    """No app.py, so no session mark: the page must not try to leave a legacy mode AppTest is not in."""
    monkeypatch.setenv("ATTENTION_LAB_CHECKPOINTS", str(tiny_checkpoints))
    at = AppTest.from_file(str(ROOT / "pages" / "home.py"), default_timeout=60).run()
    assert not at.exception and at.title and "app_ran" not in at.session_state


def first_navigations(url: str, page_name: str) -> list[list[str]]:
    """Every page list the server sends a first visitor (of a fresh server) while the run of `page_name` ('' for
    the home page, 'attention' for a shared link) goes on, read off the websocket as the browser reads it."""
    import asyncio

    from streamlit.proto.BackMsg_pb2 import BackMsg
    from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

    from serve.streamlit_ws import StreamlitSession

    async def visit() -> list[list[str]]:
        session = StreamlitSession(url, timeout_s=60)
        await session.connect()
        message = BackMsg()
        message.rerun_script.page_name = page_name
        await session.ws.send(message.SerializeToString())
        listed = []
        try:
            while True:
                forward = ForwardMsg()
                forward.ParseFromString(await asyncio.wait_for(session.ws.recv(), 60))
                kind = forward.WhichOneof("type")
                if kind == "navigation":
                    listed.append([p.url_pathname for p in forward.navigation.app_pages])
                elif kind == "script_finished" and forward.script_finished != forward.FINISHED_EARLY_FOR_RERUN:
                    return listed
        finally:
            await session.close()

    from concurrent.futures import ThreadPoolExecutor

    # on a thread of its own: the browser tests' Playwright session keeps an event loop running in this thread,
    # where asyncio.run refuses to start (tests/test_serve.py, run_apart)
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(lambda: asyncio.run(visit())).result()


def test_a_fresh_servers_first_listing_names_only_pages(tmp_path, tiny_checkpoints):
    """Issue 52 (4): before any run calls st.navigation Streamlit lists the pages/ folder beside app.py as a
    legacy multipage app; that first listing showed every module of pages/ ('app shell', 'page caches', ...).
    pages/ now holds the page scripts alone (the modules they share are in ui/), so the first listing names only
    the entry point and pages, and a shared link still ends on app.py's navigation (leave_legacy_multipage_mode:
    without it, that first visitor's page would run without app.py, and the folder's listing would stay)."""
    from serve.streamlit_process import start_healthy

    pages = [page.url_path for page in APP_PAGES]
    server = start_healthy(tmp_path / "log", extra_env={"ATTENTION_LAB_CHECKPOINTS": str(tiny_checkpoints)})
    try:
        listed = first_navigations(server.url, "attention")
    finally:
        server.stop()
    first, last = listed[0], listed[-1]
    assert set(first) <= {"", *(Path(page.file).stem for page in APP_PAGES)}, first  # "": app.py itself
    assert last == pages, last
