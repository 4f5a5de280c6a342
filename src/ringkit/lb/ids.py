"""Proxy server ids kept in the coordination service, allocated once by compare-and-swap.

HAProxy places a server's points at ``full_hash(id × 4096 + j)`` (``lb_chash.c``), so the
layout of a backend depends on each server's *id*, not only its name: a proxy that numbers its
servers itself (in the order they were added) would route a key differently after a restart,
and two proxies fed the same members would disagree. So ids live beside the ring, in one key
``PREFIX/lb/BACKEND/ids`` (a JSON table name → id), written only by compare-and-swap on the
key's revision: two controllers that allocate at once cannot hand one id to two members, and
every proxy of the backend is given the same ids, which are also what ``ringkit.compat``'s
HAProxy layout is given to predict it.

An entry holds ``seen``, the revision at which its member's record was created (the member
joined, or rejoined under a new lease). It is dropped, freeing its id, only by a controller
that read the members at a *later* revision without that name (the member has gone: its
lease ended or it left) and whose proxy no longer holds a server of that name; a controller
whose read is older than the member cannot drop it. Ids are below 2**20, so
``id × 4096 + j`` stays within HAProxy's 32 bits.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass

from ringkit.errors import BackendError, ConfigError
from ringkit.live.backend import Backend

__all__ = ["MAX_SERVER_ID", "IdAssignment", "assign_ids", "ids_key", "read_ids"]

#: The largest id: HAProxy computes ``id × 4096 + j`` in 32 bits (j < 4096).
MAX_SERVER_ID = 2**20 - 1
_ATTEMPTS = 20
_log = logging.getLogger("ringkit.lb")


def ids_key(prefix: str, backend_name: str) -> str:
    """Return the key of `backend_name`'s id table under a live ring's `prefix`.

    >>> ids_key("/workers/", "app")
    '/workers/lb/app/ids'

    :raises ConfigError: for an empty name or one with ``/`` or whitespace
    """
    if not backend_name or "/" in backend_name or any(c.isspace() for c in backend_name):
        raise ConfigError(
            f"backend name must be non-empty without '/' or spaces, got {backend_name!r}"
        )
    return f"{prefix}lb/{backend_name}/ids"


@dataclass(frozen=True, slots=True)
class IdAssignment:
    """The outcome of an allocation: ``ids`` (member → id) and ``unplaced`` (no id was free)."""

    ids: Mapping[str, int]
    unplaced: tuple[str, ...]


def _decode(value: bytes, key: str) -> dict[str, dict[str, int]]:
    try:
        raw = json.loads(value)
        return {str(n): {"id": int(e["id"]), "seen": int(e["seen"])} for n, e in raw.items()}
    except (ValueError, TypeError, KeyError, AttributeError) as error:
        raise ConfigError(f"id table {key} must be ringkit's JSON, got {value[:80]!r}") from error


def read_ids(backend: Backend, key: str) -> tuple[dict[str, dict[str, int]], int]:
    """Return (the id table at `key`, its revision; 0 when absent)."""
    _, records = backend.get_prefix(key)
    record = next((r for r in records if r.key == key), None)
    if record is None:
        return {}, 0
    return _decode(record.value, key), record.mod_revision


def _lowest_free(used: Collection[int], choices: Iterable[int] | None) -> int | None:
    if choices is not None:
        return next((c for c in sorted(choices) if c not in used), None)
    candidate = 1
    while candidate in used:
        candidate += 1
    return candidate if candidate <= MAX_SERVER_ID else None


def assign_ids(
    backend: Backend,
    key: str,
    *,
    wanted: Iterable[str],
    alive: Mapping[str, int],
    revision: int,
    in_proxy: Collection[str] = (),
    reserved: Collection[int] = (),
    choices: Iterable[int] | None = None,
) -> IdAssignment:
    """Give every member of `wanted` an id, keeping ids already given; return all of them.

    `alive` maps the members read at `revision` to their records' create revisions; entries
    of other members are dropped when `revision` is later than their ``seen`` and `in_proxy`
    (server names the proxy holds) has no server of theirs. A new id is the lowest one not in
    the table nor `reserved` (ids the proxy uses for servers it was not given by this table),
    from `choices` when given (a backend's pre-declared slots), else from 1 to
    :data:`MAX_SERVER_ID`.

    :raises BackendError: when the service cannot be reached or CAS keeps losing
    """
    wanted = sorted(set(wanted))
    for _ in range(_ATTEMPTS):
        table, mod_revision = read_ids(backend, key)
        updated = {
            name: entry
            for name, entry in table.items()
            if name in alive or name in in_proxy or entry["seen"] >= revision
        }
        for name in wanted:
            if name in updated and updated[name]["seen"] < alive.get(name, 0):
                updated[name] = {"id": updated[name]["id"], "seen": alive[name]}
        used = {entry["id"] for entry in updated.values()} | set(reserved)
        unplaced: list[str] = []
        for name in wanted:
            if name not in updated:
                free = _lowest_free(used, choices)
                if free is None:
                    unplaced.append(name)
                    continue
                updated[name] = {"id": free, "seen": alive.get(name, revision)}
                used.add(free)
        ids = {name: entry["id"] for name, entry in updated.items()}
        if updated == table:
            return IdAssignment(ids, tuple(unplaced))
        value = json.dumps(updated, sort_keys=True).encode()
        ok, _ = backend.swap(key, value, 0, mod_revision)
        if ok:
            for name in sorted(updated.keys() - table.keys()):
                _log.info("allocated id %d to member %r in %s", updated[name]["id"], name, key)
            return IdAssignment(ids, tuple(unplaced))
    raise BackendError(f"id table {key} kept changing under {_ATTEMPTS} compare-and-swaps")
