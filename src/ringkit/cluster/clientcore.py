"""The one decision core of the sync and async sharded clients.

:class:`ClientCore` checks its options once (:class:`~ringkit.cluster.options.ClientOptions`)
and composes the client: a :class:`~ringkit.cluster.core.servers.ServerSet` (the servers, their
health, probes and hints), a :class:`~ringkit.cluster.core.tracker.ViewTracker` over a
:class:`~ringkit.cluster.views.stores.ViewStore` (the view, its router, refresh and retry), a
:class:`~ringkit.cluster.core.reader.Reader`, a :class:`~ringkit.cluster.core.writer.Writer` and
the remedies (:mod:`ringkit.cluster.remedies`). Nothing intercepts attribute assignment; each
part has its own interface.

Every verb is written here once, as a sans-I/O generator (:mod:`ringkit.cluster.drivers.steps`):
:class:`~ringkit.cluster.client.ShardedClient` drives it with blocking backends,
:class:`~ringkit.cluster.aio.AsyncShardedClient` awaits it; the two only open their kind of
server and run the steps. A single-key ``get`` or ``set`` that the steps would answer with one
call is that call made straight, decided here too (the ``_lone_*`` methods,
:mod:`ringkit.cluster.core.alone`); the clients only make it. Membership changes are the
coordinator's (:mod:`ringkit.cluster.rebalance.coordination`): the client calls one, it does not
import it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any, Generic, TypeVar

from ringkit.cluster.checks import int_in_range, non_negative_int, one_of, positive_seconds
from ringkit.cluster.core.alone import LoneRoutes
from ringkit.cluster.core.health import DEFAULT_DEAD_TIMEOUT_S, Hook, ServerHealth, StatsSnapshot
from ringkit.cluster.core.hotkeys import HotKeys
from ringkit.cluster.core.reader import Reader
from ringkit.cluster.core.routing import Router
from ringkit.cluster.core.servers import Fenced, Server, ServerSet, check_server_map
from ringkit.cluster.core.tracker import ViewTracker
from ringkit.cluster.core.writer import Writer
from ringkit.cluster.drivers.steps import Call, Failed, Steps
from ringkit.cluster.metrics import ClientMetrics
from ringkit.cluster.options import DEFAULT_MAX_VALUE_BYTES, RAW_WHY, ClientOptions, ServerOptions
from ringkit.cluster.rebalance.coordination import coordinator_for
from ringkit.cluster.rebalance.options import RebalanceOptions, RebalanceReport
from ringkit.cluster.remedies.nearcache import (
    NearCache,
    invalidating,
    read_many_through,
    read_through,
    wanted,
)
from ringkit.cluster.remedies.splits import SplitCounters
from ringkit.cluster.values.codec import (
    RAW,
    Codec,
    RawCodec,
    Serializer,
    ValueCodec,
    get_serializer,
)
from ringkit.cluster.values.keys import key_bytes, route_key, user_key, user_keys
from ringkit.cluster.views.stores import ViewStore, open_view_store
from ringkit.cluster.views.view import ClusterView
from ringkit.cluster.wire.credentials import Credentials
from ringkit.cluster.wire.index import SWEEP_BATCH
from ringkit.cluster.wire.redis.handoff import is_copy_tombstone
from ringkit.cluster.wire.urls import ServerURL
from ringkit.errors import (
    EpochLostError,
    UnsupportedError,
)
from ringkit.placement import Placement

__all__ = ["ON_ERROR", "REFUSED", "STEPS", "ClientCore", "check_delta", "check_keys"]

#: What ``get_many`` does about a key no replica of which answered: raise, or leave it out.
ON_ERROR = ("raise", "miss")


class _Sentinel:
    __slots__ = ("_name",)

    def __init__(self, name: str) -> None:
        self._name = name

    def __repr__(self) -> str:
        return self._name


#: What a client's transport answers for a lone call the server refused (a newer view, a lost
#: epoch): the whole steps then refresh, or re-stamp, and retry.
REFUSED: Any = _Sentinel("REFUSED")
#: What :meth:`ClientCore._lone_got` answers when the whole read must answer instead.
STEPS: Any = _Sentinel("STEPS")
B = TypeVar("B", bound=Fenced)
T = TypeVar("T")


# The largest step every backend counts by: Redis's INCRBY takes a signed 64-bit delta.
_MAX_DELTA = 2**63 - 1


def check_delta(delta: object) -> int:
    """Return `delta` if it is an int (not a bool) in [-(2**63 - 1), 2**63 - 1].

    :raises ConfigError: otherwise, naming the value
    """
    return int_in_range("delta", delta, -_MAX_DELTA, _MAX_DELTA, "Redis's INCRBY range")


def check_keys(keys: object) -> list[str | bytes]:
    """Return the keys of `keys`, an iterable of keys that is not itself one key.

    A str or bytes is iterable, so ``get_many("x1")`` would otherwise read the keys "x" and "1".

    :raises TypeError: when `keys` is a single str or bytes, or is not iterable
    """
    if isinstance(keys, (str, bytes, bytearray, memoryview)):
        raise TypeError(
            f"keys must be an iterable of keys, got one key {keys!r:.60}; pass a list of keys"
        )
    if not isinstance(keys, Iterable):
        raise TypeError(f"keys must be an iterable of keys, got {type(keys).__name__}")
    return list(keys)


class ClientCore(Generic[B]):
    """Options, composition and every operation's decisions; subclasses drive the steps.

    Options (keyword-only, all checked by :class:`ClientOptions` before any server is contacted,
    and kept as ``options``):

    - `replicas`: copies of each key, on the first R distinct nodes of its preference list;
    - `write_quorum`: replicas that must acknowledge a write (<= replicas), else QuorumError;
    - `read`: ``"first"`` (first healthy replica, fall back on miss / error / timeout) or
      ``"all"`` (ask every replica, keep the highest version); `read_repair` fixes the rest;
    - `serializer`: ``"json"`` (default), ``"pickle"``, a :class:`Serializer`, or ``"raw"``:
      bytes, str (UTF-8) and ints stored as is, readable by other languages' clients; reads
      return bytes; refuses ``replicas > 1``, ``read="all"``, `hot_keys` and online rebalancing;
    - `timeout_s`, `connect_timeout_s`: per call (pymemcache's timeout / connect_timeout);
    - `dead_timeout_s`: how long a failed server is skipped before a probe; `max_hints`: keys
      hinted per down server (on each server that took the writes, and in memory when none
      could), deleted there on re-admission by whichever client re-admits it;
    - `max_value_bytes`: largest stored value; `max_connections`: pool size per server;
    - `hot_keys`: a :class:`HotKeys` policy, or None; `hooks`: callables given each OpEvent;
    - `index_keys`: whether Redis writes also record each key in the server's key index
      (default True: a rebalance reads an arc as range reads); False saves the index's memory
      and a rebalance finds the keys with a ``SCAN`` of each source;
    - `near_cache`: a :class:`~ringkit.cluster.remedies.nearcache.NearCache` (reads answered from
      this client's memory, at most its `ttl_s` old for other processes' writes), or None (default);
    - `metrics_registry`: a ``prometheus_client`` registry (``REGISTRY`` for the default) to
      register this client's metrics in, labelled ``client=metrics_name``
      (:mod:`ringkit.cluster.metrics`); None (default): no metrics;
    - `view_store`: where the newest cluster view is read, a URL (``servers://``, the default;
      ``file:///path``; ``etcd://HOST:PORT/PREFIX``, followed by a watch) or a
      :class:`~ringkit.cluster.views.stores.ViewStore`;
    - `credentials`: ``{server name or "host:port" or "*": password or (user, password)}``,
      the secrets of Redis servers, also of those learnt from a view (views carry none); else
      ``RINGKIT_REDIS_PASSWORD``. Secrets inline in `servers` URLs are used, never published
      (:mod:`ringkit.cluster.wire.credentials`).
    """

    def __init__(
        self,
        placement: Placement,
        servers: Mapping[str, str],
        *,
        replicas: int = 1,
        write_quorum: int = 1,
        read: str = "first",
        read_repair: bool = True,
        serializer: str | Serializer = "json",
        timeout_s: float = 1.0,
        connect_timeout_s: float | None = None,
        dead_timeout_s: float = DEFAULT_DEAD_TIMEOUT_S,
        max_hints: int = 100_000,
        max_value_bytes: int = DEFAULT_MAX_VALUE_BYTES,
        max_connections: int = 32,
        hot_keys: HotKeys | None = None,
        hooks: Sequence[Hook] = (),
        view_store: str | ViewStore | None = None,
        credentials: Mapping[str, str | tuple[str, str]] | None = None,
        near_cache: NearCache | None = None,
        index_keys: bool = True,
        metrics_registry: object | None = None,
        metrics_name: str | None = None,
    ) -> None:
        self.options = options = ClientOptions(
            replicas=replicas,
            write_quorum=write_quorum,
            read=read,
            read_repair=read_repair,
            serializer=serializer,
            timeout_s=timeout_s,
            connect_timeout_s=connect_timeout_s,
            dead_timeout_s=dead_timeout_s,
            max_hints=max_hints,
            max_value_bytes=max_value_bytes,
            max_connections=max_connections,
            hot_keys=hot_keys,
            hooks=hooks,
            view_store=view_store,
            credentials=credentials,
            near_cache=near_cache,
            index_keys=index_keys,
        )
        self._near = near_cache
        self.metrics = (
            ClientMetrics(metrics_registry, name=metrics_name)
            if metrics_registry is not None
            else None
        )
        self._server_options = options.server_options
        if self.metrics is not None:  # the metrics count every server call through the hooks
            self._server_options = replace(
                self._server_options, hooks=(*self._server_options.hooks, self.metrics.observe)
            )
        urls = check_server_map(placement, servers)
        self._credentials = Credentials(credentials)
        self._credentials.check_known(urls)
        public = self._credentials.learn_all(urls)
        store = open_view_store(view_store)
        self._index_keys = options.index_keys
        self._hot = hot_keys
        self._servers: ServerSet[B] = ServerSet(self._open)
        self._raw = options.raw
        codec: ValueCodec = RawCodec() if self._raw else Codec(get_serializer(serializer))
        # The client's configuration, as a view: the first client of empty servers publishes it
        # (epoch 1); later clients must match the one published (ringkit.cluster.core.tracker).
        named = RAW if self._raw else get_serializer(serializer).name
        view = ClusterView(0, placement, public, replicas, serializer=named)
        self.reader = Reader(self._servers, codec, read_all=read == "all", read_repair=read_repair)
        self.writer = Writer(
            self._servers, codec, write_quorum=write_quorum, max_value_bytes=max_value_bytes
        )
        self._tracker = ViewTracker(
            view, self._servers, store, hot_keys=hot_keys, owns_store=isinstance(view_store, str)
        )
        self._splits = (
            SplitCounters(hot_keys, self.reader, self.writer)
            if hot_keys is not None and hot_keys.remedy == "split"
            else None
        )
        self.view_check_s: float | None = None
        # Whether a single-key call may ever go alone (ringkit.cluster.core.alone): no hot keys
        # (they record every read), no near-cache (it answers, or fills, first), read="first".
        self._alone = hot_keys is None and near_cache is None and read == "first"
        self._lone: LoneRoutes | None = None
        if self.metrics is not None:
            self.metrics.track(self)

    def _open(self, name: str, url: ServerURL) -> Server[B]:
        options = self._server_options
        health = ServerHealth(
            name, dead_timeout_s=options.dead_timeout_s, max_hints=options.max_hints
        )
        backend = self._open_backend(self._credentials.apply(name, url), options)
        backend.index_keys = self._index_keys
        return Server(name, backend, health, options.hooks)

    def _open_backend(self, url: ServerURL, options: ServerOptions) -> B:
        raise NotImplementedError  # each client opens its own kind of fenced backend

    def _epoch(self) -> int:
        return self._tracker.view.epoch

    def _point_of(self, key: bytes) -> int:
        point_for = getattr(self._tracker.view.placement, "point_for", None)
        return int(point_for(route_key(key))) if point_for is not None else 0

    # -- routing and views ---------------------------------------------------------------------

    @property
    def placement(self) -> Placement:
        """The placement that routes keys (the current view's)."""
        return self._tracker.view.placement

    @property
    def router(self) -> Router:
        """The router of the current view: replicas, read order and write targets of keys."""
        return self._tracker.router

    @property
    def near_cache(self) -> NearCache | None:
        """The client's near-cache (its ``stats()`` count hits, misses, …), or None."""
        return self._near

    @property
    def view(self) -> ClusterView:
        """The cluster view this client routes by."""
        return self._tracker.view

    @property
    def epoch(self) -> int:
        """The epoch of the client's view."""
        return self._tracker.view.epoch

    @property
    def view_store(self) -> ViewStore:
        """Where the client reads the newest view (``servers://`` unless given)."""
        return self._tracker.store

    def adopt_view(self, view: ClusterView) -> None:
        """Route by `view` from now on, unless the client already has a newer one."""
        self._tracker.adopt(view)

    def replicas_for(self, key: str | bytes) -> list[str]:
        """Return the nodes that hold `key`: the first `replicas` of its preference list."""
        return self._tracker.router.replica_names(key_bytes(key))

    def server(self, name: str) -> Server[B]:
        """Return the server named `name` (its backend, health and counters)."""
        return self._servers.server(name)

    @property
    def index_keys(self) -> bool:
        """Whether Redis writes also record the key in the server's index (default True).

        Set by the ``index_keys=`` option. The index makes a rebalance a range read per arc;
        it costs about 127 bytes per key on Redis 7 (measured with 20-byte keys). Off, writes
        skip it and a rebalance finds the keys with one SCAN of each source
        (``RebalanceOptions(scan=True)``, the default).
        """
        return self._index_keys

    @index_keys.setter
    def index_keys(self, value: bool) -> None:
        self._index_keys = bool(value)
        for _, server in self._servers.items():
            server.backend.index_keys = self._index_keys

    # -- the operations, once: each a generator of steps ---------------------------------------

    def _fenced(self, op: Callable[[Router], Steps[T]]) -> Steps[T]:
        return self._tracker.fenced(op, self.view_check_s)

    def _record(self, router: Router, keys: Iterable[bytes]) -> Steps[None]:
        hot = self._hot
        if hot is None:
            return
        for data in keys:
            hot.record(data)
        if hot.remedy != "spread":
            return
        now = time.monotonic()
        for data in keys:
            if not hot.due(data, now):
                continue
            if not router.view.hot_copies:
                # Writers read spread markers only under a view that says keys may be spread:
                # publish one first; copies follow once every writer must have learnt it.
                yield from self._tracker.spread_hot_keys()
                router = self._tracker.router
                if not router.view.hot_copies:
                    break
            if self._tracker.hot_copies_learnt(time.monotonic()):
                # mark, copy, check, then rotate reads over the copies
                yield from self.writer.copies.spread(router, data, hot)
        for data in hot.drain_left():
            # A key left the hot set: delete its extra copies so they never serve stale values.
            for name in router.extra_copies(data):
                call = Call(name, "delete", (data,), router.view.epoch)
                yield from self._servers.attempt(router, name, call, [data])

    def _get(self, data: bytes) -> Steps[Any]:
        """Read `data` with the whole steps: through the near-cache, else from its servers."""
        near = self._near
        if near is not None and wanted(near, (data,), self._hot):
            return read_through(near, data, self._get_stored(data), self._hot)
        return self._get_stored(data)

    def _get_stored(self, data: bytes) -> Steps[Any]:
        """Read `data` from its servers (the sum of its parts if it is a split counter)."""
        splits = self._splits

        def op(router: Router) -> Steps[Any]:
            if self._hot is not None:
                yield from self._record(router, (data,))
            if splits is not None:
                read = yield from splits.read(router, [data])
                return read.get(data)
            found = yield from self.reader.get(router, data)
            return None if found is None else found.value

        return (yield from self._fenced(op))

    # -- the lone call (ringkit.cluster.core.alone): a get or set made straight ---------------

    def _lone_routes(self) -> LoneRoutes | None:
        """The current view's :class:`LoneRoutes`, or None when no call may go alone now.

        None before the client settled, and while a periodic view check is due (the steps
        refresh the view first); built once per router.
        """
        router = self._tracker.router
        lone = self._lone
        if lone is None or lone.router is not router:
            if not self._tracker.settled:
                return None
            lone = self._lone = LoneRoutes(router, dict(self._servers.items()), alone=self._alone)
        check_s = self.view_check_s
        if check_s is not None and self._tracker.check_due(check_s):
            return None
        return lone

    def _lone_get(self, data: bytes) -> tuple[Call, Server[B]] | None:
        """Return the one call a get of `data` makes and its server, when it can go alone.

        A lone read costs 2.06x a bare pymemcache read on memcached where the whole steps cost
        2.42x (benchmarks/bench_fanout.py); on memory:// see benchmarks/bench_client_path.py.
        None: take the whole read.
        """
        lone = self._lone_routes()
        if lone is None or not lone.reads:
            return None
        server = lone.server_for(data)
        if server is None:
            return None
        return Call(server.name, "get_many", ((data,),), lone.epoch, "get"), server

    def _lone_got(self, lone: tuple[Call, Server[B]], data: bytes, found: Any) -> Any:
        """Return the value a lone get answered, or :data:`STEPS`: the whole read answers.

        A refusal (a newer view, a server that lost its epoch) makes the whole read refresh
        and retry; a failed server, already marked down, makes it fall back or name the cause.
        """
        if found is REFUSED:
            return STEPS
        if isinstance(found, Failed):
            lone[1].stats.bump("failovers")
            return STEPS
        stored = found.get(data)
        if stored is None or is_copy_tombstone(stored):  # an invalidated hot-key copy: a miss
            return None
        return self.reader.codec.decode_value(stored)

    def _lone_set(
        self, encoded: Mapping[bytes, bytes], ttl_s: float | None
    ) -> tuple[Call, Server[B]] | None:
        """Return the one call a write of one encoded key makes and its server, if it can go alone.

        As :meth:`_lone_get`, and under a view that spreads no hot key (no spread marker to
        read back): the write's acknowledgement is that call's answer. None: the whole write.
        """
        if len(encoded) != 1:
            return None
        lone = self._lone_routes()
        if lone is None or not lone.writes:
            return None
        [data] = encoded
        server = lone.server_for(data)
        if server is None:
            return None
        return Call(server.name, "set_many", (encoded, ttl_s), lone.epoch), server

    @staticmethod
    def _lone_done(outcome: Any) -> bool:
        """Return True if a lone write took; else the whole write sends the same value again.

        The same encoded value (same version): a refusal makes it refresh and retry, a failed
        server (marked down already) makes it hint or name the cause.
        """
        return outcome is not REFUSED and not isinstance(outcome, Failed)

    def _get_many(
        self, keys: Iterable[str | bytes], on_error: str = "raise"
    ) -> Steps[dict[Any, Any]]:
        one_of("on_error", on_error, ON_ERROR)
        # "miss": a key no replica of which answered is left out like a missing one, so the
        # healthy servers' keys are still served while a shard is down (pymemcache's
        # ignore_exc). Never cached as a miss: the key may well be there.
        partial = on_error == "miss"
        asked_keys = check_keys(keys)
        datas = user_keys(asked_keys)
        once = dict(zip(datas, asked_keys, strict=True))
        given: dict[bytes, list[str | bytes]] | None = None
        if len(once) < len(asked_keys):  # "x1" and b"x1" are one key, answered as each was asked
            given = {}
            for data, key in zip(datas, asked_keys, strict=True):
                given.setdefault(data, []).append(key)

        def read(asked: list[bytes]) -> Steps[dict[bytes, Any]]:
            def op(router: Router) -> Steps[Any]:
                yield from self._record(router, once)
                if self._splits is not None:
                    return (yield from self._splits.read(router, asked, partial=partial))
                found = yield from self.reader.get_many(router, asked, partial=partial)
                return {data: decoded.value for data, decoded in found.items()}

            return self._fenced(op)

        near = self._near
        values: dict[bytes, Any] = {}
        if near is not None:
            values = yield from read_many_through(
                near, list(once), read, self._hot, fill_misses=not partial
            )
        elif once:
            values = yield from read(list(once))
        if given is None:  # each key asked once, the common case: one entry per key found
            return {once[data]: value for data, value in values.items() if value is not None}
        return {
            key: value for data, value in values.items() if value is not None for key in given[data]
        }

    def _set_encoded(self, encoded: Mapping[bytes, bytes], ttl_s: float | None) -> Steps[None]:
        """Write `encoded` with the whole steps (near-cache invalidation, quorum, hints)."""
        attempts: list[Router] = []  # one per attempt: a refused write is sent again

        def write(router: Router) -> Steps[None]:
            attempts.append(router)
            return self.writer.set_many(router, encoded, ttl_s, retried=len(attempts) > 1)

        yield from invalidating(self._near, encoded, self._fenced(write))

    def _each(self, data: bytes, method: str, args: tuple[Any, ...]) -> Steps[list[Any]]:
        done: dict[str, Any] = {}  # kept across the retries of a refused call: applied once
        answers: list[Any] = yield from invalidating(
            self._near,
            (data,),
            self._fenced(lambda router: self.writer.each(router, data, method, args, done)),
        )
        return answers

    def _add(self, key: str | bytes, value: object, ttl_s: float | None) -> Steps[bool]:
        [(data, stored)] = self.writer.encode_many({key: value}, ttl_s).items()
        return bool((yield from self._each(data, "add", (data, stored, ttl_s)))[0])

    def _delete(self, key: str | bytes) -> Steps[bool]:
        data = user_key(key)
        return (yield from invalidating(self._near, (data,), self._delete_key(data)))

    def _delete_key(self, data: bytes) -> Steps[bool]:
        """Delete `data` (a split counter's marker and parts too); return whether it existed."""
        if self._splits is not None:
            return (yield from self._splits.delete(data, self._fenced, self._delete_one))
        return any((yield from self._delete_one(data)))

    def _delete_one(self, data: bytes) -> Steps[list[Any]]:
        done: dict[str, Any] = {}  # kept across the retries of a refused call: applied once
        answers: list[Any] = yield from self._fenced(
            lambda router: self.writer.delete(router, data, done)
        )
        return answers

    def _delete_many(self, keys: Iterable[str | bytes]) -> Steps[int]:
        given = list(dict.fromkeys(user_key(key) for key in check_keys(keys)))
        return (yield from invalidating(self._near, given, self._delete_given(given)))

    def _delete_given(self, given: list[bytes]) -> Steps[int]:
        if self._splits is not None:
            # A split counter is its marker and parts too, which only ``_delete_key`` finds:
            # deleting the key alone would leave the marker, and the next read would sum the
            # parts back. Key by key, as ``delete`` does.
            deleted = 0
            for data in given:
                deleted += bool((yield from self._delete_key(data)))
            return deleted
        gone: set[bytes] = set()  # kept across the retries of a refused call
        yield from self._fenced(lambda router: self.writer.delete_many(router, given, gone))
        return len(gone)

    def _incr(self, key: str | bytes, delta: int) -> Steps[int | None]:
        check_delta(delta)
        if self.reader.read_all:
            raise UnsupportedError(
                "incr/decr cannot be reconciled by version with read='all'; "
                "use a client with read='first' for counters"
            )
        data = user_key(key)
        splits = self._splits
        if splits is None:
            answer: int | None = (yield from self._each(data, "incr", (data, delta)))[0]
            return answer
        return (
            yield from invalidating(
                self._near, (data,), splits.incr(data, delta, self._each, self._fenced)
            )
        )

    def _touch(self, key: str | bytes, ttl_s: float) -> Steps[bool]:
        self.writer.check_ttl(positive_seconds("ttl_s", ttl_s))
        data = user_key(key)
        touched = any((yield from self._each(data, "touch", (data, ttl_s))))
        if touched and self._splits is not None:
            yield from self._splits.touch(data, ttl_s, self._each, self._fenced)
        return touched

    def _check_health(self) -> Steps[list[str]]:
        for name in self._servers.names:
            try:
                yield from self._servers.usable(name, self._tracker.router)
            except EpochLostError as lost:  # restarted empty: re-stamped, probed again later
                yield from self._tracker.restamp(lost.server)
        return self.down_servers

    def _sweep_index(self) -> Steps[int]:
        """Sweep the whole key index of every server, one bounded step at a time."""
        removed = 0
        for name in self._servers.names:
            cursor = b"-"
            while cursor:
                call = Call(name, "sweep_index", (cursor, SWEEP_BATCH), self._epoch())
                [outcome] = yield (call,)
                if isinstance(outcome, Failed):
                    raise outcome.error
                gone, cursor = outcome
                removed += gone
        return removed

    def _flush(self) -> Steps[None]:
        names = self._servers.names
        outcomes = yield tuple(Call(name, "flush", (), self._epoch()) for name in names)
        for outcome in outcomes:
            if isinstance(outcome, Failed):
                raise outcome.error

    def _refresh(self, at_least: int) -> Steps[ClusterView]:
        return self._tracker.refresh(non_negative_int("at_least", at_least))

    def _check_change(self, change: str) -> None:
        """Refuse membership change `change` (add, remove) before anything is read or moved.

        :raises UnsupportedError: with ``serializer="raw"``, naming why
        """
        if self._raw:
            raise UnsupportedError(
                f"{change}_server cannot move keys safely with serializer='raw': a moved copy "
                f"could overwrite a newer write ({RAW_WHY}); change the servers offline"
            )

    def _change(
        self, view: ClusterView, options: RebalanceOptions | None, change: str, *args: str
    ) -> RebalanceReport:
        """Run membership change `change` (add, remove) with a coordinator; blocks."""
        coordinator = coordinator_for(
            view, options, self._tracker.adopt, self._tracker.store, self._credentials
        )
        try:
            report: RebalanceReport = getattr(coordinator, change)(*args)
            return report
        finally:
            coordinator.close()

    # -- operating -----------------------------------------------------------------------------

    def stats(self) -> dict[str, StatsSnapshot]:
        """Return each server's counters: hits, misses, errors, failovers, latency."""
        return {name: server.stats.snapshot() for name, server in self._servers.items()}

    def server_health(self) -> dict[str, ServerHealth]:
        """Return each server's health: up or down, its probe schedule, the hints kept for it."""
        return {name: server.health for name, server in self._servers.items()}

    @property
    def hot_keys(self) -> HotKeys | None:
        """The client's hot-key policy (its ``split_stats()`` counts split counters), or None."""
        return self._hot

    @property
    def down_servers(self) -> list[str]:
        """The names of the servers marked down right now."""
        return [name for name, server in self._servers.items() if not server.health.up]

    def __repr__(self) -> str:
        urls = {name: server.url.redacted() for name, server in self._servers.items()}
        return (
            f"{type(self).__name__}({type(self.placement).__name__} of {len(urls)} nodes, "
            f"servers={urls}, replicas={self.options.replicas}, "
            f"write_quorum={self.options.write_quorum})"
        )
