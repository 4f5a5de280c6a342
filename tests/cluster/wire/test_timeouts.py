"""memcached calls time out: a server that never answers is named as a timeout, not a hang."""

from __future__ import annotations

import socket
import struct
import sys
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from ringkit import HashRing
from ringkit.cluster import ShardedClient
from ringkit.cluster.wire.memcached.protocol import Exchange
from ringkit.cluster.wire.memcached.transports import SocketTransport, _time_out
from ringkit.cluster.wire.urls import ServerURL, parse_url
from ringkit.errors import BackendError


@contextmanager
def silent_server() -> Iterator[ServerURL]:
    """A port that takes connections (the kernel's backlog) and never answers on them."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        yield parse_url(f"memcached://127.0.0.1:{listener.getsockname()[1]}")


def _transport(url: ServerURL, timeout_s: float) -> SocketTransport:
    return SocketTransport(url, timeout_s=timeout_s, connect_timeout_s=1.0, max_connections=2)


def test_a_reply_that_never_comes_is_a_timeout_named_as_one() -> None:
    with silent_server() as url:
        transport = _transport(url, 0.2)
        with pytest.raises(BackendError) as raised:
            transport.exchange(Exchange(b"get k\r\n", 1))
        assert str(raised.value) == f"server {url} failed: TimeoutError: timed out"
        transport.close()


def test_the_client_marks_a_silent_server_down_with_the_timeout_as_cause() -> None:
    with silent_server() as url:
        client = ShardedClient(HashRing(["a"]), {"a": str(url)}, timeout_s=0.2)
        try:
            with pytest.raises(BackendError, match="TimeoutError: timed out"):
                client.get("k")
            assert client.down_servers == ["a"]
        finally:
            client.close()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the kernel's timeouts: Linux")
@pytest.mark.parametrize("timeout_s", [0.2, 2.5])
def test_each_send_and_receive_waits_at_most_the_timeout(timeout_s: float) -> None:
    # The socket itself blocks (no poll before each call); the kernel times each call out.
    with silent_server() as url:
        transport = _transport(url, timeout_s)
        sock = transport._connect()
        try:
            assert sock.gettimeout() is None
            for option in (socket.SO_RCVTIMEO, socket.SO_SNDTIMEO):
                seconds, micros = struct.unpack(
                    "@ll", sock.getsockopt(socket.SOL_SOCKET, option, 16)
                )
                # The kernel keeps it in clock ticks: within one tick (10 ms at HZ=100).
                assert seconds + micros / 1e6 == pytest.approx(timeout_s, abs=0.011)
        finally:
            sock.close()


def test_a_green_socket_keeps_its_own_timeout() -> None:
    # gevent's and eventlet's sockets are non-blocking underneath and wait in their event loop,
    # where the kernel's timeouts never fire: a hung server would hang the call for ever.
    class GreenSocket:  # not a _socket.socket, as theirs are not
        timeout_s: float | None = None

        def settimeout(self, timeout_s: float | None) -> None:
            self.timeout_s = timeout_s

    green = GreenSocket()
    _time_out(green, 0.2)  # type: ignore[arg-type]
    assert green.timeout_s == 0.2
