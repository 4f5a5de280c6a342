"""``ringkit demo cache`` and ``ringkit demo workers``: their arguments."""

from __future__ import annotations

import argparse
from typing import Any

from ringkit.commands.common import positive_int
from ringkit.commands.parsers import deferred
from ringkit.commands.parsers.names import docs_page

__all__ = ["register"]


def _pool_size(text: str) -> int:
    value = positive_int(text)
    if value < 2:
        raise argparse.ArgumentTypeError(f"must be >= 2 (one is killed), got {value}")
    return value


def register(subparsers: Any) -> None:
    """Add the ``demo`` subcommand and its ``cache`` and ``workers`` scenarios."""
    parser = subparsers.add_parser(
        "demo",
        help="run a lesson on real servers or processes",
        description="Run a lesson on real servers or processes.",
    )
    scenarios = parser.add_subparsers(dest="scenario", metavar="SCENARIO", required=True)
    _register_cache(scenarios)
    _register_workers(scenarios)


def _register_cache(scenarios: Any) -> None:
    cache = scenarios.add_parser(
        "cache",
        help="Gatepass: add a cache server, ring against hash %% N",
        description="Fill cache servers, add one, replay the reads: ring against hash % N.",
    )
    cache.add_argument(
        "--backend",
        choices=("memory", "memcached", "redis"),
        default="memory",
        help="where the cache lives (default: memory, in this process)",
    )
    cache.add_argument(
        "--servers", type=positive_int, default=3, help="servers before the change (default: 3)"
    )
    cache.add_argument("--add", type=positive_int, default=1, help="servers added (default: 1)")
    cache.add_argument(
        "--keys", type=positive_int, default=10_000, help="booking keys (default: 10000)"
    )
    cache.add_argument("--json", action="store_true", help="print JSON")
    cache.set_defaults(run=deferred("ringkit.commands.demo"))


def _register_workers(scenarios: Any) -> None:
    parser = scenarios.add_parser(
        "workers",
        help="workers share tenants by a live ring; one is SIGKILLed and the pool converges",
        description="Start workers that own tenants by a live ring, kill one with SIGKILL and "
        f"show the tenants moving and the pool converging ({docs_page('live.md')}).",
    )
    parser.add_argument("--workers", type=_pool_size, default=6, help="workers (default: 6)")
    parser.add_argument("--tenants", type=positive_int, default=30, help="tenants (default: 30)")
    parser.add_argument(
        "--store",
        metavar="URL",
        help="etcd://HOST:PORT/PREFIX (processes) or memory://NAME (threads); default: a "
        "throwaway local etcd",
    )
    parser.add_argument(
        "--ttl-s", type=positive_int, default=2, help="the workers' lease TTL (default: 2)"
    )
    parser.add_argument(
        "--timeout-s", type=positive_int, default=30, help="give up after (default: 30)"
    )
    parser.add_argument("--json", action="store_true", help="print JSON")
    parser.set_defaults(run=deferred("ringkit.commands.workers"))
