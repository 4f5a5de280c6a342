"""``Member.abandon``: a crash rehearsed in one process (used by ``ringkit demo workers``).

The heartbeat stops but the lease is not revoked, so the member stays in the ring until its
lease runs out, then leaves every ring at one epoch, as a SIGKILLed process would; ``owns``
turns False at once on the abandoning side.
"""

from __future__ import annotations

import time

import pytest

import ringkit.live

pytestmark = pytest.mark.timeout(60)


def test_an_abandoned_member_leaves_when_its_lease_runs_out(store_url: str) -> None:
    with ringkit.live.connect(store_url) as store, ringkit.live.connect(store_url) as other:
        member = store.join("crashing", ttl_s=2)
        store.join("staying", ttl_s=5)
        other.wait_for(lambda s: len(s.ring) == 2)
        abandoned_at = time.monotonic()
        member.abandon()
        assert not member.owns("any-key")
        assert other.lease_remaining_s("crashing") > 0  # not revoked: still held
        assert "crashing" in other.snapshot().active
        gone = other.wait_for(lambda s: "crashing" not in s.members, timeout_s=10)
        assert time.monotonic() - abandoned_at >= 1.0  # the lease ran out; nobody revoked it
        assert gone.active == ("staying",)
