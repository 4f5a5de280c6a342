"""What the controller's tests add to tests/proxies.py: backends in threads that answer their
own name (one can be stopped, and counts its requests), the proxies' configurations, and a
bounded load loop that records which backend answered each key and every failure.
"""

from __future__ import annotations

import http.client
import http.server
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from tests.proxies import ConfigFor, Proxy, proxy
from tests.servers import require_binary

__all__ = [
    "LoadLoop",
    "NameServer",
    "haproxy",
    "haproxy_config",
    "name_servers",
    "nginx_reload_command",
    "nginx_upstream",
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
            thread = threading.Thread(target=httpd.serve_forever, args=(0.05,), daemon=True)
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


def haproxy_config(servers: Sequence[str] = ()) -> ConfigFor:
    """A backend ``be`` hashing header X-Key consistently (sdbm + avalanche, HAProxy's default),
    with an admin socket and `servers` (configuration lines) declared in it.
    """
    lines = "".join(f"    {line}\n" for line in servers)

    def text_for(port: int, socket: Path) -> str:
        return (
            f"global\n    stats socket {socket} level admin\n"
            "defaults\n    mode http\n    timeout connect 2s\n"
            "    timeout client 10s\n    timeout server 10s\n"
            f"backend be\n    balance hdr({KEY_HEADER})\n    hash-type consistent\n{lines}"
            f"frontend fe\n    bind 127.0.0.1:{port}\n    default_backend be\n"
        )

    return text_for


@contextmanager
def haproxy(servers: Sequence[str] = ()) -> Iterator[Proxy]:
    """Run HAProxy with :func:`haproxy_config` for the block."""
    with proxy("haproxy", haproxy_config(servers)) as running:
        yield running


def nginx_upstream(upstream_file: Path) -> ConfigFor:
    """nginx hashing ``$http_x_key`` consistently over the servers `upstream_file` holds."""

    def text_for(port: int, socket: Path) -> str:
        return (
            f"  upstream app {{ hash $http_x_key consistent; include {upstream_file}; }}\n"
            f"  server {{ listen 127.0.0.1:{port}; location / {{ proxy_pass http://app; }} }}"
        )

    return text_for


def nginx_reload_command(running: Proxy) -> list[str]:
    """The command that reloads `running` (an nginx started by ``proxy("nginx", …)``)."""
    folder = running.directory
    return [
        require_binary("nginx", "nginx-light"),
        "-p",
        str(folder),
        "-c",
        str(running.config),
        "-e",
        str(folder / "error.log"),
        "-s",
        "reload",
    ]
