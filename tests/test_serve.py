"""`make serve`: replicas behind HAProxy (serve/). The end-to-end test starts 2 replicas and the proxy on
free loopback ports, talks to a page through the proxy over Streamlit's websocket, kills a replica and
follows a session onto the other one, then stops everything and checks that nothing it started is left."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import time
from pathlib import Path

import pytest

from serve import proxy
from serve.__main__ import main as serve_main
from serve.streamlit_process import (
    ServerError,
    free_port,
    healthy,
    read_state,
    spawn,
    start_serve,
    stop_process,
    wait_until,
)
from serve.streamlit_ws import StreamlitSession
from tests.conftest import save_tiny_checkpoint

HAPROXY = proxy.shutil.which("haproxy", path=proxy.SEARCH_PATH)
needs_haproxy = pytest.mark.skipif(HAPROXY is None, reason="HAProxy is not installed (apt-get install haproxy)")


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie (exited, not yet reaped by its parent) counts as gone
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0] != "Z"
    except (OSError, IndexError):
        return False


# --------------------------------------------------------------------------- one server process


def test_a_stopped_server_takes_its_whole_process_group_with_it(tmp_path):
    """serve/streamlit_process.py: what make serve, the benchmarks and the tests start, they stop here."""
    log = tmp_path / "sleepers.log"
    process = spawn(["sh", "-c", "sleep 60 & echo $!; sleep 60"], log)
    child = int(wait_until(lambda: log.read_text().strip(), 10, "the shell"))
    assert alive(process.pid) and alive(child)
    stop_process(process, grace_s=5)
    wait_until(lambda: not alive(child), 5, "The shell's child")
    assert process.returncode is not None
    stop_process(process)  # stopping a stopped process is nothing


def test_a_server_that_dies_while_starting_is_one_sentence_with_its_log(tmp_path):
    port = free_port()
    assert not healthy(f"http://127.0.0.1:{port}")
    log = tmp_path / "dies.log"
    process = spawn(["sh", "-c", "echo cannot start; exit 3"], log)
    with pytest.raises(ServerError, match="exited while starting(.|\\n)*cannot start"):
        wait_until(lambda: healthy(f"http://127.0.0.1:{port}"), 10, "The server", alive=lambda: process.poll() is None,
                   log=log)
    with pytest.raises(ServerError, match="did not answer within 0 s"):
        wait_until(lambda: False, 0.1, "Nothing")


# --------------------------------------------------------------------------- configuration and refusals


@needs_haproxy
def test_rendered_configuration_passes_haproxys_own_check(tmp_path):
    upstreams = [proxy.Upstream("r1", "127.0.0.1", 8601), proxy.Upstream("r2", "127.0.0.1", 8602),
                 proxy.parse_upstream("10.0.0.7:8601", 1)]
    text = proxy.render_config("0.0.0.0:8501", upstreams, tmp_path / "haproxy.sock")
    path = tmp_path / "haproxy.cfg"
    path.write_text(text)
    proxy.check_config(HAPROXY, path)  # raises with HAProxy's reason if it refuses
    assert "server r1 127.0.0.1:8601 check cookie r1" in text and "server remote1 10.0.0.7:8601" in text
    assert "cookie attention_lab_replica insert" in text and "option httpchk GET /_stcore/health" in text
    assert "timeout tunnel" in text and "bind 0.0.0.0:8501" in text
    path.write_text(text.replace("balance leastconn", "balance no-such-algorithm"))
    with pytest.raises(proxy.ServeError, match="HAProxy refuses"):
        proxy.check_config(HAPROXY, path)


def test_without_haproxy_and_without_root_it_names_the_package(monkeypatch, capsys):
    monkeypatch.setattr(proxy.shutil, "which", lambda *a, **k: None)
    monkeypatch.setattr(proxy.os, "geteuid", lambda: 1000)
    assert serve_main(["--replicas", "1", "--port", str(free_port())]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "apt-get install haproxy" in err and "Traceback" not in err


@pytest.mark.parametrize("args, words", [
    (["--upstream", "nohost"], "is not HOST:PORT"),
    (["--upstream", "10.0.0.7:99999"], "is not HOST:PORT"),
])
def test_bad_arguments_get_one_sentence(args, words, capsys):
    assert serve_main(["--replicas", "1", *args]) == 2
    assert words in capsys.readouterr().err


@needs_haproxy
def test_a_taken_public_port_is_refused_before_anything_starts(capsys, tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert serve_main(["--replicas", "1", "--host", "127.0.0.1", "--port", str(port),
                           "--run-dir", str(tmp_path)]) == 2
    assert f"Port {port}" in capsys.readouterr().err
    assert not (tmp_path / "state.json").exists()  # no replica was started


def test_zero_replicas_without_upstreams_is_refused(capsys):
    with pytest.raises(SystemExit):
        serve_main(["--replicas", "0"])
    assert "--replicas must be 1 or more" in capsys.readouterr().err


# --------------------------------------------------------------------------- two replicas and the proxy


def run_apart(coroutine_function) -> None:
    """asyncio.run in a thread of its own: a Playwright session fixture of the browser tests keeps an event
    loop running in the main thread, where asyncio.run refuses to start."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=1) as pool:
        pool.submit(lambda: asyncio.run(coroutine_function())).result()


