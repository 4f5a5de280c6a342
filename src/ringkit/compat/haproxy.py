"""HAProxy's ``hash-type consistent``, point for point: which server a request's key goes to.

HAProxy 2.x (``src/lb_chash.c``) gives each usable server ``16 × weight`` points
(``BE_WEIGHT_SCALE``) on a 32-bit circle, point j being ``full_hash(id × 4096 + j)`` for the
server's numeric id. A request's key (a header value, the URI, a URL parameter, ...) is hashed
with the backend's function (sdbm, djb2, wt6 or crc32), through ``full_hash`` too with the
``avalanche`` modifier; ``chash_get_server_hash`` then takes the *nearer* of the next point at or
after the hash and the previous point, ties going to the previous one, wrapping at both ends.

Nearest-point is first-point-at-or-after over the midpoints: the arc between two neighbouring
points a < b splits at ``(a + b) // 2``, hashes up to it going to a. So the layout is a
:class:`~ringkit.compat.Continuum` whose points are those midpoints (each owned by the point
before it), and lookups are ketama's bisect. ``server_points`` keeps HAProxy's own points.

Servers without an ``id`` are numbered as HAProxy's configuration check does (``cfgparse.c``:
a counter from 1 advances past every server in order; an unnumbered server takes the first id
at or above it that no server uses), so removing an unnumbered server renumbers the ones after
it and moves their keys: give ids to keep them.

>>> servers = [HAProxyServer("s1"), HAProxyServer("s2", weight=2), HAProxyServer("s3", id=7)]
>>> layout = haproxy(servers)
>>> layout.ids, len(layout.server_points)
({'s1': 1, 's2': 2, 's3': 7}, 64)
>>> layout.node_for("user:42")
's2'
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Self

import numpy as np
import numpy.typing as npt

from ringkit.compat._continuum import Continuum
from ringkit.compat.haproxy_hash import HAPROXY_HASHES, KEY_HASHES, full_hash, hash_many_haproxy
from ringkit.errors import ConfigError, DuplicateNodeError
from ringkit.hashing import Hasher, Key
from ringkit.nodes import Node

__all__ = [
    "HAPROXY_MAX_ID",
    "HAPROXY_MAX_WEIGHT",
    "HAProxyRing",
    "HAProxyServer",
    "assign_ids",
    "haproxy",
]

HAPROXY_MAX_WEIGHT = 256  # SRV_UWGHT_MAX
HAPROXY_MAX_ID = 2**31 - 1  # ids are C ints
POINTS_PER_WEIGHT = 16  # BE_WEIGHT_SCALE
ID_STRIDE = 4096  # SRV_EWGHT_RANGE: a server's points are full_hash(id * 4096 + j)
_SPACE = 1 << 32


@dataclass(frozen=True, slots=True)
class HAProxyServer:
    """One ``server`` line of a backend: its name, numeric id (None: automatic) and weight.

    `address` is carried for the caller (the runtime API and ``plan --add`` need one); HAProxy's
    default ``hash-key id`` does not hash it, so it does not move keys.

    >>> HAProxyServer("web1", id=3, weight=10)
    HAProxyServer(name='web1', id=3, weight=10, address=None)
    """

    name: str
    id: int | None = None
    weight: int = 1
    address: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name or any(c.isspace() for c in self.name):
            raise ConfigError(
                f"server name must be a non-empty str without spaces, got {self.name!r}"
            )
        if self.id is not None and (
            isinstance(self.id, bool)
            or not isinstance(self.id, int)
            or not 1 <= self.id <= HAPROXY_MAX_ID
        ):
            raise ConfigError(
                f"id of server {self.name!r} must be an int in [1, {HAPROXY_MAX_ID}], "
                f"got {self.id!r}"
            )
        if (
            isinstance(self.weight, bool)
            or not isinstance(self.weight, int)
            or not 1 <= self.weight <= HAPROXY_MAX_WEIGHT
        ):
            raise ConfigError(
                f"weight of server {self.name!r} must be an int in [1, {HAPROXY_MAX_WEIGHT}], "
                f"got {self.weight!r}; a server of weight 0 takes no keys: leave it out"
            )


def assign_ids(servers: Sequence[HAProxyServer]) -> tuple[int, ...]:
    """Return each server's id: its own, or the one HAProxy's configuration check gives it.

    A counter starts at 1 and advances past every server in order; a server without an id
    takes the first id at or above the counter that no server uses yet (HAProxy ``cfgparse.c``,
    ``get_next_id``). Servers HAProxy will not route to (``disabled``, weight 0) still count.

    >>> assign_ids([HAProxyServer("a"), HAProxyServer("b", id=2), HAProxyServer("c")])
    (1, 2, 3)
    >>> assign_ids([HAProxyServer("a", id=1), HAProxyServer("b"), HAProxyServer("c", id=2)])
    (1, 3, 2)

    :raises ConfigError: when two servers have the same explicit id
    """
    used: dict[int, str] = {}
    for server in servers:
        if server.id is not None:
            if server.id in used:
                raise ConfigError(
                    f"servers {used[server.id]!r} and {server.name!r} both have id {server.id}"
                )
            used[server.id] = server.name
    ids: list[int] = []
    counter = 1
    for server in servers:
        if server.id is None:
            while counter in used:
                counter += 1
            used[counter] = server.name
            ids.append(counter)
        else:
            ids.append(server.id)
        counter += 1
    return tuple(ids)


def server_points(server_id: int, weight: int) -> list[int]:
    """Return a server's points: ``full_hash(id * 4096 + j)`` for j < 16 * weight (mod 2**32)."""
    base = server_id * ID_STRIDE
    return [full_hash((base + j) & 0xFFFFFFFF) for j in range(POINTS_PER_WEIGHT * weight)]


