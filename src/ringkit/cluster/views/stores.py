"""View stores: where a client reads the newest cluster view, chosen by URL.

A :class:`ViewStore` answers one question, "what is the newest view, at least this epoch?", as
a sans-I/O generator (:mod:`ringkit.cluster.drivers.steps`), so the sync and the async client read
it the same way. Stores are named by URL and built by scheme from a registry, so a store backed by a
coordination service plugs in with :func:`register_view_store` (the etcd store of the live ring
registers ``etcd://``):

- ``servers://`` (the default): the view the coordinator wrote on every cache server under
  ``ringkit:view``; no extra service. Its limit: a client learns a change when a server refuses
  its call or at its next ``view_check_s``, and a server that was down during the change holds
  an old view until the next one is published.
- ``file:///path/view.json``: a file an operator or a deploy tool keeps (re-read on refresh),
  for static setups (:func:`~ringkit.cluster.views.view.load_view`).
- ``etcd://HOST:PORT/PREFIX`` (registered by :mod:`ringkit.cluster`): the view under its own
  compare-and-swap key in etcd, followed by a watch, and a lease lock for the coordinator
  (:mod:`ringkit.cluster.views.etcd`).

Every view records its *authority*, the store it is decided in (``servers://``, ``file://PATH``
or ``etcd://ENDPOINTS/PREFIX``, never a secret), and the servers hold it with the view: a
coordinator that would publish through another store, and a client configured with another
store, are refused (:func:`check_authority`), naming the command that moves the authority.

Two richer forms of the protocol: a :class:`FollowedViewStore` pushes each new view to the
client (the client follows it from construction to ``close``), and an
:class:`AuthoritativeViewStore` is where the coordinator publishes views first, under its lock.

>>> open_view_store(None).url, open_view_store("file:///tmp/view.json").url
('servers://', 'file:///tmp/view.json')
>>> open_view_store("zk://host/ring")  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
ringkit.errors.ConfigError: view store scheme must be one of ..., got 'zk'; ...
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from functools import partial
from typing import Any, Protocol, runtime_checkable

from ringkit.cluster.drivers.steps import Blocking, Call, Failed, Steps, run_plain
from ringkit.cluster.views.view import SERVERS_AUTHORITY, ClusterView, load_view
from ringkit.errors import BackendError, ConfigError, ViewConflictError

__all__ = [
    "AuthoritativeViewStore",
    "FileViewStore",
    "FollowedViewStore",
    "Following",
    "ServersViewStore",
    "ViewStore",
    "authority_of",
    "check_authority",
    "open_view_store",
    "read_views",
    "register_view_store",
    "same_authority",
    "stamp",
]


@runtime_checkable
class ViewStore(Protocol):
    """A source of cluster views: ``read`` the newest one (None when there is none)."""

    url: str

    def read(self, servers: Sequence[str], at_least: int) -> Steps[ClusterView | None]:
        """Return the newest view; `servers` are the client's, `at_least` an epoch to reach.

        :raises BackendError: when the store cannot be reached
        """
        ...


class Following(Protocol):
    """What ``FollowedViewStore.follow`` returns: ``cancel()`` stops the callbacks."""

    def cancel(self) -> None: ...


@runtime_checkable
class FollowedViewStore(ViewStore, Protocol):
    """A view store that tells its followers of every new view (a watch, not polling)."""

    def follow(self, on_view: Callable[[ClusterView], None]) -> Following:
        """Call `on_view` with the current view, then with every newer one, until cancelled."""
        ...

    def close(self) -> None:
        """Stop following and release connections."""
        ...


@runtime_checkable
class AuthoritativeViewStore(ViewStore, Protocol):
    """A view store the coordinator publishes to first: the authority on the cluster's view.

    The cache servers still learn each epoch (they fence calls by it); the store decides.
    """

    def load(self) -> ClusterView | None:
        """Return the view in the store now (None when there is none); blocks."""
        ...

    def publish(self, view: ClusterView, *, replace: bool = False) -> None:
        """Store `view` unless the store holds a newer epoch (or another view at that epoch).

        :raises ViewConflictError: when it does
        """
        ...

    def lock(self, holder: str | None = None) -> AbstractContextManager[Any]:
        """Return the coordinator's lock, taken on entering (a second holder is refused)."""
        ...

    def import_view(self, view: ClusterView) -> bool:
        """Store `view` taken from the servers; False when the store holds it already.

        :raises ConfigError: when the store holds a newer epoch
        """
        ...


class ServersViewStore:
    """The view stored on the cache servers themselves (``ringkit:view``), newest epoch wins."""

    url = SERVERS_AUTHORITY
    authority = SERVERS_AUTHORITY

    def read(self, servers: Sequence[str], at_least: int) -> Steps[ClusterView | None]:
        """Ask the servers in name order until one holds a view of epoch `at_least` or newer.

        Servers that fail are skipped.

        :raises BackendError: when no server answered, ending with each server's failure (a
            refused connection, an authentication or TLS error)
        """
        best: ClusterView | None = None
        answered = 0
        causes: list[str] = []
        for name in sorted(servers):
            [data] = yield (Call(name, "read_view", (), 0, "read_view"),)
            if isinstance(data, Failed):
                causes.append(str(data.error))
                continue
            answered += 1
            if data:
                view = ClusterView.from_json(data)
                if best is None or view.epoch > best.epoch:
                    best = view
            if best is not None and at_least and best.epoch >= at_least:
                break
        if not answered and servers:
            raise BackendError(
                f"no server answered for the cluster view (asked {len(servers)}); "
                f"cause: {'; '.join(causes) or 'none reported'}"
            )
        return best


