"""An HAProxy backend as HAProxy holds it: servers with ids, hashing settings, what is hashed.

``HAProxyBackend`` is what ``haproxy_config`` reads from a file (or ``runtime_backend`` from
the runtime API's ``show servers state``): every server with its flags, numbered as HAProxy's
configuration check numbers them; ``layout()`` is the consistent-hash tree over the servers
HAProxy routes to. The key parts are the cuts ``src/backend.c`` makes before hashing.

>>> backend = HAProxyBackend("web", "<example>", (
...     ConfiguredServer("a", "10.0.0.1:80", None, 1, False, False, 3),
...     ConfiguredServer("b", "10.0.0.2:80", None, 2, True, False, 4),
...     ConfiguredServer("c", "10.0.0.3:80", None, 1, False, False, 5)), "hdr(X)", "sdbm", True)
>>> backend.ids(), list(backend.layout())
({'a': 1, 'b': 2, 'c': 3}, ['a', 'c'])
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace

from ringkit.compat.haproxy import HAProxyRing, HAProxyServer, assign_ids
from ringkit.compat.haproxy_hash import HAPROXY_HASHES
from ringkit.compat.haproxy_state import ServerState
from ringkit.errors import ConfigError

__all__ = [
    "ConfiguredServer",
    "HAProxyBackend",
    "domain_only",
    "first_value",
    "parse_hash_type",
    "runtime_backend",
    "uri_part",
]


@dataclass(frozen=True, slots=True)
class ConfiguredServer:
    """A server as the configuration declares it (weight 0 allowed), with its line."""

    name: str
    address: str
    id: int | None
    weight: int
    disabled: bool
    backup: bool
    line: int


@dataclass(frozen=True, slots=True)
class HAProxyBackend:
    """One backend's hashing settings and servers as read from a configuration file.

    ``layout(down=...)`` is the placement of the servers HAProxy routes to; ``with_servers``
    returns the same backend with another server list (a change to plan).
    """

    name: str
    path: str
    servers: tuple[ConfiguredServer, ...]
    balance: str
    hash_function: str
    avalanche: bool
    allbackups: bool = False
    key_part: Callable[[bytes], bytes] | None = field(default=None, compare=False)

    def ids(self) -> dict[str, int]:
        """Each server's id, explicit or as HAProxy's configuration check assigns it."""
        given = [HAProxyServer(s.name, id=s.id) for s in self.servers]
        return dict(zip((s.name for s in self.servers), assign_ids(given), strict=True))

    def usable(self, down: Iterable[str] = ()) -> list[ConfiguredServer]:
        """Return the servers HAProxy hashes over: active ones, else backups (all or first)."""
        gone = set(down)
        up = [s for s in self.servers if not s.disabled and s.weight >= 1 and s.name not in gone]
        active = [s for s in up if not s.backup]
        if active:
            return active
        backups = [s for s in up if s.backup]
        return backups if self.allbackups else backups[:1]

    def layout(self, *, down: Iterable[str] = ()) -> HAProxyRing:
        """Return the consistent-hash layout over the servers HAProxy would route to.

        `down` names servers that are DOWN or in maintenance at runtime: their points leave
        the tree, as ``chash_set_server_status_down`` removes them.

        :raises ConfigError: when no server is usable
        """
        ids = self.ids()
        usable = self.usable(down)
        if not usable:
            raise ConfigError(f"{self.path}: backend {self.name!r} has no usable server")
        servers = tuple(
            HAProxyServer(s.name, id=ids[s.name], weight=s.weight, address=s.address)
            for s in usable
        )
        return HAProxyRing(
            servers,
            hash_function=self.hash_function,
            avalanche=self.avalanche,
            key_part=self.key_part,
        )

    def with_servers(self, servers: Sequence[ConfiguredServer]) -> HAProxyBackend:
        """Return this backend with another server list."""
        return replace(self, servers=tuple(servers))

    def with_runtime(self, state: Sequence[ServerState]) -> HAProxyBackend:
        """Return this backend with the servers a running HAProxy reports (ids as it uses them).

        A server the runtime reports as unusable (DOWN, maintenance, drain) is kept, disabled;
        a server the file declares backup stays backup.

        :raises ConfigError: for a server added at runtime without an id (not in the file, no
            forced id): HAProxy 2.6 places its points as for id 0 while it reports another id
        """
        declared = {server.name for server in self.servers}
        for s in state:
            if declared and s.name not in declared and s.forced_id is False:
                raise ConfigError(
                    f"server {s.name!r} was added at runtime without an id: HAProxy 2.6 places "
                    f"its points as for id 0 while it reports id {s.id}, which ringkit does not "
                    "predict; delete it and add it again with 'id N'"
                )
        backups = {server.name for server in self.servers if server.backup}
        servers = [
            ConfiguredServer(s.name, s.host, s.id, s.weight, not s.usable, s.name in backups, 0)
            for s in state
        ]
        return replace(self, servers=tuple(servers))


def runtime_backend(
    name: str, state: Sequence[ServerState], hash_type: Sequence[str]
) -> HAProxyBackend:
    """Return a backend from the runtime state alone, hashed by `hash_type` (its words).

    The key is hashed as given (as ``balance hdr()`` and ``balance hash`` do).
    """
    function, avalanche = parse_hash_type(hash_type)
    backend = HAProxyBackend(name, "<runtime>", (), "hash", function, avalanche)
    return backend.with_runtime(state)


def parse_hash_type(words: Sequence[str]) -> tuple[str, bool]:
    """Return (function, avalanche) of ``hash-type consistent [function] [avalanche]``.

    >>> parse_hash_type(["consistent"]), parse_hash_type("consistent crc32".split())
    (('sdbm', True), ('crc32', False))

    :raises ConfigError: for another hash type, an unknown function or modifier
    """
    if list(words[:1]) != ["consistent"]:
        raise ConfigError(f"hash-type must be 'consistent [function] [avalanche]', got {words!r}")
    if len(words) == 1:
        return "sdbm", True  # consistent with no function: sdbm and the avalanche modifier
    function = words[1]
    if function not in HAPROXY_HASHES:
        known = ", ".join(HAPROXY_HASHES)
        raise ConfigError(f"unknown hash function {function!r}; known: {known}")
    if list(words[2:]) not in ([], ["avalanche"]):
        raise ConfigError(f"the only hash modifier is 'avalanche', got {' '.join(words[2:])!r}")
    return function, len(words) > 2


def first_value(data: bytes) -> bytes:
    """Return the part of a header value ``balance hdr()`` hashes: its first value, trimmed."""
    # http_find_header(..., full=0) reads a header as comma-separated values: the first one,
    # without the spaces around it.
    return data.split(b",", 1)[0].strip(b" \t")


def domain_only(data: bytes) -> bytes:
    """Return the part ``hdr(Host) use_domain_only`` hashes: the label before the TLD."""
    # use_domain_only: the label before the top-level domain ("www.example.com" -> "example").
    value = first_value(data)
    labels = value.split(b".")
    return labels[-2] if len(labels) >= 2 else value


def uri_part(length: int, depth: int, whole: bool, path_only: bool) -> Callable[[bytes], bytes]:
    """Return the cut ``balance uri`` makes (``get_server_uh``): len, depth, whole, path-only."""

    def part(data: bytes) -> bytes:
        if path_only:
            found = re.match(rb"[A-Za-z][A-Za-z0-9+.-]*://[^/]*", data)
            if found:
                data = data[found.end() :]
        if length:
            data = data[:length]
        end, slashes = 0, 0
        for end, c in enumerate(data):
            if c == 0x2F:  # "/"
                slashes += 1
                if depth and slashes == depth + 1:
                    return data[:end]
            elif c == 0x3F and not whole:  # "?"
                return data[:end]
        return data

    return part
