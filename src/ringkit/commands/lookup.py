"""``ringkit lookup KEY``: where a key lives, and why (its point, the owning token, the owners).

The placement comes from the strategy registry (``--strategy``, a ring by default) with only the
options given on the command line; a strategy refuses an option it does not use (``--vnodes``
with ``--strategy modulo``), so nothing is silently ignored. The owner and preference list are
the placement's; the point, owning token and clockwise walk are its ring's
:meth:`~ringkit.ring.HashRing.trace`, for placements built on a ring.
"""

from __future__ import annotations

import argparse
from typing import Any

from ringkit.commands.common import print_json
from ringkit.commands.compat_lookup import compat_report, print_compat_report
from ringkit.commands.proxy_modes import (
    PROXY_MODES,
    load_pool,
    print_proxy_report,
    proxy_report,
)
from ringkit.errors import ConfigError
from ringkit.hashing import encode_key
from ringkit.placement import Placement
from ringkit.ring.trace import trace_ring
from ringkit.strategies.registry import StrategyOptions, build_placement

__all__ = ["lookup_report"]

# The options of a placement lookup, which the compatibility modes do not take.
_PLACEMENT_FLAGS = (("--strategy", "strategy"), ("--vnodes", "vnodes"), ("--hasher", "hasher"))


def lookup_report(placement: Placement, key: str, replicas: int) -> dict[str, Any]:
    """Return what ``lookup`` prints: hash, point, owning token, walk and preference list.

    Point, token and walk render the placement's ring's trace (None without a ring); the
    hash is the placement's hasher's (None for placements that do not hash keys).
    """
    ring = placement.ring
    trace = None if ring is None else trace_ring(ring, key, replicas)
    hasher = placement.hasher
    native = None
    if trace is not None:
        native = trace.hash_hex
    elif hasher is not None:
        native = f"0x{hasher.function(encode_key(key)):0{hasher.bits // 4}x}"
    return {
        "key": key,
        "hasher": None if hasher is None else hasher.name,
        "hash": native,
        "point": None if trace is None else trace.point,
        "token": None if trace is None else trace.token,
        "token_index": None if trace is None else trace.token_index,
        "tokens": None if ring is None else len(ring.tokens),
        "wrapped": None if trace is None else trace.wrapped,
        "owner": placement.node_for(key),
        "preference_list": placement.nodes_for(key, replicas),
        "walk": None
        if trace is None
        else [
            {
                "token": step.token,
                "node": step.node,
                "first": step.first,
                "rank": step.rank,
                "held_back": step.held_back,
                "wrapped": step.wrapped,
            }
            for step in trace.steps
        ],
    }


def run(args: argparse.Namespace) -> int:
    """Print the lookup report for ``args.key``."""
    if args.mode in PROXY_MODES:
        return _run_proxy(args)
    for flag in ("config", "backend", "upstream", "socket", "hash_type"):
        if getattr(args, flag) is not None:
            option = "--" + flag.replace("_", "-")
            raise ConfigError(f"{option} is for --mode haproxy or nginx, not {args.mode!r}")
    if args.mode != "ring" or args.servers is not None:
        return _run_compat(args)
    options = StrategyOptions(vnodes=args.vnodes, hasher=args.hasher, replicas=args.replicas)
    placement = build_placement(args.strategy or "ring", args.nodes, options)
    report = lookup_report(placement, args.key, args.replicas or 1)
    if args.json:
        print_json(report)
        return 0
    print(f"key      {report['key']!r}")
    if args.strategy is not None:
        print(f"strategy {args.strategy}")
    if report["hash"] is not None:
        print(f"hash     {report['hash']} ({report['hasher']})")
    if report["point"] is not None:
        print(f"point    {report['point']:#018x}")
        walk = " (wrapped past the last token)" if report["wrapped"] else ""
        where = f"#{report['token_index']} of {report['tokens']}"
        print(f"token    {report['token']:#018x} ({where}){walk}")
    print(f"owner    {report['owner']}")
    if (args.replicas or 1) > 1:
        print(f"replicas {', '.join(report['preference_list'])}")
    return 0


def _run_proxy(args: argparse.Namespace) -> int:
    for flag, name in (*_PLACEMENT_FLAGS, ("--servers", "servers"), ("--key-hash", "key_hash")):
        if getattr(args, name) is not None:
            raise ConfigError(f"{flag} is not for --mode {args.mode}: the pool comes from --config")
    if args.unweighted or (args.replicas or 1) > 1:
        raise ConfigError(f"--mode {args.mode} routes each request to one server, with its weight")
    report = proxy_report(load_pool(args), args.key)
    if args.json:
        print_json(report)
    else:
        print_proxy_report(report)
    return 0


def _run_compat(args: argparse.Namespace) -> int:
    if args.mode == "ring":
        raise ConfigError("--servers is for the compatibility modes; use --nodes with --mode ring")
    for flag, name in _PLACEMENT_FLAGS:
        if getattr(args, name) is not None:
            raise ConfigError(f"{flag} is for --mode ring; --mode {args.mode} has its own layout")
    if not args.servers:
        raise ConfigError(
            f"--mode {args.mode} needs --servers, e.g. "
            f'--servers "10.0.1.1:11211 600,10.0.1.2:11211 300"'
        )
    report = compat_report(
        args.mode,
        args.servers,
        args.key,
        args.replicas or 1,
        key_hash=args.key_hash,
        weighted=not args.unweighted,
    )
    if args.json:
        print_json(report)
    else:
        print_compat_report(report)
    return 0
