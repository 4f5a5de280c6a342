"""libmemcached itself, through ctypes: where does the real library put a key?

``memcached_generate_hash`` returns the index of the server that libmemcached picks for a key; it
is what libmemcached's own ketama tests call. No server is contacted. The library is Debian's
``libmemcached11`` (libmemcached-awesome), from ``libmemcached-dev`` (.ci/apt-packages.txt).
"""

from __future__ import annotations

import ctypes
from collections.abc import Iterable, Iterator
from contextlib import contextmanager

from tests.servers import require_library

# Enum values from <libmemcached-1.0/types/behavior.h> and server_distribution.h.
BEHAVIOR_HASH = 2
BEHAVIOR_DISTRIBUTION = 9
BEHAVIOR_KETAMA_WEIGHTED = 16
DISTRIBUTION_CONSISTENT_KETAMA = 2
DISTRIBUTION_CONSISTENT_KETAMA_SPY = 4
# memcached_hash_t, from <libhashkit-1.0/hash.h> (pylibmc.hashers has the same numbers).
HASHES = {
    "default": 0,
    "md5": 1,
    "crc32": 2,
    "fnv1_64": 3,
    "fnv1a_64": 4,
    "fnv1_32": 5,
    "fnv1a_32": 6,
    "hsieh": 7,
    "murmur": 8,
    "jenkins": 9,
}


def load() -> ctypes.CDLL:
    """Return libmemcached; skip locally, fail under CI, when it is missing."""
    lib = ctypes.CDLL(require_library("memcached", "libmemcached-dev"))
    lib.memcached_create.restype = ctypes.c_void_p
    lib.memcached_create.argtypes = [ctypes.c_void_p]
    lib.memcached_free.argtypes = [ctypes.c_void_p]
    lib.memcached_servers_parse.restype = ctypes.c_void_p
    lib.memcached_servers_parse.argtypes = [ctypes.c_char_p]
    lib.memcached_server_push.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
    lib.memcached_server_list_free.argtypes = [ctypes.c_void_p]
    lib.memcached_behavior_set.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_uint64]
    lib.memcached_behavior_set.restype = ctypes.c_int
    lib.memcached_generate_hash.restype = ctypes.c_uint32
    lib.memcached_generate_hash.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t]
    lib.memcached_server_instance_by_position.restype = ctypes.c_void_p
    lib.memcached_server_instance_by_position.argtypes = [ctypes.c_void_p, ctypes.c_uint32]
    lib.memcached_server_name.restype = ctypes.c_char_p
    lib.memcached_server_name.argtypes = [ctypes.c_void_p]
    lib.memcached_server_port.restype = ctypes.c_uint16
    lib.memcached_server_port.argtypes = [ctypes.c_void_p]
    return lib


@contextmanager
def client(spec: str, behaviors: list[tuple[int, int]]) -> Iterator[LibmemcachedClient]:
    """Yield a libmemcached handle over the servers of `spec`, `behaviors` set in order."""
    lib = load()
    memc = lib.memcached_create(None)
    try:
        for flag, value in behaviors:
            assert lib.memcached_behavior_set(memc, flag, value) == 0
        servers = lib.memcached_servers_parse(spec.encode())
        assert servers
        try:
            assert lib.memcached_server_push(memc, servers) == 0
        finally:
            lib.memcached_server_list_free(servers)
        yield LibmemcachedClient(lib, memc)
    finally:
        lib.memcached_free(memc)


class LibmemcachedClient:
    """A configured ``memcached_st``: asks libmemcached which server owns each key."""

    def __init__(self, lib: ctypes.CDLL, memc: int) -> None:
        self._lib = lib
        self._memc = memc

    def server_for(self, key: bytes) -> str:
        """Return ``host:port`` of the server libmemcached picks for `key`."""
        index = self._lib.memcached_generate_hash(self._memc, key, len(key))
        instance = self._lib.memcached_server_instance_by_position(self._memc, index)
        host = self._lib.memcached_server_name(instance).decode()
        return f"{host}:{self._lib.memcached_server_port(instance)}"

    def servers_for(self, keys: Iterable[bytes]) -> list[str]:
        """Return the server of each key, in order."""
        return [self.server_for(key) for key in keys]
