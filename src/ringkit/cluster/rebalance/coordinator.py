"""Online rebalancing: change membership on live servers without losing a key.

Data still has to move when membership changes: it is streamed in the background while reads
keep being served from the old owner until the copy is done (the bootstrap of a Dynamo node,
DeCandia et al. 2007, section 4.9). A :class:`Rebalancer` is the coordinator of one change:

1. publish a transitional *moving* view (epoch + 1) on every server: from then on every server
   refuses calls routed by the old view, reads try the new owners and fall back to the old ones,
   and writes go to the new owners;
2. stream exactly the moved arcs of :func:`ringkit.diff` (replicas included) with range reads
   on each source's index, a page per script on each side (:mod:`ringkit.cluster.values.packed`)
   with the TTL left, several streams at once, landing only where the key is absent or older (a
   newer write is never overwritten, nor a delete made during the move undone: it leaves a
   tombstone, :mod:`ringkit.cluster.core.writer`), a checkpoint after each transfer;
3. publish the final view (epoch + 2), then delete the moved copies from the old owners.

An interrupted rebalance continues with :meth:`Rebalancer.resume` (finished transfers are
skipped; the copy is idempotent), and a failed one is undone with :meth:`Rebalancer.rollback`,
itself a rebalance back to the old placement in which writes go to both sides. When a source is
down (a failed server removed with ``replicas >= 2``), its arcs are rebuilt from the surviving
copies. Every view and plan goes to the audit log.

With an authoritative view store (``etcd://``, :mod:`ringkit.cluster.views.etcd`) the
coordinator holds the store's lease lock for the whole change (a second coordinator is refused,
naming the holder), reads the current view from the store, and publishes each view there first
(compare-and-swap, epochs only grow), then on the servers, which keep fencing calls by epoch: a
client refused by a server reads the new view from the store, where it already is.

>>> from ringkit import HashRing
>>> from ringkit.cluster import ShardedClient
>>> servers = {name: f"memory://doctest-rebalance-{name}" for name in "abc"}
>>> client = ShardedClient(HashRing(["a", "b"]), {name: servers[name] for name in "ab"})
>>> client.set_many({f"k{i}": i for i in range(100)})
>>> report = client.add_server("c", servers["c"])
>>> report.outcome, report.epoch, report.keys_streamed == report.keys_deleted
('done', 3, True)
>>> client.get("k7"), client.view.state
(7, 'stable')
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, as_completed
from typing import TYPE_CHECKING, Any

from ringkit.cluster.rebalance.options import (
    Progress,
    RebalanceOptions,
    RebalanceReport,
    Tally,
    Throttle,
)
from ringkit.cluster.values.keys import route_key
from ringkit.cluster.values.packed import PackedRecords, Record
from ringkit.cluster.views.stores import (
    AuthoritativeViewStore,
    FileViewStore,
    ViewStore,
    authority_of,
    check_authority,
    read_views,
)
from ringkit.cluster.views.view import (
    SERVERS_AUTHORITY,
    AuditLog,
    ClusterView,
    load_view,
    write_view,
)
from ringkit.cluster.wire.backends import open_backend
from ringkit.cluster.wire.credentials import Credentials
from ringkit.cluster.wire.handles import FencedBackend, fence
from ringkit.cluster.wire.index import ArcSet
from ringkit.cluster.wire.urls import parse_url
from ringkit.errors import BackendError, ConfigError, StaleViewError, UnsupportedError
from ringkit.movement import Movement, diff
from ringkit.ring import HashRing

if TYPE_CHECKING:
    from ringkit.movement import Transfer

__all__ = ["RebalanceOptions", "RebalanceReport", "Rebalancer", "read_views"]


#: A throttled rebalance scans and indexes foreign keys at this many times its `keys_per_s`:
#: a key scanned costs the servers about 1.1 µs, a key copied about 15 µs (DUMP_PAGE,
#: RESTORE_PAGE, DELETE_PAGE), measured with Redis's commandstats, so the paced backfill takes a
#: third of the servers' time the copy does; at 2 the reads fared no better and a move took
#: longer (docs/rebalance.md, Performance).
SCAN_PACE = 5
_log = logging.getLogger("ringkit.cluster")


def _size_bytes(records: Sequence[Record]) -> int:
    if isinstance(records, PackedRecords):  # counted by the source's script
        return records.size_bytes
    return sum(record.size_bytes for record in records)


def _transfer_id(transfer: Transfer) -> str:
    return f"{transfer.source}>{transfer.destination}:{transfer.start}:{transfer.end}"


class Rebalancer:
    """The coordinator of one membership change on the servers of `view`.

    Changing: ``add``, ``remove``, ``change``. Recovering: ``resume``, ``rollback``.
    ``view`` is the newest view it published or found; `on_view` is told of every view it
    publishes. With an authoritative `view_store` (etcd), views are read and published there
    first, under its lock; other stores (``servers://``, ``file://``) change nothing here.
    Servers are opened with `credentials` (default: ``RINGKIT_REDIS_PASSWORD``); views carry
    none, and an added server's inline secret is learnt there, never published.
    """

    def __init__(
        self,
        view: ClusterView,
        *,
        options: RebalanceOptions | None = None,
        on_view: Callable[[ClusterView], None] | None = None,
        view_store: ViewStore | None = None,
        credentials: Credentials | None = None,
    ) -> None:
        self.view = view
        self.credentials = Credentials() if credentials is None else credentials
        self.options = options or RebalanceOptions()
        self._on_view = on_view
        self._authority = view_store if isinstance(view_store, AuthoritativeViewStore) else None
        self._store = view_store
        #: The authority every view this coordinator publishes records (its store's URL).
        self.authority = authority_of(view_store)
        self._lock: Any = None
        self._epoch = view.epoch
        self._backends: dict[str, FencedBackend] = {}
        self._urls: dict[str, str] = dict(view.servers)
        self._down: set[str] = set()
        self.audit = AuditLog(self.options.audit_path)

    # -- servers -------------------------------------------------------------------------------

    def _point_of(self, key: bytes) -> int:
        placement = self.view.placement
        assert isinstance(placement, HashRing)  # checked before any key moves
        return placement.point_for(route_key(key))

    def backend(self, name: str) -> FencedBackend:
        """Return the coordinator's fenced connection to server `name`."""
        backend = self._backends.get(name)
        if backend is None:
            url = self.credentials.apply(name, parse_url(self._urls[name]))
            raw = open_backend(url, timeout_s=self.options.timeout_s)
            backend = self._backends[name] = fence(raw, lambda: self._epoch, self._point_of)
        return backend

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        """Hold the authoritative store's lock for the block (once, however deeply nested)."""
        if self._authority is None or self._lock is not None:
            yield
            return
        self._lock = self._authority.lock()
        try:
            with self._lock:
                yield
        finally:
            self._lock = None

    def _refresh(self) -> None:
        self._urls.update(self.view.servers)
        on_servers = read_views({name: self.backend(name) for name in self._urls})
        found = on_servers if self._authority is None else self._authoritative(on_servers)
        # Publishing through another store would split the cluster: the followers of the
        # authority would be refused by every server moved past the epoch it holds.
        check_authority(on_servers, self.authority, who="the coordinator")
        if found is not None and found.epoch > self.view.epoch:
            self.view = found
            self._urls.update(found.servers)

    def _authoritative(self, on_servers: ClusterView | None) -> ClusterView | None:
        """Return the store's view, refusing servers that moved on without the store."""
        assert self._authority is not None
        held = self._authority.load()
        epoch = 0 if held is None else held.epoch
        if on_servers is not None and on_servers.epoch > epoch:
            where = "holds no view" if held is None else f"holds epoch {epoch}"
            raise ConfigError(
                f"the servers' view must not be newer than the view store's, got epoch "
                f"{on_servers.epoch} on the servers while {self._authority.url} {where}; "
                f"import it with `ringkit rebalance --view-store URL --import-from-servers`"
            )
        return held

    def _probe(self, view: ClusterView) -> None:
        self._urls.update(view.servers)
        needed = {node.name for node in view.placement.nodes}
        for name in sorted(view.servers):
            try:
                self.backend(name).ping()
            except BackendError as error:
                if name in needed:
                    raise BackendError(
                        f"server {name!r} is down and is a node of the new placement: {error}"
                    ) from None
                self._down.add(name)

    def _publish(
        self, view: ClusterView, targets: Mapping[str, str] | None = None, *, replace: bool = False
    ) -> None:
        self._epoch = view.epoch
        line = self.audit.record("view", view.to_dict(redact_passwords=True))
        data = view.to_json()
        if self._authority is not None:
            # The store first: a client that a server refuses finds this view there.
            check = getattr(self._lock, "check", None)  # a LeaseLock says if it lost its lease
            if check is not None:
                check()
            self._authority.publish(view, replace=replace)
        # A removed server gets the final view too: a stale client that reaches it learns it.
        for name in sorted(targets or view.servers):
            if name in self._down:
                continue
            backend = self.backend(name)
            held = backend.publish(view.epoch, data, replace=replace)
            if held > view.epoch:
                raise StaleViewError(name, held, view.epoch)
            backend.append_audit(line)
        self.view = view
        if self._on_view is not None:
            self._on_view(view)

    # -- changing ------------------------------------------------------------------------------

    def _current_ring(self) -> HashRing:
        self._refresh()
        placement = self.view.placement
        if not isinstance(placement, HashRing):
            raise UnsupportedError(
                f"membership changes need a HashRing placement, got {type(placement).__name__}"
            )
        return placement

    def add(self, name: str, url: str) -> RebalanceReport:
        """Add server `name` at `url` to the newest view on the servers, and move its keys.

        :raises DuplicateNodeError: when `name` is already a node
        """
        url = self.credentials.learn(name, url)
        with self._locked():
            new = self._current_ring().add(name)
            return self.change(new, {**self.view.servers, name: url}, {"add": name})

    def remove(self, name: str) -> RebalanceReport:
        """Remove server `name` from the newest view on the servers, and move its keys.

        :raises UnknownNodeError: when `name` is not a node
        """
        with self._locked():
            new = self._current_ring().remove(name)
            return self.change(new, dict(self.view.servers), {"remove": name})

    def change(
        self, new: HashRing, servers: Mapping[str, str], change: Mapping[str, str]
    ) -> RebalanceReport:
        """Move the cluster from its current placement to `new`, served by `servers`.

        Runtime: one range read per moved arc and source, plus O(k) work for the k keys on
        moved arcs (twice: copy, then cleanup), plus one SCAN per source with ``scan``.

        :raises ConfigError: when a rebalance is in progress (resume or roll it back first),
            or another coordinator holds the view store's lock
        :raises BackendError: when a server of `new` is down, or keys would have no source
        """
        public = self.credentials.learn_all(servers)  # secrets stay here, out of the views
        with self._locked():
            return self._change(new, public, change)

    def _change(
        self, new: HashRing, servers: Mapping[str, str], change: Mapping[str, str]
    ) -> RebalanceReport:
        self._refresh()
        current = self.view
        if current.transitional:
            raise ConfigError(
                f"a rebalance is in progress (epoch {current.epoch}, {current.state}); "
                f"resume it or roll it back first"
            )
        moving = ClusterView(
            current.epoch + 1,
            new,
            dict(servers),
            current.replicas,
            previous=current.placement,
            state="moving",
            change=dict(change),
            serializer=current.serializer,  # the configuration travels with every view
            hot_copies=current.hot_copies,
            authority=self.authority,
        )
        return self._run(moving)

    def resume(self) -> RebalanceReport:
        """Finish the rebalance in progress (skipping finished transfers), if there is one."""
        with self._locked():
            return self._resume()

    def _resume(self) -> RebalanceReport:
        self._refresh()
        if not self.view.transitional:
            if self.view.epoch == 0:  # no view was ever published: nothing to finish
                return RebalanceReport("nothing", 0, 0, 0, 0, 0, 0, 0, 0, 0.0)
            # A coordinator may have died while publishing the final view: finish that.
            self._probe(self.view)
            self._publish(self.view, replace=True)
            return RebalanceReport("nothing", self.view.epoch, 0, 0, 0, 0, 0, 0, 0, 0.0)
        return self._run(self.view, resuming=True)

    def rollback(self) -> RebalanceReport:
        """Undo the ``moving`` rebalance in progress: move back to its previous placement.

        :raises ConfigError: when no ``moving`` rebalance is in progress
        """
        with self._locked():
            return self._rollback()

    def _rollback(self) -> RebalanceReport:
        self._refresh()
        current = self.view
        if current.state != "moving" or current.previous is None:
            raise ConfigError(
                f"no rebalance to roll back: the view at epoch {current.epoch} is {current.state}"
            )
        back = ClusterView(
            current.epoch + 1,
            current.previous,
            dict(current.servers),
            current.replicas,
            previous=current.placement,
            state="rolling_back",
            change={"rollback": str(current.epoch)},
            serializer=current.serializer,
            hot_copies=current.hot_copies,
            authority=self.authority,
        )
        return self._run(back, outcome="rolled_back")

    # -- moving the authority ------------------------------------------------------------------

    def _file_path(self) -> str | None:
        return self._store.path if isinstance(self._store, FileViewStore) else None

    def import_from_servers(self) -> bool:
        """Make this coordinator's view store the authority over the view the servers hold.

        The store takes the view first (etcd under its lock, refused when it holds a newer
        epoch; a file store's file is written), then every server is given the same view at
        the same epoch, recording the new authority. Return False when both held it already.

        :raises ConfigError: when this coordinator has no store other than the servers, or
            the servers hold no view
        """
        path = self._file_path()
        if self._authority is None and path is None:
            raise ConfigError(
                f"the view store to import into must be etcd://HOST:PORT/PREFIX or "
                f"file://PATH, got {self.authority}"
            )
        found = read_views({name: self.backend(name) for name in self._urls})
        if found is None:
            raise ConfigError(
                "the servers hold no cluster view to import; rebalance with --view-store"
            )
        moved = dataclasses.replace(found, authority=self.authority)
        if self._authority is not None:
            stored = self._authority.import_view(moved)
        else:
            assert path is not None
            write_view(moved, path)
            stored = True
        return self._restamp(moved) or stored

    def export_to_servers(self) -> bool:
        """Give the authority over the view back to the servers (``servers://``).

        The store's view, at its epoch, is given to every server recording ``servers://``,
        and the store keeps it so recorded (its followers are refused at their first call).
        Return False when the servers held it already.

        :raises ConfigError: when this coordinator has no other store, the store holds no
            view, or the servers hold a newer epoch than the store
        """
        path = self._file_path()
        if self._authority is None and path is None:
            raise ConfigError(
                f"the view store to export from must be etcd://HOST:PORT/PREFIX or "
                f"file://PATH, got {self.authority}"
            )
        with self._locked():
            held = self._authority.load() if self._authority is not None else load_view(path)
            if held is None:
                raise ConfigError(f"{self.authority} must hold a cluster view to export, got none")
            self._urls.update(held.servers)
            on_servers = read_views({name: self.backend(name) for name in self._urls})
            if on_servers is not None and on_servers.epoch > held.epoch:
                raise ConfigError(
                    f"the servers' view must not be newer than {self.authority}'s to export it, "
                    f"got epoch {on_servers.epoch} on the servers, {held.epoch} in the store"
                )
            back = dataclasses.replace(held, authority=SERVERS_AUTHORITY)
            if self._authority is not None:
                self._authority.publish(back, replace=True)
            return self._restamp(back)

    def _restamp(self, view: ClusterView) -> bool:
        """Give every server of `view` that view at its epoch; True when one held another."""
        data = view.to_json()
        changed = False
        for name in sorted(view.servers):
            backend = self.backend(name)
            if backend.read_view() != data:
                backend.publish(view.epoch, data, replace=True)  # never moves a server back
                changed = True
        self.view = view
        if self._on_view is not None:
            self._on_view(view)
        return changed

    def _run(
        self, view: ClusterView, outcome: str = "done", *, resuming: bool = False
    ) -> RebalanceReport:
        started = time.perf_counter()
        old, new = view.previous, view.placement
        if not (isinstance(old, HashRing) and isinstance(new, HashRing)):
            raise UnsupportedError("online rebalancing needs HashRing placements")
        if old.hasher != new.hasher or old.space != new.space:
            raise UnsupportedError("online rebalancing cannot change the hasher or the space")
        self._probe(view)
        movement = diff(old, new, replicas=view.replicas)
        plan = movement.plan(max_streams_per_source=self.options.max_streams_per_source)
        # Everything that can refuse is checked before anything is published: a refusal after
        # the moving view would leave the cluster stuck in it.
        for transfer in plan.transfers:
            for name in (*self._sources(view, transfer), transfer.destination):
                _ = self.backend(name).index  # raises on a server that cannot list its keys
        self._publish(view, replace=resuming)
        _log.info(
            "move %s to epoch %d: %s, %d transfers",
            "resumed" if resuming else "started",
            view.epoch,
            ", ".join(f"{what} {name}" for what, name in sorted(view.change.items())) or view.state,
            len(plan.transfers),
        )
        self.audit.record(
            "plan", {"epoch": view.epoch, "transfers": [str(t) for t in plan.transfers]}
        )
        tally, skipped = self._stream(view, plan.transfers, movement)
        servers = {node.name: view.servers[node.name] for node in new.nodes}
        final = ClusterView(
            view.epoch + 1,
            new,
            servers,
            view.replicas,
            change=dict(view.change),
            serializer=view.serializer,
            hot_copies=view.hot_copies,
            authority=self.authority,
        )
        self._publish(final, view.servers)
        deleted = self._cleanup(movement, new.space)
        for name in sorted(view.servers):
            if name not in self._down:
                self.backend(name).write_checkpoint(None)
        report = RebalanceReport(
            outcome,
            final.epoch,
            len(plan.transfers),
            skipped,
            tally.planned,
            tally.streamed,
            tally.copied,
            tally.bytes,
            deleted,
            time.perf_counter() - started,
        )
        self.audit.record("done", {"epoch": final.epoch, "outcome": outcome})
        _log.info(
            "move finished (%s) at epoch %d: %d keys streamed, %d copied (%d bytes), "
            "%d deleted from old owners, %.2f s",
            outcome,
            final.epoch,
            report.keys_streamed,
            report.keys_copied,
            report.bytes_copied,
            report.keys_deleted,
            report.elapsed_s,
        )
        return report

    # -- streaming -----------------------------------------------------------------------------

    def _checkpoint(self, view: ClusterView) -> set[str]:
        done: set[str] = set()
        for name in sorted(view.servers):
            if name in self._down:
                continue
            data = self.backend(name).read_checkpoint()
            if data:
                saved = json.loads(data)
                if saved.get("epoch") == view.epoch:
                    done.update(saved.get("done", []))
        return done

    def _save(self, view: ClusterView, done: set[str]) -> None:
        data = json.dumps({"epoch": view.epoch, "done": sorted(done)}).encode()
        for name in sorted(view.servers):
            if name not in self._down:
                self.backend(name).write_checkpoint(data)

    def _sources(self, view: ClusterView, transfer: Transfer) -> list[str]:
        if transfer.source not in self._down:
            return [transfer.source]
        assert view.previous is not None
        survivors = [
            node.name
            for node in view.previous.nodes
            if node.name not in self._down and node.name != transfer.destination
        ]
        if view.replicas < 2 or not survivors:
            raise BackendError(
                f"server {transfer.source!r} is down and its keys have no other copy "
                f"(replicas={view.replicas}); they cannot be rebuilt"
            )
        return survivors  # each surviving copy of the arc: the newest version wins

    def _prepare(
        self, view: ClusterView, todo: list[Transfer], movement: Movement
    ) -> tuple[dict[str, list[str]], list[str], Tally]:
        """Pick each transfer's sources, index foreign keys, count the keys to move."""
        space = movement.space
        sources = {_transfer_id(t): self._sources(view, t) for t in todo}
        names = sorted({name for chosen in sources.values() for name in chosen})
        if self.options.scan:
            # What the index is read for: the arcs each source streams, and the arcs each old
            # owner loses (the cleanup deletes them by their entries; the same arcs, unless a
            # source was down and its arcs are read from the surviving replicas).
            arcs: dict[str, set[tuple[int, int]]] = {name: set() for name in names}
            for t in todo:
                for name in sources[_transfer_id(t)]:
                    arcs[name].add((t.start or 0, t.end or 0))
            for name in movement.nodes_before:
                if name not in self._down:
                    lost = {(arc.start, arc.end) for arc in movement.lost(name)}
                    arcs.setdefault(name, set()).update(lost)
            ring = view.placement
            assert isinstance(ring, HashRing)  # checked before anything was published
            self._backfill({name: ArcSet(sorted(held), ring) for name, held in arcs.items()})
        tally = Tally()
        for t in todo:
            for name in sources[_transfer_id(t)]:
                tally.planned += self.backend(name).index.count(t.start or 0, t.end or 0, space)
        return sources, names, tally

    def _backfill(self, arcs: Mapping[str, ArcSet]) -> None:
        """Index the foreign keys on the arcs to move, every server at once.

        Each server is scanned once and only the keys on its `arcs` are indexed: the rest are
        never read from its index in this change. Throttled, the SCAN pages shrink to `batch`
        keys and go at :data:`SCAN_PACE` times `keys_per_s`, so that no burst slows the reads
        the throttle protects.
        """
        keys_per_s = self.options.keys_per_s
        if keys_per_s is None:
            batch, pace = 1000, None
        else:
            batch, pace = self.options.batch, Throttle(keys_per_s * SCAN_PACE).take
        names = sorted(name for name, held in arcs.items() if held.arcs)
        with ThreadPoolExecutor(max_workers=max(1, min(16, len(names)))) as pool:
            list(
                pool.map(
                    lambda name: self.backend(name).index.backfill(batch, pace, arcs[name]), names
                )
            )

    def _stream(
        self, view: ClusterView, transfers: tuple[Transfer, ...], movement: Movement
    ) -> tuple[Tally, int]:
        space = movement.space
        done = self._checkpoint(view)
        todo = [t for t in transfers if _transfer_id(t) not in done]
        sources, names, tally = self._prepare(view, todo, movement)
        limits = {name: threading.Semaphore(self.options.max_streams_per_source) for name in names}
        throttle = Throttle(self.options.keys_per_s)
        workers = max(1, min(16, self.options.max_streams_per_source * max(len(names), 1)))
        title = f"epoch {view.epoch}: {len(todo)} transfers"
        progress = Progress(tally.planned, show=self.options.progress, title=title)
        with progress, ThreadPoolExecutor(max_workers=workers) as pool:
            shared = (tally, progress, throttle, limits)
            futures: dict[Future[None], Transfer] = {
                pool.submit(self._transfer, t, sources[_transfer_id(t)], space, shared): t
                for t in todo
            }
            saved_at = time.monotonic()
            try:
                for future in as_completed(futures):
                    future.result()
                    transfer = futures[future]
                    done.add(_transfer_id(transfer))
                    if time.monotonic() - saved_at >= self.options.checkpoint_s:
                        self._save(view, done)
                        saved_at = time.monotonic()
                    if self.options.on_transfer is not None:
                        self.options.on_transfer(transfer, len(done))
            except BaseException:
                pool.shutdown(wait=True, cancel_futures=True)
                with contextlib.suppress(BackendError):  # keep what finished, for resume
                    self._save(view, done)
                raise
        self._save(view, done)
        return tally, len(transfers) - len(todo)

    def _transfer(
        self,
        transfer: Transfer,
        sources: list[str],
        space: int,
        shared: tuple[Tally, Progress, Throttle, Mapping[str, threading.Semaphore]],
    ) -> None:
        tally, progress, throttle, limits = shared
        rollback = self.view.state == "rolling_back"
        start, end = transfer.start or 0, transfer.end or 0
        batch = self.options.batch
        target = self.backend(transfer.destination).index
        for name in sources:
            index = self.backend(name).index
            with limits[name]:
                for records in index.dump_arc(start, end, space, batch, self.options.page_bytes):
                    copied = target.restore(records, replace_unversioned=rollback)
                    size = _size_bytes(records)
                    tally.add(len(records), copied, size)
                    progress.advance(len(records), size)
                    # The pause goes between pages, never between a page's read and its landing:
                    # a counter (no version) incremented on the destination in that window is
                    # replaced by the older count copied, so the window is kept to one round trip.
                    throttle.take(len(records))

    def _cleanup(self, movement: Movement, space: int) -> int:
        """Delete the moved copies from the old owners, every server at once."""

        keys_per_s = self.options.keys_per_s
        pace = None if keys_per_s is None else Throttle(keys_per_s).take  # a ceiling here too

        def clean(name: str) -> int:
            index = self.backend(name).index
            batch = self.options.batch
            return sum(
                index.delete_arc(arc.start, arc.end, space, batch, pace)
                for arc in movement.lost(name)
            )

        names = [name for name in movement.nodes_before if name not in self._down]
        with ThreadPoolExecutor(max_workers=max(1, min(16, len(names)))) as pool:
            return sum(pool.map(clean, names))

    def close(self) -> None:
        """Close the coordinator's connections."""
        for backend in self._backends.values():
            backend.close()
