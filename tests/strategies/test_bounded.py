"""BoundedLoad: the cap is never exceeded, the walk matches a brute-force model, errors."""

from __future__ import annotations

import math
import threading
from collections import Counter
from fractions import Fraction

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule
from tests.hypothesis_profiles import examples

from ringkit import BoundedLoad, CapacityError, ConfigError, HashRing, Node, UnknownNodeError
from ringkit.errors import DuplicateNodeError, EmptyRingError

NAMES = ("a", "b", "c", "d", "e")


def model_cap(factor: float, held: int, weight: float, total_weight: float) -> int:
    """The paper's cap, computed independently: ceil(c · (m + 1) · w / W), exactly."""
    return math.ceil(Fraction(factor) * (held + 1) * Fraction(weight) / Fraction(total_weight))


class BoundedLoadMachine(RuleBasedStateMachine):
    """Random acquire / release / add / remove, checked against a brute-force model."""

    def __init__(self) -> None:
        super().__init__()
        self.bounded: BoundedLoad | None = None
        self.held: Counter[str] = Counter()  # the model's load table
        self.absolute = False

    @precondition(lambda self: self.bounded is None)
    @rule(
        count=st.integers(1, 4),
        factor=st.sampled_from([1.01, 1.25, 1.5, 2.0]),
        absolute=st.booleans(),
        weighted=st.booleans(),
    )
    def start(self, count: int, factor: float, absolute: bool, weighted: bool) -> None:
        nodes = [Node(n, weight=1.0 + (i % 2 if weighted else 0)) for i, n in enumerate(NAMES)]
        capacities = {node.name: 2 for node in nodes[:count]} if absolute else None
        ring = HashRing(nodes[:count], vnodes=8)
        self.bounded = BoundedLoad(ring, balance_factor=factor, capacities=capacities)
        self.absolute = absolute

    def caps(self) -> dict[str, int]:
        assert self.bounded is not None
        nodes = self.bounded.nodes
        total_weight = sum(node.weight for node in nodes)
        held = sum(self.held.values())
        caps = {
            node.name: model_cap(self.bounded.balance_factor, held, node.weight, total_weight)
            for node in nodes
        }
        return {name: min(cap, 2) if self.absolute else cap for name, cap in caps.items()}

    @precondition(lambda self: self.bounded is not None and len(self.bounded) > 0)
    @rule(key=st.integers(0, 30))
    def acquire(self, key: int) -> None:
        assert self.bounded is not None
        caps = self.caps()
        assert {name: self.bounded.capacity(name) for name in self.bounded} == caps
        expected = next(
            (n for n in self.bounded.ring.iter_nodes(key) if self.held[n] < caps[n]), None
        )
        if expected is None:
            with pytest.raises(CapacityError, match="raise the capacities, release load"):
                self.bounded.acquire(key)
            return
        assert self.bounded.node_for(key) == expected  # the pure lookup agrees
        node = self.bounded.acquire(key)
        assert node == expected
        self.held[node] += 1
        assert self.held[node] <= caps[node]  # never above the cap it was given under

    @precondition(lambda self: self.bounded is not None)
    @rule(data=st.data())
    def release(self, data: st.DataObject) -> None:
        assert self.bounded is not None
        holders = sorted(name for name, load in self.held.items() if load > 0)
        if not holders:
            with pytest.raises(UnknownNodeError, match="holds no load to release"):
                self.bounded.release("a")
            return
        name = data.draw(st.sampled_from(holders))
        self.bounded.release(name)
        self.held[name] -= 1

    @precondition(lambda self: self.bounded is not None and len(self.bounded) < len(NAMES))
    @rule(data=st.data())
    def add(self, data: st.DataObject) -> None:
        assert self.bounded is not None
        name = data.draw(st.sampled_from([n for n in NAMES if n not in self.bounded]))
        self.bounded = self.bounded.add(name, capacity=2 if self.absolute else None)

    @precondition(lambda self: self.bounded is not None and len(self.bounded) > 0)
    @rule(data=st.data())
    def remove(self, data: st.DataObject) -> None:
        assert self.bounded is not None
        self.bounded = self.bounded.remove(data.draw(st.sampled_from(list(self.bounded))))

    @invariant()
    def loads_match_the_model(self) -> None:
        if self.bounded is not None:
            loads = self.bounded.loads()
            assert {name: load for name, load in loads.items() if load} == {
                name: load for name, load in self.held.items() if load
            }
            assert set(self.bounded.ring) <= set(loads)


# 60 sequences of up to 50 steps: a few seconds, also under the CI profile.
BoundedLoadMachine.TestCase.settings = settings(max_examples=examples(60))
TestBoundedLoadStateful = BoundedLoadMachine.TestCase


def test_hot_key_spreads_and_never_exceeds_the_cap() -> None:
    bounded = BoundedLoad(HashRing([f"n{i}" for i in range(4)]), balance_factor=1.25)
    for count in range(1, 201):
        node = bounded.acquire("one-hot-key")
        assert bounded.loads()[node] <= math.ceil(1.25 * count / 4)
    assert max(bounded.loads().values()) <= math.ceil(1.25 * 200 / 4)


