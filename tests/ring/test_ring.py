"""HashRing: the classic worked examples exactly, transparent-hash tests, the API and bad input."""

from __future__ import annotations

import json
import math
import pickle
import threading

import pytest

from ringkit import (
    ConfigError,
    DuplicateNodeError,
    EmptyRingError,
    HashRing,
    Node,
    UnknownNodeError,
)
from ringkit.hashing import Hasher, xxh3_64
from ringkit.ring import vnode_count


def transparent(data: bytes) -> int:
    """A hash you can compute by hand (groupcache's test trick): the text's trailing digits.

    Vnode labels ``"name#i"`` hash to the number after the ``#``; keys like ``"75"`` to 75.
    """
    text = data.decode()
    return int(text.rsplit("#", 1)[-1])


# -- the textbook 3-node ring on 0-359 ---------------------------------------------------------


def test_textbook_three_nodes_lookup_and_wrap_around() -> None:
    ring = HashRing.from_tokens({"A": [40], "B": [160], "C": [300]}, space=360)
    assert ring.node_for_point(75) == "B"  # "user:42" -> 75 -> B
    assert ring.node_for_point(310) == "A"  # "user:99" -> 310 wraps past 360/0 to A
    assert ring.node_for_point(359) == "A"
    assert ring.node_for_point(0) == "A"


def test_a_point_equal_to_a_token_belongs_to_that_token() -> None:
    # First token >= point (libketama, Envoy); a sketch with bisect.bisect would say C.
    ring = HashRing.from_tokens({"A": [40], "B": [160], "C": [300]}, space=360)
    assert ring.node_for_point(160) == "B"
    assert ring.node_for_point(161) == "C"


def test_textbook_virtual_nodes_even_out_the_arcs() -> None:
    one_each = HashRing.from_tokens({"A": [10], "B": [40], "C": [300]}, space=360)
    assert one_each.owned_points() == {"A": 70, "B": 30, "C": 260}
    three_each = HashRing.from_tokens(
        {"A": [10, 130, 250], "B": [40, 170, 90], "C": [300, 210, 350]}, space=360
    )
    assert three_each.owned_points() == {"A": 100, "B": 120, "C": 140}
    assert [three_each.node_for_point(t) for t in three_each.tokens.tolist()] == list("ABBABCACC")


def test_textbook_node_add_corrected_k4_moves_from_c_to_e() -> None:
    # The seed's text says E owns (50, 60] and k5 moves; its own rule (first token >= point)
    # gives E the arc (35, 50]: k4 (45) moves C -> E, k5 (55) stays on C. ringkit follows the rule.
    before = HashRing.from_tokens({"A": [10], "B": [35], "C": [60], "D": [85]}, space=100)
    after = before.add("E", tokens=[50])
    keys = {"k1": 5, "k2": 20, "k3": 30, "k4": 45, "k5": 55, "k6": 70, "k7": 80, "k8": 95}
    owners_before = {k: before.node_for_point(p) for k, p in keys.items()}
    owners_after = {k: after.node_for_point(p) for k, p in keys.items()}
    assert owners_before == {
        "k1": "A", "k2": "B", "k3": "B", "k4": "C", "k5": "C", "k6": "D", "k7": "D", "k8": "A",
    }  # fmt: skip
    moved = {
        k: (owners_before[k], owners_after[k]) for k in keys if owners_before[k] != owners_after[k]
    }
    assert moved == {"k4": ("C", "E")}
    assert after.arcs("E")[0].start == 35 and after.arcs("E")[0].end == 50
    assert after.arcs("C")[0].start == 50 and after.arcs("C")[0].end == 60


# -- transparent hash: owners you can check by hand (groupcache's TestHashing) ------------------


def test_transparent_hash_owners_are_the_next_token_clockwise() -> None:
    hasher = Hasher("transparent", transparent, 64)
    # Every node's vnodes sit at 0, 1, 2: all tokens tie, so ties break by name: "a" first.
    ring = HashRing(["b", "a"], vnodes=3, hasher=hasher)
    assert ring.tokens.tolist() == [0, 0, 1, 1, 2, 2]
    assert [ring.node_for(str(p)) for p in (0, 1, 2, 3)] == ["a", "a", "a", "a"]
    ring._check()


def test_insertion_order_does_not_matter() -> None:
    a = HashRing(["x", "y", "z"]).add("w")
    b = HashRing(["w", "z"]).add("y").add("x")
    assert a == b
    assert [a.node_for(f"k{i}") for i in range(300)] == [b.node_for(f"k{i}") for i in range(300)]


def test_hashed_tokens_are_the_hashes_of_the_vnode_labels() -> None:
    ring = HashRing(["cache-a"], vnodes=4)
    assert sorted(ring.tokens.tolist()) == sorted(
        xxh3_64(f"cache-a#{i}".encode()) for i in range(4)
    )


