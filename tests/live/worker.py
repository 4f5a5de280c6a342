"""A live-ring member in its own process, for the multi-process tests (not collected).

Usage: ``python -m tests.live.worker URL NAME TTL_S``. Prints one JSON line per event:
``epoch`` (every new epoch this process holds, with a digest of the owners of 10,000 keys) and
``owns`` (whenever whether it owns its keys, its lease or its rejoin count changes).
"""

from __future__ import annotations

import hashlib
import json
import sys
import threading
import time

import ringkit.live
from ringkit.live import Snapshot

KEYS = [f"key-{i}" for i in range(10_000)]
_print_lock = threading.Lock()


def emit(**fields: object) -> None:
    with _print_lock:
        print(json.dumps({**fields, "t": time.time()}), flush=True)


def digest(snapshot: Snapshot) -> str:
    if not len(snapshot.ring):
        return ""
    owners = "\n".join(snapshot.ring.node_for_many(KEYS))
    return hashlib.sha1(owners.encode()).hexdigest()


def main(url: str, name: str, ttl_s: float) -> None:
    store = ringkit.live.connect(url)

    def on_change(change: ringkit.live.Change) -> None:
        new = change.new
        emit(kind="epoch", epoch=new.epoch, ring=list(new.ring), digest=digest(new))

    store.subscribe(on_change)
    member = store.join(name, ttl_s=ttl_s)
    snapshot = store.snapshot()
    emit(kind="epoch", epoch=snapshot.epoch, ring=list(snapshot.ring), digest=digest(snapshot))
    last: tuple[object, ...] = ()
    while True:
        # replicas=len(ring): True exactly when this member is active and sure of its lease.
        owns = member.owns("probe", replicas=max(1, len(store.snapshot().ring)))
        status = (owns, member.info.lease, member.dropped_count)
        if status != last:
            emit(kind="owns", owns=owns, lease=member.info.lease, dropped=member.dropped_count)
            last = status
        time.sleep(0.005)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], float(sys.argv[3]))
