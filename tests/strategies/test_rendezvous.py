"""Rendezvous: pymemcache's vectors and implementation as oracles, weights, minimal movement."""

from __future__ import annotations

import importlib
import os
import random
from collections import Counter
from types import ModuleType

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ringkit import ConfigError, EmptyRingError, Node, Rendezvous, UnknownNodeError
from ringkit.errors import DuplicateNodeError

names_strategy = st.lists(
    st.text(st.characters(codec="utf-8"), min_size=1, max_size=6),
    min_size=1,
    max_size=8,
    unique=True,
)
keys_strategy = st.lists(
    st.one_of(st.text(max_size=12), st.binary(max_size=8), st.integers()), min_size=1, max_size=40
)


def _require(module: str) -> ModuleType:
    """Import an oracle package: skip locally when missing, fail under CI=true."""
    try:
        return importlib.import_module(module)
    except ImportError:
        if os.environ.get("CI"):
            raise
        pytest.skip(f"{module} is not installed (pip install -e '.[dev]')")


def test_pymemcache_published_vectors() -> None:
    placement = Rendezvous(["0", "1", "2"], variant="pymemcache")
    assert [placement.node_for(key) for key in ("ok", "mykey", "wat", "lol")] == [
        "0",
        "1",
        "2",
        "2",
    ]
    assert placement.add("3").node_for("lol") == "3"


def test_agrees_with_pymemcache_rendezvous_hash() -> None:
    rendezvous = _require("pymemcache.client.rendezvous")
    rng = random.Random(1998)
    alphabet = "abcxyz0129:_-/ é€日😀"
    keys = [f"key:{i}" for i in range(7000)] + [
        "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 24))) for _ in range(3000)
    ]
    names = [f"10.0.0.{i}:11211" for i in range(9)]
    ours = Rendezvous(names, variant="pymemcache")
    theirs = rendezvous.RendezvousHash(list(names))
    assert [ours.node_for(key) for key in keys] == [theirs.get_node(key) for key in keys]
    assert ours.node_for_many(keys[:500]) == [theirs.get_node(key) for key in keys[:500]]
    ours, _ = ours.remove(names[3]).add("cache-new"), theirs.remove_node(names[3])
    theirs.add_node("cache-new")
    sample = keys[::5]
    assert [ours.node_for(key) for key in sample] == [theirs.get_node(key) for key in sample]
    assert [ours.node_for(i) for i in range(300)] == [theirs.get_node(i) for i in range(300)]


def test_pymemcache_ties_go_to_the_larger_name() -> None:
    # A node named twice over cannot exist, but equal scores can: force them with a collision.
    placement = Rendezvous(["a", "b"], variant="pymemcache")
    scores = placement.scores("k")
    best = max(scores.values())
    winners = sorted(name for name, score in scores.items() if score == best)
    assert placement.node_for("k") == winners[-1]
    assert placement.nodes_for("k", 2) == sorted(scores, key=lambda n: (scores[n], n))[::-1]


@pytest.mark.parametrize("weights", [None, {"a": 1.0, "b": 2.0, "c": 3.0, "d": 0.5}])
def test_owner_and_replicas_follow_the_scores(weights: dict[str, float] | None) -> None:
    placement = Rendezvous(weights or ["a", "b", "c", "d"])
    keys = [f"key-{i}" for i in range(300)] + [b"\xff", -7]
    owners = placement.node_for_many(keys)
    for key, owner in zip(keys, owners, strict=True):
        scores = placement.scores(key)
        ranked = sorted(scores, key=lambda name: (scores[name], name), reverse=True)
        assert placement.nodes_for(key, 4) == ranked
        assert placement.node_for(key) == owner == ranked[0]


def test_weights_set_the_share_within_the_binomial_bound() -> None:
    weights = {"a": 1.0, "b": 2.0, "c": 3.0, "d": 4.0}
    placement = Rendezvous(weights)
    keys = [f"key-{i}" for i in range(100_000)]
    counts = Counter(placement.node_for_many(keys))
    for name, weight in weights.items():
        p = weight / 10
        sigma = (100_000 * p * (1 - p)) ** 0.5
        assert abs(counts[name] - 100_000 * p) < 6 * sigma, name
    assert placement.shares() == {name: w / 10 for name, w in weights.items()}


