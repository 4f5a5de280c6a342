"""Restores: etcd came back from a backup or empty, and epochs must still only go forward.

A store's epoch is etcd's revision of the last change it applied. An etcd restored from a
backup, or re-bootstrapped on an empty data dir with the same flags (it then keeps its cluster
id), starts again from a lower revision: a store that kept following it would stay at its old
epoch while new processes count up from 1, and once the new revision passed the old one two
processes would report one epoch with different rings.

So an epoch is an *epoch base* plus the revision: the base is one record under the ring's
prefix (``PREFIX/epoch-base``, a JSON integer, absent: 0), written only by compare-and-swap
and only upwards. A store detects a restore when a response's revision is below the revision
it holds, or the cluster id changed, or, whenever its watch is (re)created, when reading the
prefix at the revision it holds is refused as a future revision or returns other records than
its own (:func:`restore_reason`). It then raises the base above every epoch it has held
(:func:`raise_base`), reads the current records, and moves to the new epoch as one change.
``ringkit ring restore --store URL --epoch-above N`` raises the base the same way for a
restore made while no ringkit process ran. (Later etcd 3.5 releases and 3.6 can bump the
revision at restore, ``etcdutl snapshot restore --bump-revision N --mark-compacted``; etcd 3.4
cannot, and a restore made without it, or an etcd started empty, still needs the base.)

>>> from ringkit.live.memory import MemoryBackend
>>> service = MemoryBackend.named("restore-doctest")
>>> raise_base(service, "/r/epoch-base", above_epoch=40)
41
>>> raise_base(service, "/r/epoch-base", above_epoch=10)  # already high enough: unchanged
41
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping

from ringkit.errors import BackendError, ConfigError
from ringkit.live.backend import Backend, Record
from ringkit.live.records import strict_json

__all__ = ["BASE_KEY", "decode_base", "raise_base", "restore_reason"]

#: The base's key, under the ring's prefix.
BASE_KEY = "epoch-base"
_CAS_ATTEMPTS = 50


def decode_base(record: Record | None) -> int:
    """Return the epoch base a record holds (0 when absent).

    :raises ConfigError: naming the key when the record is not an integer >= 0
    """
    if record is None:
        return 0
    value = strict_json(record.key, record.value)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ConfigError(f"epoch base record {record.key} must be an integer >= 0, got {value!r}")
    return value


def raise_base(backend: Backend, key: str, *, above_epoch: int) -> int:
    """Make the base at `key` high enough that every epoch from now on is above `above_epoch`.

    The base is raised by compare-and-swap, never lowered: of several stores that detect one
    restore, each raises it past what it has held, and a store that finds it high enough
    already leaves it. Return the base now stored.

    :raises BackendError: when the service cannot be reached, or other writers keep winning
    """
    for _ in range(_CAS_ATTEMPTS):
        revision, records = backend.get_prefix(key)
        found = next((r for r in records if r.key == key), None)
        try:
            base = decode_base(found)
        except ConfigError:
            base = 0  # a foreign value: overwrite it (the swap still guards the race)
        if base + revision > above_epoch:
            return base  # every later revision is above it too
        wanted = above_epoch + 1
        ok, _ = backend.swap(
            key, json.dumps(wanted).encode(), 0, found.mod_revision if found else 0
        )
        if ok:
            return wanted
    raise BackendError(
        f"epoch base {key} must be raised above {above_epoch}, got {_CAS_ATTEMPTS} "
        "compare-and-swap conflicts"
    )


def _future_revision(error: BaseException) -> bool:
    return "future revision" in str(error)


def restore_reason(
    backend: Backend,
    prefix: str,
    revision: int,
    records: Mapping[str, Record],
    relevant: Callable[[str], bool],
) -> str | None:
    """Return why etcd seems restored under a store at `revision` holding `records`, or None.

    Reads the prefix as it was at `revision`: a restored etcd refuses it (a future revision
    to it) or answers with other records (values, mod revisions or leases) than the store
    holds. `relevant` filters the keys the store follows. A compacted revision proves nothing.

    Leases are compared because values and mod revisions alone can coincide: members that
    register again after a restore, in the order they first did, write the same values at the
    same revisions. They cannot do so under the same leases: a restored etcd has none of the
    leases granted after its backup, and etcd numbers leases from its member id, the
    millisecond the member started and a count (its ``pkg/idutil``), so a lease granted after
    the restart has an id no lease had before it. Records equal in all three are the same
    state: the store's ring at `revision` is then etcd's.

    :raises BackendError: when the service cannot be reached
    """
    if revision <= 0:
        return None
    try:
        current, found = backend.get_prefix(prefix, revision)
    except BackendError as error:
        if _future_revision(error):
            return f"etcd refused revision {revision} as a future revision"
        if "compact" in str(error).lower():
            return None
        raise
    if current < revision:
        return f"etcd is at revision {current}, below the store's {revision}"
    theirs = {r.key: (r.value, r.mod_revision, r.lease) for r in found if relevant(r.key)}
    ours = {k: (r.value, r.mod_revision, r.lease) for k, r in records.items()}
    if theirs != ours:
        differ = sorted(set(theirs) ^ set(ours) | {k for k in theirs if theirs[k] != ours.get(k)})
        return f"etcd's records at revision {revision} differ from the store's ({differ[:3]})"
    return None
