"""TTLs on the wire: the longest each kind of server keeps, and the form each is sent in.

memcached reads an expiry time above 30 days (2,592,000 s) as an absolute Unix time, not a
number of seconds (memcached ``doc/protocol.txt``, "Expiration times"), and keeps it as a signed
32-bit number: memcached 1.6 truncates a larger one to 32 bits, so an expiry past 2038-01-19
(2**31 - 1) wraps, and an item stored with it is acknowledged and then gone at once (or lives a
few seconds). So a TTL is sent as seconds up to 30 days and as ``now + ttl`` beyond, and one
that would end past 2**31 - 1 is refused. Redis takes milliseconds (``SET … PX``, ``PEXPIRE``)
and refuses an expiry past 2**63 - 1 ms of Unix time; the client's envelope keeps the expiry in
8 bytes of Unix milliseconds (:mod:`ringkit.cluster.values.codec`). Redis and memory servers get
the same bound, 2**62 ms of Unix time (about 146 million years), which leaves Redis a margin for
a clock ahead of the client's.

The client asks for a TTL one way, ``ttl_s=`` (seconds, keyword-only), where pymemcache takes a
third positional argument or ``expire=`` and redis-py takes ``ex=`` / ``px=``. Python's own
``TypeError`` for those habits ("takes 3 positional arguments but 4 were given", "unexpected
keyword argument 'ex'") does not say what to write instead; :func:`ttl_keyword` wraps a verb so
the error names ``ttl_s=``, without widening the signature mypy and ``help()`` see.

>>> memcached_exptime(3600, now=1_800_000_000.5), memcached_exptime(40 * 86400, now=1.8e9)
(3600, 1803456000)
>>> max_ttl_s("memcached", now=2**31 - 61)
60
"""

from __future__ import annotations

import functools
import inspect
import math
from collections.abc import Awaitable, Callable
from typing import Any, ParamSpec, TypeVar, cast

from ringkit.errors import ConfigError

__all__ = [
    "MAX_EXPIRY_UNIX_MS",
    "MEMCACHED_MAX_EXPTIME",
    "THIRTY_DAYS_S",
    "max_ttl_s",
    "memcached_exptime",
    "redis_px",
    "refuse_ttl",
    "ttl_keyword",
]

# Above this, memcached reads an exptime as an absolute Unix time (protocol.txt).
THIRTY_DAYS_S = 30 * 24 * 3600
# memcached keeps an absolute exptime as a signed 32-bit Unix time: 2038-01-19T03:14:07Z.
MEMCACHED_MAX_EXPTIME = 2**31 - 1
# Redis refuses an expiry past 2**63 - 1 ms; half of it leaves room for clock skew.
MAX_EXPIRY_UNIX_MS = 2**62
_WHY = {
    "memcached": "memcached keeps an expiry beyond 30 days as a 32-bit Unix time, which ends "
    "at 2038-01-19T03:14:07Z",
}
# The other clients' names for a TTL: pymemcache's expire=, redis-py's ex= / px= / exat=, and
# the names people guess from the protocols (memcached's exptime) and from other caches.
_TTL_HABITS = frozenset({"expire", "expires", "exptime", "ex", "px", "exat", "ttl", "timeout"})
_SECONDS_HABITS = _TTL_HABITS - {"px", "exat"}
_HABIT_OF = {"expire": "pymemcache", "ex": "redis-py", "px": "redis-py", "exat": "redis-py"}
P = ParamSpec("P")
R = TypeVar("R")
_WHY_MS = "ringkit keeps expiries up to 2**62 ms of Unix time (Redis's own limit is 2**63 - 1)"


def max_ttl_s(scheme: str, now: float) -> int:
    """Return the longest TTL, in whole seconds, that a `scheme` server keeps from Unix time `now`.

    >>> max_ttl_s("redis", now=0) == 2**62 // 1000
    True
    """
    if scheme == "memcached":
        return MEMCACHED_MAX_EXPTIME - math.floor(now)
    return MAX_EXPIRY_UNIX_MS // 1000 - math.ceil(now)


