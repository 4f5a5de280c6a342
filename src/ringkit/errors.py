"""The exceptions ringkit raises.

Every error is a :class:`RingkitError` and also subclasses the builtin it refines, so that code
written against the builtins (``except ValueError``) keeps working::

    RingkitError
    ├── ConfigError(RingkitError, ValueError)         bad option: weight <= 0, unknown hasher
    │   └── ParamError(ConfigError)                   a named input parameter (HTTP query) is bad
    ├── EmptyRingError(RingkitError, LookupError)     a lookup on a placement with no nodes
    ├── UnknownNodeError(RingkitError, KeyError)      remove / reweight a node that is not there
    ├── DuplicateNodeError(RingkitError, ValueError)  add a node that is already there
    ├── CapacityError(RingkitError, RuntimeError)     bounded load: every node at its cap
    ├── UnsupportedError(RingkitError, NotImplementedError)  e.g. jump removing a non-last bucket
    ├── BackendError(RingkitError)                    cluster: server unavailable, timeout, protocol
    │   └── QuorumError(BackendError)                 fewer replicas than write_quorum took a write
    ├── StaleViewError(RingkitError, RuntimeError)    a server refused a call of an older view
    ├── EpochLostError(RingkitError, RuntimeError)    a server restarted empty refused a write
    └── ViewConflictError(RingkitError, RuntimeError) two writers raced for one epoch; one lost

Messages follow ``<subject> <constraint>, got <value!r>[; <how to fix>]``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

__all__ = [
    "BackendError",
    "CapacityError",
    "ConfigError",
    "DuplicateNodeError",
    "EmptyRingError",
    "EpochLostError",
    "ParamError",
    "QuorumError",
    "RingkitError",
    "StaleViewError",
    "UnknownNodeError",
    "UnsupportedError",
    "ViewConflictError",
    "format_names",
]


class RingkitError(Exception):
    """Base class of every error ringkit raises on purpose."""


class ConfigError(RingkitError, ValueError):
    """An option or argument has a value ringkit cannot work with."""


class ParamError(ConfigError):
    """A named input parameter is missing, malformed or out of range.

    ``param`` names the parameter and ``value`` holds what was given (None when it was missing),
    so that a face can point at it: the web API answers HTTP 400 with both.

    >>> error = ParamError("vnodes", "vnodes must be in [1, 1024], got '0'", "0")
    >>> error.param, error.value, str(error)
    ('vnodes', '0', "vnodes must be in [1, 1024], got '0'")
    """

    def __init__(self, param: str, message: str, value: str | None) -> None:
        super().__init__(message)
        self.param = param
        self.message = message
        self.value = value

    def __reduce__(self) -> tuple[type[ParamError], tuple[str, str, str | None]]:
        # Pickled whole: a refusal raised in a worker process (the web API's compute gate)
        # reaches the server as the same 400. The default pickles ``args`` only, the message.
        return (type(self), (self.param, self.message, self.value))


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


class QuorumError(BackendError):
    """Fewer replicas than the write quorum acknowledged a write; `keys` lists those keys."""

    def __init__(self, message: str, keys: Sequence[bytes]) -> None:
        super().__init__(message)
        self.keys = list(keys)


class StaleViewError(RingkitError, RuntimeError):
    """A server refused a call routed by an older cluster view; `epoch` is the server's epoch.

    The cluster client catches it, adopts the newer view and retries the call.
    """

    def __init__(self, server: str, epoch: int, sent: int) -> None:
        super().__init__(
            f"server {server} is at epoch {epoch}, the call was routed by epoch {sent}; "
            f"refresh the cluster view"
        )
        self.server = server
        self.epoch = epoch


class EpochLostError(RingkitError, RuntimeError):
    """A server that holds no epoch (restarted empty) refused a write routed by epoch `sent`.

    The cluster client catches it, gives the server the newest view the other servers hold
    and retries: until then the server could take writes that up-to-date clients never read.
    """

    def __init__(self, server: str, sent: int) -> None:
        super().__init__(
            f"server {server} holds no cluster view (restarted empty?), the write was routed by "
            f"epoch {sent}; give it the newest view of the other servers first"
        )
        self.server = server
        self.sent = sent


class ViewConflictError(RingkitError, RuntimeError):
    """Two writers raced to publish a view or a table at one epoch, and this one lost.

    ``epoch`` is the epoch at which the other writer won; ``server`` names the cache server that
    holds the other view when the race was seen there (None for a coordination service).
    """

    def __init__(self, message: str, *, epoch: int, server: str | None = None) -> None:
        super().__init__(message)
        self.epoch = epoch
        self.server = server

    @classmethod
    def on_server(cls, server: str, epoch: int) -> ViewConflictError:
        """Return the error for a cache server that holds another view at `epoch`."""
        return cls(
            f"server {server} holds another view at epoch {epoch}: run one coordinator at a "
            f"time; resume (or roll back) settles the cluster on one view",
            epoch=epoch,
            server=server,
        )


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
