"""twemproxy's key hashes against libhashkit (Debian's libmemcached), which they were taken from.

nutcracker itself checks all twelve in tests/compat/test_ketama_clients.py; this checks the nine
that libhashkit also has, on random bytes (>= 0x80 included, read through a signed char in C).
"""

from __future__ import annotations

import ctypes
import random

import pytest

from ringkit.compat.hashkit import TWEMPROXY_HASHES, get_key_hash
from ringkit.errors import ConfigError
from tests.servers import require_library

# hashkit_hash_algorithm_t from <libhashkit-1.0/algorithm.h>; 0 is the default, one_at_a_time.
LIBHASHKIT = {
    "one_at_a_time": 0,
    "md5": 1,
    "crc32": 2,
    "fnv1_64": 3,
    "fnv1a_64": 4,
    "fnv1_32": 5,
    "fnv1a_32": 6,
    "murmur": 8,
    "jenkins": 9,
}


def _libhashkit() -> ctypes.CDLL:
    lib = ctypes.CDLL(require_library("hashkit", "libmemcached-dev"))
    lib.libhashkit_digest.restype = ctypes.c_uint32
    lib.libhashkit_digest.argtypes = [ctypes.c_char_p, ctypes.c_size_t, ctypes.c_int]
    return lib


@pytest.mark.parametrize("name", sorted(LIBHASHKIT))
def test_matches_libhashkit(name: str) -> None:
    lib = _libhashkit()
    rng = random.Random(name)
    keys = [bytes(rng.getrandbits(8) for _ in range(rng.randrange(0, 40))) for _ in range(3_000)]
    ours = TWEMPROXY_HASHES[name]
    assert [ours(key) for key in keys] == [
        lib.libhashkit_digest(key, len(key), LIBHASHKIT[name]) for key in keys
    ]


def test_unknown_key_hash_lists_the_known_ones() -> None:
    with pytest.raises(ConfigError, match="unknown key hash 'crc64'; known: crc16, crc32, crc32a"):
        get_key_hash("crc64")
