"""memcached's text protocol, sans I/O: request bytes, the framing of replies, their meaning.

A request is the bytes of one or more commands, sent at once (memcached answers a connection's
commands in order, so a pipeline is one round trip), with the number of replies to read back
(:class:`Exchange`). :class:`ReplyFramer` cuts the bytes a transport receives into those replies:
a reply is one closing line (``STORED``, ``END``, ``DELETED``…) with the ``VALUE`` blocks that
came before it (a ``get`` of several keys is one reply). Nothing here reads a socket. The
protocol is memcached's ``doc/protocol.txt``.

>>> framer = ReplyFramer(2)
>>> framer.feed(b"STORED\\r\\nVALUE k 0 2 7\\r\\nhi\\r")
False
>>> framer.feed(b"\\nEND\\r\\n")
True
>>> framer.replies
[(b'STORED', []), (b'END', [(b'k', b'hi', b'7')])]
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import NamedTuple

from ringkit.cluster.wire.failures import too_large
from ringkit.cluster.wire.urls import ServerURL
from ringkit.errors import BackendError, ConfigError

__all__ = [
    "Exchange",
    "Reply",
    "ReplyFramer",
    "Value",
    "checked",
    "get",
    "gets",
    "store",
    "values",
]

# One VALUE block: the key, its data and its cas token (b"" for a plain get).
Value = tuple[bytes, bytes, bytes]
# One reply: its closing line, and the VALUE blocks read before it.
Reply = tuple[bytes, list[Value]]


class Exchange(NamedTuple):
    """Send `data` (one or more commands), then read `replies` replies.

    A named tuple, immutable and built per call at a third of a frozen dataclass's cost.
    """

    data: bytes
    replies: int


class ReplyFramer:
    """Cut received bytes into `wanted` replies (a ``VALUE`` block belongs to the next line)."""

    __slots__ = ("_buffer", "_values", "_wanted", "replies")

    def __init__(self, wanted: int) -> None:
        self._wanted = wanted
        self._buffer = b""
        self._values: list[Value] = []
        self.replies: list[Reply] = []

    def feed(self, chunk: bytes) -> bool:
        """Take `chunk` of the answer; return True once every reply wanted is complete."""
        buffer = self._buffer + chunk if self._buffer else chunk
        at = 0
        while len(self.replies) < self._wanted:
            end = buffer.find(b"\r\n", at)
            if end < 0:
                break
            if buffer.startswith(b"VALUE ", at):
                header = buffer[at:end].split()
                start = end + 2
                stop = start + int(header[3])
                if len(buffer) < stop + 2:
                    break  # the value is not all here yet: read its header again later
                token = header[4] if len(header) > 4 else b""
                self._values.append((header[1], buffer[start:stop], token))
                at = stop + 2
            else:
                self.replies.append((buffer[at:end], self._values))
                self._values = []
                at = end + 2
        self._buffer = buffer[at:]
        return len(self.replies) >= self._wanted


def get(keys: Sequence[bytes]) -> bytes:
    """Return the ``get`` of `keys` (one reply: their VALUE blocks, then END)."""
    return b"get " + b" ".join(keys) + b"\r\n"


def gets(keys: Sequence[bytes]) -> bytes:
    """Return the ``gets`` of `keys`: a ``get`` whose VALUE blocks carry cas tokens."""
    return b"gets " + b" ".join(keys) + b"\r\n"


def store(verb: bytes, key: bytes, value: bytes, expire: int, token: bytes = b"") -> bytes:
    """Return a storage command (``set``, ``add``, ``cas`` with `token`) with flags 0."""
    if token:
        return b"%s %s 0 %d %d %s\r\n%s\r\n" % (verb, key, expire, len(value), token, value)
    return b"%s %s 0 %d %d\r\n%s\r\n" % (verb, key, expire, len(value), value)


def values(reply: Reply) -> dict[bytes, bytes]:
    """Return the values a ``get`` reply carries, by key."""
    found = {}
    for key, data, _ in reply[1]:  # a loop, not a comprehension: no function call in 3.11
        found[key] = data
    return found


def checked(reply: Reply, url: ServerURL, items: Mapping[bytes, bytes] | None = None) -> bytes:
    """Return `reply`'s closing line, or raise what it says went wrong.

    A refused request (``CLIENT_ERROR``; ``SERVER_ERROR object too large`` for the `items`
    sent) is the caller's :class:`~ringkit.errors.ConfigError`, never a failover; any other
    error line is a :class:`~ringkit.errors.BackendError`. A reply is read whole before this,
    so the connection stays in step either way.
    """
    line = reply[0]
    if not line.startswith((b"CLIENT_ERROR", b"SERVER_ERROR", b"ERROR")):
        return line
    text = line.decode(errors="replace")
    if line.startswith(b"CLIENT_ERROR"):
        raise ConfigError(f"server {url} refused the request: {text}")
    if items and b"too large" in line:
        raise too_large(url, items, text)
    raise BackendError(f"server {url} answered {text!r}")
