"""Two ``allocate=True`` joins at the same moment never take the same tokens.

Each plans its tokens against the ring it sees; the record is written only if no member record
changed since (compare-and-swap), else the join plans again against the newer ring.
"""

from __future__ import annotations

import threading

import pytest

import ringkit.live
from ringkit.live import Member
from ringkit.nodes import Node
from ringkit.ring import HashRing
from ringkit.strategies.allocation import allocate_tokens

pytestmark = pytest.mark.timeout(60)


def test_two_allocated_joins_at_once_get_distinct_tokens(store_url: str) -> None:
    with ringkit.live.connect(store_url) as store:
        base = [store.join(n, vnodes=8, allocate=True, ttl_s=5) for n in "abc"]
        planned = store.wait_for(lambda s: len(s.ring) == 3)
        stores = [ringkit.live.connect(store_url) for _ in range(2)]
        for other in stores:
            other.wait_for(lambda s: s.epoch >= planned.epoch)
        gate = threading.Barrier(2)
        joined: dict[str, Member] = {}

        def join(other: ringkit.live.Store, name: str) -> None:
            gate.wait()
            joined[name] = other.join(name, vnodes=8, allocate=True, ttl_s=5)

        threads = [
            threading.Thread(target=join, args=(other, name))
            for other, name in zip(stores, ("d", "e"), strict=True)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        snap = store.wait_for(lambda s: len(s.ring) == 5)
        assert not set(snap.members["d"].tokens) & set(snap.members["e"].tokens)
        shares = snap.ring.shares()
        assert shares["d"] > 0 and shares["e"] > 0
        # The largest share is no worse than allocating the two joins one after the other.
        sequential = []
        for order in (("d", "e"), ("e", "d")):
            ring = planned.ring
            assert isinstance(ring, HashRing)
            for name in order:
                ring = ring.add(Node(name), tokens=allocate_tokens(ring, Node(name), tokens=8))
            sequential.append(max(ring.shares().values()))
        assert max(shares.values()) <= max(sequential) + 1e-9
        for member in [*base, *joined.values()]:
            member.close()
        for other in stores:
            other.close()
