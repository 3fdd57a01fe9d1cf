"""TensorBoard folders through TensorBoard's own fast loader, `tensorboard-data-server` (its Rust reader, in the
`tensorboard-data-server` wheel of the extra): what `tensorboard` itself launches (tensorboard/data/server_ingester.py)
and asks over gRPC (tensorboard/data/grpc_provider.py).

One server per log folder per process, kept in a lock-guarded registry keyed by the folder (`reading`), started as
TensorBoard starts it but bound to 127.0.0.1 only, with every scalar kept (`--samples-per-plugin=scalars=all`, where
TensorBoard's default keeps 1,000 a tag), every record's CRC checked (`--checksum`, as event_files.py's reader does),
and one load (`--reload=once`): the caller says whether what it loaded is still of use (sources.py reads the
runs whose files changed since with the Python reader, which follows them as they grow, and starts a new server
when none is unchanged). Loading is known
to be finished from the server itself: its reloader logs "Finished load cycle" after the cycle has committed every
run (tensorboard/data/server/cli.rs), and nothing is asked before that line. Its warnings ("Read error in FILE",
"Failed to open event file FILE") say which files it could not read whole; sources.py reads those runs with the
Python reader, which says where each stopped. A server exits when its stdin closes (`--die-after-stdin`: the app
ending, even killed) and at exit (atexit). Where the binary is missing, cannot run here, or fails, `Unavailable`
carries one sentence and the Python reader reads as before. No streamlit.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import re
import shutil
import subprocess
import tempfile
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

SCALARS = "scalars"
START_TIMEOUT_S = 30.0  # for the port: the server writes it within milliseconds
LOAD_TIMEOUT_S = 120.0  # a safety net for a server that hangs, not a guess at when loading ends
MAX_SERVERS = 16  # folders kept loaded; the least recently read is shut down first
ALL_POINTS = 2**62  # ReadScalars downsamples to this many points a series: every one
_FINISHED = "Finished load cycle"
_PORT = re.compile(r'Wrote port "(\d+)"')


class Unavailable(RuntimeError):
    """The fast loader cannot read this folder here; str() is one sentence for the user."""


def _sentence(why: str) -> str:
    return (f"TensorBoard's fast loader (tensorboard-data-server) {why}, so TensorBoard runs are read with the "
            "slower Python reader.")


def binary() -> str:
    """The data server's path, found as TensorBoard finds it (TENSORBOARD_DATA_SERVER_BINARY, its bundle, the
    tensorboard-data-server package); Unavailable where there is none."""
    try:
        from tensorboard.data import server_ingester
    except ImportError as exc:
        raise Unavailable(_sentence(f"is missing ({exc.name or exc} is not installed)")) from None
    try:
        found = server_ingester.get_server_binary()
    except server_ingester.NoDataServerError:
        raise Unavailable(_sentence("is missing here")) from None
    if not found.path or not os.path.isfile(found.path):
        raise Unavailable(_sentence("is missing here"))
    return found.path


@dataclass
class RunScalars:
    """One run's scalars as the server holds them: tag -> (steps, wall times, values), each tag sorted by step."""

    tags: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]] = field(default_factory=dict)


