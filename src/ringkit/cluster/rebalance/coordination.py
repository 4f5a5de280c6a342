"""Coordination: how a client runs a membership change without importing the coordinator.

``ShardedClient.add_server`` / ``remove_server`` stay public API, but the change itself is the
coordinator's (:class:`~ringkit.cluster.rebalance.coordinator.Rebalancer`): it publishes views,
streams the moved arcs and cleans up. The client only *calls* a coordinator, built by the factory
registered here; :mod:`ringkit.cluster` registers the Rebalancer when the package is imported (which
always happens before any of its modules is used). Wiring it there, not with an import inside the
client, keeps the dependencies one way (the coordinator uses the backends, fencing and views; the
client uses none of the coordinator) and lets a test or a later live-ring coordinator register
another factory.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from ringkit.cluster.rebalance.options import RebalanceOptions, RebalanceReport
from ringkit.cluster.views.stores import ViewStore
from ringkit.cluster.views.view import ClusterView
from ringkit.cluster.wire.credentials import Credentials
from ringkit.errors import ConfigError

__all__ = ["Coordinator", "CoordinatorFactory", "coordinator_for", "register_coordinator"]


class Coordinator(Protocol):
    """The coordinator of one membership change (see ``Rebalancer``)."""

    def add(self, name: str, url: str) -> RebalanceReport:
        """Add server `name` at `url` and move its keys to it."""
        ...

    def remove(self, name: str) -> RebalanceReport:
        """Remove server `name`, moving its keys to their new owners."""
        ...

    def close(self) -> None:
        """Close the coordinator's connections."""
        ...


CoordinatorFactory = Callable[
    [
        ClusterView,
        RebalanceOptions | None,
        Callable[[ClusterView], None],
        ViewStore | None,
        Credentials | None,
    ],
    Coordinator,
]
_FACTORY: list[CoordinatorFactory] = []


def register_coordinator(factory: CoordinatorFactory) -> None:
    """Build coordinators with `factory(view, options, on_view, view_store, credentials)`."""
    _FACTORY[:] = [factory]


def coordinator_for(
    view: ClusterView,
    options: RebalanceOptions | None,
    on_view: Callable[[ClusterView], None],
    view_store: ViewStore | None = None,
    credentials: Credentials | None = None,
) -> Coordinator:
    """Return a coordinator of a change from `view`; it tells `on_view` of every view.

    `view_store` is the client's: an authoritative one (etcd) is where views are published
    first, under the coordinator's lock. `credentials` are the client's, shared: the
    coordinator opens the servers with them and teaches them an added server's inline secret.

    :raises ConfigError: when no coordinator is registered
    """
    if not _FACTORY:
        raise ConfigError("no coordinator is registered; import ringkit.cluster first")
    return _FACTORY[0](view, options, on_view, view_store, credentials)
