"""JumpHash and jump_hash: the paper's vectors, the C extension as an oracle, movement."""

from __future__ import annotations

import importlib
import os
import random
from collections import Counter
from types import ModuleType

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ringkit import (
    ConfigError,
    EmptyRingError,
    JumpHash,
    UnknownNodeError,
    UnsupportedError,
    jump_hash,
)
from ringkit.errors import DuplicateNodeError
from ringkit.hashing import encode_key, xxh3_64
from ringkit.strategies.jump import jump_hash_many


def _require(module: str) -> ModuleType:
    """Import an oracle package: skip locally when missing, fail under CI=true."""
    try:
        return importlib.import_module(module)
    except ImportError:
        if os.environ.get("CI"):
            raise
        pytest.skip(f"{module} is not installed (pip install -e '.[dev]')")


@pytest.mark.parametrize(
    ("key", "buckets", "bucket"),
    [(42, 57, 43), (0xDEAD10CC, 666, 361), (256, 1024, 520), (1, 1, 0)],
)
def test_published_vectors(key: int, buckets: int, bucket: int) -> None:
    assert jump_hash(key, buckets) == bucket
    assert jump_hash_many([key], buckets).tolist() == [bucket]


def test_agrees_with_jump_consistent_hash_c_extension() -> None:
    jump = _require("jump")
    rng = random.Random(2014)
    keys = [rng.getrandbits(64) for _ in range(10_000)] + [0, 2**64 - 1]
    for buckets in (1, 2, 3, 10, 57, 1000, 65_536, 2**31 - 1):
        expected = [jump.hash(key, buckets) for key in keys]
        assert [jump_hash(key, buckets) for key in keys] == expected
        assert jump_hash_many(keys, buckets).tolist() == expected


@given(st.integers(0, 2**64 - 1), st.integers(1, 5000))
def test_growing_by_one_bucket_moves_keys_only_to_it(key: int, buckets: int) -> None:
    before, after = jump_hash(key, buckets), jump_hash(key, buckets + 1)
    assert after in (before, buckets)


@pytest.mark.parametrize(
    ("key", "buckets", "error", "match"),
    [
        (-1, 10, ConfigError, r"key must be in \[0, 2\*\*64\), got -1"),
        (2**64, 10, ConfigError, r"got 18446744073709551616"),
        (1, 0, ConfigError, r"buckets must be in \[1, 2\*\*31 - 1\], got 0"),
        (1, 2**31, ConfigError, r"got 2147483648"),
        (1.5, 10, TypeError, r"key must be int, got float"),
        (1, 2.0, TypeError, r"buckets must be int, got float"),
    ],
)
def test_bad_arguments_are_refused(key: object, buckets: object, error: type, match: str) -> None:
    with pytest.raises(error, match=match):
        jump_hash(key, buckets)  # type: ignore[arg-type]


def test_named_nodes_map_to_buckets_in_order() -> None:
    placement = JumpHash(["A", "B", "C", "D"])
    for key in ("k1", "booking:42", b"\x00", 7):
        assert placement.node_for(key) == "ABCD"[jump_hash(xxh3_64(encode_key(key)), 4)]


def test_balance_within_the_binomial_bound() -> None:
    placement = JumpHash([f"node-{i}" for i in range(10)])
    keys = [f"key-{i}" for i in range(100_000)]
    counts = Counter(placement.node_for_many(keys))
    # Each count is Binomial(100000, 0.1): sigma = sqrt(100000 * 0.1 * 0.9) ≈ 95; allow 6 sigma.
    assert all(abs(count - 10_000) < 6 * 95 for count in counts.values())
    assert placement.shares() == dict.fromkeys(placement, 0.1)


def test_adding_a_node_moves_keys_only_to_it() -> None:
    small = JumpHash([f"node-{i}" for i in range(9)])
    big = small.add("node-9")
    keys = [f"key-{i}" for i in range(50_000)]
    before, after = small.node_for_many(keys), big.node_for_many(keys)
    moved = [new for old, new in zip(before, after, strict=True) if old != new]
    assert set(moved) == {"node-9"}
    # Moved keys ~ Binomial(50000, 1/10): sigma ≈ 67; allow 6 sigma.
    assert abs(len(moved) - 5000) < 6 * 67
    assert big.remove("node-9") == small


def test_batch_and_replicas_agree_with_node_for() -> None:
    placement = JumpHash([f"n{i}" for i in range(7)])
    keys = [f"key-{i}" for i in range(2000)] + [b"raw", 12345]
    owners = placement.node_for_many(keys)
    assert owners == [placement.node_for(key) for key in keys]
    for key, owner in zip(keys, owners, strict=True):
        replicas = placement.nodes_for(key, 3)
        assert replicas[0] == owner and len(set(replicas)) == 3
    assert sorted(placement.nodes_for("k", 50)) == sorted(placement)


@given(st.lists(st.text(min_size=1, max_size=8), min_size=1, max_size=20, unique=True), st.text())
def test_replicas_are_distinct_and_complete(names: list[str], key: str) -> None:
    placement = JumpHash(names)
    everyone = placement.nodes_for(key, len(names) + 3)
    assert sorted(everyone) == sorted(names)
    assert everyone[0] == placement.node_for(key)


def test_only_the_last_node_can_be_removed() -> None:
    placement = JumpHash(["A", "B", "C"])
    with pytest.raises(UnsupportedError, match=r"only remove the last bucket \('C'\), got 'A'"):
        placement.remove("A")
    with pytest.raises(UnsupportedError, match="use Rendezvous for arbitrary removal"):
        placement.discard("B")
    assert list(placement.remove("C")) == ["A", "B"]
    with pytest.raises(UnknownNodeError, match=r"node 'Z' is not in the placement"):
        placement.remove("Z")
    assert placement.discard("Z") is placement


def test_membership_errors_and_value_semantics() -> None:
    placement = JumpHash(["A", "B"])
    with pytest.raises(DuplicateNodeError, match="node 'A' is already in the placement"):
        placement.add("A")
    with pytest.raises(EmptyRingError, match=r"node_for\(\) on an empty placement"):
        JumpHash().node_for("k")
    with pytest.raises(ConfigError, match="n must be >= 1, got 0"):
        placement.nodes_for("k", 0)
    with pytest.raises(TypeError, match="key must be str, bytes or int, got float"):
        placement.node_for(1.5)  # type: ignore[arg-type]
    assert placement == JumpHash(["A", "B"]) and placement != JumpHash(["B", "A"])
    assert hash(placement) == hash(JumpHash(["A", "B"]))
    assert len(placement) == 2 and "A" in placement and list(placement) == ["A", "B"]
    assert repr(placement) == "JumpHash(['A', 'B'], hasher='xxh3_64')"
    assert [node.name for node in placement.add("C").nodes] == ["A", "B", "C"]
