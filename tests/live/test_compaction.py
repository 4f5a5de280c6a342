"""etcd compacted the history a store needs: it starts, or resumes, from the current records."""

from __future__ import annotations

import pytest

import ringkit.live
from tests.servers import EtcdCluster

pytestmark = pytest.mark.timeout(60)


class RevisionCompacted(Exception):
    """What a watch reports when its start revision was compacted (as pyetcd's error)."""


def test_a_store_starts_and_resumes_after_compaction(etcd: EtcdCluster) -> None:
    url = etcd.url("compaction")
    with ringkit.live.connect(url) as first:
        a, b = first.join("a", ttl_s=5), first.join("b", ttl_s=5)
        b.close()  # a delete after the newest record: a fresh store must replay it
        revision = first.wait_for(lambda s: "b" not in s.members).epoch
        first.backend._client.compact(revision)  # type: ignore[attr-defined]
        with ringkit.live.connect(url) as fresh:
            snap = fresh.snapshot()
            assert list(snap.ring) == ["a"] and snap.epoch >= revision
            assert snap.ring == first.snapshot().ring
        # A watch told that its revision is gone reloads the records (a new epoch only if
        # they changed since) and follows on from there.
        before = first.snapshot()
        first._watch._broke(RevisionCompacted("required revision has been compacted"))
        c = first.join("c", ttl_s=5)
        assert first.snapshot().epoch > before.epoch
        assert list(first.snapshot().ring) == ["a", "c"]
        a.close()
        c.close()
