"""The cluster view: the placement, its servers and an epoch that every client agrees on.

Every client must agree on the ring: two clients with different views of membership send the same
key to different places (Karger et al. 1997 call these *views*). A :class:`ClusterView` is the
placement (a :class:`~ringkit.ring.HashRing`), the server URL of each node, the replica count and a
monotonically increasing *epoch*. The coordinator of a change writes each new view on every server
under the reserved key ``ringkit:view`` (so no extra service is needed); a client that meets a
newer epoch reads it from there (:mod:`ringkit.cluster.views.stores`). Static setups can keep the
view in a file or an environment variable (:func:`load_view`).

A view carries no secret: it is published on every server, in etcd and in files, so its URLs
hold no user or password (given ones are dropped when the view is built); each process opens
the servers with its own :mod:`~ringkit.cluster.wire.credentials`.

A change goes through three views: the *stable* one, a transitional *moving* one (``previous``
is the old placement: reads try the new owners, then the old; writes go to the new owners),
and the stable final one. A rollback is a *rolling_back* view from the abandoned placement back
to the old one (reads try the abandoned owners first, writes go to both sides).

>>> from ringkit.ring import HashRing
>>> view = ClusterView(3, HashRing(["a", "b"]), {"a": "memory://a", "b": "memory://b"})
>>> again = ClusterView.from_json(view.to_json())
>>> again.epoch, again.state, sorted(again.servers), again.placement == view.placement
(3, 'stable', ['a', 'b'], True)
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ringkit.cluster.checks import is_flag, non_negative_int, one_of, positive_int
from ringkit.cluster.wire.urls import parse_url, url_text
from ringkit.errors import ConfigError, RingkitError, UnsupportedError
from ringkit.placement import Placement
from ringkit.ring import HashRing

__all__ = [
    "SERVERS_AUTHORITY",
    "STATES",
    "VIEW_ENV",
    "AuditLog",
    "ClusterView",
    "check_view_path",
    "load_view",
    "refuse_mismatch",
    "write_view",
]

STATES = ("stable", "moving", "rolling_back")
#: The authority of a view published on the cache servers themselves (the default store).
SERVERS_AUTHORITY = "servers://"
VIEW_ENV = "RINGKIT_VIEW"
_FORMAT = 1
_log = logging.getLogger("ringkit.cluster")
# Files ringkit writes are readable by their owner only: a view or an audit log tells where every
# server is. Created with this mode by os.open, never chmod-ed after (no window of 0644).
_PRIVATE_MODE = 0o600


@dataclass(frozen=True, slots=True)
class ClusterView:
    """One membership view: placement, server URLs, replicas, epoch and transition state.

    Invariants: every node of `placement` (and of `previous`) has a URL in `servers`, and no
    URL holds a user or password (they are dropped here, so no repr, JSON or file of a view
    shows one); `previous` is set exactly when `state` is not ``"stable"``; `epoch` >= 0;
    `replicas` >= 1.
    """

    epoch: int
    placement: Placement
    servers: Mapping[str, str]
    replicas: int = 1
    previous: Placement | None = None
    state: str = "stable"
    change: Mapping[str, str] = field(default_factory=dict)
    serializer: str | None = None  # the clients' serializer name; None: not recorded
    # Whether hot keys may be spread (ringkit.cluster.hotcopies): off, no write reads a marker.
    hot_copies: bool = False
    # Where the view is decided: servers://, file://PATH or etcd://ENDPOINTS/PREFIX (no secret).
    authority: str = SERVERS_AUTHORITY

    def __post_init__(self) -> None:
        if not isinstance(self.authority, str) or "://" not in self.authority:
            raise ConfigError(
                f"view authority must be a store URL such as servers://, got {self.authority!r}"
            )
        if "@" in self.authority.partition("://")[2].partition("/")[0]:
            raise ConfigError("view authority must not hold a user or password")
        non_negative_int("epoch", self.epoch)
        positive_int("replicas", self.replicas)
        is_flag("hot_copies", self.hot_copies)
        one_of("view state", self.state, STATES)
        if (self.previous is None) != (self.state == "stable"):
            raise ConfigError(
                f"a {self.state} view must {'not ' if self.state == 'stable' else ''}"
                f"have a previous placement"
            )
        for ring in (self.placement, self.previous):
            names = [] if ring is None else [node.name for node in ring.nodes]
            missing = [name for name in names if name not in self.servers]
            if missing:
                raise ConfigError(f"node {missing[0]!r} of the view has no server URL")
        # Frozen, so set once here: the URLs as a view publishes them, without secrets.
        public = {name: url_text(parse_url(url)) for name, url in self.servers.items()}
        object.__setattr__(self, "servers", public)

    @property
    def transitional(self) -> bool:
        """True while data moves (``moving`` or ``rolling_back``)."""
        return self.state != "stable"

    @property
    def read_placements(self) -> tuple[Placement, ...]:
        """The placements reads try, in order."""
        if self.previous is None:
            return (self.placement,)
        if self.state == "moving":
            return (self.placement, self.previous)
        return (self.previous, self.placement)

    @property
    def write_placements(self) -> tuple[Placement, ...]:
        """The placements writes go to (both sides while rolling back)."""
        if self.previous is not None and self.state == "rolling_back":
            return (self.placement, self.previous)
        return (self.placement,)

    def to_dict(self, *, redact_passwords: bool = False) -> dict[str, Any]:
        """Return the JSON-ready form. Its URLs never hold a secret.

        `redact_passwords` is kept for callers of older versions: a view has none to redact.
        """
        servers = dict(self.servers)
        # The default authority is left out: a view stored by an older ringkit reads the same.
        authority = {} if self.authority == SERVERS_AUTHORITY else {"authority": self.authority}
        return {
            **authority,
            "format": _FORMAT,
            "epoch": self.epoch,
            "state": self.state,
            "replicas": self.replicas,
            "placement": _ring_dict(self.placement),
            "previous": None if self.previous is None else _ring_dict(self.previous),
            "servers": dict(sorted(servers.items())),
            "change": dict(self.change),
            "serializer": self.serializer,
            "hot_copies": self.hot_copies,
        }

    def to_json(self) -> bytes:
        """Return the view as compact JSON bytes (as stored on the servers)."""
        return json.dumps(self.to_dict(), separators=(",", ":")).encode()

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ClusterView:
        """Return the view described by `data` (the form of :meth:`to_dict`).

        :raises ConfigError: when a field is missing or invalid
        """
        for name in ("epoch", "placement", "servers"):
            if name not in data:
                raise ConfigError(f"cluster view field {name!r} is missing")
        servers = _str_map(data, "servers", "a JSON object of server name to URL")
        change = _str_map(data, "change", "a JSON object of str to str", default={})
        epoch = non_negative_int("cluster view field 'epoch'", data["epoch"])
        replicas = positive_int("cluster view field 'replicas'", data.get("replicas", 1))
        state = one_of("cluster view field 'state'", data.get("state", "stable"), STATES)
        serializer = data.get("serializer")
        if serializer is not None and not isinstance(serializer, str):
            raise ConfigError(
                f"cluster view field 'serializer' must be a string, got {_shape(serializer)}"
            )
        hot_copies = data.get("hot_copies", False)
        if not isinstance(hot_copies, bool):
            raise ConfigError(
                f"cluster view field 'hot_copies' must be true or false, got {_shape(hot_copies)}"
            )
        previous = data.get("previous")
        authority = data.get("authority", SERVERS_AUTHORITY)
        if not isinstance(authority, str):
            raise ConfigError(
                f"cluster view field 'authority' must be a string, got {_shape(authority)}"
            )
        return cls(
            epoch=epoch,
            placement=_ring_field("placement", data["placement"]),
            servers=servers,
            replicas=replicas,
            previous=None if previous is None else _ring_field("previous", previous),
            state=state,
            change=change,
            serializer=serializer,
            hot_copies=hot_copies,
            authority=authority,
        )

    @classmethod
    def from_json(cls, text: str | bytes) -> ClusterView:
        """Return the view stored as JSON `text`.

        :raises ConfigError: when `text` is not JSON or not a view
        """
        try:
            data = json.loads(text)
        except ValueError as error:
            raise ConfigError(f"cluster view is not valid JSON: {error}") from None
        except RecursionError:
            raise ConfigError("cluster view is not valid JSON: nested too deeply") from None
        if not isinstance(data, dict):
            raise ConfigError(f"cluster view must be a JSON object, got {type(data).__name__}")
        return cls.from_dict(data)


def _placement_form(placement: Placement) -> dict[str, object]:
    """The parts of a placement a client configures: its kind, hash and vnodes (not members)."""
    form: dict[str, object] = {"kind": type(placement).__name__}
    if isinstance(placement, HashRing):
        form.update(hash=placement.hasher.name, vnodes=placement.vnodes, space=placement.space)
    return form


def refuse_mismatch(published: ClusterView, configured: ClusterView) -> None:
    """Refuse a client configured as `configured` on servers that published `published`.

    The published view is the cluster's configuration: replicas, serializer and the form of
    the placement (kind, hash, vnodes) must match it. Membership may differ once the view has
    moved past the first epoch (servers were added or removed since); at epoch 1, the view the
    first client published, a different membership is two clients disagreeing.

    :raises ConfigError: naming the configured and the published value
    """

    def refuse(what: str, mine: object, theirs: object) -> ConfigError:
        return ConfigError(
            f"{what} must match the cluster view the servers hold (epoch {published.epoch}): "
            f"configured {mine!r}, published {theirs!r}; configure the client like the cluster "
            f"(the view is its one source of configuration)"
        )

    if configured.replicas != published.replicas:
        raise refuse("replicas", configured.replicas, published.replicas)
    if None not in (configured.serializer, published.serializer) and (
        configured.serializer != published.serializer
    ):
        raise refuse("serializer", configured.serializer, published.serializer)
    mine, theirs = _placement_form(configured.placement), _placement_form(published.placement)
    for part in mine:
        if mine[part] != theirs.get(part):
            raise refuse(f"placement {part}", mine[part], theirs.get(part))
    if published.epoch == 1 and not published.transitional:
        names = sorted(node.name for node in configured.placement.nodes)
        held = sorted(node.name for node in published.placement.nodes)
        if names != held:
            raise refuse("servers", names, held)
        weights = {node.name: node.weight for node in configured.placement.nodes}
        held_weights = {node.name: node.weight for node in published.placement.nodes}
        if weights != held_weights:
            raise refuse("node weights", weights, held_weights)


def _str_map(
    data: Mapping[str, Any], name: str, form: str, default: dict[str, str] | None = None
) -> dict[str, str]:
    """Return field `name` of a view's `data` if it is a JSON object of str to str.

    :raises ConfigError: naming the field, what it must be and the type found
    """
    value = data.get(name, default)
    if not isinstance(value, Mapping) or not all(
        isinstance(key, str) and isinstance(item, str) for key, item in value.items()
    ):
        raise ConfigError(f"cluster view field {name!r} must be {form}, got {_shape(value)}")
    return dict(value)


def _shape(value: object) -> str:
    """Name the JSON type of `value` (never its content, which may hold a URL with a secret)."""
    if isinstance(value, Mapping):
        return "an object with a non-string entry"
    return {list: "a list", str: "a string", type(None): "null"}.get(
        type(value), type(value).__name__
    )


def _ring_field(name: str, value: object) -> HashRing:
    """Return the HashRing described by view field `name`.

    :raises ConfigError: naming the field when it does not describe one
    """
    if not isinstance(value, Mapping):
        raise ConfigError(
            f"cluster view field {name!r} must be a HashRing description (a JSON object), "
            f"got {_shape(value)}"
        )
    try:
        return HashRing.from_dict(value)
    except RingkitError as error:
        raise ConfigError(f"cluster view field {name!r}: {error}") from None
    except (KeyError, TypeError, ValueError, AttributeError) as error:
        raise ConfigError(f"cluster view field {name!r} is malformed: {error!r}") from None


def _ring_dict(placement: Placement) -> dict[str, Any]:
    if not isinstance(placement, HashRing):
        raise UnsupportedError(
            f"a cluster view can be stored only for a HashRing, got {type(placement).__name__}"
        )
    return placement.to_dict()


def load_view(source: str | os.PathLike[str] | None = None) -> ClusterView:
    """Return the view in file `source`, or else in the environment variable RINGKIT_VIEW.

    The variable holds either the JSON itself or the path of a file with it.

    :raises ConfigError: when neither is given, or the text is not a valid view
    """
    if source is None:
        text = os.environ.get(VIEW_ENV)
        if not text:
            raise ConfigError(f"no cluster view: pass a file or set {VIEW_ENV}")
        if text.lstrip().startswith("{"):
            return ClusterView.from_json(text)
        source = text
    try:
        return ClusterView.from_json(Path(source).read_bytes())
    except OSError as error:
        raise ConfigError(f"cannot read cluster view file {str(source)!r}: {error}") from None


def check_view_path(path: str | os.PathLike[str]) -> None:
    """Check that a file can be written at `path`, before any work it would record starts.

    Nothing is created or changed at `path` itself: a probe file is created and removed
    beside it.

    :raises ConfigError: naming the path and the cause (no such directory, a directory, denied)
    """
    target = Path(path)
    if target.is_dir():
        raise ConfigError(f"cannot write file {str(path)!r}: it is a directory")
    try:
        descriptor, probe = _private_temp(target)
    except OSError as error:
        raise ConfigError(f"cannot write file {str(path)!r}: {_cause(error)}") from None
    os.close(descriptor)
    os.unlink(probe)


def write_view(view: ClusterView, path: str | os.PathLike[str]) -> None:
    """Write `view` as indented JSON to `path`, readable by its owner only (mode 0600).

    The file is written beside `path` and renamed over it, so a reader never sees half a view
    and an existing file's wider mode is not kept.

    :raises ConfigError: naming the path and the cause when it cannot be written
    """
    target = Path(path)
    data = (json.dumps(view.to_dict(), indent=2) + "\n").encode()
    try:
        descriptor, temporary = _private_temp(target)
        try:
            with os.fdopen(descriptor, "wb") as handle:
                handle.write(data)
            os.replace(temporary, target)
        except BaseException:
            os.unlink(temporary)
            raise
    except OSError as error:
        raise ConfigError(f"cannot write file {str(path)!r}: {_cause(error)}") from None


def _private_temp(target: Path) -> tuple[int, str]:
    """Create a new file beside `target`, mode 0600; return its descriptor and path."""
    for attempt in range(100):
        candidate = target.with_name(f".{target.name}.{os.getpid()}.{attempt}.tmp")
        try:
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL
            return os.open(candidate, flags, _PRIVATE_MODE), str(candidate)
        except FileExistsError:
            continue
    raise FileExistsError(f"no free temporary name beside {target.name}")


def _cause(error: OSError) -> str:
    return error.strerror or str(error)


class AuditLog:
    """Every view and every plan, as JSON lines: appended to a local file when one is given.

    The coordinator also appends each record to every server's ``ringkit:audit`` log, so the
    history travels with the cluster. Views hold no secrets. The file is created readable by its
    owner only (0600), when the log is built, so that a bad path fails before any change.
    A write that fails later (a full disk) does not stop the change it records: it is logged
    once and kept in `error`, and every record stays in `records`.

    :raises ConfigError: when the file cannot be opened for appending (naming it and why)
    """

    def __init__(self, path: str | os.PathLike[str] | None = None) -> None:
        self.path = None if path is None else Path(path)
        self.records: list[dict[str, Any]] = []
        self.error: str | None = None
        if self.path is not None:
            if self.path.is_dir():
                raise ConfigError(f"cannot write audit file {str(path)!r}: it is a directory")
            try:
                os.close(self._open())
            except OSError as error:
                raise ConfigError(
                    f"cannot write audit file {str(path)!r}: {_cause(error)}"
                ) from None

    def _open(self) -> int:
        assert self.path is not None
        return os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, _PRIVATE_MODE)

    def record(self, kind: str, data: Mapping[str, Any]) -> bytes:
        """Add one record of `kind` (view, plan, done, rollback); return its JSON line."""
        entry = {"at": round(time.time(), 3), "kind": kind, **data}
        self.records.append(entry)
        line = json.dumps(entry, separators=(",", ":"), default=str)
        if self.path is not None and self.error is None:
            try:
                with os.fdopen(self._open(), "a", encoding="utf-8") as handle:
                    handle.write(line + "\n")
            except OSError as error:
                self.error = f"cannot append to audit file {str(self.path)!r}: {_cause(error)}"
                _log.warning("%s; the change goes on, its records are kept in memory", self.error)
        return line.encode()
