"""A supervisor restarting a worker under the same name, and one lookup for many keys."""

from __future__ import annotations

import time

import pytest

import ringkit.live
from ringkit.errors import ConfigError, DuplicateNodeError

pytestmark = pytest.mark.timeout(60)


def crash(member: ringkit.live.Member) -> None:
    """Stop heartbeating without revoking: the member dies as a SIGKILLed process would."""
    member.abandon()


def test_join_waits_for_the_old_lease_of_the_same_name(store_url: str) -> None:
    with ringkit.live.connect(store_url) as store, ringkit.live.connect(store_url) as restarted:
        crash(store.join("w1", ttl_s=1))
        with pytest.raises(DuplicateNodeError, match="lease ends in"):
            restarted.join("w1", ttl_s=2)  # by default: refused while the old lease holds
        started = time.monotonic()
        member = restarted.join("w1", ttl_s=2, wait_s=10)
        assert time.monotonic() - started < 10
        snap = restarted.wait_for(lambda s: "w1" in s.ring)
        assert snap.members["w1"].lease == member.info.lease and member.owns("k")
        member.close()


def test_join_waits_no_longer_than_wait_s(store_url: str) -> None:
    with ringkit.live.connect(store_url) as store, ringkit.live.connect(store_url) as other:
        holder = store.join("w1", ttl_s=5)  # alive: its lease never ends
        with pytest.raises(DuplicateNodeError, match="member name 'w1' must be free"):
            other.join("w1", ttl_s=2, wait_s=0.5)
        with pytest.raises(ConfigError, match="wait_s must be a finite number >= 0, got -1"):
            other.join("w2", wait_s=-1)
        holder.close()


def test_owns_many_answers_as_owns_per_key(store_url: str) -> None:
    with ringkit.live.connect(store_url) as store:
        a, b, c = (store.join(n, ttl_s=5) for n in "abc")
        store.wait_for(lambda s: len(s.ring) == 3)
        keys = [f"key-{i}" for i in range(300)] + [b"bytes", 7]
        for member in (a, b, c):
            for replicas in (1, 2):
                assert member.owns_many(keys, replicas=replicas) == [
                    member.owns(key, replicas=replicas) for key in keys
                ]
        assert sum(a.owns_many(keys)) + sum(b.owns_many(keys)) + sum(c.owns_many(keys)) == len(keys)
        assert a.owns_many([]) == []
        c.close()
        assert c.owns_many(keys) == [False] * len(keys)
        a.close()
        b.close()