def test_32_bit_hashers_are_widened_into_the_top_bits() -> None:
    ring = HashRing(["A", "B", "C"], vnodes=8, hasher="fnv1a_32_mix")
    assert all(int(t) & 0xFFFFFFFF == 0 for t in ring.tokens)
    assert ring.point_for("booking-0001") == 0xF93F2E70 << 32


# -- weights, zones, preference lists -----------------------------------------------------------


def test_weights_give_absolute_vnode_counts() -> None:
    ring = HashRing({"big": 2.0, "small": 1.0, "tiny": 0.001}, vnodes=160)
    counts = {name: int((ring.token_owners == i).sum()) for i, name in enumerate(ring)}
    assert counts == {"big": 320, "small": 160, "tiny": 1}
    assert vnode_count(160, 0.5) == 80 and vnode_count(3, 0.5) == 2  # half up, not to even


def test_reweight_moves_keys_only_to_or_from_that_node() -> None:
    ring = HashRing(["a", "b", "c", "d"], vnodes=50)
    heavier = ring.reweight("b", 2.0)
    keys = [f"key-{i}" for i in range(3000)]
    for old, new in zip(ring.node_for_many(keys), heavier.node_for_many(keys), strict=True):
        assert old == new or new == "b"
    assert heavier.reweight("b", 1.0) == ring


def test_nodes_for_returns_distinct_nodes_clockwise() -> None:
    # Keys "15", "25", "65" hash (transparently) to those points in the space 0-99.
    hasher = Hasher("transparent", transparent, 64)
    ring = HashRing.from_tokens({"A": [10, 20], "B": [30], "C": [60]}, space=100, hasher=hasher)
    assert ring.nodes_for("15", 3) == ["A", "B", "C"]  # A at 20, B at 30, C at 60
    assert ring.nodes_for("25", 3) == ["B", "C", "A"]
    assert ring.nodes_for("65", 2) == ["A", "B"]  # wraps: A at 10, skips A at 20, B at 30
    assert ring.nodes_for("65", 99) == ["A", "B", "C"]


def test_preference_list_skips_repeated_nodes_and_stops_at_every_node() -> None:
    ring = HashRing(["a", "b", "c"], vnodes=40)
    for i in range(200):
        replicas = ring.nodes_for(f"k{i}", 5)
        assert sorted(replicas) == ["a", "b", "c"]
        assert replicas[0] == ring.node_for(f"k{i}")
        assert list(ring.iter_nodes(f"k{i}")) == replicas


def test_zones_put_replicas_in_different_zones_first() -> None:
    nodes = [
        Node(f"{zone}-{i}", zone=zone) for zone in ("eu-1a", "eu-1b", "eu-1c") for i in range(3)
    ]
    ring = HashRing(nodes, vnodes=20)
    for i in range(300):
        replicas = ring.nodes_for(f"k{i}", 4)
        zones = [name.rsplit("-", 1)[0] for name in replicas]
        assert len(set(zones[:3])) == 3
        assert len(set(replicas)) == 4
        assert list(ring.iter_nodes(f"k{i}"))[:4] == replicas


# -- the API surface ----------------------------------------------------------------------------


def test_ring_is_an_immutable_value() -> None:
    ring = HashRing(["a", "b", "c"])
    bigger = ring.add("d")
    assert list(ring) == ["a", "b", "c"] and list(bigger) == ["a", "b", "c", "d"]
    assert len(ring) == 3 and "a" in ring and "d" not in ring and 5 not in ring
    assert not ring.tokens.flags.writeable and not ring.token_owners.flags.writeable
    assert ring.discard("zz") is ring
    assert ring.discard("a") == ring.remove("a")
    assert repr(ring) == "HashRing(['a', 'b', 'c'], vnodes=160, hasher='xxh3_64', tokens=480)"


def test_shares_are_exact_and_sum_to_one() -> None:
    ring = HashRing(["a", "b", "c", "d"], vnodes=16)
    assert sum(ring.owned_points().values()) == 2**64
    assert math.isclose(sum(ring.shares().values()), 1.0)
    assert ring.fair_shares() == {"a": 0.25, "b": 0.25, "c": 0.25, "d": 0.25}
    assert HashRing(["solo"], vnodes=3).shares() == {"solo": 1.0}
    assert sum(arc.length for arc in ring.arcs("a")) == ring.owned_points()["a"]


