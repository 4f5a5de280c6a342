"""Keep an HAProxy backend in step with a live ring, through HAProxy's runtime API.

Each pass compares the members etcd holds now (:mod:`ringkit.lb.follow`) with the backend's
servers as ``show servers state`` reports them, and sends only the commands that close the gap,
so a pass is idempotent: a controller that restarts, or an HAProxy that reloaded and lost its
runtime servers, is put right by the next pass. HAProxy's management guide (management.txt,
"add server", "del server", "set server") gives the steps:

- a member joins: ``add server BACKEND/NAME ADDR id ID weight W`` with the id kept in etcd
  (:mod:`ringkit.lb.ids`; never without one, since HAProxy would number it by itself and place
  its points by that number), then ``enable server`` (a new server starts in maintenance);
- a member leaves (its state is ``leaving``, or its record is gone): ``set server … state
  drain`` (weight 0: its points leave the ring, its current sessions go on), then once it has
  no sessions ``state maint`` and ``del server``; sessions still open after
  ``drain_timeout_s`` are ended with ``shutdown sessions server`` first;
- a weight or an address changes: ``set server … weight`` / ``addr``.

With ``slots=True`` the backend instead declares ``disabled`` servers with fixed ids (for
proxies where runtime ``add server`` is not wanted, or before HAProxy 2.4): a member is given
a free slot's id, the slot is filled with ``set server … addr`` and ``weight`` and enabled, and
a leaving member's slot is drained and put back in maintenance.

Servers of the backend that are not members' (declared in its configuration) are left alone,
and their ids are never handed to members.
"""

from __future__ import annotations

import ipaddress
import logging
import threading
import time
from collections.abc import Collection, Iterator
from dataclasses import dataclass

from ringkit.compat.haproxy import HAProxyRing, HAProxyServer, haproxy
from ringkit.errors import BackendError, ConfigError
from ringkit.lb.follow import Follower, Following, Reading, read_members
from ringkit.lb.ids import assign_ids, ids_key, read_ids
from ringkit.lb.pool import HAPROXY_WEIGHTS, Pool, ProxyServer, proxied
from ringkit.lb.runtime import HAProxyRuntime, ServerState
from ringkit.live import Store

__all__ = ["DEFAULT_DRAIN_TIMEOUT_S", "HAProxyController"]

DEFAULT_DRAIN_TIMEOUT_S = 30.0
#: How soon a pass runs again while a server drains (to see its sessions end).
_DRAIN_POLL_S = 0.2
_log = logging.getLogger("ringkit.lb")


def _split(address: str) -> tuple[str, int]:
    host, _, port = address.rpartition(":")
    return host.strip("[]"), int(port)


def _same_address(server: ServerState, address: str) -> bool:
    """Whether `server` points at `address` (for a host name, HAProxy resolved it: the port)."""
    host, port = _split(address)
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return server.port == port
    return (server.host, server.port) == (host, port)


@dataclass(frozen=True, slots=True)
class _Plan:
    """What one pass wants: proxy servers by name, and names of servers to take out."""

    wanted: dict[str, ProxyServer]
    out: set[str]


