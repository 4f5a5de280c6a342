"""A write carries the version of when it is sent, not of when it was encoded.

Versions order the copies that ``read="all"`` reconciles, and a delete's tombstone hides every
value with an older version. A plain ``set`` replaces whatever its server holds, so a write
whose version was taken before a slow step of its call (a view refresh, a probe) and that
reaches the servers after another client's delete and newer write replaces that write there
and then reads as deleted on every replica. The chaos check found it (``kill/memcached/read_all``
under load): a ``set`` encoded before a 160 ms view refresh reached memcached after another
process had deleted the key and written it again; the final reads missed the acknowledged write.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ringkit import HashRing
from ringkit.cluster import ShardedClient
from ringkit.cluster.core.health import OpEvent
from ringkit.cluster.values.codec import JSON, Codec

KEY = "seat:{lis-jfk}:14C"
New = Callable[..., Any]


def _held(client: Any, name: str) -> object:
    """What server `name` holds under KEY (decoded), or None."""
    stored = client.server(name).backend.get_many([KEY.encode()]).get(KEY.encode())
    return None if stored is None else Codec(JSON).decode(stored).value


def test_a_set_delayed_by_a_view_refresh_never_hides_a_write_made_meanwhile(
    urls: dict[str, str], new: New
) -> None:
    ring = HashRing(list(urls))
    other = ShardedClient(ring, urls, replicas=2, read="all")
    armed: list[bool] = []  # set while the slow write under test runs, until it refreshes

    def meanwhile(event: OpEvent) -> None:
        # The slow client is reading the view before its write: another client deletes the
        # key and writes it again, both acknowledged on every replica.
        if armed and event.op == "read_view":
            armed.clear()
            other.delete(KEY)
            other.set(KEY, "acknowledged")

    slow = new(ring, urls, replicas=2, read="all", hooks=[meanwhile])
    slow.set(KEY, "first")
    slow.view_check_s = 0.0  # its next call reads the view first, as a due view check does
    armed.append(True)
    slow.set(KEY, "late")  # began before the delete and the other write, ends after both
    assert not armed  # the other client's writes ran in the middle of it
    replicas = slow.replicas_for(KEY)
    assert [_held(slow, name) for name in replicas] == ["late", "late"]
    # The later of the two writes: read as deleted, it was lost on both replicas.
    assert slow.get(KEY) == "late"
    assert other.get(KEY) == "late"
    other.close()