def test_json_round_trip_keeps_everything() -> None:
    ring = HashRing(
        [Node("a", weight=2.0, zone="z1", address="10.0.0.1:11211"), Node("b", zone="z2")],
        vnodes=7,
        hasher="murmur3_32",
    ).add("c", tokens=[123, 2**63])
    data = json.loads(json.dumps(ring.to_dict()))
    copy = HashRing.from_dict(data)
    assert (
        copy == ring and copy.nodes == ring.nodes and copy.explicit_tokens() == {"c": (123, 2**63)}
    )
    assert pickle.loads(pickle.dumps(ring)) == ring


def test_a_ring_looked_up_once_still_pickles_and_its_changes_answer_for_themselves() -> None:
    # A ring answers node_for through a closure over lists and memoryviews of its table: a
    # pickled copy must not carry it, and a ring made from this one answers with its own.
    ring = HashRing([f"n{i}" for i in range(8)], vnodes=32)
    keys = [f"k{i}" for i in range(300)]
    before = [ring.node_for(key) for key in keys]
    copy = pickle.loads(pickle.dumps(ring))
    assert [copy.node_for(key) for key in keys] == before == ring.node_for_many(keys)
    grown = ring.add("n8")
    assert [grown.node_for(key) for key in keys] == grown.node_for_many(keys)
    assert {grown.node_for(key) for key in keys} >= {"n8"}
    assert [ring.node_for(key) for key in keys] == before


def test_node_for_many_and_owner_indices_agree_with_node_for() -> None:
    ring = HashRing([f"n{i}" for i in range(20)], vnodes=64)
    keys: list[str | bytes | int] = [f"k{i}" for i in range(500)] + [b"\x00raw", 7, -3]
    assert ring.node_for_many(keys) == [ring.node_for(k) for k in keys]
    points = ring.points_for(keys)
    assert [ring.nodes[i].name for i in ring.owner_indices(points)] == ring.node_for_many(keys)


def test_readers_keep_working_while_another_thread_swaps_rings() -> None:
    current = {"ring": HashRing(["a", "b", "c"], vnodes=32)}
    errors: list[BaseException] = []
    seen: set[str] = set()
    stop = threading.Event()

    def reader() -> None:
        try:
            while not stop.is_set():
                ring = current["ring"]  # one reference read: a consistent ring
                owner = ring.node_for("booking:42")
                assert owner in ring
                seen.add(owner)
        except BaseException as error:  # collected and re-raised in the main thread
            errors.append(error)

    threads = [threading.Thread(target=reader) for _ in range(3)]
    for thread in threads:
        thread.start()
    ring = current["ring"]
    for i in range(200):
        ring = ring.add(f"x{i}") if i % 2 == 0 else ring.remove(f"x{i - 1}")
        current["ring"] = ring
    stop.set()
    for thread in threads:
        thread.join(timeout=10)
    assert not errors and seen


# -- bad input ----------------------------------------------------------------------------------


def test_empty_ring_raises_on_every_lookup() -> None:
    ring = HashRing([])
    assert len(ring) == 0 and ring.shares() == {}
    for call in (
        lambda: ring.node_for("k"),
        lambda: ring.nodes_for("k", 2),
        lambda: ring.node_for_many(["k"]),
        lambda: ring.owner_indices([1]),
        lambda: ring.node_for_point(1),
        lambda: list(ring.iter_nodes("k")),
    ):
        with pytest.raises(EmptyRingError, match=r"on an empty ring; add a node first"):
            call()
    assert ring.add("a").node_for("k") == "a"


@pytest.mark.parametrize(
    ("weight", "shown"),
    [(0, "0"), (-1.0, "-1.0"), (float("nan"), "nan"), (float("inf"), "inf")],
)
def test_bad_weights_are_refused_with_the_value(weight: float, shown: str) -> None:
    with pytest.raises(
        ConfigError, match=f"weight of node 'a' must be finite and > 0, got {shown}"
    ):
        HashRing({"a": weight})
    with pytest.raises(ConfigError, match="must be finite and > 0"):
        HashRing(["a"]).reweight("a", weight)


def test_bad_vnodes_and_names_are_refused() -> None:
    with pytest.raises(ConfigError, match="vnodes must be >= 1, got 0"):
        HashRing(["a"], vnodes=0)
    with pytest.raises(ConfigError, match="vnodes must be >= 1, got -5"):
        HashRing(["a"], vnodes=-5)
    with pytest.raises(ConfigError, match="vnodes must be an int, got float"):
        HashRing(["a"], vnodes=1.5)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="weight of node 'a' must be a number, got bool"):
        HashRing({"a": True})
    with pytest.raises(ConfigError, match="node name must not be empty"):
        HashRing([""])
    with pytest.raises(TypeError, match="node must be str or Node, got int"):
        HashRing([1])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="got a single str 'abc'; wrap it in a list"):
        HashRing("abc")


