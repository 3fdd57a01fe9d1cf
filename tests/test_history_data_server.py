"""TensorBoard folders through TensorBoard's data server (core/lens/history/data_server.py, sources.fast_event_tables):
the same points as the Python reader (event_files.py) on files torch's SummaryWriter writes in the test, and the
Python reader with one sentence wherever the server is missing, fails, is killed or cannot read a file."""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from core.lens.history import event_files, sources
from core.lens.history.__main__ import main as history_cli
from core.lens.history.sources import read_paths

pytest.importorskip("tensorboard", reason="the optional TensorBoard extra is not installed "
                                          "(pip install -r requirements-tensorboard.txt)")
data_server = pytest.importorskip("core.lens.history.data_server")
FAST = "fast loader"  # in the one sentence said when the server cannot serve


def server_runs_here() -> bool:
    try:
        data_server.binary()
    except data_server.Unavailable:
        return False
    return True


needs_server = pytest.mark.skipif(not server_runs_here(), reason="tensorboard-data-server has no binary here")


@pytest.fixture(autouse=True)
def no_servers_left():
    yield
    data_server.shutdown_all()


@pytest.fixture
def python_reads(monkeypatch) -> list[str]:
    """The runs the Python reader read (every other TensorBoard run came from the data server)."""
    seen: list[str] = []
    real = sources.read_scalars

    def counting(run, files, followers=None):
        seen.append(run)
        return real(run, files, followers)

    monkeypatch.setattr(sources, "read_scalars", counting)
    return seen


def write_run(folder: Path, points: int, tags=("train/loss", "val/loss", "train/grad_norm"), new_style=()) -> None:
    from torch.utils.tensorboard import SummaryWriter

    rng = np.random.default_rng(len(str(folder)))
    writer = SummaryWriter(str(folder), max_queue=10_000, flush_secs=3600)
    for step in range(points):
        for i, tag in enumerate(tags):
            if i and step % (10 * i):  # the later tags every 10th, 20th, ... step
                continue
            value = float(rng.normal(2.0, 0.5))
            if step % 997 == 13:
                value = [float("nan"), float("inf"), -float("inf")][step % 3]
            writer.add_scalar(tag, value, step, new_style=tag in new_style)
    writer.close()


def equal_reads(folder: Path, **kwargs) -> tuple[sources.RunsRead, sources.RunsRead]:
    fast = read_paths([folder], labels=["logs"], **kwargs)
    python = read_paths([folder], labels=["logs"], fast=False, **kwargs)
    pd.testing.assert_frame_equal(fast.frame, python.frame)  # row for row, NaN where NaN
    return fast, python


@needs_server
def test_the_data_server_gives_the_python_readers_points_every_one(tmp_path, python_reads):
    write_run(tmp_path / "a", 10_000, tags=("train/loss", "val/loss", "train/grad_norm", "train/learning_rate"),
              new_style=("train/learning_rate",))  # a one-number tensor, as torch's new_style writes it
    write_run(tmp_path / "b" / "seed1", 300)
    write_run(tmp_path, 50, tags=("loss",))  # event files in the folder itself are a run too
    fast, python = equal_reads(tmp_path)
    assert python_reads == ["logs", "logs/a", "logs/b/seed1"]  # the fast read had none: the Python read only
    assert fast.runs == ["logs", "logs/a", "logs/b/seed1"]
    loss = fast.frame[(fast.frame["run"] == "logs/a") & (fast.frame["metric"] == "loss") &
                      (fast.frame["split"] == "train")]
    assert len(loss) == 10_000 and list(loss["step"]) == list(range(10_000))  # none sampled away
    assert (~np.isfinite(loss["value"])).sum() == len([s for s in range(10_000) if s % 997 == 13])
    assert fast.notes == python.notes and any("NaN or infinite" in n for n in fast.notes)
    (server,) = data_server.running().values()
    assert "--host=127.0.0.1" in server.process.args and "--samples-per-plugin=scalars=all" in server.process.args
    assert server.loaded.is_set()


def rewritten(folder: Path, points: int, scratch: Path) -> None:
    """`folder`'s event file replaced by a longer run's under the same name (a job writing on, as far as the file's
    size and time tell)."""
    (path,) = folder.glob("events.out.tfevents.*")
    write_run(scratch, points, tags=("train/loss",))
    (longer,) = scratch.glob("events.out.tfevents.*")
    longer.replace(path)


