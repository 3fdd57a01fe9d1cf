"""The reverse proxy of `make serve`: finding HAProxy, and its configuration from haproxy.cfg.template."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
from dataclasses import dataclass
from pathlib import Path
from string import Template

TEMPLATE = Path(__file__).with_name("haproxy.cfg.template")
PACKAGE = "haproxy"
# Debian installs it in /usr/sbin, which is not on every user's PATH.
SEARCH_PATH = os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/usr/local/sbin", "/sbin"])
MISSING = (f"make serve needs HAProxy, the reverse proxy in front of the replicas: install Debian's package "
           f"`{PACKAGE}` (sudo apt-get install {PACKAGE}) and run it again.")


class ServeError(Exception):
    """Something `make serve` cannot go on without, said in one sentence."""


@dataclass(frozen=True)
class Upstream:
    name: str  # HAProxy's server name, also the value of the sticky cookie
    host: str
    port: int

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"


def parse_upstream(text: str, number: int) -> Upstream:
    """`HOST:PORT` of a replica on another machine (`--upstream`)."""
    host, sep, port = text.strip().rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ServeError(f"--upstream {text!r} is not HOST:PORT (for example 10.0.0.7:8601).")
    return Upstream(f"remote{number}", host, int(port))


def find_haproxy(install: bool = True) -> str:
    """The haproxy executable; installed from Debian's packages when this process may (root, apt-get)."""
    found = shutil.which(PACKAGE, path=SEARCH_PATH)
    if found:
        return found
    apt = shutil.which("apt-get", path=SEARCH_PATH)
    if install and apt and hasattr(os, "geteuid") and os.geteuid() == 0:
        print(f"HAProxy is not installed; installing Debian's package `{PACKAGE}`…", flush=True)
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        for command in ([apt, "install", "-y", "-q", PACKAGE], [apt, "update", "-q"],
                        [apt, "install", "-y", "-q", PACKAGE]):
            subprocess.run(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT, check=False)
            found = shutil.which(PACKAGE, path=SEARCH_PATH)
            if found:
                return found
    raise ServeError(MISSING)


def render_config(bind: str, upstreams: list[Upstream], stats_socket: Path) -> str:
    """HAProxy's configuration: one public `bind`, every replica a health-checked, cookie-named server."""
    if not upstreams:
        raise ServeError("There is no replica to send students to: give --replicas 1 or more, or --upstream.")
    servers = "\n".join(f"    server {u.name} {u.address} check cookie {u.name}" for u in upstreams)
    return Template(TEMPLATE.read_text(encoding="utf-8")).substitute(
        bind=bind, servers=servers, stats_socket=str(stats_socket))


def check_config(haproxy: str, path: Path) -> None:
    """`haproxy -c`: a configuration HAProxy rejects stops `make serve` with HAProxy's own first line."""
    result = subprocess.run([haproxy, "-c", "-q", "-f", str(path)], capture_output=True, text=True, check=False)
    if result.returncode != 0:
        lines = [line for line in (result.stderr + result.stdout).splitlines() if line.strip()]
        raise ServeError(f"HAProxy refuses the configuration {path}: {lines[0] if lines else 'no reason given'}")


def servers_state(stats_socket: Path, timeout_s: float = 2.0) -> dict[str, dict[str, str]]:
    """Each replica's row of HAProxy's statistics, via its socket: "status" as the health checks see it
    ("UP", "DOWN", "MAINT", ...), "stot" the requests and websockets it was sent, "pid" HAProxy's own."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(timeout_s)
        sock.connect(str(stats_socket))
        sock.sendall(b"show stat\n")
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    lines = b"".join(chunks).decode().splitlines()
    if not lines or not lines[0].startswith("# "):
        return {}
    header = lines[0][2:].split(",")
    states = {}
    for line in lines[1:]:
        row = dict(zip(header, line.split(",")))
        if row.get("pxname") == "replicas" and row.get("svname") not in ("BACKEND", "FRONTEND", None):
            states[row["svname"]] = row
    return states
