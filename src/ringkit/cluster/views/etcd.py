"""``etcd://``: the cluster view kept in etcd, changed by compare-and-swap, followed by a watch.

The cache servers are not members of a live ring; only their *view* moves to etcd. It lives
under the URL's prefix, next to (never among) the keys of :mod:`ringkit.live`, which uses
``PREFIX/members/NAME`` and ``PREFIX/table``:

- ``PREFIX/cluster/view``: the :class:`~ringkit.cluster.views.view.ClusterView` as JSON, written
  only by compare-and-swap on the key's mod revision, and only with a newer epoch (or, on resume,
  the same view again). The epoch is the view's own counter, not etcd's revision: the cache servers
  fence every call by it, and a view imported from the servers keeps counting from theirs.
- ``PREFIX/cluster/lock``: the coordinator's lease lock (:mod:`ringkit.live.leaselock`),
  whose value names the holder.

Clients follow the view key with a watch from the revision they read (no polling: a new epoch
arrives within a round trip), and read it again when a server refuses a call, since the
coordinator publishes each view here *before* it moves the servers to its epoch. A watch that
breaks is resumed from the next revision, as the live store does. The client is
``etcd-sdk-python`` through :func:`ringkit.live.open_store_backend`: one etcd client in ringkit.

>>> key_of("/views/"), lock_key_of("/views/")
('/views/cluster/view', '/views/cluster/lock')
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import replace

from ringkit.cluster.checks import positive_seconds
from ringkit.cluster.drivers.steps import Blocking, Steps
from ringkit.cluster.views.view import ClusterView
from ringkit.cluster.wire.urls import redact
from ringkit.errors import ConfigError, ViewConflictError
from ringkit.live.backend import Backend, Event, Record, WatchHandle
from ringkit.live.leaselock import DEFAULT_LOCK_TTL_S, LeaseLock, default_holder
from ringkit.live.store import open_store_backend
from ringkit.live.urls import parse_store_url

__all__ = ["SCHEMES", "EtcdViewStore", "key_of", "lock_key_of"]

SCHEMES = ("etcd", "etcds")
_log = logging.getLogger("ringkit.cluster")
_RESUME_DELAY_S = 0.1
_CAS_ATTEMPTS = 5


def key_of(prefix: str) -> str:
    """Return the key of the cluster view under `prefix` (which ends with ``/``)."""
    return prefix + "cluster/view"


def lock_key_of(prefix: str) -> str:
    """Return the key of the coordinator's lock under `prefix`."""
    return prefix + "cluster/lock"