@needs_server
def test_one_server_per_folder_kept_while_a_run_is_unchanged_and_replaced_when_none_is(tmp_path, python_reads):
    for name in ("a", "b"):
        write_run(tmp_path / "logs" / name, 20, tags=("train/loss",))
    read_paths([tmp_path / "logs"], labels=["logs"])
    (first,) = data_server.running().values()
    read_paths([tmp_path / "logs"], labels=["logs"], tag_filter="loss")
    assert list(data_server.running().values()) == [first] and python_reads == []  # the same process, asked again
    rewritten(tmp_path / "logs" / "b", 30, tmp_path / "scratch1")  # b changed: Python reader; a: the server
    fast, _ = equal_reads(tmp_path / "logs")
    assert list(data_server.running().values()) == [first] and python_reads == ["logs/b"] + ["logs/a", "logs/b"]
    assert len(fast.frame[fast.frame["run"] == "logs/b"]) == 30
    python_reads.clear()
    rewritten(tmp_path / "logs" / "a", 40, tmp_path / "scratch2")  # now neither is as loaded: a new server
    fast = read_paths([tmp_path / "logs"], labels=["logs"])
    (second,) = data_server.running().values()
    assert second is not first and first.process.poll() is not None  # the stale one has stopped
    assert python_reads == [] and len(fast.frame) == 40 + 30
    data_server.shutdown_all()
    assert second.process.wait(5) is not None and not data_server.running()


def kill(server) -> None:
    server.process.send_signal(signal.SIGKILL)
    server.process.wait(5)


@needs_server
@pytest.mark.parametrize("when", ["loading", "reading"])
def test_a_server_killed_mid_read_is_one_sentence_and_the_python_reader_reads(tmp_path, monkeypatch, python_reads,
                                                                              capsys, when):
    write_run(tmp_path / "a", 2_000)
    method = "wait_loaded" if when == "loading" else "read"
    real = getattr(data_server.DataServer, method)

    def killed_first(self, *args, **kwargs):
        kill(self)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(data_server.DataServer, method, killed_first)
    fast = read_paths([tmp_path], labels=["logs"])
    python = read_paths([tmp_path], labels=["logs"], fast=False)
    pd.testing.assert_frame_equal(fast.frame, python.frame)
    (sentence,) = [n for n in fast.notes if FAST in n]
    assert sentence.startswith("TensorBoard's fast loader") and sentence.count(". ") == 0
    assert "stopped" in sentence and python_reads == ["logs/a", "logs/a"]
    assert history_cli([str(tmp_path)]) == 0  # the command too: the points, and the sentence
    printed = capsys.readouterr().out
    assert "1 run(s), 2," in printed and FAST in printed
    monkeypatch.setattr(data_server.DataServer, method, real)
    python_reads.clear()
    again = read_paths([tmp_path], labels=["logs"])  # a new server for the folder: the dead one is not kept
    pd.testing.assert_frame_equal(again.frame, python.frame)
    assert python_reads == [] and not any(FAST in n for n in again.notes)


@needs_server
@pytest.mark.xfail(strict=True, reason="known difference (sources.fast_event_tables): within one file, a step written "
                   "again keeps only its last value in the data server (TensorBoard's preemption), every record in "
                   "the Python reader; the server does not say it dropped any")
