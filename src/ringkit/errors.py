"""The exceptions ringkit raises.

Every error is a :class:`RingkitError` and also subclasses the builtin it refines, so that code
written against the builtins (``except ValueError``) keeps working::

    RingkitError
    ├── ConfigError(RingkitError, ValueError)         bad option: weight <= 0, unknown hasher
    ├── EmptyRingError(RingkitError, LookupError)     a lookup on a placement with no nodes
    ├── UnknownNodeError(RingkitError, KeyError)      remove / reweight a node that is not there
    ├── DuplicateNodeError(RingkitError, ValueError)  add a node that is already there
    ├── CapacityError(RingkitError, RuntimeError)     bounded load: every node at its cap
    ├── UnsupportedError(RingkitError, NotImplementedError)  e.g. jump removing a non-last bucket
    ├── BackendError(RingkitError)                    cluster: server unavailable, timeout, protocol
    └── ViewConflictError(RingkitError, RuntimeError) two writers raced for one epoch; one lost

Messages follow ``<subject> <constraint>, got <value!r>[; <how to fix>]``.
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = [
    "BackendError",
    "CapacityError",
    "ConfigError",
    "DuplicateNodeError",
    "EmptyRingError",
    "RingkitError",
    "UnknownNodeError",
    "UnsupportedError",
    "ViewConflictError",
    "format_names",
]


class RingkitError(Exception):
    """Base class of every error ringkit raises on purpose."""


class ConfigError(RingkitError, ValueError):
    """An option or argument has a value ringkit cannot work with."""


class EmptyRingError(RingkitError, LookupError):
    """A lookup was made on a placement that has no nodes."""


class UnknownNodeError(RingkitError, KeyError):
    """A node named in a call is not part of the placement."""

    def __str__(self) -> str:
        # KeyError quotes its argument (repr); the message is already a sentence.
        return str(self.args[0]) if self.args else ""


class DuplicateNodeError(RingkitError, ValueError):
    """A node was added that is already part of the placement."""


class CapacityError(RingkitError, RuntimeError):
    """Every node that could take a key is at its capacity."""


class UnsupportedError(RingkitError, NotImplementedError):
    """The placement cannot do this operation; the message names what can."""


class BackendError(RingkitError):
    """A cache server failed: unavailable, timed out or answered out of protocol."""


class ViewConflictError(RingkitError, RuntimeError):
    """Two writers raced to publish a view or table at one epoch, and this one lost."""


def format_names(names: Iterable[object], limit: int = 5) -> str:
    """Render names for an error message, cutting long lists after `limit`.

    >>> format_names(["a", "b"])
    "'a', 'b'"
    >>> format_names(range(8), limit=3)
    '0, 1, 2, … and 5 more'
    """
    items = list(names)
    shown = ", ".join(repr(item) for item in items[:limit])
    if len(items) > limit:
        shown += f", … and {len(items) - limit} more"
    return shown