class DataServer:
    """One `tensorboard-data-server` process over one folder, loaded once. `warnings` are the lines it logged at
    WARN or above (files it could not open or read whole); `loaded` is set once its load cycle has finished."""

    def __init__(self, logdir: Path, signature: object = None) -> None:
        self.logdir, self.signature = Path(logdir), signature
        self.warnings: list[str] = []
        self.loaded = threading.Event()
        self.ended = threading.Event()  # stderr closed: the process is gone
        self._port: int | None = None
        self._port_seen = threading.Event()
        self._tmp = tempfile.mkdtemp(prefix="attention-lab-tb-")
        self._channel = self._stub = None
        path = binary()
        args = [path, f"--logdir={self.logdir}", "--host=127.0.0.1", "--port=0",
                f"--port-file={os.path.join(self._tmp, 'port')}", f"--error-file={os.path.join(self._tmp, 'error')}",
                "--reload=once", f"--samples-per-plugin={SCALARS}=all", "--checksum", "--die-after-stdin", "--verbose"]
        # its log is how it says it is ready and done: INFO from its own modules whatever the caller's RUST_LOG
        env = dict(os.environ, RUST_LOG="warn,rustboard_core=info,rustboard=info", RUST_LOG_STYLE="never")
        try:
            self.process = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                                            stderr=subprocess.PIPE, env=env)
        except OSError as exc:  # not executable, or built for another platform
            shutil.rmtree(self._tmp, ignore_errors=True)
            raise Unavailable(_sentence(f"cannot run here ({exc.strerror or exc})")) from None
        threading.Thread(target=self._read_log, name="tb-data-server-log", daemon=True).start()

    def _read_log(self) -> None:
        for raw in self.process.stderr:
            line = raw.decode("utf-8", errors="replace").rstrip("\n")
            if " WARN " in line or " ERROR " in line or line.startswith("fatal:"):
                self.warnings.append(line)
            elif not self._port_seen.is_set() and (match := _PORT.search(line)):
                self._port = int(match.group(1))
                self._port_seen.set()
            elif _FINISHED in line:
                self.loaded.set()
        self.ended.set()
        self._port_seen.set()

    @property
    def alive(self) -> bool:
        return self.process.poll() is None and not self.ended.is_set()

    def _failure(self, what: str) -> Unavailable:
        error = ""
        with contextlib.suppress(OSError):
            error = Path(self._tmp, "error").read_text(errors="replace").strip()
        status = self.process.poll()
        ended = "" if status is None else f"killed by signal {-status}" if status < 0 else f"exit status {status}"
        detail = error.splitlines()[0] if error else ended  # its startup error (--error-file), else how it ended
        self.close()
        return Unavailable(_sentence(f"{what}{f' ({detail[:200]})' if detail else ''}"))

    def wait_loaded(self, timeout: float = LOAD_TIMEOUT_S) -> None:
        """Return once the server has logged the end of its load cycle; Unavailable if it exits or hangs first."""
        deadline = time.monotonic() + timeout
        if not self._port_seen.wait(min(START_TIMEOUT_S, timeout)) or self._port is None:
            raise self._failure("stopped before it started" if self.ended.is_set() else "did not start")
        while not self.loaded.wait(0.05):
            if self.ended.is_set() or self.process.poll() is not None:
                raise self._failure("stopped while loading")
            if time.monotonic() > deadline:
                raise self._failure(f"did not finish loading in {timeout:.0f} s")

    def _connect(self):
        if self._stub is None:
            import grpc
            from tensorboard.data.proto import data_provider_pb2_grpc

            # localhost only, never through a proxy the environment names; one answer may hold millions of points
            self._channel = grpc.insecure_channel(f"127.0.0.1:{self._port}", options=[
                ("grpc.enable_http_proxy", 0), ("grpc.max_receive_message_length", -1)])
            self._stub = data_provider_pb2_grpc.TensorBoardDataProviderStub(self._channel)
        return self._stub

    def _ask(self, method: str, request, timeout: float):
        import grpc

        self.wait_loaded(timeout)
        try:
            return getattr(self._connect(), method)(request, timeout=timeout)
        except grpc.RpcError as exc:
            code = exc.code().name.lower().replace("_", " ") if hasattr(exc, "code") else "no answer"
            raise self._failure(f"stopped answering ({code})") from None

    def runs(self, timeout: float = LOAD_TIMEOUT_S) -> set[str]:
        """The runs the server found (folders holding `*tfevents*` files, by path under the logdir)."""
        from tensorboard.data.proto import data_provider_pb2 as pb

        return {r.name for r in self._ask("ListRuns", pb.ListRunsRequest(), timeout).runs}

    def read(self, runs: Sequence[str] | None = None, timeout: float = LOAD_TIMEOUT_S) -> dict[str, RunScalars]:
        """Every scalar point of the given runs (the server's names: a folder's path under the logdir, "." for the
        logdir itself; None: every run), after loading has finished. Unavailable if the server stops meanwhile."""
        from tensorboard.data.proto import data_provider_pb2 as pb

        request = pb.ReadScalarsRequest(plugin_filter=pb.PluginFilter(plugin_name=SCALARS),
                                        downsample=pb.Downsample(num_points=ALL_POINTS))
        if runs is not None:
            request.run_tag_filter.runs.names.extend(runs)
        answer = self._ask("ReadScalars", request, timeout)
        out: dict[str, RunScalars] = {}
        for run in answer.runs:
            got = out.setdefault(run.run_name, RunScalars())
            for tag in run.tags:
                data = tag.data
                got.tags[tag.tag_name] = (np.asarray(data.step, dtype=np.int64),
                                          np.asarray(data.wall_time, dtype=float), np.asarray(data.value, dtype=float))
        return out

    def close(self) -> None:
        """Stop the process (closing its stdin ends it; then terminate, then kill) and remove its files."""
        if self._channel is not None:
            self._channel.close()
            self._channel = self._stub = None
        with contextlib.suppress(OSError):
            self.process.stdin.close()
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(2)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(2)
        with contextlib.suppress(OSError, ValueError):
            self.process.stderr.close()
        shutil.rmtree(self._tmp, ignore_errors=True)