def test_unknown_hasher_lists_the_known_ones() -> None:
    with pytest.raises(ConfigError, match=r"unknown hasher 'ketama'; known: fnv1a_32, .*xxh3_64"):
        HashRing(["a"], hasher="ketama")


def test_duplicate_and_unknown_nodes() -> None:
    with pytest.raises(DuplicateNodeError, match="node 'a' is given twice"):
        HashRing(["a", "b", "a"])
    ring = HashRing(["a", "b"])
    with pytest.raises(DuplicateNodeError, match="node 'a' is already in the ring"):
        ring.add("a")
    with pytest.raises(
        UnknownNodeError, match=r"^node 'zz' is not in the ring \(2 nodes: 'a', 'b'\)$"
    ):
        ring.remove("zz")
    with pytest.raises(KeyError):  # UnknownNodeError is a KeyError for `except KeyError` code
        ring.reweight("zz", 2.0)
    many = HashRing([f"n{i}" for i in range(9)])
    with pytest.raises(
        UnknownNodeError, match=r"\(9 nodes: 'n0', 'n1', 'n2', 'n3', 'n4', … and 4 more\)"
    ):
        many.arcs("x")


def test_wrong_key_types_are_type_errors() -> None:
    ring = HashRing(["a"])
    for bad in (1.5, None, ("k",)):
        with pytest.raises(TypeError, match="key must be str, bytes or int"):
            ring.node_for(bad)  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="key must be str, bytes or int"):
            ring.node_for_many(["ok", bad])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="key must be str, bytes or int, got float"):
        HashRing([]).node_for(1.5)  # type: ignore[arg-type]


def test_bad_replica_counts_and_points() -> None:
    ring = HashRing.from_tokens({"A": [40], "B": [160]}, space=360)
    with pytest.raises(ConfigError, match="n must be >= 1, got 0"):
        ring.nodes_for("k", 0)
    with pytest.raises(ConfigError, match=r"point must be in \[0, 360\), got 360"):
        ring.node_for_point(360)
    with pytest.raises(ConfigError, match=r"point must be in \[0, 360\), got -1"):
        ring.node_for_point(-1)


def test_bad_explicit_tokens() -> None:
    with pytest.raises(ConfigError, match=r"token of node 'A' must be in \[0, 360\), got 360"):
        HashRing.from_tokens({"A": [360]}, space=360)
    with pytest.raises(ConfigError, match="node 'A' must have at least one token, got none"):
        HashRing.from_tokens({"A": []}, space=360)
    with pytest.raises(ConfigError, match=r"node 'A' has a token twice, got \[5, 5\]"):
        HashRing.from_tokens({"A": [5, 5]}, space=360)
    with pytest.raises(ConfigError, match=r"space must be in \[1, 2\*\*64\], got 0"):
        HashRing.from_tokens({"A": [0]}, space=0)
    ring = HashRing.from_tokens({"A": [5]}, space=360)
    with pytest.raises(
        ConfigError, match="node 'A' has explicit tokens; remove it and add it with new tokens"
    ):
        ring.reweight("A", 2.0)


def test_bad_descriptions_are_refused() -> None:
    with pytest.raises(ConfigError, match="expected a HashRing description, got kind='Maglev'"):
        HashRing.from_dict({"kind": "Maglev"})
    with pytest.raises(ConfigError, match="version must be 1, got 2"):
        HashRing.from_dict({"kind": "HashRing", "version": 2, "nodes": []})
    with pytest.raises(ConfigError, match="malformed HashRing description"):
        HashRing.from_dict({"kind": "HashRing", "version": 1, "nodes": [{"weight": 1}]})
    with pytest.raises(ConfigError, match="unregistered hasher 'custom'"):
        HashRing(["a"], hasher=Hasher("custom", len)).to_dict()


def test_owner_indices_given_keys_says_to_use_node_for_many() -> None:
    """Regression: keys failed with numpy's raw "invalid literal for int()"."""
    ring = HashRing(["a", "b"])
    with pytest.raises(TypeError, match=r"got str keys;.*node_for_many\(keys\)"):
        ring.owner_indices(["user:1", "user:2"])
    with pytest.raises(TypeError, match="got bytes keys"):
        ring.owner_indices([b"user:1"])
    assert ring.owner_indices([]).tolist() == []


def test_from_tokens_repr_shows_explicit_tokens_not_vnodes() -> None:
    """Regression: a from_tokens ring showed ``vnodes=160``, an option it never used."""
    ring = HashRing.from_tokens({"A": [40], "B": [160]}, space=360)
    assert repr(ring) == "HashRing(['A', 'B'], explicit tokens, hasher='xxh3_64', tokens=2)"
    assert "vnodes=160" in repr(HashRing(["a"]))