def test_a_step_written_again_in_one_file_is_kept_as_the_python_reader_keeps_it(tmp_path):
    from torch.utils.tensorboard import SummaryWriter

    writer = SummaryWriter(str(tmp_path / "a"))
    for batch in range(30):
        writer.add_scalar("train/loss", 1.0 / (batch + 1), batch // 10)  # the step counts epochs
    writer.close()
    equal_reads(tmp_path)


def test_no_binary_is_one_sentence_and_the_python_reader_reads(tmp_path, monkeypatch):
    write_run(tmp_path / "a", 100)
    monkeypatch.setenv("TENSORBOARD_DATA_SERVER_BINARY", str(tmp_path / "no-such-server"))
    fast, _ = equal_reads(tmp_path)
    assert [n for n in fast.notes if FAST in n] == [
        "TensorBoard's fast loader (tensorboard-data-server) is missing here, so TensorBoard runs are read with the "
        "slower Python reader."]


@pytest.mark.parametrize("script", ["#!/bin/sh\necho 'fatal: no' >&2\nexit 3\n", "not a program at all"])
def test_a_binary_that_does_not_start_is_one_sentence(tmp_path, monkeypatch, script):
    write_run(tmp_path / "logs" / "a", 100)
    fake = tmp_path / "server"
    fake.write_text(script)
    fake.chmod(0o755 if script.startswith("#!") else 0o644)
    monkeypatch.setenv("TENSORBOARD_DATA_SERVER_BINARY", str(fake))
    fast, _ = equal_reads(tmp_path / "logs")
    (sentence,) = [n for n in fast.notes if FAST in n]
    assert ("stopped before it started" if script.startswith("#!") else "cannot run here") in sentence
    assert not data_server.running()


@needs_server
def test_a_damaged_or_cut_off_file_is_kept_up_to_its_byte_as_the_python_reader_keeps_it(tmp_path, python_reads):
    for name in ("damaged", "cut", "whole"):
        write_run(tmp_path / name, 200, tags=("train/loss",))
    damaged = next((tmp_path / "damaged").glob("events.out.tfevents.*"))
    data = bytearray(damaged.read_bytes())
    data[len(data) // 2] ^= 0xFF  # that record's CRC fails: the server logs it and stops the file there
    damaged.write_bytes(bytes(data))
    cut = next((tmp_path / "cut").glob("events.out.tfevents.*"))
    cut.write_bytes(cut.read_bytes()[:-7])  # the last record cut in the middle: the server stops there silently
    fast, python = equal_reads(tmp_path)
    # the fast read: the Python reader for those two only (the whole one was the server's); then the Python read
    assert python_reads == ["logs/cut", "logs/damaged"] + ["logs/cut", "logs/damaged", "logs/whole"]
    stops = [n for n in fast.notes if "stops being readable at byte" in n]
    assert len(stops) == 2 and stops == [n for n in python.notes if "stops being readable" in n]
    assert 0 < len(fast.frame[fast.frame["run"] == "logs/damaged"]) < 200
    assert len(fast.frame[fast.frame["run"] == "logs/whole"]) == 200


def unreadable_to_the_server(folder: Path, monkeypatch) -> None:
    """Make `folder`'s event file unreadable to the server: its permissions, and as root (whom permissions do not
    stop) the server run as nobody through a wrapper, so the Python reader (root) still reads what it cannot."""
    path = next(folder.glob("events.out.tfevents.*"))
    path.chmod(0)
    if os.geteuid() != 0:
        return
    setpriv = "/usr/bin/setpriv"
    if not os.path.exists(setpriv):
        pytest.skip("running as root without setpriv: no way to make a file unreadable to the server")
    wrapper = folder.parent.parent / "as-nobody"
    wrapper.write_text(textwrap.dedent(f"""\
        #!/bin/sh
        for a in "$@"; do case "$a" in --port-file=*) chmod 777 "$(dirname "${{a#--port-file=}}")";; esac; done
        exec {setpriv} --reuid=65534 --regid=65534 --clear-groups {data_server.binary()} "$@"
        """))
    wrapper.chmod(0o755)
    monkeypatch.setenv("TENSORBOARD_DATA_SERVER_BINARY", str(wrapper))


@needs_server
def test_a_file_the_server_may_not_open_is_read_by_the_python_reader(monkeypatch, python_reads):
    top = Path(tempfile.mkdtemp(prefix="attention-lab-perm-"))  # not pytest's tmp_path: its parents are 0700
    try:
        logs = top / "logs"
        for name in ("open", "closed"):
            write_run(logs / name, 100, tags=("train/loss",))
        for folder in (top, logs, logs / "open", logs / "closed"):
            folder.chmod(0o755)
        unreadable_to_the_server(logs / "closed", monkeypatch)
        fast = read_paths([logs], labels=["logs"])
        python = read_paths([logs], labels=["logs"], fast=False)
        pd.testing.assert_frame_equal(fast.frame, python.frame)
        assert fast.notes == python.notes  # as root all 100 points; otherwise "could not be opened" for both
        assert python_reads == ["logs/closed"] + ["logs/closed", "logs/open"]  # the open run: the server's
        assert not any(FAST in n for n in fast.notes)
    finally:
        for path in top.rglob("*"):
            path.chmod(stat.S_IRWXU)
        subprocess.run(["rm", "-rf", str(top)], check=False)


@needs_server
def test_the_command_reads_through_the_server(tmp_path, capsys, python_reads):
    write_run(tmp_path / "a", 1_000)
    out = tmp_path / "table.csv"
    assert history_cli([str(tmp_path), "-o", str(out)]) == 0
    assert python_reads == [] and len(pd.read_csv(out)) == 1_000 + 100 + 50
    assert FAST not in capsys.readouterr().out


@needs_server
def test_the_server_stops_when_the_app_is_killed(tmp_path):
    """`--die-after-stdin`: the app's end closes the server's stdin, even a SIGKILL that runs no atexit."""
    write_run(tmp_path / "a", 100)
    root = Path(__file__).resolve().parent.parent
    app = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""\
        import sys, time
        from core.lens.history import data_server, sources
        sources.read_paths([{str(tmp_path)!r}])
        (server,) = data_server.running().values()
        print(server.process.pid, flush=True)
        time.sleep(600)
        """)], cwd=root, stdout=subprocess.PIPE, text=True)
    try:
        pid = int(app.stdout.readline())
        os.kill(pid, 0)  # running
    finally:
        app.kill()
        app.wait(10)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            break
        try:  # a zombie waits for a parent that is gone: init reaps it
            if Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z":
                break
        except OSError:
            break
        time.sleep(0.05)
    else:
        os.kill(pid, signal.SIGKILL)
        pytest.fail("the data server outlived the app")


def test_an_event_files_last_record_whole_or_cut_is_told_from_its_tail(tmp_path):
    """sources._frames_whole (the server skips a cut-off last record silently): from the file's last bytes, and by a
    walk over every record where the last record is longer than the bytes looked at; both agree at every cut."""
    from torch.utils.tensorboard import SummaryWriter

    write_run(tmp_path / "small", 300, tags=("loss",))
    writer = SummaryWriter(str(tmp_path / "large"))
    writer.add_scalar("loss", 1.0, 0)
    writer.add_text("notes", "x" * (sources.TAIL_WINDOW + 5_000), 1)  # a last record longer than the tail looked at
    writer.close()
    for folder in ("small", "large"):
        path = next((tmp_path / folder).glob("events.out.tfevents.*"))
        data = path.read_bytes()
        assert sources._frames_whole(path)
        whole = 0
        for cut in [*range(1, 200), len(data) // 2]:
            path.write_bytes(data[:-cut])
            assert sources._frames_whole(path) == sources._walk_records(path), cut
            whole += sources._frames_whole(path)
        assert whole <= 200 // 40  # only where a cut falls between records (a scalar's record is ~40-50 bytes)
        path.write_bytes(data + data[:5])  # bytes after the last record
        assert not sources._frames_whole(path)
        path.write_bytes(data)
    assert event_files.tensorboard_available()


@needs_server
def test_event_files_the_server_would_add_leave_that_run_to_the_python_reader(tmp_path, python_reads):
    """The server reads every `*tfevents*` file and follows links; the Python reader's walk reads
    `events.out.tfevents.*` files that are not links. A run with such a file beside its own is the Python reader's."""
    for name in ("a", "b", "c", "other"):
        write_run(tmp_path / name, 40, tags=("loss",))
    other = next((tmp_path / "other").glob("events.out.tfevents.*"))
    (tmp_path / "a" / "backup.tfevents.1").write_bytes(other.read_bytes())  # not an event file to the walk
    (tmp_path / "b" / "events.out.tfevents.9.link").symlink_to(other)  # a link: not followed by the walk
    fast, _ = equal_reads(tmp_path)
    assert python_reads[:2] == ["logs/a", "logs/b"] and len(python_reads) == 2 + 4  # c and other: the server's


def test_a_server_that_never_finishes_loading_is_one_sentence_after_the_safety_net(tmp_path, monkeypatch):
    """Loading ends when the server logs it; a server that starts and never logs it is stopped after LOAD_TIMEOUT_S
    (a safety net, not a guess at when loading ends) and the Python reader reads."""
    write_run(tmp_path / "logs" / "a", 50)
    fake = tmp_path / "server"
    fake.write_text("#!/bin/sh\necho '[2026-12-07T00:00:00Z INFO  rustboard_core::cli] Wrote port \"9\" to x' >&2\n"
                    "exec sleep 600\n")
    fake.chmod(0o755)
    monkeypatch.setenv("TENSORBOARD_DATA_SERVER_BINARY", str(fake))
    monkeypatch.setattr(data_server, "LOAD_TIMEOUT_S", 1.0)
    started = []
    real_init = data_server.DataServer.__init__

    def remembered(self, *args, **kwargs):
        real_init(self, *args, **kwargs)
        started.append(self)

    monkeypatch.setattr(data_server.DataServer, "__init__", remembered)
    fast, _ = equal_reads(tmp_path / "logs")
    assert [n for n in fast.notes if FAST in n] == [
        "TensorBoard's fast loader (tensorboard-data-server) did not finish loading in 1 s, so TensorBoard "
        "runs are read with the slower Python reader."]
    assert started and all(s.process.poll() is not None for s in started) and not data_server.running()
