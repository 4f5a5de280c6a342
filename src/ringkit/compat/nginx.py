"""nginx's ``hash KEY consistent``, point for point: which upstream server a request goes to.

``ngx_http_upstream_hash_module`` (``ngx_http_upstream_init_chash``) gives each ``server``
line ``160 × weight`` points, chained as Cache::Memcached::Fast does: point j is the CRC-32 of
HOST, a NUL byte, PORT and point j-1 as 4 little-endian bytes (0 for the first). HOST and PORT
are the line's address *as written*, split at the last ``:`` followed only by digits (no default
port, no name resolution); a ``unix:`` path is all HOST with an empty PORT. Points are sorted
and equal points dropped (the first server in config order keeps it). A request's key (the
evaluated ``hash`` expression) is CRC-32 hashed and goes to the first point at or after it,
wrapping: a :class:`~ringkit.compat.Continuum`.

A ``down`` server keeps its points; a key landing on one walks on to the next points
(``ngx_http_upstream_get_chash_peer``, up to 20 more), which is the first point at or after
the key among the other servers' points. Only when 21 points in a row belong to down servers
does nginx fall back to round robin for the keys landing there; such a pool is refused, since
no layout predicts it.

>>> layout = nginx([NginxServer("127.0.0.1:8081"), NginxServer("127.0.0.1:8082", weight=2)])
>>> len(layout.points), layout.node_for("user:42")
(480, '127.0.0.1:8082')
"""

from __future__ import annotations

import re
import struct
import zlib
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from ringkit.compat._continuum import Continuum
from ringkit.errors import ConfigError
from ringkit.hashing import Hasher
from ringkit.nodes import Node

__all__ = ["NGINX_KEY_HASHER", "NginxServer", "nginx", "nginx_host_port", "nginx_points"]

POINTS_PER_WEIGHT = 160
# The walk past a down server: ngx_http_upstream_get_chash_peer gives up after 20 more points.
MAX_TRIES = 20
NGINX_KEY_HASHER = Hasher("crc32", zlib.crc32, 32)
_PORT = re.compile(rb":([0-9]*)\Z")
_LE32 = struct.Struct("<I").pack


@dataclass(frozen=True, slots=True)
class NginxServer:
    """One ``server`` line of an upstream: its address as written, weight and ``down`` flag.

    >>> NginxServer("10.0.0.1:8080", weight=3)
    NginxServer(address='10.0.0.1:8080', weight=3, down=False)
    """

    address: str
    weight: int = 1
    down: bool = False

    def __post_init__(self) -> None:
        if (
            not isinstance(self.address, str)
            or not self.address
            or any(c.isspace() for c in self.address)
        ):
            raise ConfigError(
                f"server address must be a non-empty str without spaces, got {self.address!r}"
            )
        if isinstance(self.weight, bool) or not isinstance(self.weight, int) or self.weight < 1:
            raise ConfigError(
                f"weight of server {self.address!r} must be an int >= 1, got {self.weight!r}"
            )


def nginx_host_port(address: str) -> tuple[bytes, bytes]:
    """Return (HOST, PORT) as nginx's consistent hash reads `address` (no default port).

    >>> nginx_host_port("10.0.0.1:80"), nginx_host_port("backend"), nginx_host_port("unix:/s")
    ((b'10.0.0.1', b'80'), (b'backend', b''), (b'/s', b''))
    >>> nginx_host_port("[::1]:8080")
    (b'[::1]', b'8080')
    """
    data = address.encode()
    if data[:5].lower() == b"unix:":
        return data[5:], b""
    found = _PORT.search(data)
    if found is None:
        return data, b""
    return data[: found.start()], found.group(1)


def nginx_points(address: str, weight: int) -> list[int]:
    """Return the ``160 × weight`` chained points of one server line, in the order made."""
    host, port = nginx_host_port(address)
    base = zlib.crc32(host + b"\0" + port)
    points: list[int] = []
    previous = 0
    for _ in range(POINTS_PER_WEIGHT * weight):
        previous = zlib.crc32(_LE32(previous), base)
        points.append(previous)
    return points


