"""MultiProbe: the paper's peak-to-mean at k = 21, the share model, minimal movement."""

from __future__ import annotations

import random
import statistics
from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ringkit import ConfigError, EmptyRingError, HashRing, MultiProbe, UnknownNodeError
from ringkit.errors import DuplicateNodeError
from ringkit.hashing import xxh3_64

names_strategy = st.lists(st.text(min_size=1, max_size=6), min_size=1, max_size=10, unique=True)


def _seeded_names(count: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return [f"cache-{rng.getrandbits(48):012x}" for _ in range(count)]


def _peak_to_mean(placement: MultiProbe) -> float:
    return max(placement.shares().values()) * len(placement)


def test_peak_to_mean_at_21_probes_and_100_nodes() -> None:
    # Appleton & O'Reilly: k = 1 + 1/ε probes give a peak-to-mean of 1 + ε; k = 21 gives 1.05.
    placement = MultiProbe([f"node-{i}" for i in range(100)], probes=21)
    assert _peak_to_mean(placement) <= 1.05
    # One probe is a ring with one token per node: far worse (max gap ~ ln N / N).
    assert _peak_to_mean(MultiProbe(placement.nodes, probes=1)) > 2


def test_peak_to_mean_over_many_node_sets() -> None:
    # 1.05 is the typical value, not a bound for every node set: over 300 seeded sets of 100
    # nodes the exact model gives median 1.0506, mean 1.0524, 90th percentile 1.075 (see
    # docs/strategies.md). Check the median of 25 sets against 1 + 1/(k - 1), with the sampling
    # spread of a 25-set median (about ±0.006) as the margin.
    ratios = [_peak_to_mean(MultiProbe(_seeded_names(100, seed), probes=21)) for seed in range(25)]
    assert statistics.median(ratios) <= 1 + 1 / 20 + 0.01
    assert max(ratios) < 1.15


def test_measured_counts_match_the_share_model() -> None:
    placement = MultiProbe(_seeded_names(100, 7), probes=21)
    shares = placement.shares()
    keys = [f"key-{i}" for i in range(200_000)]
    counts = Counter(placement.node_for_many(keys))
    for name, share in shares.items():
        expected = 200_000 * share
        # Binomial noise: sigma = sqrt(K·p·(1-p)); 5 sigma over 100 nodes fails ~1e-4 of seeds.
        assert abs(counts[name] - expected) < 5 * (expected * (1 - share)) ** 0.5, name


def _one_token_ring(names: list[str]) -> HashRing:
    """The ring with MultiProbe's tokens: one per node, at the hash of its name."""
    return HashRing.from_tokens({name: [xxh3_64(name.encode())] for name in names})


def test_one_probe_shares_are_the_ring_arcs() -> None:
    names = _seeded_names(8, 3)
    shares = MultiProbe(names, probes=1).shares()
    assert shares == pytest.approx(_one_token_ring(names).shares(), abs=1e-12)


def test_two_nodes_closed_form() -> None:
    # Arcs a and 1 - a: with k probes the shorter arc wins (1 - (1 - 2a)**k) / 2.
    placement = MultiProbe(["a", "b"], probes=5)
    arcs = _one_token_ring(["a", "b"]).shares()
    short = min(arcs, key=arcs.__getitem__)
    a = arcs[short]
    assert placement.shares()[short] == pytest.approx((1 - (1 - 2 * a) ** 5) / 2, rel=1e-12)
    assert sum(placement.shares().values()) == pytest.approx(1.0, abs=1e-12)


@given(names_strategy, st.lists(st.text(max_size=10), min_size=1, max_size=30), st.data())
def test_membership_changes_move_the_minimum(
    names: list[str], keys: list[str], data: st.DataObject
) -> None:
    placement = MultiProbe(names, probes=5)
    newcomer = data.draw(st.text(min_size=1, max_size=6).filter(lambda name: name not in names))
    grown = placement.add(newcomer)
    victim = data.draw(st.sampled_from(names))
    shrunk = placement.remove(victim)
    for key in keys:
        owner = placement.node_for(key)
        assert grown.node_for(key) in (owner, newcomer)
        if owner != victim:
            assert shrunk.node_for(key) == owner
        elif len(names) > 1:
            assert shrunk.node_for(key) == placement.nodes_for(key, 2)[1]


def test_lookups_agree() -> None:
    placement = MultiProbe(_seeded_names(30, 11))
    keys = [f"k{i}" for i in range(1500)] + [b"\x01", 5]
    owners = placement.node_for_many(keys)
    assert owners == [placement.node_for(key) for key in keys]
    for key, owner in zip(keys[:200], owners[:200], strict=True):
        replicas = placement.nodes_for(key, 4)
        assert replicas[0] == owner and len(set(replicas)) == 4
    assert sorted(placement.nodes_for("k", 99)) == sorted(placement)


def test_bad_inputs_and_value_semantics() -> None:
    with pytest.raises(ConfigError, match="probes must be >= 1, got 0"):
        MultiProbe(["a"], probes=0)
    with pytest.raises(TypeError, match="probes must be int, got float"):
        MultiProbe(["a"], probes=2.0)  # type: ignore[arg-type]
    placement = MultiProbe(["b", "a"], probes=3)
    with pytest.raises(DuplicateNodeError, match="node 'a' is already in the placement"):
        placement.add("a")
    with pytest.raises(UnknownNodeError, match="node 'z' is not in the placement"):
        placement.remove("z")
    with pytest.raises(EmptyRingError, match=r"node_for\(\) on an empty placement"):
        MultiProbe().node_for("k")
    with pytest.raises(ConfigError, match="n must be >= 1, got 0"):
        placement.nodes_for("k", 0)
    assert list(placement) == ["a", "b"] and "a" in placement and len(placement) == 2
    assert placement.discard("zz") is placement and placement.probes == 3
    assert placement.add("c").remove("c") == placement
    assert hash(placement) == hash(MultiProbe(["a", "b"], probes=3))
    assert placement != MultiProbe(["a", "b"], probes=4)
    assert repr(placement) == "MultiProbe(['a', 'b'], probes=3, hasher='xxh3_64')"
    assert MultiProbe(["solo"]).shares() == {"solo": 1.0}
