"""The ketama layout a pylibmc client uses, read from the client's ``behaviors`` dict.

pylibmc hands its behaviors to libmemcached one at a time, in the fixed order of its behavior
table (``hash``, ``ketama_hash``, ``ketama``, ``ketama_weighted``, ``distribution``, ...), and
libmemcached's setters overwrite one another: ``ketama`` turns on unweighted consistent ketama
(``ketama=False`` goes back to modula), ``ketama_weighted`` turns on weighted ketama *and* sets
the key hash to MD5, so a ``hash`` given beside it is overwritten, and a later ``distribution``
chooses again. This module replays that order and returns the :func:`ringkit.compat.ketama`
continuum that results. Behaviors that do not move keys (timeouts, ``tcp_nodelay``, ``cas``,
failure handling...) are accepted and ignored; behaviors that move keys in a way ringkit does not
reproduce (modula, random, virtual bucket, ``hsieh``, sorted hosts, a hashed prefix key...) are
refused, each by name.

References: lericson/pylibmc ``src/_pylibmcmodule.h`` (``PylibMC_behaviors``, the order) and
``src/pylibmc/consts.py``; libmemcached ``src/libmemcached/behavior.cc``
(``memcached_behavior_set``, ``memcached_behavior_set_distribution``).

>>> layout = from_pylibmc_behaviors(["10.0.1.1:11211", "10.0.1.2:11211"], {"ketama": True})
>>> layout.node_for("user:42"), len(layout.points)
('10.0.1.2:11211', 200)
"""

from __future__ import annotations

from collections.abc import Mapping

from ringkit.compat._continuum import Continuum
from ringkit.compat.ketama import ServersLike, ketama, parse_servers
from ringkit.errors import ConfigError, format_names

__all__ = ["PYLIBMC_HASHES", "from_pylibmc_behaviors"]

# pylibmc hash name -> ringkit.compat.hashkit name, for the hashes checked against libmemcached
# (tests/compat/test_ketama.py); "default" is libhashkit's one-at-a-time.
PYLIBMC_HASHES: Mapping[str, str] = {
    "default": "one_at_a_time",
    "md5": "md5",
    "crc": "crc32",
    "fnv1_32": "fnv1_32",
    "fnv1_64": "fnv1_64",
    "fnv1a_32": "fnv1a_32",
    "fnv1a_64": "fnv1a_64",
    "murmur": "murmur",
    "jenkins": "jenkins",
}
_KETAMA_DISTRIBUTIONS = {
    "consistent": ("libmemcached", False),
    "consistent ketama": ("libmemcached", False),
    "consistent weighted": ("libmemcached", True),
    "consistent ketama spy": ("spy", None),  # keeps the weighted flag as it is
}
# Behaviors that do not change which server a key goes to while every server is up.
_NEUTRAL = frozenset(
    [
        "no_block",
        "tcp_nodelay",
        "tcp_keepalive",
        "cas",
        "buffer_requests",
        "verify_keys",
        "connect_timeout",
        "send_timeout",
        "receive_timeout",
        "auto_eject",
        "retry_timeout",
        "remove_failed",
        "failure_limit",
        "_io_msg_watermark",
        "_io_bytes_watermark",
        "_io_key_prefetch",
        "_noreply",
        "_poll_timeout",
        "_socket_send_size",
        "_socket_recv_size",
        "dead_timeout",
        "pickle_protocol",
    ]
)
# Behaviors that move keys; accepted only when off (their default).
_OFF_ONLY = frozenset(("num_replicas", "_sort_hosts", "_hash_with_prefix_key"))
# pylibmc's order (PylibMC_behaviors); each setter may overwrite the ones before it.
_ORDER = ("hash", "ketama_hash", "ketama", "ketama_weighted", "distribution")


def _refused(name: str, value: object, why: str) -> ConfigError:
    return ConfigError(
        f"pylibmc behavior {name}={value!r} {why}; ringkit reproduces consistent ketama only "
        f"(ketama, ketama_weighted or a 'consistent ...' distribution)"
    )


def _key_hash(value: object) -> str:
    if value not in PYLIBMC_HASHES:
        raise _refused("hash", value, f"is not reproduced (known: {format_names(PYLIBMC_HASHES)})")
    return PYLIBMC_HASHES[str(value)]


def _replay(behaviors: Mapping[str, object]) -> tuple[str, str, bool]:
    """Return (distribution, key hash, weighted) after pylibmc sets `behaviors` in its order."""
    distribution, key_hash, weighted = "modula", "one_at_a_time", False
    for name in _ORDER:
        if name not in behaviors:
            continue
        value = behaviors[name]
        if name == "hash":
            key_hash = _key_hash(value)
        elif name == "ketama_hash":
            if value not in (0, False, None, "md5", "default"):
                raise _refused(name, value, "is not reproduced; leave it unset")
        elif name == "ketama":
            distribution, weighted = ("consistent ketama", False) if value else ("modula", False)
        elif name == "ketama_weighted":
            # libmemcached: ketama_weighted also sets the key hash to MD5; off means plain ketama.
            distribution, weighted = "consistent ketama", bool(value)
            key_hash = "md5" if value else key_hash
        elif value not in _KETAMA_DISTRIBUTIONS:
            raise _refused(name, value, "places keys without ketama")
        else:
            distribution = str(value)
            flag = _KETAMA_DISTRIBUTIONS[distribution][1]
            weighted = weighted if flag is None else flag
    return distribution, key_hash, weighted


def from_pylibmc_behaviors(servers: ServersLike, behaviors: Mapping[str, object]) -> Continuum:
    """Return the continuum ``pylibmc.Client(servers, behaviors=behaviors)`` places keys by.

    `servers` is what :func:`ringkit.compat.ketama` takes (pylibmc's ``"host:port:weight"``
    strings work as they are). Weights other than 1 need weighted ketama.

    Runtime: as :func:`ringkit.compat.ketama`.

    >>> from_pylibmc_behaviors(["a:11211 2"], {"ketama_weighted": True}).node_for("k")
    'a:11211'

    :raises ConfigError: for a behavior that moves keys in a way ringkit does not reproduce (it
        is named), an unknown behavior, modula placement (no ketama behavior at all), weights
        without weighted ketama, or a bad server spec
    """
    unknown = sorted(
        name
        for name in set(behaviors) - _NEUTRAL - set(_ORDER)
        if name not in _OFF_ONLY or behaviors[name]
    )
    if unknown:
        raise ConfigError(
            f"pylibmc behaviors {format_names(unknown)} change placement or are unknown, got "
            f"{ {name: behaviors[name] for name in unknown}!r}; ringkit cannot reproduce them"
        )
    distribution, key_hash, weighted = _replay(behaviors)
    if distribution == "modula":
        raise _refused("distribution", "modula", "places keys without ketama")
    variant = _KETAMA_DISTRIBUTIONS[distribution][0]
    parsed = parse_servers(servers, variant=variant)
    heavy = [server.name for server in parsed if server.weight != 1]
    if heavy and not weighted:
        raise ConfigError(
            f"server weights need weighted ketama, got weights on {format_names(heavy)} with "
            f"unweighted ketama; add behaviors={{'ketama_weighted': True}}"
        )
    return ketama(
        {server.name: server.weight for server in parsed},
        variant=variant,
        weighted=weighted,
        hash=key_hash,
    )
