"""Prometheus metrics of a cache client: calls and latency per server and verb, and its state.

``ShardedClient(..., metrics_registry=REGISTRY)`` (or ``AsyncShardedClient``) registers the
client's metrics in a ``prometheus_client`` registry (the ``metrics`` extra); the process exposes
them as it exposes its own, for example with ``prometheus_client.start_http_server(9100)``.

Two kinds of figures, as dskit's ring and Envoy's cluster statistics split them:

- *events*, counted as they happen from the client's operation hook (:class:`OpEvent`): one
  count per server call by operation and outcome (``hit``, ``miss``, ``ok``, ``error``) and a
  latency histogram per server and operation. The ``op`` label is the call the server was sent
  (``get``, ``get_many``, ``set_many``, ``bury`` for a delete's tombstone, ``incr``, and the
  client's own ``read_view`` / ``publish`` / hint calls), so a view check or a hint shows apart
  from the user's reads and writes;
- *state*, read when the registry is scraped: which servers are marked down, the hints kept in
  memory for each, the epoch of the view the client routes by, and the near-cache's and split
  counters' statistics when the client has them.

Every series carries a ``client`` label (``metrics_name=``, by default ``client-N`` in the order
clients registered), so several clients of one process share one registry; servers are labelled
by their node names, never by URL, so no password reaches a scrape. Metric names follow the
Prometheus conventions (``_total`` counters, ``_seconds`` durations).
"""

from __future__ import annotations

import itertools
import threading
import weakref
from collections.abc import Iterator
from dataclasses import fields
from typing import Any, Protocol

from ringkit.cluster.core.health import OpEvent, ServerHealth, StatsSnapshot
from ringkit.cluster.core.hotkeys import HotKeys, SplitStats
from ringkit.cluster.remedies.nearcache import NearCache, NearCacheStats
from ringkit.errors import ConfigError

__all__ = ["ClientMetrics", "MetricsSource"]

# Cache calls take 0.1-2 ms on a local network; a slow server or a timeout takes up to seconds.
# 1, 2.5 and 5 per decade from 0.1 ms to 5 s (Prometheus's own default buckets start at 5 ms).
LATENCY_BUCKETS_S = tuple(round(m * 10.0**e, 6) for e in range(-4, 1) for m in (1.0, 2.5, 5.0))


class MetricsSource(Protocol):
    """What the state metrics read from a client when the registry is scraped."""

    @property
    def epoch(self) -> int: ...

    @property
    def near_cache(self) -> NearCache | None: ...

    @property
    def hot_keys(self) -> HotKeys | None: ...

    def stats(self) -> dict[str, StatsSnapshot]: ...

    def server_health(self) -> dict[str, ServerHealth]: ...


def _prometheus() -> Any:
    try:
        import prometheus_client
    except ImportError as exc:
        raise ConfigError(
            "metrics_registry= needs the prometheus_client package: pip install 'ringkit[metrics]'"
        ) from exc
    return prometheus_client


class _Families:
    """The event families and the state collector of one registry, shared by its clients."""

    def __init__(self, registry: Any) -> None:
        prometheus = _prometheus()
        self.calls = prometheus.Counter(
            "ringkit_cache_calls",
            "Calls to one cache server, by server operation and outcome (hit, miss, ok, error).",
            ["client", "server", "op", "outcome"],
            registry=registry,
        )
        self.latency = prometheus.Histogram(
            "ringkit_cache_call_duration_seconds",
            "Latency of one call to one cache server, by server operation.",
            ["client", "server", "op"],
            buckets=LATENCY_BUCKETS_S,
            registry=registry,
        )
        self.state = _StateCollector()
        registry.register(self.state)


_families: weakref.WeakKeyDictionary[Any, _Families] = weakref.WeakKeyDictionary()
_families_lock = threading.Lock()
_client_numbers = itertools.count(1)


def _families_of(registry: Any) -> _Families:
    with _families_lock:
        families = _families.get(registry)
        if families is None:
            families = _families[registry] = _Families(registry)
        return families


