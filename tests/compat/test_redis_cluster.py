"""ringkit.compat.redis_slot / redis_cluster: spec vectors, redis-py, and a real redis-server."""

from __future__ import annotations

import random
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ringkit import ConfigError, EmptyRingError
from ringkit.compat import redis_cluster, redis_slot
from ringkit.compat.redis_cluster import crc16_xmodem
from tests.compat._deps import require
from tests.servers import free_port, require_binary, serve

# Redis Cluster specification and src/crc16.c: "123456789" -> 0x31C3; a key and its hash-tagged
# forms share one slot.
SPEC_VECTORS = [("key", 12539), ("id:{key}", 12539), ("{key}:profile", 12539)]
# Hash-tag rules of the spec: first '{', first '}' after it, empty tag means the whole key.
TAG_RULES = [
    ("foo{}{bar}", "foo{}{bar}"),
    ("foo{{bar}}zap", "{bar"),
    ("foo{bar}{zap}", "bar"),
    ("{user1000}.following", "user1000"),
]


def _redis():  # type: ignore[no-untyped-def]
    return require("redis", "pip install redis")


def test_crc16_check_value() -> None:
    assert crc16_xmodem(b"123456789") == 0x31C3


@pytest.mark.parametrize(("key", "slot"), SPEC_VECTORS)
def test_spec_vectors(key: str, slot: int) -> None:
    assert redis_slot(key) == slot


@pytest.mark.parametrize(("key", "hashed"), TAG_RULES)
def test_hash_tag_rules(key: str, hashed: str) -> None:
    assert redis_slot(key) == crc16_xmodem(hashed.encode()) % 16384


def test_agrees_with_redis_py_on_10000_keys() -> None:
    crc = require("redis.crc", "pip install redis")
    rng = random.Random(4)
    keys = [bytes(rng.getrandbits(8) for _ in range(rng.randrange(0, 16))) for _ in range(10_000)]
    assert [redis_slot(key) for key in keys] == [crc.key_slot(key) for key in keys]


@contextmanager
def _cluster_mode_redis() -> Iterator[int]:
    binary = require_binary("redis-server", "redis-server")
    with tempfile.TemporaryDirectory() as directory:

        def command(port: int) -> list[str]:
            # The cluster bus defaults to port + 10000, which may be taken or above 65535.
            return [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                    "--appendonly", "no", "--cluster-enabled", "yes", "--dir", directory,
                    "--cluster-config-file", "nodes.conf",
                    "--cluster-port", str(free_port())]  # fmt: skip

        with serve(command, None) as server:
            yield server.port


def test_agrees_with_real_redis_cluster_keyslot_on_10000_keys() -> None:
    rng = random.Random(5)
    keys = [
        f"user:{{{rng.randrange(10**6)}}}:{i}" if i % 3 == 0 else f"key:{i}:{rng.random()}"
        for i in range(9_900)
    ]
    keys += [f"ключ:{i}:{{é}}" for i in range(100)]
    with _cluster_mode_redis() as port:
        pipe = _redis().Redis(host="127.0.0.1", port=port).pipeline(transaction=False)
        for key in keys:
            pipe.execute_command("CLUSTER", "KEYSLOT", key)
        real = pipe.execute()
    assert [redis_slot(key) for key in keys] == real


@given(st.binary(max_size=30), st.binary(min_size=1, max_size=10), st.binary(max_size=10))
def test_keys_sharing_a_tag_share_a_slot(prefix: bytes, tag: bytes, suffix: bytes) -> None:
    if b"{" in prefix or b"}" in tag or b"{" in tag:
        return
    assert redis_slot(prefix + b"{" + tag + b"}" + suffix) == redis_slot(tag)


def test_slot_table() -> None:
    cluster = redis_cluster({"a": ["0-5460"], "b": [(5461, 10922)], "c": ["10923-16383"]})
    assert cluster.node_for("key") == "c" and cluster.node_for_slot(5461) == "b"
    assert cluster.slot_ranges() == {"a": [(0, 5460)], "b": [(5461, 10922)], "c": [(10923, 16383)]}
    assert cluster.node_for_many(["key", "id:{key}"]) == ["c", "c"]
    assert sum(cluster.shares().values()) == 1.0 and len(cluster) == 3 and "a" in cluster
    split = redis_cluster({"a": ["0-100", 16383], "b": ["101-16382"]})
    assert split.slot_ranges()["a"] == [(0, 100), (16383, 16383)]


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ({"a": ["0-16383"], "b": ["5"]}, "slot 5 is served by both 'a' and 'b'"),
        ({"a": ["0-16000"]}, "383 slots, first 16001"),
        ({"a": ["0-x"]}, r"unparsable slot range '0-x' of node 'a'"),
        ({"a": [(5, 2)]}, r"slot range \(5, 2\) of node 'a' must satisfy"),
        ({"a": ["0-16384"]}, r"0 <= first <= last <= 16383"),
    ],
)
def test_bad_tables(table: dict[str, list[object]], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        redis_cluster(table)  # type: ignore[arg-type]


def test_bad_lookups() -> None:
    with pytest.raises(EmptyRingError):
        redis_cluster({})
    with pytest.raises(ConfigError, match=r"slot must be an int in \[0, 16383\], got 16384"):
        redis_cluster({"a": ["0-16383"]}).node_for_slot(16384)