def stamp(view: ClusterView, names: Sequence[str]) -> Steps[bool]:
    """Give the servers `names`, in name order, `view` unless they hold a newer epoch.

    Compare-and-set on each server (atomic on Redis and memory, best effort on memcached): a
    server never moves back, and one that holds another view at the same epoch is left as it is.
    Servers that fail are skipped. Return False when a server held another view at that epoch
    (another client or coordinator published first: read the servers again), else True.
    """
    data = view.to_json()
    for name in sorted(names):
        try:
            yield (Call(name, "publish", (view.epoch, data), 0, "publish"),)
        except ViewConflictError:
            return False
    return True


class FileViewStore:
    """A view kept in a JSON file (``file:///path``), read again on every refresh."""

    def __init__(self, url: str) -> None:
        self.url = self.authority = url
        self.path = url.removeprefix("file://")

    def read(self, servers: Sequence[str], at_least: int) -> Steps[ClusterView | None]:
        """Return the view in the file.

        :raises ConfigError: when the file cannot be read or is not a view
        """
        [view] = yield (Blocking(partial(load_view, self.path)),)
        found: ClusterView = view
        return found


_STORES: dict[str, Callable[[str], ViewStore]] = {
    "file": FileViewStore,
    "servers": lambda url: ServersViewStore(),
}


def register_view_store(scheme: str, factory: Callable[[str], ViewStore]) -> None:
    """Let ``open_view_store("SCHEME://…")`` build a store with `factory(url)`."""
    _STORES[scheme] = factory


def open_view_store(source: str | ViewStore | None) -> ViewStore:
    """Return the view store `source` names (None: the servers), or `source` itself.

    :raises ConfigError: when the URL's scheme has no registered store
    """
    if source is None:
        return ServersViewStore()
    if not isinstance(source, str):
        if not isinstance(source, ViewStore):
            raise TypeError(f"view_store must be a URL or a ViewStore, got {type(source).__name__}")
        return source
    scheme = source.partition("://")[0] if "://" in source else ""
    factory = _STORES.get(scheme)
    if factory is None:
        raise ConfigError(
            f"view store scheme must be one of {', '.join(sorted(_STORES))}, got {scheme!r}; "
            f"register_view_store() adds one"
        )
    return factory(source)


def read_views(backends: Mapping[str, Any], at_least: int = 0) -> ClusterView | None:
    """Return the newest view stored on the servers of `backends` (None if none holds one).

    The coordinator's form of :meth:`ServersViewStore.read`, on bare fenced backends.

    :raises BackendError: when no server answered
    """
    return run_plain(ServersViewStore().read(list(backends), at_least), backends)


def authority_of(store: ViewStore | None) -> str:
    """Return the authority a view decided through `store` records (None: the servers).

    A store names it with an ``authority`` attribute (its URL without user or password);
    otherwise its URL is taken.
    """
    if store is None:
        return SERVERS_AUTHORITY
    authority = getattr(store, "authority", None)
    return authority if isinstance(authority, str) else store.url


def _etcd_parts(authority: str) -> tuple[frozenset[str], str] | None:
    scheme, _, rest = authority.partition("://")
    if scheme not in ("etcd", "etcds"):
        return None
    hosts, _, path = rest.partition("/")
    return frozenset(hosts.split(",")), "/".join(part for part in path.split("/") if part)


def same_authority(recorded: str, configured: str) -> bool:
    """Whether `configured` names the store `recorded` names.

    Two etcd URLs name the same store when their prefixes are equal and they share an
    endpoint (a client may list a subset of the cluster's members, in any order).
    """
    if recorded == configured:
        return True
    mine, theirs = _etcd_parts(configured), _etcd_parts(recorded)
    if mine is None or theirs is None:
        return False
    return mine[1] == theirs[1] and bool(mine[0] & theirs[0])


def check_authority(recorded: ClusterView | None, configured: str, *, who: str) -> None:
    """Refuse `who` configured with the store `configured` where the servers record another.

    `recorded` is the newest view on the servers (None: they hold none, nothing to refuse).

    :raises ConfigError: naming both authorities and the command that moves the authority
    """
    if recorded is None or same_authority(recorded.authority, configured):
        return
    held = recorded.authority
    if held == SERVERS_AUTHORITY:
        move = f"ringkit rebalance --servers … --view-store {configured} --import-from-servers"
    else:
        move = f"ringkit rebalance --view-store {held} --export-to-servers"
        if configured != SERVERS_AUTHORITY:
            move += f", then --view-store {configured} --import-from-servers"
    raise ConfigError(
        f"{who}'s view store must be the authority the servers record for the cluster view "
        f"(epoch {recorded.epoch}): configured {configured}, recorded {held}; configure "
        f"--view-store {held} (view_store=), or move the authority with `{move}`"
    )