KeyPart = Callable[[bytes], bytes]


def _key_hasher(function: str, avalanche: bool, key_part: KeyPart | None) -> Hasher:
    core = KEY_HASHES[function]
    name = f"haproxy_{function}" + ("_avalanche" if avalanche else "")
    if key_part is None and not avalanche:
        return Hasher(name, core, 32)
    part: KeyPart = key_part or bytes

    def hashed(data: bytes) -> int:
        value = core(part(data))
        return full_hash(value) if avalanche else value

    return Hasher(name, hashed, 32)


def _midpoints(
    points: npt.NDArray[np.uint64], owners: npt.NDArray[np.intp]
) -> tuple[npt.NDArray[np.uint64], npt.NDArray[np.intp], npt.NDArray[np.uint64]]:
    """Return (cell ends, their owners, the HAProxy point of each cell) in circular order.

    Cell i is ``(end[i-1], end[i]]`` around point i, ``end[i] = (p[i] + p[i+1]) // 2`` (the
    next point of the last being the first plus 2**32). A midpoint past 2**32 wraps and
    becomes the first end, so ends stay sorted; equal ends keep point order (an empty cell
    never wins the bisect).
    """
    following = np.roll(points, -1)
    following[-1] += np.uint64(_SPACE)
    ends = (points + following) // np.uint64(2)
    if ends[-1] >= _SPACE:
        ends[-1] -= np.uint64(_SPACE)
        return np.roll(ends, 1), np.roll(owners, 1), np.roll(points, 1)
    return ends, owners, points


class HAProxyRing(Continuum):
    """HAProxy's consistent-hash tree of one backend's usable servers, as a placement.

    ``node_for`` answers what ``chash_get_server_hash`` answers for a hash of the key with the
    backend's function. Beside the continuum's surface: ``servers`` (with their ids), ``ids``,
    ``hash_function``, ``avalanche``, ``server_points`` / ``server_point_owners`` (HAProxy's
    own points, sorted) and ``point_chosen(hash)``. ``add`` also takes an ``HAProxyServer``;
    ``remove`` and ``reweight`` renumber servers without an explicit id, as a reload does.
    """

    def __init__(
        self,
        servers: tuple[HAProxyServer, ...],
        *,
        hash_function: str,
        avalanche: bool,
        key_part: KeyPart | None = None,
    ) -> None:
        ids = assign_ids(servers)
        points: list[int] = []
        owners: list[int] = []
        for index, (server, server_id) in enumerate(zip(servers, ids, strict=True)):
            found = server_points(server_id, server.weight)
            points.extend(found)
            owners.extend([index] * len(found))
        point_array = np.array(points, dtype=np.uint64)
        owner_array = np.array(owners, dtype=np.intp)
        # Equal points keep insertion order (config order, then j), as HAProxy's ebtree does.
        order = np.argsort(point_array, kind="stable")
        self._server_points = point_array[order]
        self._server_point_owners = owner_array[order]
        ends, cell_owners, self._cell_points = _midpoints(
            self._server_points, self._server_point_owners
        )
        self._servers = tuple(
            replace(server, id=server_id) for server, server_id in zip(servers, ids, strict=True)
        )
        self._specs = servers
        self._hash_function = hash_function
        self._avalanche = avalanche
        self._key_part = key_part
        nodes = tuple(Node(s.name, weight=s.weight, address=s.address) for s in servers)
        super().__init__(
            nodes,
            ends,
            cell_owners,
            hasher=_key_hasher(hash_function, avalanche, key_part),
            rebuild=self._rebuild_nodes,
            kind="haproxy backend",
        )

    # -- looking up --------------------------------------------------------------------------

    def node_for_many(self, keys: Iterable[Key]) -> list[str]:
        """Return the owner of each key: keys hashed with numpy, one bisect for all.

        Runtime: O(total key bytes) vectorised, O(K log P) for the search.
        """
        batch = keys if isinstance(keys, Sequence) else list(keys)
        hashes = hash_many_haproxy(
            batch, self._hash_function, avalanche=self._avalanche, key_part=self._key_part
        )
        indices = self.owner_indices_for_hashes(hashes.astype(np.uint64))
        result: list[str] = np.array(self._names, dtype=object)[indices].tolist()
        return result

    def point_chosen(self, key_hash: int) -> int:
        """Return the HAProxy point that wins `key_hash` (the nearer neighbour, ties previous)."""
        return int(self._cell_points[self.index_for_point(key_hash)])

    # -- changing membership -----------------------------------------------------------------

    def add(self, node: str | Node | HAProxyServer) -> Self:
        """Return a new backend with `node` added (an ``HAProxyServer`` keeps its id).

        :raises DuplicateNodeError: when a server of that name is already there
        :raises ConfigError: for a bad weight or a taken id
        """
        if isinstance(node, HAProxyServer):
            if node.name in self:
                raise DuplicateNodeError(f"server {node.name!r} is already in the haproxy backend")
            return type(self)(
                (*self._specs, node),
                hash_function=self._hash_function,
                avalanche=self._avalanche,
                key_part=self._key_part,
            )
        return super().add(node)

    def _rebuild_nodes(self, nodes: tuple[Node, ...]) -> HAProxyRing:
        specs = {spec.name: spec for spec in self._specs}
        again = []
        for node in nodes:
            if node.weight != int(node.weight):
                raise ConfigError(
                    f"weight of server {node.name!r} must be an int, got {node.weight!r}"
                )
            spec = specs.get(node.name, HAProxyServer(node.name, address=node.address))
            again.append(replace(spec, weight=int(node.weight)))
        if not again:
            raise ConfigError("a haproxy backend needs at least one usable server")
        return HAProxyRing(
            tuple(again), hash_function=self._hash_function, avalanche=self._avalanche
        )

    # -- measuring ---------------------------------------------------------------------------

    @property
    def servers(self) -> tuple[HAProxyServer, ...]:
        """The servers in config order, each with the id HAProxy gives it."""
        return self._servers

    @property
    def ids(self) -> dict[str, int]:
        """Each server's numeric id (``puid``)."""
        return {server.name: int(server.id or 0) for server in self._servers}

    @property
    def hash_function(self) -> str:
        """The key hash: ``"sdbm"``, ``"djb2"``, ``"wt6"``, ``"crc32"`` (``"source"``: an IP)."""
        return self._hash_function

    @property
    def avalanche(self) -> bool:
        """Whether key hashes go through ``full_hash`` (the ``avalanche`` modifier)."""
        return self._avalanche

    @property
    def server_points(self) -> npt.NDArray[np.uint64]:
        """HAProxy's points, sorted (equal points in insertion order)."""
        return self._server_points

    @property
    def server_point_owners(self) -> npt.NDArray[np.intp]:
        """For each of ``server_points``, the index of its server."""
        return self._server_point_owners

    def _identity(self) -> tuple[object, ...]:
        return (self._container, self._servers, self._hash_function, self._avalanche)

    def _repr_options(self) -> str:
        return (
            f", hash_function={self._hash_function!r}, avalanche={self._avalanche}, "
            f"points={len(self._server_points)}"
        )


