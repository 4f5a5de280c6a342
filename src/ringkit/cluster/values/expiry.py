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

>>> memcached_exptime(3600, now=1_800_000_000.5), memcached_exptime(40 * 86400, now=1.8e9)
(3600, 1803456000)
>>> max_ttl_s("memcached", now=2**31 - 61)
60
"""

from __future__ import annotations

import math

from ringkit.errors import ConfigError

__all__ = [
    "MAX_EXPIRY_UNIX_MS",
    "MEMCACHED_MAX_EXPTIME",
    "THIRTY_DAYS_S",
    "max_ttl_s",
    "memcached_exptime",
    "redis_px",
    "refuse_ttl",
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
