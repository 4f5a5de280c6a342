"""Real proxies for the controller's tests: HAProxy and nginx on loopback, backends that answer
their own name, and a bounded load loop that records which backend answered each key.
"""

from __future__ import annotations

import http.client
import http.server
import subprocess
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from tests.servers import free_port, require_binary, stop, wait_for_port

__all__ = [
    "HAProxy",
    "LoadLoop",
    "NameServer",
    "haproxy",
    "name_servers",
    "nginx",
    "owner_of",
    "wait_until",
]

KEY_HEADER = "X-Key"


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        body = self.server.name.encode()  # type: ignore[attr-defined]
        self.server.hits += 1  # type: ignore[attr-defined]
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        """Quiet: the tests read the answers, not the access log."""


class _QuietServer(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: object, client_address: object) -> None:
        """Quiet: a proxy closing its idle keep-alive connection resets it; that is normal."""


@dataclass
class NameServer:
    """An HTTP backend on loopback that answers every request with its own name."""

    name: str
    httpd: http.server.ThreadingHTTPServer
    thread: threading.Thread

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.httpd.server_address[1]}"

    @property
    def hits(self) -> int:
        return int(self.httpd.hits)  # type: ignore[attr-defined]

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@contextmanager
def name_servers(names: Sequence[str]) -> Iterator[dict[str, NameServer]]:
    """Run one name-answering HTTP backend per name, in threads, for the block."""
    servers: dict[str, NameServer] = {}
    try:
        for name in names:
            httpd = _QuietServer(("127.0.0.1", 0), _Handler)
            httpd.name, httpd.hits = name, 0  # type: ignore[attr-defined]
            thread = threading.Thread(target=httpd.serve_forever, daemon=True)
            thread.start()
            servers[name] = NameServer(name, httpd, thread)
        yield servers
    finally:
        for server in servers.values():
            server.stop()


def owner_of(port: int, key: str, *, header: bool = True, timeout_s: float = 5.0) -> str:
    """Send one request for `key` through the proxy on `port`; return the backend's name.

    :raises OSError: when the request fails; a non-200 answer raises RuntimeError
    """
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout_s)
    try:
        path = "/" if header else f"/{key}"
        connection.request("GET", path, headers={KEY_HEADER: key} if header else {})
        reply = connection.getresponse()
        body = reply.read().decode()
        if reply.status != 200:
            raise RuntimeError(f"proxy answered {reply.status} for key {key!r}: {body[:80]!r}")
        return body
    finally:
        connection.close()


def wait_until(condition: Callable[[], bool], *, timeout_s: float = 20.0, what: str) -> float:
    """Poll `condition` until true; return the seconds it took. Fails the test after timeout_s."""
    start = time.monotonic()
    while not condition():
        if time.monotonic() - start > timeout_s:
            raise AssertionError(f"{what} within {timeout_s} s")
        time.sleep(0.02)
    return time.monotonic() - start


@dataclass
class LoadLoop:
    """A thread sending requests for `keys` round and round through the proxy, recording
    every answer (key, backend, monotonic time) and every failure, for at most `max_requests`.
    """

    port: int
    keys: Sequence[str]
    max_requests: int = 200_000
    answers: list[tuple[str, str, float]] = field(default_factory=list)
    failures: list[tuple[str, str]] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def _run(self) -> None:
        sent = 0
        while not self._stop.is_set() and sent < self.max_requests:
            key = self.keys[sent % len(self.keys)]
            sent += 1
            try:
                self.answers.append((key, owner_of(self.port, key), time.monotonic()))
            except (OSError, RuntimeError) as error:
                self.failures.append((key, repr(error)))

    def __enter__(self) -> LoadLoop:
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        assert self._thread is not None
        self._thread.join(30)


@dataclass
class HAProxy:
    """A running HAProxy: its frontend port, admin socket, config and process."""

    port: int
    socket: Path
    config: Path
    process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        binary = require_binary("haproxy", "haproxy")
        self.socket.unlink(missing_ok=True)
        self.process = subprocess.Popen(
            [binary, "-db", "-f", str(self.config)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        wait_for_port(self.port, self.process)
        wait_until(self.socket.exists, timeout_s=10, what="the admin socket appears")

    def stop(self) -> None:
        if self.process is not None:
            stop(self.process)
            self.process = None

    def restart(self) -> None:
        """Stop and start again: servers added at runtime are gone, as after a reload."""
        self.stop()
        self.start()


def haproxy_config(port: int, socket: Path, servers: Sequence[str] = ()) -> str:
    """A backend ``be`` hashing header X-Key consistently (sdbm + avalanche, HAProxy's default)."""
    lines = "".join(f"    {line}\n" for line in servers)
    return (
        "global\n"
        f"    stats socket {socket} level admin\n"
        "defaults\n"
        "    mode http\n"
        "    timeout connect 2s\n"
        "    timeout client 10s\n"
        "    timeout server 10s\n"
        "backend be\n"
        f"    balance hdr({KEY_HEADER})\n"
        "    hash-type consistent\n"
        f"{lines}"
        "frontend fe\n"
        f"    bind 127.0.0.1:{port}\n"
        "    default_backend be\n"
    )


@contextmanager
def haproxy(folder: Path, servers: Sequence[str] = ()) -> Iterator[HAProxy]:
    """Run HAProxy with `haproxy_config` in `folder` for the block (`servers`: config lines)."""
    port = free_port()
    socket = folder / "admin.sock"
    config = folder / "haproxy.cfg"
    config.write_text(haproxy_config(port, socket, servers))
    proxy = HAProxy(port, socket, config)
    proxy.start()
    try:
        yield proxy
    finally:
        proxy.stop()


@contextmanager
def nginx(folder: Path, upstream_file: Path) -> Iterator[tuple[int, list[str]]]:
    """Run nginx hashing ``$http_x_key`` consistently over the servers `upstream_file` holds.

    Yields its port and the reload command for the controller.
    """
    binary = require_binary("nginx", "nginx-light")
    port = free_port()
    config = folder / "nginx.conf"
    config.write_text(
        f"daemon off;\npid {folder}/nginx.pid;\nerror_log {folder}/error.log;\n"
        "events { worker_connections 256; }\n"
        "http {\n"
        f"    access_log off;\n    client_body_temp_path {folder}/body;\n"
        f"    proxy_temp_path {folder}/proxy;\n"
        "    upstream app {\n        hash $http_x_key consistent;\n"
        f"        include {upstream_file};\n    }}\n"
        f"    server {{\n        listen 127.0.0.1:{port};\n"
        "        location / { proxy_pass http://app; }\n    }\n}\n"
    )
    base = [binary, "-p", str(folder), "-c", str(config)]
    process = subprocess.Popen(base, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for_port(port, process, log=folder / "error.log")
        yield port, [*base, "-s", "reload"]
    finally:
        stop(process)
