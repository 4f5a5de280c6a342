"""ringkit.compat.uhashring against uhashring's default ring itself.

Regression: a uhashring user could not keep their placement; uhashring's default ring agreed with
``compat.ketama(variant="libketama")`` on 6,821 of 20,000 keys, since only its ``hash_fn="ketama"``
mode was reproduced.
"""

from __future__ import annotations

import random

import pytest

from ringkit.compat import uhashring
from ringkit.errors import ConfigError, DuplicateNodeError, EmptyRingError
from ringkit.nodes import Node
from tests.compat._deps import require

KEYS = 10_000


def _keys(seed: str) -> list[str]:
    rng = random.Random(seed)
    return [f"user:{i}:{rng.getrandbits(40):x}" for i in range(KEYS)]


def _agree(ours: object, theirs: object, keys: list[str]) -> None:
    mismatched = [key for key in keys if ours.node_for(key) != theirs.get_node(key)]  # type: ignore[attr-defined]
    assert mismatched == [], f"{len(mismatched)} of {len(keys)} keys differ"


@pytest.mark.parametrize(
    "weights",
    [
        {"cache-1": 1, "cache-2": 1, "cache-3": 1},
        {"cache-1": 1, "cache-2": 3, "10.0.0.7:11211": 2},
    ],
    ids=["equal", "unequal"],
)
def test_uhashring_default_ring_placement_kept_through_add_and_remove(
    weights: dict[str, int],
) -> None:
    uh = require("uhashring", "pip install uhashring")
    keys = _keys(str(weights))
    theirs = uh.HashRing(dict(weights))
    ours = uhashring(weights)
    ours._check()
    _agree(ours, theirs, keys)
    theirs.add_node("cache-9", {"weight": 2})
    ours = ours.add(Node("cache-9", weight=2))
    ours._check()
    _agree(ours, theirs, keys)
    theirs.remove_node("cache-2")
    ours = ours.remove("cache-2")
    ours._check()
    _agree(ours, theirs, keys)
    assert [ours.nodes_for(k, 2) for k in keys[:500]] == [
        [node["nodename"] for node in theirs.range(k, 2)] for k in keys[:500]
    ]


def test_uhashring_key_equal_to_a_point_goes_to_the_next_point() -> None:
    uh = require("uhashring", "pip install uhashring")
    names = [f"cache-{i}" for i in range(1, 6)]
    theirs, ours = uh.HashRing(names, vnodes=7), uhashring(names, vnodes=7)
    labels = [f"{name}-{i}" for name in names for i in range(7)]  # keys hashing onto points
    assert [ours.node_for(k) for k in labels] == [theirs.get_node(k) for k in labels]


def test_uhashring_int_and_bytes_keys_hash_through_str() -> None:
    uh = require("uhashring", "pip install uhashring")
    theirs, ours = uh.HashRing(["a", "b", "c"]), uhashring(["a", "b", "c"])
    keys: list[int | bytes] = [*range(300), *(f"k{i}".encode() for i in range(300))]
    assert [ours.node_for(k) for k in keys] == [theirs.get_node(k) for k in keys]


def test_uhashring_shares_sum_to_one_and_track_weights() -> None:
    shares = uhashring({"a": 1, "b": 3}).shares()
    assert sum(shares.values()) == pytest.approx(1.0)
    assert shares["b"] > shares["a"]


def test_uhashring_errors_name_the_value() -> None:
    with pytest.raises(
        ConfigError, match=r"weight of node 'a' must be a whole number >= 1, got 1\.5"
    ):
        uhashring({"a": 1.5})
    with pytest.raises(ConfigError, match="vnodes must be an integer >= 1, got 0"):
        uhashring(["a"], vnodes=0)
    with pytest.raises(ConfigError, match=r"uhashring needs at least one node, got \[\]"):
        uhashring([])
    with pytest.raises(DuplicateNodeError, match="'a'"):
        uhashring(["a", "a"])
    with pytest.raises(EmptyRingError):
        uhashring(["a"]).remove("a").node_for("k")
