"""Real HAProxy and nginx on loopback, in front of small backends that answer their own name.

``backends(names)`` runs one nginx serving each name on its own free port (``return 200
NAME``); ``proxy("haproxy" | "nginx", text_for)`` runs the proxy with the configuration
``text_for(listen_port, admin_socket)`` and reloads it with another one as operators do
(HAProxy's master-worker ``SIGUSR2``, nginx's ``SIGHUP``), returning once every old worker has
exited and new ones run. ``route(port, keys)`` sends
one keep-alive request per key and returns the name of the backend that answered each.

A missing binary skips the test locally and fails it under ``CI=true`` (tests/servers.py).
"""

from __future__ import annotations

import contextlib
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

from tests.servers import (
    STARTS_ON_FREE_PORTS,
    distinct_free_ports,
    require_binary,
    stop,
    wait_for_port,
)

__all__ = ["Proxy", "backends", "nginx_main", "proxy", "route"]

ConfigFor = Callable[[int, Path], str]
_RESIGNAL_S = 2.0


def nginx_main(directory: Path, http_body: str) -> str:
    """Return an nginx main configuration that keeps every file under `directory`."""
    temp = "\n".join(
        f"  {kind}_temp_path {directory}/{kind};"
        for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
    )
    return (
        f"daemon off;\nmaster_process on;\nworker_processes 1;\npid {directory}/nginx.pid;\n"
        f"error_log {directory}/error.log warn;\nevents {{ worker_connections 512; }}\n"
        f"http {{\n  access_log off;\n{temp}\n{http_body}\n}}\n"
    )


@contextmanager
def backends(names: Sequence[str]) -> Iterator[dict[str, int]]:
    """Run one nginx answering ``NAME`` on each name's port; yield ``{name: port}``."""
    binary = require_binary("nginx", "nginx-light")
    for attempt in range(STARTS_ON_FREE_PORTS):
        ports = dict(zip(names, distinct_free_ports(len(names)), strict=True))
        servers = "\n".join(
            f"  server {{ listen 127.0.0.1:{port}; keepalive_requests 100000; "
            f'location / {{ return 200 "{name}"; }} }}'
            for name, port in ports.items()
        )
        with tempfile.TemporaryDirectory() as directory:
            process, log = _start_nginx(binary, Path(directory), servers)
            try:
                try:
                    for port in ports.values():
                        wait_for_port(port, process, log=log)
                except RuntimeError:
                    if attempt + 1 == STARTS_ON_FREE_PORTS:
                        raise
                    continue
                yield ports
                return
            finally:
                stop(process)


def _start_nginx(
    binary: str, directory: Path, http_body: str
) -> tuple[subprocess.Popen[bytes], Path]:
    config = directory / "nginx.conf"
    config.write_text(nginx_main(directory, http_body))
    command = [binary, "-p", str(directory), "-c", str(config), "-e", str(directory / "error.log")]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return process, directory / "error.log"