@given(names_strategy, keys_strategy, st.booleans())
def test_adding_a_node_moves_only_the_keys_it_wins(
    names: list[str], keys: list[str | bytes | int], weighted: bool
) -> None:
    nodes = [Node(name, weight=1.0 + i % 3 if weighted else 1.0) for i, name in enumerate(names)]
    small = Rendezvous(nodes[:-1]) if len(nodes) > 1 else None
    big = Rendezvous(nodes)
    if small is None:
        return
    for key in keys:
        before, after = small.node_for(key), big.node_for(key)
        assert after in (before, names[-1])


@given(names_strategy, keys_strategy, st.booleans(), st.data())
def test_removing_a_node_moves_only_its_keys_to_their_second_choice(
    names: list[str], keys: list[str | bytes | int], pymemcache: bool, data: st.DataObject
) -> None:
    variant = "pymemcache" if pymemcache else "weighted"
    placement = Rendezvous(names, variant=variant)
    victim = data.draw(st.sampled_from(names))
    smaller = placement.remove(victim)
    for key in keys:
        ranked = placement.nodes_for(key, 2)
        if ranked[0] != victim:
            assert smaller.node_for(key) == ranked[0]
        elif len(ranked) == 2:
            assert smaller.node_for(key) == ranked[1]


def test_order_of_nodes_does_not_matter() -> None:
    names = [f"node-{i}" for i in range(12)]
    shuffled = random.Random(4).sample(names, len(names))
    keys = [f"k{i}" for i in range(2000)]
    assert Rendezvous(names).node_for_many(keys) == Rendezvous(shuffled).node_for_many(keys)
    assert Rendezvous(names) == Rendezvous(shuffled)


def test_bad_options_and_inputs_are_refused() -> None:
    with pytest.raises(ConfigError, match="unknown rendezvous variant 'ketama'; known: weighted"):
        Rendezvous(["a"], variant="ketama")
    with pytest.raises(ConfigError, match="always hashes with murmur3_32, got hasher='md5'"):
        Rendezvous(["a"], variant="pymemcache", hasher="md5")
    with pytest.raises(ConfigError, match=r"unweighted, got weight 2\.0 for node 'b'"):
        Rendezvous({"a": 1.0, "b": 2.0}, variant="pymemcache")
    placement = Rendezvous(["a", "b"])
    with pytest.raises(UnknownNodeError, match=r"node 'z' is not in the placement \(2 nodes"):
        placement.remove("z")
    with pytest.raises(DuplicateNodeError, match="node 'a' is already in the placement"):
        placement.add("a")
    with pytest.raises(EmptyRingError, match=r"nodes_for\(\) on an empty placement"):
        Rendezvous().nodes_for("k", 1)
    with pytest.raises(ConfigError, match="n must be >= 1, got -1"):
        placement.nodes_for("k", -1)
    with pytest.raises(TypeError, match="key must be str, bytes or int, got NoneType"):
        placement.node_for(None)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="key must be str, bytes or int, got float"):
        Rendezvous(["a"], variant="pymemcache").node_for(1.0)  # type: ignore[arg-type]


def test_value_semantics() -> None:
    placement = Rendezvous(["b", "a"], variant="pymemcache")
    assert list(placement) == ["a", "b"] and len(placement) == 2 and "a" in placement
    assert placement.discard("zz") is placement
    assert placement.discard("a") == Rendezvous(["b"], variant="pymemcache")
    assert placement != Rendezvous(["a", "b"])
    assert hash(placement) == hash(Rendezvous(["a", "b"], variant="pymemcache"))
    assert repr(placement) == "Rendezvous(['a', 'b'], hasher='murmur3_32', variant='pymemcache')"
    assert placement.variant == "pymemcache" and placement.shares() == {"a": 0.5, "b": 0.5}