def test_lookups_are_pure() -> None:
    ring = HashRing(["a", "b", "c"])
    bounded = BoundedLoad(ring)
    keys = [f"k{i}" for i in range(50)]
    assert bounded.node_for_many(keys) == ring.node_for_many(keys)  # no load: the ring's owner
    assert [bounded.nodes_for(key, 3) for key in keys] == [ring.nodes_for(key, 3) for key in keys]
    assert bounded.loads() == {"a": 0, "b": 0, "c": 0}
    owner = bounded.acquire("k0")
    assert bounded.nodes_for("k0", 3)[-1] == owner  # a node at its cap goes last
    assert bounded.shares() == ring.shares()


def test_concurrent_acquires_never_exceed_the_cap() -> None:
    bounded = BoundedLoad(HashRing([f"n{i}" for i in range(5)]), balance_factor=1.1)
    errors: list[BaseException] = []

    def worker(offset: int) -> None:
        try:
            for i in range(300):
                bounded.acquire(f"key-{(offset + i) % 7}")
        except BaseException as error:  # pragma: no cover - reported below
            errors.append(error)

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    loads = bounded.loads()
    assert sum(loads.values()) == 1200
    # Caps only grow while nothing is released, so the final cap bounds every step.
    assert max(loads.values()) <= math.ceil(Fraction(1.1) * 1200 / 5)


def test_absolute_capacities_fail_loudly_when_every_node_is_full() -> None:
    bounded = BoundedLoad(HashRing(["a", "b"]), capacities={"a": 1, "b": 2})
    assert sorted(bounded.acquire("k") for _ in range(3)) == ["a", "b", "b"]
    with pytest.raises(CapacityError, match=r"all 2 nodes at their cap .*add nodes"):
        bounded.acquire("k")
    with pytest.raises(CapacityError, match="cannot place key 'k'"):
        bounded.node_for("k")
    assert bounded.loads() == {"a": 1, "b": 2}  # the failed call counted nothing
    bounded.release("a")
    assert bounded.acquire("k") == "a"


def test_load_on_a_removed_node_is_kept_until_released() -> None:
    bounded = BoundedLoad(HashRing(["a", "b"]), capacities={"a": 1, "b": 1})
    first, second = bounded.acquire("k"), bounded.acquire("k")
    smaller = bounded.remove(first)
    assert smaller.loads() == {second: 1, first: 1}
    with pytest.raises(CapacityError, match="all 1 nodes at their cap"):
        smaller.acquire("k")
    smaller.release(first)
    assert smaller.loads() == {second: 1}
    grown = smaller.add("c", capacity=3)
    assert grown.acquire("k") == "c" and bounded.loads()["c"] == 1  # one shared load table


@pytest.mark.parametrize(
    ("factor", "error", "match"),
    [
        (1.0, ConfigError, "balance_factor must be finite and > 1, got 1.0"),
        (0.5, ConfigError, "got 0.5"),
        (math.inf, ConfigError, "got inf"),
        (math.nan, ConfigError, "got nan"),
        ("1.5", TypeError, "balance_factor must be a number, got str"),
    ],
)
def test_bad_balance_factor(factor: object, error: type, match: str) -> None:
    with pytest.raises(error, match=match):
        BoundedLoad(HashRing(["a"]), balance_factor=factor)  # type: ignore[arg-type]


def test_bad_capacities_and_calls() -> None:
    ring = HashRing(["a", "b"])
    with pytest.raises(ConfigError, match="capacities must name every node, got none for 'b'"):
        BoundedLoad(ring, capacities={"a": 1})
    with pytest.raises(ConfigError, match="name a node not in the ring, got 'z'"):
        BoundedLoad(ring, capacities={"a": 1, "b": 1, "z": 1})
    with pytest.raises(ConfigError, match="capacity of node 'a' must be >= 1, got 0"):
        BoundedLoad(ring, capacities={"a": 0, "b": 1})
    with pytest.raises(ConfigError, match="capacity of node 'a' must be int, got float"):
        BoundedLoad(ring, capacities={"a": 1.5, "b": 1})  # type: ignore[dict-item]
    with pytest.raises(TypeError, match="ring must be a HashRing, got list"):
        BoundedLoad(["a"])  # type: ignore[arg-type]
    bounded = BoundedLoad(ring)
    with pytest.raises(UnknownNodeError, match="node 'a' holds no load to release"):
        bounded.release("a")
    with pytest.raises(ConfigError, match="capacity of node 'c' must be given exactly when"):
        bounded.add("c", capacity=3)
    with pytest.raises(ConfigError, match="got capacity=None"):
        BoundedLoad(ring, capacities={"a": 1, "b": 1}).add("c")
    with pytest.raises(DuplicateNodeError, match="'a'"):
        bounded.add("a")
    with pytest.raises(UnknownNodeError, match="node 'z' is not in the ring"):
        bounded.capacity("z")
    with pytest.raises(EmptyRingError, match=r"acquire\(\) on an empty placement"):
        BoundedLoad(HashRing()).acquire("k")


def test_value_semantics() -> None:
    ring = HashRing(["a", "b"], vnodes=4)
    bounded = BoundedLoad(ring, balance_factor=1.5)
    assert bounded == BoundedLoad(ring, balance_factor=1.5) != BoundedLoad(ring)
    assert hash(bounded) == hash(BoundedLoad(ring, balance_factor=1.5))
    assert list(bounded) == ["a", "b"] and "a" in bounded and len(bounded) == 2
    assert bounded.discard("z") is bounded and bounded.discard("a").ring == ring.remove("a")
    assert repr(bounded) == f"BoundedLoad({ring!r}, balance_factor=1.5)"
    assert bounded.nodes == ring.nodes and bounded.ring is ring
