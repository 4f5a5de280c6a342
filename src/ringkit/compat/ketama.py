"""Ketama: memcached's consistent hashing, exactly as libketama, libmemcached and twemproxy do it.

Each server gets points on a 32-bit circle: the MD5 digest of a label such as ``"10.0.1.1-0"``
gives four points (its little-endian 32-bit words), and the number of digests is proportional to
the server's weight. A key's hash is the first little-endian word of MD5(key) (libmemcached and
twemproxy let the client choose another key hash), and its server owns the first point >= that
hash, wrapping past the last point. The variants differ only in the labels and the rounding:

============  =====================================  ======================================
variant       label of digest ``i``                  digests per server
============  =====================================  ======================================
libketama     ``"<server as given>-i"``              ``floorf(pct * 40.0 * N)``
libmemcached  ``"host-i"``, ``"host:port-i"`` when   ``floorf(pct * 160/4 * N + 1e-10)``
              the port is not 11211
spy           ``"/host:port-i"`` (spymemcached)      as libmemcached
twemproxy     ``"<alias>-i"``, else as libmemcached  as libmemcached, over live servers
============  =====================================  ======================================

``pct`` is the server's weight over the total, in single precision as the C code computes it.
Unweighted libmemcached (``weighted=False``: the ``ketama`` behaviour without ``ketama_weighted``,
all weights 1) puts 100 points per server, one per label, each the key hash of the label.

References: libketama ``ketama.c`` (https://github.com/RJ/ketama); libmemcached ``hosts.cc``
``update_continuum`` and ``test/fixtures/ketama.hpp`` (https://github.com/awesomized/libmemcached);
twemproxy ``src/hashkit/nc_ketama.c``.

>>> layout = ketama("10.0.1.1:11211 600,10.0.1.2:11211 300,10.0.1.3:11211 200")
>>> layout.node_for("D[HE+cFXDK")
'10.0.1.3:11211'
>>> hex(layout.point_for("VDEAAAAA"))
'0xfffcd1b5'
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass

import numpy as np

from ringkit.compat._continuum import Continuum
from ringkit.compat.hashkit import get_key_hash, ketama_md5
from ringkit.errors import ConfigError
from ringkit.hashing import Hasher
from ringkit.nodes import Node
from ringkit.placement import check_token_count

__all__ = [
    "KETAMA_VARIANTS",
    "MEMCACHED_DEFAULT_PORT",
    "PLACEHOLDERS",
    "Server",
    "ketama",
    "parse_servers",
]

KETAMA_VARIANTS = ("libketama", "libmemcached", "spy", "twemproxy")
MEMCACHED_DEFAULT_PORT = 11211
_UNWEIGHTED_POINTS = 100  # libmemcached MEMCACHED_POINTS_PER_SERVER
# An ellipsis pasted from an example ("10.0.1.1:11211 600,...") is not a server.
PLACEHOLDERS = ("...", "\u2026")
_SPEC_FORMS = "'host[:port] weight', 'host[:port]:weight' or a {server: weight} mapping"

ServersLike = str | Mapping[str, int] | Iterable[str | Node]


@dataclass(frozen=True, slots=True)
class Server:
    """One memcached server as a ketama layout sees it.

    `name` is the server as given (``"10.0.1.1:11211"``, what lookups return); `host` and `port`
    are parsed from it (port 11211 when omitted); `alias` is twemproxy's optional server name.
    """

    name: str
    weight: int
    host: str
    port: int
    alias: str | None = None


def _check_weight(name: str, weight: object) -> int:
    if isinstance(weight, bool) or not isinstance(weight, (int, float)):
        raise ConfigError(f"weight of server {name!r} must be a whole number, got {weight!r}")
    if not math.isfinite(weight) or weight != int(weight) or weight < 1:
        raise ConfigError(f"weight of server {name!r} must be a whole number >= 1, got {weight!r}")
    return int(weight)


def _split_address(name: str, *, verbatim: bool) -> tuple[str, int]:
    if verbatim:
        return name, MEMCACHED_DEFAULT_PORT
    host, colon, port_text = name.rpartition(":")
    if not colon:
        return name, MEMCACHED_DEFAULT_PORT
    if not host or not port_text.isdigit() or not 0 < int(port_text) < 65536:
        raise ConfigError(f"unparsable server {name!r}; expected host[:port] with port 1-65535")
    return host, int(port_text)


def _parse_item(item: str, *, verbatim: bool, aliases: bool) -> Server:
    """Parse one ``"host:port weight"`` / ``"host:port:weight [alias]"`` item."""
    fields = item.split()
    if fields and fields[0] in PLACEHOLDERS:
        raise ConfigError(
            f"server spec {item.strip()!r} is a placeholder, not a server; list every server, "
            f"e.g. '10.0.1.1:11211 600,10.0.1.2:11211 300'"
        )
    if not fields or len(fields) > 2:
        raise ConfigError(f"unparsable server spec {item!r}; expected {_SPEC_FORMS}")
    address, weight_text, alias = fields[0], "1", None
    if not verbatim and address.count(":") == 2:
        address, _, weight_text = address.rpartition(":")
        if len(fields) == 2:
            if not aliases:
                raise ConfigError(
                    f"unparsable server spec {item!r}; a name after "
                    f"'host:port:weight' is twemproxy's, expected {_SPEC_FORMS}"
                )
            alias = fields[1]
    elif len(fields) == 2:
        if not verbatim and ":" not in address:
            # libmemcached would read "host 2" as a host name with a space in it.
            raise ConfigError(
                f"unparsable server spec {item!r}; a weight needs a port: "
                f"'{address}:{MEMCACHED_DEFAULT_PORT} {fields[1]}'"
            )
        weight_text = fields[1]
    try:
        weight: object = int(weight_text)
    except ValueError:
        weight = weight_text
    host, port = _split_address(address, verbatim=verbatim)
    return Server(address, _check_weight(address, weight), host, port, alias)


def parse_servers(servers: ServersLike, *, variant: str = "libmemcached") -> tuple[Server, ...]:
    """Parse servers from a string, a ``{server: weight}`` mapping or names / ``Node`` values.

    The string is libmemcached's: comma-separated ``"host[:port] weight"`` (or
    ``"host:port:weight"``); twemproxy also takes ``"host:port:weight alias"``. libketama keeps
    each server label verbatim (its server file does); the others parse ``host[:port]``.

    >>> parse_servers("10.0.1.1:11211 600, cache-b")[1]
    Server(name='cache-b', weight=1, host='cache-b', port=11211, alias=None)

    :raises ConfigError: for an unparsable item, a weight that is not a whole number >= 1, a
        server given twice, or no servers at all
    """
    verbatim, aliases = variant == "libketama", variant == "twemproxy"
    if isinstance(servers, str):
        parsed = [
            _parse_item(item, verbatim=verbatim, aliases=aliases) for item in servers.split(",")
        ]
    elif isinstance(servers, Mapping):
        parsed = [
            _with_weight(_parse_item(str(name), verbatim=verbatim, aliases=aliases), weight)
            for name, weight in servers.items()
        ]
    else:
        parsed = [_from_node(item, verbatim=verbatim, aliases=aliases) for item in servers]
    seen: set[str] = set()
    for server in parsed:
        if server.name in seen:
            raise ConfigError(f"server {server.name!r} is given twice")
        seen.add(server.name)
    return tuple(parsed)


def _with_weight(server: Server, weight: object) -> Server:
    return Server(
        server.name, _check_weight(server.name, weight), server.host, server.port, server.alias
    )


def _from_node(item: object, *, verbatim: bool, aliases: bool) -> Server:
    if isinstance(item, Node):
        server = _parse_item(item.name, verbatim=verbatim, aliases=aliases)
        return _with_weight(server, item.weight)
    if isinstance(item, str):
        return _parse_item(item, verbatim=verbatim, aliases=aliases)
    raise TypeError(f"server must be str or Node, got {type(item).__name__}")


# -- points per variant ------------------------------------------------------------------------


def _digests(weight: int, total: int, live: int, variant: str) -> int:
    """Return how many MD5 digests (4 points each) a server of `weight` gets."""
    pct = np.float32(weight) / np.float32(total)
    if variant == "libketama":
        # floorf(pct * 40.0 * (float)N): the product is double, then narrowed to float.
        return math.floor(np.float32(float(pct) * 40.0 * float(np.float32(live))))
    # floor((float)(pct * 160 / 4 * (float)live + 1e-10)) in single precision.
    product = pct * np.float32(160) / np.float32(4) * np.float32(live)
    return math.floor(np.float32(product + np.float32(1e-10)))


def _label_base(server: Server, variant: str) -> str:
    if variant == "libketama":
        return server.name
    if variant == "spy":
        return f"/{server.host}:{server.port}"
    if variant == "twemproxy" and server.alias is not None:
        return server.alias
    if server.port == MEMCACHED_DEFAULT_PORT:
        return server.host
    return f"{server.host}:{server.port}"


def _server_points(
    server: Server, total: int, live: int, variant: str, key_hash: Callable[[bytes], int] | None
) -> Iterator[int]:
    base = _label_base(server, variant)
    if key_hash is not None:
        # Unweighted libmemcached hashes each label with the key hash (hashkit_digest).
        for i in range(_UNWEIGHTED_POINTS):
            yield key_hash(f"{base}-{i}".encode())
        return
    for i in range(_digests(server.weight, total, live, variant)):
        label = f"{base}-{i}".encode()
        for alignment in range(4):
            yield ketama_md5(label, alignment)


def _build(servers: tuple[Server, ...], variant: str, weighted: bool, hasher: Hasher) -> Continuum:
    total = sum(server.weight for server in servers)
    # Counted before hashing: about 160 points a server whatever the weights (they are shares).
    count = sum(
        _digests(server.weight, total, len(servers), variant) * 4
        if weighted
        else _UNWEIGHTED_POINTS
        for server in servers
    )
    what = f"a {variant} ketama continuum of {len(servers):,} servers"
    check_token_count(count, what=what, fix="use fewer servers")
    points: list[int] = []
    owners: list[int] = []
    for index, server in enumerate(servers):
        before = len(points)
        points.extend(
            _server_points(
                server, total, len(servers), variant, None if weighted else hasher.function
            )
        )
        owners.extend([index] * (len(points) - before))
    known = {server.name: server for server in servers}

    def rebuild(nodes: tuple[Node, ...]) -> Continuum:
        again = tuple(
            _with_weight(known[node.name], node.weight)
            if node.name in known
            else _from_node(node, verbatim=variant == "libketama", aliases=variant == "twemproxy")
            for node in nodes
        )
        return _build(again, variant, weighted, hasher)

    nodes = tuple(
        Node(server.name, weight=server.weight, address=f"{server.host}:{server.port}")
        for server in servers
    )
    return Continuum.from_points(
        nodes,
        points,
        owners,
        hasher=hasher,
        rebuild=rebuild,
        kind=f"{variant} ketama continuum",
        weighted=weighted,
    )


def _default_hash(variant: str, weighted: bool) -> str:
    if variant == "twemproxy":
        return "fnv1a_64"  # twemproxy conf.c CONF_DEFAULT_HASH
    return "md5" if weighted else "one_at_a_time"  # libhashkit's HASHKIT_HASH_DEFAULT


def ketama(
    servers: ServersLike,
    *,
    variant: str = "libmemcached",
    weighted: bool = True,
    hash: str | None = None,
) -> Continuum:
    """Return the ketama continuum of `servers` as `variant` builds it.

    `servers` is ``"10.0.1.1:11211 600,10.0.1.2:11211 300"``, a ``{server: weight}`` mapping, or
    names / ``Node`` values; ``node_for(key)`` returns the server as given. `weighted=False` is
    libmemcached's (and spy's) unweighted ketama, 100 points per server. `hash` names the key hash
    in :data:`ringkit.compat.hashkit.TWEMPROXY_HASHES` (libmemcached's ``MEMCACHED_BEHAVIOR_HASH``,
    twemproxy's ``hash:``); by default the system's own: md5 for weighted ketama and libketama
    (which knows no other), one_at_a_time for unweighted libmemcached, fnv1a_64 for twemproxy.
    Removing a server rebuilds the continuum over the servers
    left, which is what twemproxy's auto-eject does.

    Runtime: O(S·P log(S·P)) to build, for S servers of P points.

    >>> ketama({"a:11211": 1, "b:11211": 1}, variant="twemproxy", hash="fnv1a_64").node_for("k")
    'a:11211'

    :raises ConfigError: for an unknown variant or key hash, a bad server spec or weight, no
        servers, or an unweighted layout given weights other than 1
    """
    if variant not in KETAMA_VARIANTS:
        raise ConfigError(
            f"unknown ketama variant {variant!r}; known: {', '.join(KETAMA_VARIANTS)}"
        )
    hash_name = _default_hash(variant, weighted) if hash is None else hash
    key_hash = Hasher(f"hashkit:{hash_name}", get_key_hash(hash_name), 32)
    if variant == "libketama" and hash not in (None, "md5"):
        raise ConfigError(f"libketama hashes keys with md5 only, got hash={hash!r}")
    parsed = parse_servers(servers, variant=variant)
    if not parsed:
        raise ConfigError(f"ketama needs at least one server, got {servers!r}")
    if not weighted:
        if variant not in ("libmemcached", "spy"):
            raise ConfigError(f"weighted=False is libmemcached's and spy's, not {variant!r}")
        heavy = [server.name for server in parsed if server.weight != 1]
        if heavy:
            raise ConfigError(
                f"weighted=False needs every weight to be 1 (libmemcached turns "
                f"weighting on otherwise), got weights on {heavy!r}"
            )
    return _build(parsed, variant, weighted, key_hash)
