"""A state machine: add / remove / reweight a ring, against a brute-force model of the ring."""

from __future__ import annotations

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import Bundle, RuleBasedStateMachine, invariant, precondition, rule

from ringkit import HashRing, Node
from ringkit.hashing import xxh3_64
from ringkit.ring import vnode_count
from tests.hypothesis_profiles import examples
from tests.hypothesis_strategies import node_names, weights

VNODES = 6
PROBE_KEYS = [f"probe-{i}" for i in range(40)]


def brute_force_owner(model: dict[str, float], key: str) -> str:
    """Owner by definition: hash every label, sort (token, name), take the first >= the key."""
    pairs = sorted(
        (xxh3_64(f"{name}#{i}".encode()), name)
        for name, weight in model.items()
        for i in range(vnode_count(VNODES, weight))
    )
    point = xxh3_64(key.encode())
    return next((name for token, name in pairs if token >= point), pairs[0][1])


class RingMachine(RuleBasedStateMachine):
    names = Bundle("names")

    def __init__(self) -> None:
        super().__init__()
        self.ring = HashRing([], vnodes=VNODES)
        self.model: dict[str, float] = {}

    @rule(target=names, name=node_names, weight=weights)
    def add(self, name: str, weight: float) -> str:
        if name not in self.model:
            previous = self.ring
            self.ring = self.ring.add(Node(name, weight=weight))
            self.model[name] = weight
            # Minimal movement: keys only move to the new node.
            for key in PROBE_KEYS[:10]:
                if len(previous):
                    assert self.ring.node_for(key) in (previous.node_for(key), name)
        return name

    @precondition(lambda self: self.model)
    @rule(data=st.data())
    def remove(self, data: st.DataObject) -> None:
        name = data.draw(st.sampled_from(sorted(self.model)))
        previous = self.ring
        self.ring = self.ring.remove(name)
        del self.model[name]
        for key in PROBE_KEYS[:10]:
            if previous.node_for(key) != name and len(self.ring):
                assert self.ring.node_for(key) == previous.node_for(key)

    @precondition(lambda self: self.model)
    @rule(data=st.data(), weight=weights)
    def reweight(self, data: st.DataObject, weight: float) -> None:
        name = data.draw(st.sampled_from(sorted(self.model)))
        self.ring = self.ring.reweight(name, weight)
        self.model[name] = weight

    @invariant()
    def matches_the_model(self) -> None:
        self.ring._check()
        assert list(self.ring) == sorted(self.model)
        if self.model:
            assert self.ring == HashRing(
                [Node(n, weight=w) for n, w in self.model.items()], vnodes=VNODES
            )  # incremental changes equal a rebuild
            for key in PROBE_KEYS[:8]:
                assert self.ring.node_for(key) == brute_force_owner(self.model, key)


TestRingMachine = RingMachine.TestCase
TestRingMachine.settings = settings(
    max_examples=examples(40), stateful_step_count=15, deadline=None
)