class _Entry:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.server: DataServer | None = None


_registry: OrderedDict[str, _Entry] = OrderedDict()
_registry_lock = threading.Lock()


@contextlib.contextmanager
def reading(folder: Path, signature: object, keep: Callable[[object], bool] | None = None) -> Iterator[DataServer]:
    """The folder's loaded server, started (and waited for) when there is none, it has stopped, or what it loaded
    is of no use now: `keep(the signature it was started with)` is false (default: that signature differs from
    `signature`); held for the caller alone until the block ends. Unavailable (one sentence) when the fast loader
    cannot serve it."""
    folder = Path(os.path.abspath(folder))
    key = str(folder)
    with _registry_lock:
        entry = _registry.setdefault(key, _Entry())
        _registry.move_to_end(key)
        stale = [k for k in list(_registry)[:-MAX_SERVERS] if not _registry[k].lock.locked()]
        evicted = [_registry.pop(k) for k in stale]
    for old in evicted:
        with old.lock:
            if old.server is not None:
                old.server.close()
                old.server = None
    with entry.lock:
        server = entry.server
        useful = server is not None and (keep(server.signature) if keep else server.signature == signature)
        if server is None or not server.alive or not useful:
            if server is not None:
                server.close()
            entry.server = None
            server = DataServer(folder, signature)
            entry.server = server
        try:
            server.wait_loaded(LOAD_TIMEOUT_S)
        except Unavailable:
            entry.server = None
            raise
        try:
            yield server
        except Unavailable:
            entry.server = None
            raise


def release(folder: Path) -> None:
    """Stop the folder's server, if there is one (a folder about to be removed: an upload's temporary copy)."""
    with _registry_lock:
        entry = _registry.pop(str(Path(os.path.abspath(folder))), None)
    if entry is not None:
        with entry.lock:
            if entry.server is not None:
                entry.server.close()
                entry.server = None


def running() -> dict[str, DataServer]:
    """The registry's live servers by folder (for tests and benchmarks)."""
    with _registry_lock:
        return {k: e.server for k, e in _registry.items() if e.server is not None}


def shutdown_all() -> None:
    """Stop every server this process started (registered with atexit)."""
    with _registry_lock:
        entries = list(_registry.values())
        _registry.clear()
    for entry in entries:
        server, entry.server = entry.server, None
        if server is not None:
            server.close()


atexit.register(shutdown_all)
