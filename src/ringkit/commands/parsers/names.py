"""The library's names and defaults that the command line shows in its ``--help``.

Copied, not imported: importing them from :mod:`ringkit.hashing`, the strategy registry or
:mod:`ringkit.movement.plan` loads numpy and every strategy, which is most of the time a
``--help`` took. ``tests/commands/test_cli_startup.py`` checks every copy against the library,
so a new hash function or strategy fails a test until it is listed here.
"""

from __future__ import annotations

__all__ = [
    "CHANGES",
    "COMPAT_MODES",
    "DEFAULT_BANDWIDTH_BYTES_PER_S",
    "DEFAULT_HASH",
    "DEFAULT_MAX_STREAMS",
    "DEFAULT_SETUP_S",
    "DEFAULT_VNODES",
    "DOCS_URL",
    "HASH_NAMES",
    "MAX_SAMPLE_KEYS",
    "STRATEGY_NAMES",
    "SWEEP_VNODES",
    "docs_page",
]

# ringkit.hashing.HASHERS, sorted.
HASH_NAMES = (
    "fnv1a_32",
    "fnv1a_32_mix",
    "fnv1a_64",
    "md5",
    "murmur3_32",
    "murmur3_64",
    "sha1",
    "xxh3_64",
)
DEFAULT_HASH = "xxh3_64"  # ringkit.hashing.DEFAULT_HASH
DEFAULT_VNODES = 160  # ringkit.ring.DEFAULT_VNODES
# ringkit.strategies.registry.STRATEGY_NAMES, in the registry's order.
STRATEGY_NAMES = (
    "allocated",
    "bounded",
    "fixed",
    "jump",
    "maglev",
    "modulo",
    "multiprobe",
    "ranges",
    "rendezvous",
    "ring",
    "scheduled",
)
# ringkit.compat.ketama.KETAMA_VARIANTS, then the other layouts `lookup --mode` knows.
COMPAT_MODES = ("libketama", "libmemcached", "spy", "twemproxy", "envoy", "cassandra", "redis")
# ringkit.sim.compare.CHANGES: the membership changes `ringkit compare` measures.
CHANGES = ("add", "remove")
# ringkit.movement.plan's defaults of a migration plan.
DEFAULT_MAX_STREAMS = 4
DEFAULT_SETUP_S = 0.5
DEFAULT_BANDWIDTH_BYTES_PER_S = 100_000_000.0
# ringkit.cluster.rebalance.options.DEFAULT_PAGE_BYTES: the bytes of one page a move copies.
DEFAULT_PAGE_BYTES = 1 << 20
# ringkit.lb.haproxy.DEFAULT_DRAIN_TIMEOUT_S: the longest wait for a leaving server's sessions.
DEFAULT_DRAIN_TIMEOUT_S = 30.0
# The vnode counts `ringkit sweep` tries: the powers of two up to 1024.
SWEEP_VNODES = tuple(2**i for i in range(11))
# `ringkit plan --keys`: the sample is a list of key strings (~100 bytes each), so past this it
# is gigabytes, and the plan's figures are fractions that a larger sample hardly changes.
MAX_SAMPLE_KEYS = 1 << 22

# Where the documentation is read: the wheel ships no docs/, so help texts link to the repository.
DOCS_URL = "https://github.com/ringkit/ringkit/blob/main/docs/"


def docs_page(page: str) -> str:
    """Return the URL of documentation page `page`.

    >>> docs_page("live.md")
    'https://github.com/ringkit/ringkit/blob/main/docs/live.md'
    """
    return DOCS_URL + page