class ClientMetrics:
    """The metrics of one client in one registry: the operation hook and the state it reads.

    Made by the client when it is given ``metrics_registry=``; ``observe`` is one of its
    operation hooks, and ``track`` lets the registry read the client's state at each scrape
    (through a weak reference: a registry never keeps a client alive).
    """

    def __init__(self, registry: Any, *, name: str | None = None) -> None:
        if name is not None and (not isinstance(name, str) or not name):
            raise ConfigError(f"metrics_name must be a non-empty string, got {name!r}")
        self.name = name if name is not None else f"client-{next(_client_numbers)}"
        self._families = _families_of(registry)
        self._calls: dict[tuple[str, str, str], Any] = {}
        self._latency: dict[tuple[str, str], Any] = {}

    def observe(self, event: OpEvent) -> None:
        """Count one server call (the client's operation hook)."""
        # Looking a child up by labels costs a lock and a dict lookup in prometheus_client;
        # keeping the children here makes the hook two increments on the hot path.
        call_key = (event.server, event.op, event.outcome)
        calls = self._calls.get(call_key)
        if calls is None:
            calls = self._calls[call_key] = self._families.calls.labels(self.name, *call_key)
        calls.inc()
        latency_key = (event.server, event.op)
        latency = self._latency.get(latency_key)
        if latency is None:
            latency = self._latency[latency_key] = self._families.latency.labels(
                self.name, *latency_key
            )
        latency.observe(event.elapsed_s)

    def track(self, client: MetricsSource) -> None:
        """Read `client`'s state at every scrape, until it is closed or collected."""
        self._families.state.track(self.name, client)

    def untrack(self) -> None:
        """Stop reading the client's state (it was closed); its event counts stay."""
        self._families.state.untrack(self.name)


class _StateCollector:
    """Reads the tracked clients' state at scrape time (a prometheus_client custom collector)."""

    def __init__(self) -> None:
        self._clients: dict[str, weakref.ReferenceType[MetricsSource]] = {}
        self._lock = threading.Lock()

    def track(self, name: str, client: MetricsSource) -> None:
        with self._lock:
            self._clients[name] = weakref.ref(client)

    def untrack(self, name: str) -> None:
        with self._lock:
            self._clients.pop(name, None)

    def describe(self) -> list[Any]:
        return []  # the families are known only at scrape time; nothing to check at register

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        with self._lock:
            clients = [(name, ref()) for name, ref in self._clients.items()]
        live = [(name, client) for name, client in clients if client is not None]

        def gauge(name: str, doc: str, labels: list[str]) -> Any:
            return GaugeMetricFamily(name, doc, labels=["client", *labels])

        def counter(name: str, doc: str, labels: list[str]) -> Any:
            return CounterMetricFamily(name, doc, labels=["client", *labels])

        up = gauge(
            "ringkit_cache_server_up", "1 while the client routes to the server.", ["server"]
        )
        hints = gauge(
            "ringkit_cache_hints_pending",
            "Keys hinted in this client's memory for a down server (hints kept on other "
            "servers are on those servers).",
            ["server"],
        )
        dropped = counter(
            "ringkit_cache_hints_dropped",
            "Hints not kept because the server's max_hints was reached.",
            ["server"],
        )
        epoch = gauge("ringkit_cache_view_epoch", "The epoch of the view the client routes by.", [])
        server_counts = {
            field: counter(
                f"ringkit_cache_server_{field}",
                f"The client's {field} counter of the server ({StatsSnapshot.__doc__}).",
                ["server"],
            )
            for field in ("failovers", "skipped", "readmissions")
        }
        near = {
            field.name: (
                gauge("ringkit_cache_near_entries", "Entries in the near-cache.", [])
                if field.name == "size"
                else counter(f"ringkit_cache_near_{field.name}", f"Near-cache {field.name}.", [])
            )
            for field in fields(NearCacheStats)
        }
        splits = {
            field.name: counter(
                f"ringkit_cache_split_{field.name}", f"Split counters: {field.name}.", []
            )
            for field in fields(SplitStats)
        }
        for name, client in live:
            epoch.add_metric([name], client.epoch)
            for server, health in client.server_health().items():
                up.add_metric([name, server], 1.0 if health.up else 0.0)
                hints.add_metric([name, server], health.pending_hints)
                dropped.add_metric([name, server], health.hints_dropped)
            for server, snapshot in client.stats().items():
                for field, family in server_counts.items():
                    family.add_metric([name, server], getattr(snapshot, field))
            cache = client.near_cache
            if cache is not None:
                near_stats = cache.stats()
                for field, family in near.items():
                    family.add_metric([name], getattr(near_stats, field))
            hot_keys = client.hot_keys
            if hot_keys is not None and hot_keys.remedy == "split":
                split_stats = hot_keys.split_stats()
                for field, family in splits.items():
                    family.add_metric([name], getattr(split_stats, field))
        yield from (up, hints, dropped, epoch, *server_counts.values())
        yield from near.values()
        yield from splits.values()