class HAProxyController(Following):
    """Keeps HAProxy's `backend` holding exactly the live ring's proxied members.

    Running: ``start`` (follow the store in a thread), ``close``, also a context manager.
    One pass now: ``reconcile``. Reading: ``servers`` (what the proxy routes by), ``layout``
    (``ringkit.compat``'s HAProxy layout of them), ``last_error``.
    """

    def __init__(
        self,
        store: Store,
        runtime: HAProxyRuntime | str,
        backend: str,
        *,
        weight_scale: float | None = None,
        drain_timeout_s: float = DEFAULT_DRAIN_TIMEOUT_S,
        slots: bool = False,
        resync_s: float = 5.0,
    ) -> None:
        if not drain_timeout_s >= 0:
            raise ConfigError(f"drain_timeout_s must be >= 0, got {drain_timeout_s!r}")
        self._store, self._backend_name = store, backend
        self._runtime = runtime if isinstance(runtime, HAProxyRuntime) else HAProxyRuntime(runtime)
        self._ids_key = ids_key(store.prefix, backend)
        self._weight_scale, self._drain_timeout_s, self._slots = (
            weight_scale,
            drain_timeout_s,
            slots,
        )
        self._draining: dict[str, float] = {}
        self._servers: tuple[ProxyServer, ...] = ()
        self._refused: dict[str, str] = {}
        self._lock = threading.Lock()
        self._follower = Follower(
            store, self._pass, resync_s=resync_s, name=f"ringkit-lb-haproxy-{backend}"
        )

    # -- what it did ------------------------------------------------------------------------------

    def servers(self) -> tuple[ProxyServer, ...]:
        """The servers the backend routes to after the last pass, sorted by name."""
        return self._servers

    def layout(
        self, *, hash_function: str | None = None, avalanche: bool | None = None
    ) -> HAProxyRing:
        """The backend's own layout over :meth:`servers`: where HAProxy sends each key.

        ``ringkit.compat.haproxy`` of the servers with their ids and weights; give the
        backend's `hash_function` and `avalanche` as its configuration does. Not the live
        ring's tokens: ``Member.owns`` does not predict the proxy's choice.

        :raises ConfigError: when the backend has no servers
        """
        servers = [
            HAProxyServer(s.name, id=s.id, weight=s.weight, address=s.address)
            for s in self._servers
        ]
        return haproxy(servers, hash_function=hash_function, avalanche=avalanche)

    def reconcile(self) -> list[str]:
        """Run one pass now; return the commands it sent that changed something.

        :raises BackendError: when etcd or the admin socket does not answer (nothing is sent
            on a stale reading)
        :raises ConfigError: when a member's weight does not fit HAProxy's 1–256 (the pool is
            refused, naming it)
        """
        return self._reconcile()[0]

    def _pass(self) -> float | None:
        return self._reconcile()[1]

    # -- one pass --------------------------------------------------------------------------------

    def _reconcile(self) -> tuple[list[str], float | None]:
        with self._lock:
            reading = read_members(self._store)
            pool = proxied(
                reading.members, weights=HAPROXY_WEIGHTS, weight_scale=self._weight_scale
            )
            self._note_refused(pool)
            current = {s.name: s for s in self._runtime.servers(self._backend_name)}
            plan = self._plan(reading, pool, current)
            sent = list(self._converge(plan, current))
            sent += self._take_out(plan.out, current)
            current = {s.name: s for s in self._runtime.servers(self._backend_name)}
            self._servers = tuple(
                server
                for name, server in sorted(plan.wanted.items())
                if name in current and current[name].serving
            )
            return sent, (_DRAIN_POLL_S if self._draining else None)

    def _note_refused(self, pool: Pool) -> None:
        for name, why in pool.refused.items():
            if self._refused.get(name) != why:
                _log.warning("backend %s: not proxying %s", self._backend_name, why)
        self._refused = dict(pool.refused)

    def _plan(self, reading: Reading, pool: Pool, current: dict[str, ServerState]) -> _Plan:
        table, _ = read_ids(self._store.backend, self._ids_key)
        ids = self._assign(reading, pool, current, table.keys())
        wanted: dict[str, ProxyServer] = {}
        slots = {s.id: s.name for s in current.values()}
        for server in pool.servers:
            if server.member in ids:
                proxy_id = ids[server.member]
                name = slots[proxy_id] if self._slots else server.member
                wanted[name] = ProxyServer(
                    name, server.member, server.address, proxy_id, server.weight
                )
        if self._slots:
            return _Plan(wanted, {s.name for s in current.values() if s.name not in wanted})
        mine = table.keys() | ids.keys() | reading.members.keys()
        taken = {w.id for w in wanted.values()}
        out = {
            s.name
            for s in current.values()
            if (s.name not in wanted and (s.name in mine or s.id in taken))
            or (s.name in wanted and s.id != wanted[s.name].id)
        }
        return _Plan(wanted, out)

    def _assign(
        self,
        reading: Reading,
        pool: Pool,
        current: dict[str, ServerState],
        known: Collection[str],
    ) -> dict[str, int]:
        """Give each proxied member its id (a slot's, with `slots`); `known`: the table's names."""
        if self._slots:
            slots = {s.id: s for s in current.values()}
            in_proxy = {
                member
                for member, entry in read_ids(self._store.backend, self._ids_key)[0].items()
                if entry["id"] in slots and not slots[entry["id"]].in_maintenance
            }
            choices: set[int] | None = set(slots)
            reserved: set[int] = set()
        else:
            mine = set(known) | reading.members.keys()
            in_proxy, choices = set(current), None
            reserved = {s.id for s in current.values() if s.name not in mine}
        assignment = assign_ids(
            self._store.backend,
            self._ids_key,
            wanted=pool.members,
            alive=reading.created,
            revision=reading.revision,
            in_proxy=in_proxy,
            reserved=reserved,
            choices=choices,
        )
        for name in assignment.unplaced:
            _log.error("backend %s: no free id for member %r", self._backend_name, name)
        return dict(assignment.ids)

    # -- commands --------------------------------------------------------------------------------

    def _send(self, command: str, why: str, *successes: str) -> str:
        self._runtime.expect(command, *successes)
        _log.info("backend %s: %s (%s)", self._backend_name, command, why)
        return command

    def _converge(self, plan: _Plan, current: dict[str, ServerState]) -> Iterator[str]:
        """Add, fill, re-weight or re-enable the wanted servers."""
        for name, want in sorted(plan.wanted.items()):
            server, path = current.get(name), f"{self._backend_name}/{name}"
            why = f"member {want.member}"
            if name in plan.out:
                continue  # held under another id: taken out first, added again next pass
            if server is None:
                if any(other.id == want.id for other in current.values()):
                    continue  # the id's previous holder is still being taken out
                yield self._send(
                    f"add server {path} {want.address} id {want.id} weight {want.weight}",
                    f"{why} joined",
                    "New server registered.",
                )
                yield self._send(f"enable server {path}", f"{why} joined")
                continue
            if not _same_address(server, want.address):
                host, port = _split(want.address)
                yield self._send(
                    f"set server {path} addr {host} port {port}",
                    f"{why} at {want.address}",
                    "IP changed",
                    "no need to change",
                    "port changed",
                )
            if server.weight != want.weight:
                yield self._send(f"set server {path} weight {want.weight}", f"{why} weight")
            if server.in_maintenance:
                yield self._send(f"enable server {path}", f"{why} active")
            elif server.draining:
                yield self._send(f"set server {path} state ready", f"{why} active again")
            self._draining.pop(name, None)

    def _take_out(self, out: set[str], current: dict[str, ServerState]) -> list[str]:
        """Drain, then (no sessions left, or drain_timeout_s passed) maint and del each of `out`."""
        sent: list[str] = []
        self._draining = {n: t for n, t in self._draining.items() if n in out}
        sessions: dict[str, int] | None = None
        now = time.monotonic()
        for name in sorted(out):
            server, path = current[name], f"{self._backend_name}/{name}"
            if self._slots and server.in_maintenance:
                continue  # a free slot
            if not server.in_maintenance:
                if not server.draining:
                    sent.append(self._send(f"set server {path} state drain", "member gone"))
                    self._draining[name] = now
                    continue
                started = self._draining.setdefault(name, now)
                if sessions is None:
                    sessions = self._runtime.sessions(self._backend_name)
                left = sessions.get(name, 0)
                if left and now - started < self._drain_timeout_s:
                    continue
                sent.append(self._send(f"set server {path} state maint", "drained"))
                if left:  # past drain_timeout_s: end them, as HAProxy's on-marked-down does
                    sent.append(
                        self._send(f"shutdown sessions server {path}", f"{left} sessions left")
                    )
            if not self._slots:
                try:
                    sent.append(self._send(f"del server {path}", "removed", "Server deleted."))
                except BackendError as error:  # connections not yet released: next pass
                    self._draining.setdefault(name, now)
                    _log.info("backend %s: %s; trying again", self._backend_name, error)
                    continue
            self._draining.pop(name, None)
        return sent
