"""Prometheus metrics of a live ring, as one process sees it.

``connect(url, metrics_registry=REGISTRY)`` registers the store's metrics in a
``prometheus_client`` registry (the ``metrics`` extra); ``ringkit serve --store URL --metrics``
exposes them at ``/metrics``. Every figure is read from the store when the registry is scraped,
so a scrape shows the ring at the epoch this process holds, as dskit's ring exports its members
and tokens from each process's own view:

- ``ringkit_live_epoch``: the epoch of the process's snapshot;
- ``ringkit_live_members{state}``: members by state (joining, active, leaving, …);
- ``ringkit_live_member_share{member}``: each member's share of the keyspace (its owned share);
- ``ringkit_live_confirmed_age_seconds`` and ``ringkit_live_current``: how long ago the store last
  confirmed it is current (:mod:`ringkit.live.currency`), and whether that is within
  ``current_within_s`` (members own nothing while it is not);
- ``ringkit_live_records_skipped``: records under the prefix that the store skipped as invalid,
  member, table and release records alike (:mod:`ringkit.live.records`; ``ringkit ring
  status`` lists them).

Series carry a ``ring`` label, the store's URL without its credentials (``Store.url``): no
password reaches a scrape.
"""

from __future__ import annotations

import threading
import weakref
from collections import Counter
from collections.abc import Iterator
from typing import Any, Protocol

from ringkit.errors import ConfigError
from ringkit.live.snapshot import SkippedRecord, Snapshot

__all__ = ["StoreMetrics", "track_store"]


class MetricsSource(Protocol):
    """What the metrics read from a store at each scrape."""

    @property
    def url(self) -> str: ...

    def snapshot(self) -> Snapshot: ...

    def confirmed_age_s(self) -> float: ...

    def is_current(self) -> bool: ...

    def skipped_records(self) -> tuple[SkippedRecord, ...]: ...


def _check_prometheus() -> None:
    try:
        import prometheus_client  # noqa: F401
    except ImportError as exc:
        raise ConfigError(
            "metrics_registry= needs the prometheus_client package: pip install 'ringkit[metrics]'"
        ) from exc


class StoreMetrics:
    """A prometheus_client collector of the stores tracked in one registry.

    One per registry (:func:`track_store` makes it), holding weak references: a registry never
    keeps a closed store alive, and a collected store stops reporting.
    """

    def __init__(self) -> None:
        self._stores: dict[str, weakref.ReferenceType[MetricsSource]] = {}
        self._lock = threading.Lock()

    def track(self, store: MetricsSource) -> None:
        """Report `store` at every scrape (a newer store of the same URL replaces it)."""
        with self._lock:
            self._stores[store.url] = weakref.ref(store)

    def untrack(self, store: MetricsSource) -> None:
        """Stop reporting `store` (it was closed)."""
        with self._lock:
            if self._stores.get(store.url, lambda: None)() is store:
                del self._stores[store.url]

    def describe(self) -> list[Any]:
        return []  # the families are made at scrape time; nothing to check when registering

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import GaugeMetricFamily

        with self._lock:
            stores = [ref() for ref in self._stores.values()]
        epoch = GaugeMetricFamily(
            "ringkit_live_epoch", "The epoch of this process's snapshot.", labels=["ring"]
        )
        members = GaugeMetricFamily(
            "ringkit_live_members", "Members of the ring by state.", labels=["ring", "state"]
        )
        share = GaugeMetricFamily(
            "ringkit_live_member_share",
            "A member's share of the keyspace at this process's epoch.",
            labels=["ring", "member"],
        )
        age = GaugeMetricFamily(
            "ringkit_live_confirmed_age_seconds",
            "Seconds since the read that last confirmed the store current was sent.",
            labels=["ring"],
        )
        current = GaugeMetricFamily(
            "ringkit_live_current",
            "1 while the store counts as current (members may own keys), else 0.",
            labels=["ring"],
        )
        skipped = GaugeMetricFamily(
            "ringkit_live_records_skipped",
            "Records under the prefix skipped as invalid (members, table, release marks).",
            labels=["ring"],
        )
        for store in stores:
            if store is None:
                continue
            ring = store.url
            snapshot = store.snapshot()
            epoch.add_metric([ring], snapshot.epoch)
            by_state = Counter(member.state for member in snapshot.members.values())
            for state, count in sorted(by_state.items()):
                members.add_metric([ring, state], count)
            if len(snapshot.ring):
                for member, fraction in sorted(snapshot.ring.shares().items()):
                    share.add_metric([ring, member], fraction)
            age.add_metric([ring], store.confirmed_age_s())
            current.add_metric([ring], 1.0 if store.is_current() else 0.0)
            skipped.add_metric([ring], len(store.skipped_records()))
        yield from (epoch, members, share, age, current, skipped)


_collectors: weakref.WeakKeyDictionary[Any, StoreMetrics] = weakref.WeakKeyDictionary()
_collectors_lock = threading.Lock()


def track_store(store: MetricsSource, registry: Any) -> StoreMetrics:
    """Register `store`'s metrics in `registry` (a ``prometheus_client`` CollectorRegistry).

    :raises ConfigError: when prometheus_client is not installed
    """
    _check_prometheus()
    with _collectors_lock:
        collector = _collectors.get(registry)
        if collector is None:
            collector = _collectors[registry] = StoreMetrics()
            registry.register(collector)
    collector.track(store)
    return collector