class EtcdViewStore:
    """The cluster view in etcd at `url` (``etcd://[user:password@]h1:p1[,h2:p2…]/PREFIX``).

    Reading: ``read`` (the client's refresh), ``load``. Following: ``follow``. Coordinating:
    ``publish``, ``lock``, ``import_view``. ``close``.

    :raises ConfigError: for a malformed URL or another scheme, or `lock_ttl_s` not > 0
    :raises BackendError: when etcd cannot be reached within a few seconds (naming the hosts)
    """

    def __init__(self, url: str, *, lock_ttl_s: float = DEFAULT_LOCK_TTL_S) -> None:
        positive_seconds("lock_ttl_s", lock_ttl_s)  # before etcd is reached
        parsed = parse_store_url(url)
        if parsed.scheme not in SCHEMES:
            raise ConfigError(
                f"etcd view store URL scheme must be one of {', '.join(SCHEMES)}, "
                f"got {parsed.scheme!r}; use etcd://HOST:PORT/PREFIX"
            )
        self.url = redact(url)
        # What the views decided here record: endpoints and prefix, never a user or password.
        hosts = ",".join(f"[{h}]:{p}" if ":" in h else f"{h}:{p}" for h, p in parsed.endpoints)
        self.authority = f"{parsed.scheme}://{hosts}{parsed.prefix.rstrip('/') or '/'}"
        self.lock_ttl_s = lock_ttl_s
        self.backend: Backend
        self.backend, prefix = open_store_backend(url)
        self.key, self.lock_key = key_of(prefix), lock_key_of(prefix)

    # -- reading -------------------------------------------------------------------------------

    def _decode(self, value: bytes) -> ClusterView:
        try:
            return ClusterView.from_json(value)
        except ConfigError as error:
            raise ConfigError(
                f"etcd key {self.key!r} on {self.backend.describe()} must hold a ringkit "
                f"cluster view, got {value[:60]!r} ({error}); it belongs to something else: "
                f"choose another prefix"
            ) from None

    def _get(self) -> tuple[int, Record | None]:
        revision, records = self.backend.get_prefix(self.key)
        found = [record for record in records if record.key == self.key]
        return revision, (found[0] if found else None)

    def load(self) -> ClusterView | None:
        """Return the view in etcd now, or None when there is none.

        :raises ConfigError: when the key holds something that is not a ringkit view
        :raises BackendError: when etcd cannot be reached
        """
        record = self._get()[1]
        return None if record is None else self._decode(record.value)

    def read(self, servers: Sequence[str], at_least: int) -> Steps[ClusterView | None]:
        """Return the view in etcd (the servers are not asked: etcd is the authority)."""
        [view] = yield (Blocking(self.load),)
        found: ClusterView | None = view
        return found

    # -- publishing ----------------------------------------------------------------------------

    def publish(self, view: ClusterView, *, replace: bool = False) -> None:
        """Store `view` by compare-and-swap unless etcd holds a newer epoch.

        The same view again is accepted (a resumed coordinator publishes it twice); another
        view at the same epoch only with `replace`.

        :raises ViewConflictError: when etcd holds a newer epoch, or another view at this one
        """
        data = view.to_json()
        for _ in range(_CAS_ATTEMPTS):
            record = self._get()[1]
            if record is not None:
                held = self._decode(record.value)
                # Compared as views hold them: one stored by an older ringkit, secrets and all,
                # is the same view, rewritten here without them.
                if held.epoch > view.epoch or (
                    held.epoch == view.epoch and held.to_json() != data and not replace
                ):
                    raise ViewConflictError(
                        f"etcd key {self.key!r} must hold an older view to publish epoch "
                        f"{view.epoch}, got epoch {held.epoch} ({held.state}); another "
                        f"coordinator moved on: resume from its view",
                        epoch=held.epoch,
                    )
                if record.value == data:
                    return
            swapped, _ = self.backend.swap(
                self.key, data, 0, 0 if record is None else record.mod_revision
            )
            if swapped:
                return
        raise ViewConflictError(
            f"etcd key {self.key!r} changed under every one of {_CAS_ATTEMPTS} compare-and-swaps "
            f"for epoch {view.epoch}; run one coordinator at a time",
            epoch=view.epoch,
        )

    def lock(self, holder: str | None = None) -> LeaseLock:
        """Return the coordinator's lease lock (taken by ``with`` or ``acquire()``)."""
        return LeaseLock(
            self.backend, self.lock_key, holder or default_holder(), ttl_s=self.lock_ttl_s
        )

    def import_view(self, view: ClusterView) -> bool:
        """Store `view` (read from the servers) under the lock; False when etcd has it already.

        :raises ConfigError: when etcd holds a newer epoch (it is the authority already), or
            the lock is held
        :raises ViewConflictError: when etcd holds another view at the same epoch
        """
        with self.lock():
            held = self.load()
            if held is not None and held.epoch > view.epoch:
                raise ConfigError(
                    f"the view to import must be at least etcd's epoch {held.epoch} "
                    f"({self.key!r}), got the servers' epoch {view.epoch}; etcd holds the "
                    f"newer view already, there is nothing to import"
                )
            if held is not None and held.to_json() == view.to_json():
                return False
            # The same view imported before its authority was recorded is rewritten in place.
            same = (
                held is not None
                and held.to_json() == replace(view, authority=held.authority).to_json()
            )
            self.publish(view, replace=same)
            return True

    # -- following -----------------------------------------------------------------------------

    def follow(self, on_view: Callable[[ClusterView], None]) -> _Following:
        """Call `on_view` with the view in etcd now (if any), then with every new one.

        Views that are not ringkit views are logged and skipped. Returns a handle whose
        ``cancel()`` stops the callbacks.

        :raises BackendError: when etcd cannot be reached
        """
        following = _Following(self, on_view)
        following.start()
        return following

    def close(self) -> None:
        """Release the etcd connection."""
        self.backend.close()

    def __repr__(self) -> str:
        return f"EtcdViewStore({self.url!r})"


class _Following:
    """One follower of the view key: the current view, then a watch, resumed when it breaks."""

    def __init__(self, store: EtcdViewStore, on_view: Callable[[ClusterView], None]) -> None:
        self._store, self._on_view = store, on_view
        self._revision = 0
        self._cancelled = False
        self._watch: WatchHandle | None = None
        self._lock = threading.Lock()

    def start(self) -> None:
        revision, record = self._store._get()
        if record is not None:
            self._deliver(record.value, record.mod_revision)
        self._revision = max(self._revision, revision)
        self._watch = self._store.backend.watch(
            self._store.key, self._revision + 1, self._on_events, self._on_error
        )

    def _deliver(self, value: bytes, revision: int) -> None:
        with self._lock:
            if self._cancelled or revision <= self._revision:
                return
            self._revision = revision
        try:
            view = self._store._decode(value)
        except ConfigError as error:
            _log.warning("ignoring %s", error)
            return
        self._on_view(view)

    def _on_events(self, events: Sequence[Event]) -> None:
        for event in events:
            if event.key == self._store.key and event.kind == "put":
                self._deliver(event.value, event.revision)

    def _on_error(self, error: Exception) -> None:
        if self._cancelled:
            return
        _log.info("watch of %s broke (%s); resuming", self._store.key, error)
        threading.Thread(target=self._resume, name="ringkit-view-resume", daemon=True).start()

    def _resume(self) -> None:
        """Read the view again and watch from the revision read, until cancelled."""
        while not self._cancelled:
            time.sleep(_RESUME_DELAY_S)
            try:
                self.start()  # a read, then a watch: nothing compacted is needed
                return
            except Exception as error:  # any failure: try again; a follower never stops
                _log.info("resuming the watch of %s failed: %r", self._store.key, error)

    def cancel(self) -> None:
        """Stop the callbacks."""
        with self._lock:
            self._cancelled = True
        if self._watch is not None:
            self._watch.cancel()
