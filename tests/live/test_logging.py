"""What the live ring logs for an operator: members joining and leaving, once per change."""

from __future__ import annotations

import logging

import pytest

import ringkit.live

pytestmark = pytest.mark.timeout(60)


def test_members_joining_and_leaving_are_logged_once_with_the_epoch(
    store_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="ringkit.live")
    with ringkit.live.connect(store_url) as store:
        a = store.join("a", ttl_s=3)
        b = store.join("b", ttl_s=3)
        store.wait_for(lambda s: len(s.ring) == 2, timeout_s=10)
        b.leave()
        left = store.wait_for(lambda s: "b" not in s.members, timeout_s=10)
        a.leave()
        store.wait_for(lambda s: not s.members, timeout_s=10)
        # The line is written as the change goes to the subscribers, just after the snapshot.
        store.wait_delivered(store.snapshot().epoch, timeout_s=10)
    lines = [r.getMessage() for r in caplog.records if r.name == "ringkit.live"]
    membership = [line for line in lines if " joined" in line or " left" in line]
    assert sum("a joined" in line for line in membership) == 1
    assert sum("b joined" in line for line in membership) == 1
    assert [line for line in membership if "b left" in line] == [
        f"ring {store.url} at epoch {left.epoch}: b left"
    ]
    assert sum("a left" in line for line in membership) == 1