def refuse_ttl(ttl_s: float, scheme: str, server: str, now: float) -> None:
    """Raise unless `ttl_s` (finite, > 0) fits what a `scheme` server named `server` keeps.

    >>> try:
    ...     refuse_ttl(12 * 365.25 * 86400, "memcached", "s1", now=1_800_000_000)
    ... except ConfigError as error:
    ...     print(str(error)[:87])
    ttl_s=378691200.0 is longer than memcached server s1 can keep: at most 347483647 s from

    :raises ConfigError: naming the TTL, the server and its limit
    """
    limit = max_ttl_s(scheme, now)
    if ttl_s > limit:
        why = _WHY.get(scheme, _WHY_MS)
        raise ConfigError(
            f"ttl_s={ttl_s!r} is longer than {scheme} server {server or '(this one)'} can keep: "
            f"at most "
            f"{max(limit, 0)} s from now ({max(limit, 0) / 31_557_600:.1f} years); {why}"
        )


def memcached_exptime(ttl_s: float | None, now: float, server: str = "") -> int:
    """Return memcached's exptime for `ttl_s`: seconds up to 30 days, else an absolute time.

    :raises ConfigError: when the expiry would pass 2**31 - 1 (it would wrap on the server)
    """
    if ttl_s is None:
        return 0
    seconds = max(1, math.ceil(ttl_s))
    if seconds <= THIRTY_DAYS_S:
        return seconds
    refuse_ttl(ttl_s, "memcached", server, now)
    return math.floor(now) + seconds


def redis_px(ttl_s: float, now: float, server: str = "") -> int:
    """Return Redis's ``PX`` milliseconds for `ttl_s` (at least 1).

    :raises ConfigError: when the expiry would pass 2**62 ms of Unix time
    """
    refuse_ttl(ttl_s, "redis", server, now)
    return max(1, math.ceil(ttl_s * 1000))


def ttl_keyword(verb: Callable[P, R]) -> Callable[P, R]:
    """Wrap a client verb so a TTL passed the pymemcache or redis-py way is named as ``ttl_s=``.

    A call that binds is the verb's own, unchanged (an error raised inside it is not touched;
    for a coroutine function the call only creates the coroutine). A call that does not bind
    raises a ``TypeError`` naming ``ttl_s=`` when it carries an extra positional argument or a
    keyword from another client (``expire=``, ``ex=``, …); any other mistake keeps Python's
    own message.

    >>> @ttl_keyword
    ... def put(key: str, value: object, *, ttl_s: float | None = None) -> None: ...
    >>> put("k", "v", ex=60)
    Traceback (most recent call last):
    ...
    TypeError: put() takes its TTL as ttl_s=60 (seconds, keyword-only), not ex=60 (redis-py's habit)
    """
    signature = inspect.signature(verb)
    positional = [
        p
        for p in signature.parameters.values()
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
    ]
    accepts_ttl = "ttl_s" in signature.parameters

    def refuse(error: TypeError, args: tuple[object, ...], kwargs: dict[str, object]) -> None:
        try:
            signature.bind(*args, **kwargs)
        except TypeError:
            habit = _habit(args, kwargs, len(positional), accepts_ttl)
            if habit is not None:
                raise TypeError(f"{verb.__name__}() takes its TTL as {habit}") from error

    if inspect.iscoroutinefunction(verb):
        # A coroutine function stays one (asyncio and frameworks check for it); a call that
        # does not bind fails when the coroutine is created, before anything is awaited.
        @functools.wraps(verb)
        async def awaited(*args: P.args, **kwargs: P.kwargs) -> Any:
            try:
                coroutine = verb(*args, **kwargs)
            except TypeError as error:
                refuse(error, args, kwargs)
                raise
            return await cast(Awaitable[Any], coroutine)

        return cast(Callable[P, R], awaited)

    @functools.wraps(verb)
    def checked(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return verb(*args, **kwargs)
        except TypeError as error:
            refuse(error, args, kwargs)
            raise

    return checked


def _habit(
    args: tuple[object, ...], kwargs: dict[str, object], positional: int, accepts_ttl: bool
) -> str | None:
    """Say how a call that did not bind gave its TTL, or None when it is another mistake."""
    given = sorted(_TTL_HABITS.intersection(kwargs))
    if given:
        name = given[0]
        value = kwargs[name]
        # px= is milliseconds and exat= a Unix time: the seconds are not the number given.
        seconds = repr(value) if name in _SECONDS_HABITS else "SECONDS"
        return (
            f"ttl_s={seconds} (seconds, keyword-only), not {name}={value!r} "
            f"({_HABIT_OF.get(name, 'another client')}'s habit)"
        )
    if accepts_ttl and len(args) == positional + 1:
        return (
            f"ttl_s={args[-1]!r} (seconds, keyword-only), not as one more positional argument "
            "(pymemcache's habit)"
        )
    return None
