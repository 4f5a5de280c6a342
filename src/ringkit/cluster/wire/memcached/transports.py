"""memcached's two transports: a pool of blocking sockets, and one of asyncio streams.

Each sends an :class:`~ringkit.cluster.wire.memcached.protocol.Exchange`'s bytes and reads its
replies with a :class:`~ringkit.cluster.wire.memcached.protocol.ReplyFramer`; neither knows a
command, a key or an epoch. A connection that failed or timed out is closed, never reused with a
half-read reply; a pool opened before a fork is not used after it (the child opens its own, so
gunicorn's workers never share a socket with their parent), and an asyncio pool belongs to one
event loop. Loopback calls are small: ``TCP_NODELAY`` (asyncio sets it itself), so a request is
never held back waiting for the previous reply's ACK.
"""

from __future__ import annotations

import _socket
import asyncio
import os
import socket
import struct
import sys
from typing import NoReturn

from ringkit.cluster.wire.failures import server_failed
from ringkit.cluster.wire.idle import IdleConnections
from ringkit.cluster.wire.memcached.protocol import Exchange, Reply, ReplyFramer
from ringkit.cluster.wire.urls import ServerURL

__all__ = ["SocketTransport", "StreamTransport"]

# A read takes what has arrived, up to this much: most replies come whole in one.
_CHUNK = 65536
_Stream = tuple[asyncio.StreamReader, asyncio.StreamWriter]


class SocketTransport:
    """Blocking exchanges with one memcached server over a pool of sockets (thread-safe).

    What pymemcache's ``Client.get`` costs (one ``sendall``, one ``recv``), plus the framing:
    the idle sockets wait in an :class:`~ringkit.cluster.wire.idle.IdleConnections`.
    """

    def __init__(
        self, url: ServerURL, *, timeout_s: float, connect_timeout_s: float, max_connections: int
    ) -> None:
        self.url = url
        self._timeout_s, self._connect_timeout_s = timeout_s, connect_timeout_s
        self._idle = IdleConnections[socket.socket](max_idle=max_connections)

    def _connect(self) -> socket.socket:
        address = (self.url.host, self.url.port)
        sock = socket.create_connection(address, timeout=self._connect_timeout_s)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        _time_out(sock, self._timeout_s)
        return sock

    def exchange(self, request: Exchange) -> list[Reply]:
        """Send `request`, return its replies.

        :raises BackendError: when the connection fails or a reply takes over the timeout
        """
        sock = self._idle.take()
        try:
            if sock is None:
                sock = self._connect()
            sock.sendall(request.data)
            framer = ReplyFramer(request.replies)
            # No reply wanted (noreply commands only): nothing to wait for.
            while request.replies and not framer.feed(sock.recv(_CHUNK) or _closed()):
                pass
        except (OSError, ValueError) as error:  # a timeout; a reply that is not memcached's
            if sock is not None:
                sock.close()
            if isinstance(error, BlockingIOError):  # the kernel's timeout (_time_out): say so
                error = TimeoutError("timed out")
            raise server_failed(self.url, error) from None
        if not self._idle.give(sock):
            sock.close()
        return framer.replies

    def close(self) -> None:
        """Close the idle connections (one in use closes when its call ends)."""
        for sock in self._idle.drain():
            sock.close()


# Linux's struct timeval is two C longs; elsewhere its layout differs (Windows takes a DWORD).
_KERNEL_TIMEOUTS = sys.platform.startswith("linux")


def _time_out(sock: socket.socket, timeout_s: float) -> None:
    """Make each send and each receive on `sock` give up after `timeout_s` seconds.

    On Linux the kernel keeps the timeout of a blocking socket (``SO_RCVTIMEO``,
    ``SO_SNDTIMEO``; an expired one fails with ``EAGAIN``): a round trip is then one ``send``
    and one ``recv`` system call, as pymemcache's untimed socket makes. Python's own timeout
    (``settimeout``) polls before each of them, two more system calls per round trip. The
    timeout is per call either way: one receive waits at most `timeout_s`. A green socket
    (gevent's, eventlet's: not a ``_socket.socket``) is non-blocking underneath and waits in its
    event loop, where the kernel's timeouts never fire: it keeps ``settimeout``.
    """
    if not _KERNEL_TIMEOUTS or not isinstance(sock, _socket.socket):
        sock.settimeout(timeout_s)
        return
    seconds = int(timeout_s)
    micros = max(int((timeout_s - seconds) * 1_000_000), 0 if seconds else 1)  # 0: no limit
    timeval = struct.pack("@ll", seconds, micros)
    sock.settimeout(None)  # blocking: the kernel times each call out
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, timeval)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, timeval)


def _closed() -> NoReturn:
    raise ConnectionResetError("connection closed by the server")


class StreamTransport:
    """Awaited exchanges with one memcached server over a pool of asyncio streams."""

    def __init__(
        self, url: ServerURL, *, timeout_s: float, connect_timeout_s: float, max_connections: int
    ) -> None:
        self.url = url
        self._timeout_s, self._connect_timeout_s = timeout_s, connect_timeout_s
        self._slots = max_connections
        self._idle: list[_Stream] = []
        self._owner: tuple[int, int] = (0, 0)
        self._semaphore: asyncio.Semaphore | None = None

    def _pool_for_this_loop(self) -> asyncio.Semaphore:
        # Streams belong to one event loop and one process: start afresh in another.
        owner = (os.getpid(), id(asyncio.get_running_loop()))
        if self._semaphore is None or owner != self._owner:
            self._owner, self._idle = owner, []
            self._semaphore = asyncio.Semaphore(self._slots)
        return self._semaphore

    async def exchange(self, request: Exchange) -> list[Reply]:
        """Send `request`, return its replies (at most `max_connections` at once).

        :raises BackendError: when the connection fails or a reply takes over the timeout
        """
        async with self._pool_for_this_loop():
            stream = self._idle.pop() if self._idle else None
            try:
                if stream is None:
                    opening = asyncio.open_connection(self.url.host, self.url.port)
                    stream = await asyncio.wait_for(opening, self._connect_timeout_s)
                replies = await asyncio.wait_for(_talk(stream, request), self._timeout_s)
            except (TimeoutError, OSError, ValueError) as error:
                if stream is not None:
                    stream[1].close()
                raise server_failed(self.url, error) from None
            self._idle.append(stream)
            return replies

    async def close(self) -> None:
        """Close the idle connections."""
        idle, self._idle = self._idle, []
        for _, writer in idle:
            writer.close()


async def _talk(stream: _Stream, request: Exchange) -> list[Reply]:
    reader, writer = stream
    writer.write(request.data)
    await writer.drain()
    if not request.replies:  # noreply commands only: nothing to wait for
        return []
    framer = ReplyFramer(request.replies)
    while True:
        chunk = await reader.read(_CHUNK)
        if not chunk:
            raise ConnectionResetError("connection closed by the server")
        if framer.feed(chunk):
            return framer.replies
