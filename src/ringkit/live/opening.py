"""Opening a live ring's coordination service from its URL, and the connect options' checks.

:func:`open_store_backend` is what :func:`ringkit.live.connect` opens, kept apart so that other
users of the same service (the cache client's view store) open etcd with the same client and
URL rules without a store.
"""

from __future__ import annotations

import math

from ringkit.errors import ConfigError
from ringkit.live.backend import Backend
from ringkit.live.urls import parse_store_url

__all__ = ["check_current_within", "open_store_backend"]


def open_store_backend(url: str) -> tuple[Backend, str]:
    """Open the coordination service `url` names; return it and the URL's key prefix.

    What :func:`ringkit.live.connect` opens, for other users of the same service (the cache
    client keeps its cluster view in etcd through it, :mod:`ringkit.cluster.views.etcd`).

    >>> backend, prefix = open_store_backend("memory://open-doctest")
    >>> backend.describe(), prefix
    ('memory://open-doctest', '/')

    :raises ConfigError: for a malformed URL
    :raises BackendError: when etcd cannot be reached within a few seconds
    """
    parsed = parse_store_url(url)
    if parsed.scheme == "memory":
        from ringkit.live.memory import MemoryBackend

        return MemoryBackend.named(parsed.name), parsed.prefix
    from ringkit.live.etcd import EtcdBackend

    return EtcdBackend(parsed), parsed.prefix


def check_current_within(value: object) -> float | None:
    """Return `value` as ``current_within_s`` (seconds > 0, finite, or None).

    :raises ConfigError: naming `value` when it is not such a number
    """
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise ConfigError(f"current_within_s must be a number > 0 or None, got {value!r}")
    if not math.isfinite(value):
        raise ConfigError(f"current_within_s must be finite, got {value!r}")
    return float(value)