class Proxy:
    """A running proxy: its listening port, admin socket, config file; ``reload(text_for)``."""

    def __init__(self, kind: str, directory: Path, text_for: ConfigFor) -> None:
        self.kind = kind
        self.directory = directory
        self.socket = directory / "admin.sock"
        self.config = directory / ("haproxy.cfg" if kind == "haproxy" else "nginx.conf")
        self.port = 0
        self._process: subprocess.Popen[bytes] | None = None
        self._text_for = text_for

    def start(self, text_for: ConfigFor | None = None) -> None:
        """Start the proxy (on a fresh port the first time, the same one after)."""
        self._text_for = text_for or self._text_for
        binary = require_binary(self.kind, "haproxy" if self.kind == "haproxy" else "nginx-light")
        for attempt in range(STARTS_ON_FREE_PORTS if not self.port else 1):
            port = self.port or distinct_free_ports(1)[0]
            text = self._text_for(port, self.socket)
            log = self.directory / ("haproxy.log" if self.kind == "haproxy" else "error.log")
            if self.kind == "haproxy":
                self.config.write_text(text)
                # master-worker mode: SIGUSR2 reloads, as systemd's haproxy.service does
                command = [binary, "-W", "-db", "-f", str(self.config)]
                with log.open("wb") as sink:
                    process = subprocess.Popen(command, stdout=sink, stderr=subprocess.STDOUT)
            else:
                process, log = _start_nginx(binary, self.directory, text)
            try:
                wait_for_port(port, process, log=log)
                if self.kind == "haproxy":
                    _wait_for_socket(self.socket, process)
            except RuntimeError:
                stop(process)
                if attempt + 1 == STARTS_ON_FREE_PORTS or self.port:
                    raise
                continue
            self._process, self.port = process, port
            return

    def reload(self, text_for: ConfigFor, *, timeout_s: float = 30.0) -> None:
        """Reload the proxy with another configuration, on the same port.

        Returns once every worker of the old configuration has exited and a new one runs, so
        that every request after it is routed by the new file.
        """
        assert self._process is not None
        text = text_for(self.port, self.socket)
        if self.kind == "haproxy":
            self.config.write_text(text)
        else:
            self.config.write_text(nginx_main(self.directory, text))
        old = _children(self._process.pid)
        reload_signal = signal.SIGUSR2 if self.kind == "haproxy" else signal.SIGHUP
        deadline = time.monotonic() + timeout_s
        sent = 0.0
        while time.monotonic() < deadline:
            if time.monotonic() - sent > _RESIGNAL_S:
                # An HAProxy master that has only just started can lose the signal (it is not
                # yet catching it): send it again until the workers are replaced.
                self._process.send_signal(reload_signal)
                sent = time.monotonic()
            now = _children(self._process.pid)
            if now and not now & old:
                return
            time.sleep(0.05)
        raise RuntimeError(f"{self.kind} did not replace workers {sorted(old)} in {timeout_s} s")

    def stop(self) -> None:
        """Stop the proxy if it runs."""
        if self._process is not None:
            stop(self._process)
            self._process = None


@contextmanager
def proxy(kind: str, text_for: ConfigFor) -> Iterator[Proxy]:
    """Run ``haproxy`` or ``nginx`` with ``text_for(port, admin_socket)`` for the block."""
    with tempfile.TemporaryDirectory() as directory:
        running = Proxy(kind, Path(directory), text_for)
        running.start()
        try:
            yield running
        finally:
            running.stop()


def _wait_for_socket(path: Path, process: subprocess.Popen[bytes], timeout_s: float = 20.0) -> None:
    """Wait until HAProxy's admin socket answers: its worker creates it after the port is bound."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and process.poll() is None:
        with contextlib.suppress(OSError), socket.socket(socket.AF_UNIX) as probe:
            probe.connect(str(path))
            return
        time.sleep(0.02)
    raise RuntimeError(f"HAProxy's admin socket {path} did not answer within {timeout_s} s")


def _children(pid: int) -> set[int]:
    """Return the pids of `pid`'s child processes (its workers)."""
    path = Path(f"/proc/{pid}/task/{pid}/children")
    if path.exists():
        return {int(child) for child in path.read_text().split()}
    # Kernels without CONFIG_PROC_CHILDREN: the parent pid is field 4 of /proc/PID/stat.
    found = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError):
            if int(stat.read_text().rsplit(")", 1)[1].split()[1]) == pid:
                found.add(int(stat.parent.name))
    return found


def route(
    port: int, keys: Sequence[str | None], *, header: str | None = "X-Key", batch: int = 500
) -> list[str]:
    """Send one GET per key (in `header`; None: no header) and return who answered each.

    With `header` None each key is the request's path instead. Requests are pipelined on
    keep-alive connections, `batch` at a time (both proxies answer pipelined requests in
    order); the answer is the body, the backend's name.
    """
    answers: list[str] = []
    for first in range(0, len(keys), batch):
        chunk = keys[first : first + batch]
        with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
            sock.sendall(b"".join(_request(key, header) for key in chunk))
            reader = sock.makefile("rb")
            answers.extend(_answer(reader, key) for key in chunk)
    return answers


def _request(key: str | None, header: str | None) -> bytes:
    if header is None:
        return f"GET {key} HTTP/1.1\r\nHost: test\r\n\r\n".encode()
    line = "" if key is None else f"{header}: {key}\r\n"
    return f"GET / HTTP/1.1\r\nHost: test\r\n{line}\r\n".encode()


def _answer(reader: BinaryIO, key: str | None) -> str:
    status = reader.readline().split()
    length = 0
    while (line := reader.readline()) not in (b"\r\n", b""):
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    body = reader.read(length).decode()
    if len(status) < 2 or status[1] != b"200":
        raise AssertionError(f"proxy answered {status!r} for key {key!r}: {body}")
    return body
