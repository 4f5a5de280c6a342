"""Membership sequences: each change moves only the keys it must (a hypothesis state machine).

Jump hash is left out: it can only drop its last node (tests/strategies/test_jump.py).
"""

from __future__ import annotations

import math

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule
from tests.hypothesis_profiles import examples

from ringkit import MultiProbe, Node, Rendezvous
from ringkit.hashing import xxh3_64

KEYS = [f"key-{i}" for i in range(30)] + ["", "é", "😀"]
POOL = ("a", "b", "c", "d", "e", "f#1", "g:2", "日本")
_MASK64 = 2**64 - 1


def _fmix64(z: int) -> int:
    z = ((z ^ (z >> 33)) * 0xFF51AFD7ED558CCD) & _MASK64
    z = ((z ^ (z >> 33)) * 0xC4CEB9FE1A85EC53) & _MASK64
    return z ^ (z >> 33)


def brute_force_rendezvous(nodes: dict[str, float], key: str) -> str:
    """The weighted rendezvous owner from its definition, one node at a time."""

    def score(name: str) -> tuple[float, str]:
        z = _fmix64(xxh3_64(key.encode()) ^ xxh3_64(name.encode()))
        if len(set(nodes.values())) == 1:
            return float(z), name
        u = ((z >> 11) + 0.5) / 2**53
        return -nodes[name] / math.log(u), name

    return max(nodes, key=score)


class MinimalMovement(RuleBasedStateMachine):
    """Add and remove nodes at random; after every change compare owners before and after."""

    def __init__(self) -> None:
        super().__init__()
        self.placements: dict[str, Rendezvous | MultiProbe] = {
            "rendezvous": Rendezvous(["a"]),
            "pymemcache": Rendezvous(["a"], variant="pymemcache"),
            "multiprobe": MultiProbe(["a"], probes=7),
        }
        self.weights = {"a": 1.0}

    def _owners(self) -> dict[str, list[str]]:
        return {label: [p.node_for(k) for k in KEYS] for label, p in self.placements.items()}

    @precondition(lambda self: len(self.weights) < len(POOL))
    @rule(data=st.data(), weight=st.sampled_from([1.0, 1.0, 2.0, 0.5]))
    def add(self, data: st.DataObject, weight: float) -> None:
        name = data.draw(st.sampled_from([n for n in POOL if n not in self.weights]))
        before = self._owners()
        for label, placement in self.placements.items():
            node = Node(name, weight=weight) if label == "rendezvous" else name
            self.placements[label] = placement.add(node)
        self.weights[name] = weight
        for label, owners in self._owners().items():
            for old, new in zip(before[label], owners, strict=True):
                assert new in (old, name), (label, old, new)

    @precondition(lambda self: len(self.weights) > 1)
    @rule(data=st.data())
    def remove(self, data: st.DataObject) -> None:
        name = data.draw(st.sampled_from(sorted(self.weights)))
        before = self._owners()
        for label, placement in self.placements.items():
            self.placements[label] = placement.remove(name)
            for key, old in zip(KEYS, before[label], strict=True):
                if old != name:
                    assert self.placements[label].node_for(key) == old, (label, key)
        del self.weights[name]

    @invariant()
    def rendezvous_matches_its_definition(self) -> None:
        placement = self.placements["rendezvous"]
        assert sorted(placement) == sorted(self.weights)
        for key in KEYS[:20]:
            assert placement.node_for(key) == brute_force_rendezvous(self.weights, key)


# Bounded so the machine stays a few seconds under the CI profile too.
MinimalMovement.TestCase.settings = settings(max_examples=examples(30), stateful_step_count=10)
TestMinimalMovement = MinimalMovement.TestCase