def shows(session: StreamlitSession, sentence: str) -> bool:
    """Every word of the sentence is in what the last run drew (the heatmap's token labels)."""
    return all(word.encode() in session.drawn for word in sentence.split())


async def open_attention(url: str, sentence: str) -> StreamlitSession:
    session = StreamlitSession(url, timeout_s=60, keep_drawn=True)
    await session.connect()
    await session.rerun()
    drawn = await session.rerun(page_hash=session.pages["attention"])
    assert drawn.get("plotly_chart"), drawn
    drawn = await session.rerun(page_hash=session.pages["attention"], text={"Sentence": sentence})
    assert drawn.get("plotly_chart") and shows(session, sentence)
    return session


@pytest.mark.slow
@needs_haproxy
def test_two_replicas_behind_the_proxy_survive_losing_one(tmp_path):
    folder = tmp_path / "ckpts"
    save_tiny_checkpoint(folder / "tiny-lm.safetensors", "lm")
    run_dir, port = tmp_path / "run", free_port()
    allowed = tmp_path / "allowed"
    env = {**os.environ, "ATTENTION_LAB_CHECKPOINTS": str(folder), "PYTHONUNBUFFERED": "1",
           "ATTENTION_LAB_ALLOWED_DIRS": str(allowed)}
    env.pop("STREAMLIT_SERVER_COOKIE_SECRET", None)
    launcher_log = tmp_path / "serve.log"
    launcher, state = start_serve(2, port, run_dir, launcher_log, env)
    started: list[int] = []
    try:
        started = [state["proxy_pid"]] + [r["pid"] for r in state["replicas"]]
        url, sock = state["url"], Path(state["stats_socket"])
        # Every replica runs under the operator's hosting rules, with one cookie secret between them.
        environs = [dict(item.split("=", 1) for item in Path(f"/proc/{r['pid']}/environ").read_text().split("\0")
                         if "=" in item) for r in state["replicas"]]
        assert all(e["ATTENTION_LAB_ALLOWED_DIRS"] == str(allowed) for e in environs)
        assert environs[0]["STREAMLIT_SERVER_COOKIE_SECRET"] == environs[1]["STREAMLIT_SERVER_COOKIE_SECRET"]
        assert url == f"http://127.0.0.1:{port}"
        wait_until(lambda: {name: row["status"] for name, row in proxy.servers_state(sock).items()} ==
                   {"r1": "UP", "r2": "UP"}, 30, "HAProxy's checks of both replicas", log=launcher_log)

        async def scenario() -> None:
            first = await open_attention(url, "Alan was born in Maida Vale")
            second = await open_attention(url, "Ada Turing was born in London")
            # leastconn: the second tab goes to the replica without an open websocket.
            assert {first.replica, second.replica} == {"r1", "r2"}
            # Sticky: every request of a tab goes to the replica its cookie names.
            before = proxy.servers_state(sock)
            for _ in range(5):
                await asyncio.to_thread(first._load_page)
            after = proxy.servers_state(sock)
            other = second.replica
            assert int(after[first.replica]["stot"]) - int(before[first.replica]["stot"]) == 5
            assert after[other]["stot"] == before[other]["stot"]

            victim = next(r for r in read_state(run_dir)["replicas"] if r["name"] == first.replica)
            os.kill(victim["pid"], signal.SIGKILL)
            killed_at = time.monotonic()
            with pytest.raises(Exception):  # noqa: B017 - the connection is gone, whatever the library calls it
                await first.rerun(page_hash=first.pages["attention"])
            # The tab reconnects, as Streamlit's frontend does, and asks for its URL: the view comes back.
            query = first.query_string
            assert "text=" in query
            await first.connect()
            assert first.replica == other  # HAProxy skipped the dead replica and gave a new cookie
            drawn = await first.rerun(page_hash=first.pages["attention"], query_string=query)
            assert drawn.get("plotly_chart") and shows(first, "Alan was born in Maida Vale")
            assert time.monotonic() - killed_at < 10
            # The tab on the surviving replica never noticed.
            drawn = await second.rerun(page_hash=second.pages["attention"], text={"Sentence": "Ada was born in London"})
            assert drawn.get("plotly_chart")
            await first.close()
            await second.close()

        run_apart(scenario)
        # The health checks marked the killed replica down (HAProxy counts UP -> DOWN transitions), the
        # launcher started it again, and it is back in the pool.
        wait_until(lambda: sum(int(row["chkdown"]) for row in proxy.servers_state(sock).values()) == 1, 10,
                   "HAProxy's mark of the killed replica as down", log=launcher_log)
        wait_until(lambda: all(row["status"] == "UP" for row in proxy.servers_state(sock).values()), 120,
                   "The restarted replica", log=launcher_log)
        new_state = read_state(run_dir)
        started += [r["pid"] for r in new_state["replicas"]]
        assert len({r["pid"] for r in new_state["replicas"]} - set(started[:3])) == 1
        assert "starting it again" in launcher_log.read_text()
    finally:
        if launcher.poll() is None:
            os.kill(launcher.pid, signal.SIGTERM)
        launcher.wait(timeout=30)
    assert launcher.returncode == 0, launcher_log.read_text()[-3000:]
    wait_until(lambda: not any(alive(pid) for pid in started), 10, "The end of every process the launcher started")
    with socket.socket() as again:  # nothing listens on the public port any more (TIME_WAIT is fine)
        again.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        again.bind(("127.0.0.1", port))