def _build(servers: tuple[NginxServer, ...]) -> Continuum:
    points: list[int] = []
    owners: list[int] = []
    for index, server in enumerate(servers):
        found = nginx_points(server.address, server.weight)
        points.extend(found)
        owners.extend([index] * len(found))
    point_array = np.array(points, dtype=np.uint64)
    owner_array = np.array(owners, dtype=np.intp)
    order = np.lexsort((owner_array, point_array))
    point_array, owner_array = point_array[order], owner_array[order]
    # Equal points: nginx keeps the first after its (stable) sort, the earliest server line.
    first = np.ones(len(point_array), dtype=bool)
    first[1:] = point_array[1:] != point_array[:-1]
    point_array, owner_array = point_array[first], owner_array[first]
    down = np.array([server.down for server in servers], dtype=bool)[owner_array]
    _check_walk(down, servers)
    up = [server for server in servers if not server.down]
    renumber = np.cumsum(~np.array([s.down for s in servers])) - 1
    nodes = tuple(Node(server.address, weight=server.weight) for server in up)

    def rebuild(again: tuple[Node, ...]) -> Continuum:
        kept = {server.address: server for server in servers if server.down}
        listed = [NginxServer(node.name, weight=_int_weight(node)) for node in again]
        return nginx([*listed, *kept.values()])

    return Continuum(
        nodes,
        point_array[~down],
        renumber[owner_array[~down]].astype(np.intp),
        hasher=NGINX_KEY_HASHER,
        rebuild=rebuild,
        kind="nginx upstream",
    )


def _int_weight(node: Node) -> int:
    if node.weight != int(node.weight):
        raise ConfigError(f"weight of server {node.name!r} must be an int, got {node.weight!r}")
    return int(node.weight)


def _check_walk(down: np.ndarray, servers: tuple[NginxServer, ...]) -> None:
    """Refuse a pool where 21 points in a row (wrapping) belong to down servers."""
    if down.all():
        raise ConfigError(
            f"every server of the nginx upstream is down, got {[s.address for s in servers]!r}"
        )
    if not down.any():
        return
    # Longest run of down points around the circle: unroll it twice.
    circle = np.concatenate([down, down]).astype(np.int8)
    edges = np.flatnonzero(np.diff(np.concatenate([[0], circle, [0]])))
    longest = int((edges[1::2] - edges[::2]).max())
    if longest > MAX_TRIES:
        raise ConfigError(
            f"{longest} consecutive points of the nginx upstream belong to down servers; nginx "
            f"round-robins keys that land there (after {MAX_TRIES + 1} tries), so no layout "
            "predicts them: mark fewer servers down"
        )


def nginx(servers: Iterable[NginxServer | str]) -> Continuum:
    """Return the ``hash ... consistent`` layout of an nginx upstream.

    `servers` is a sequence of ``NginxServer(address, weight=1, down=False)`` values (or plain
    addresses: weight 1), in config order; node names are the addresses as written. A ``down``
    server is not a node but keeps its points, so keys landing on them go on to the next
    server's points, as nginx walks them.

    Runtime: O(P log P) for P = 160 × total weight points.

    >>> nginx(["127.0.0.1:8081", "127.0.0.1:8082"]).node_for("user:42")
    '127.0.0.1:8082'

    :raises ConfigError: for no servers, an address listed twice, a weight < 1, every server
        down, or 21 points in a row of down servers
    """
    if isinstance(servers, str):
        raise TypeError(f"servers must be a sequence of NginxServer values, got {servers!r}")
    given: list[NginxServer] = []
    for item in servers:
        if isinstance(item, str):
            item = NginxServer(item)
        elif not isinstance(item, NginxServer):
            raise TypeError(
                f"servers must hold NginxServer values or addresses, got {type(item).__name__}"
            )
        given.append(item)
    if not given:
        raise ConfigError("an nginx upstream needs at least one server, got none")
    addresses = [server.address for server in given]
    if len(set(addresses)) != len(addresses):
        twice = sorted({a for a in addresses if addresses.count(a) > 1})
        raise ConfigError(f"server addresses must be unique in an upstream, got {twice!r} twice")
    return _build(tuple(given))