def _as_server(item: HAProxyServer | str) -> HAProxyServer:
    if isinstance(item, HAProxyServer):
        return item
    if isinstance(item, str):
        return HAProxyServer(item)
    raise TypeError(f"servers must hold HAProxyServer values or names, got {type(item).__name__}")


def haproxy(
    servers: Iterable[HAProxyServer | str],
    *,
    hash_function: str | None = None,
    avalanche: bool | None = None,
) -> HAProxyRing:
    """Return the consistent-hash layout of an HAProxy backend over its usable servers.

    `servers` is a sequence of ``HAProxyServer(name, id=None, weight=1, address=None)`` values
    (or plain names: automatic id, weight 1), in config order: the servers HAProxy would route
    to (not ``disabled``, not DOWN, weight >= 1; backups only when no active server is up).
    Automatic ids are numbered over the servers given, so a caller reading a config that also
    has disabled servers resolves ids first (``haproxy_from_config`` does).

    `hash_function` and `avalanche` are ``hash-type consistent [function] [avalanche]``: with
    no function named, HAProxy uses sdbm *and* the avalanche modifier; with a function named,
    avalanche only when asked.

    Runtime: O(P log P) for P = 16 × total weight points.

    >>> haproxy(["a", "b"], hash_function="crc32").node_for("user:42")
    'a'

    :raises ConfigError: for no servers, two servers of one name or one explicit id, a weight
        outside [1, 256], an id outside [1, 2**31 - 1], or an unknown hash function
    """
    if hash_function is None:
        function, modifier = "sdbm", True if avalanche is None else avalanche
    elif hash_function in HAPROXY_HASHES:
        function, modifier = hash_function, bool(avalanche)
    else:
        raise ConfigError(
            f"unknown haproxy hash function {hash_function!r}; known: {', '.join(HAPROXY_HASHES)}"
        )
    if isinstance(servers, str):
        raise TypeError(f"servers must be a sequence of HAProxyServer values, got {servers!r}")
    given = tuple(_as_server(item) for item in servers)
    if not given:
        raise ConfigError("a haproxy backend needs at least one usable server, got none")
    names = [server.name for server in given]
    if len(set(names)) != len(names):
        twice = sorted({name for name in names if names.count(name) > 1})
        raise ConfigError(f"server names must be unique in a backend, got {twice!r} twice")
    return HAProxyRing(given, hash_function=function, avalanche=modifier)
