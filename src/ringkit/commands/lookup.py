"""``ringkit lookup KEY``: where a key lives, and why (its point, the owning token, the owners)."""

from __future__ import annotations

import argparse
from typing import Any

from ringkit.commands.common import node_list, positive_int, print_json
from ringkit.commands.compat_lookup import add_compat_arguments, compat_report, print_compat_report
from ringkit.errors import ConfigError
from ringkit.hashing import DEFAULT_HASH, HASHERS
from ringkit.ring import DEFAULT_VNODES, HashRing

__all__ = ["lookup_report", "register"]


def register(subparsers: Any) -> None:
    """Add the ``lookup`` subcommand."""
    parser = subparsers.add_parser(
        "lookup",
        help="show a key's point, owning token and owner(s)",
        description="Look up one key on a hash ring.",
    )
    parser.add_argument("key", help="the key to look up (hashed as UTF-8 text)")
    parser.add_argument(
        "--nodes",
        type=node_list,
        default=["A", "B", "C"],
        help="comma-separated node names (default: A,B,C)",
    )
    parser.add_argument(
        "--vnodes",
        type=positive_int,
        default=DEFAULT_VNODES,
        help=f"vnodes per node (default: {DEFAULT_VNODES})",
    )
    parser.add_argument(
        "--hasher",
        choices=sorted(HASHERS),
        default=DEFAULT_HASH,
        help=f"hash function (default: {DEFAULT_HASH})",
    )
    parser.add_argument(
        "--replicas",
        type=positive_int,
        default=1,
        help="length of the preference list to show (default: 1)",
    )
    add_compat_arguments(parser)
    parser.add_argument("--json", action="store_true", help="print JSON")
    parser.set_defaults(run=run)


def lookup_report(ring: HashRing, key: str, replicas: int) -> dict[str, Any]:
    """Return what ``lookup`` prints: hash, point, owning token and preference list."""
    data = key.encode()
    native = ring.hasher.function(data)
    point = ring.point_for(key)
    index = int(ring.tokens.searchsorted(point, side="left")) % len(ring.tokens)
    return {
        "key": key,
        "hasher": ring.hasher.name,
        "hash": f"0x{native:0{ring.hasher.bits // 4}x}",
        "point": point,
        "token": int(ring.tokens[index]),
        "token_index": index,
        "wrapped": point > int(ring.tokens[-1]),
        "owner": ring.node_for(key),
        "preference_list": ring.nodes_for(key, replicas),
    }


def run(args: argparse.Namespace) -> int:
    """Print the lookup report for ``args.key``."""
    if args.mode != "ring" or args.servers is not None:
        return _run_compat(args)
    ring = HashRing(args.nodes, vnodes=args.vnodes, hasher=args.hasher)
    report = lookup_report(ring, args.key, args.replicas)
    if args.json:
        print_json(report)
        return 0
    walk = " (wrapped past the last token)" if report["wrapped"] else ""
    print(f"key      {report['key']!r}")
    print(f"hash     {report['hash']} ({report['hasher']})")
    print(f"point    {report['point']:#018x}")
    print(
        f"token    {report['token']:#018x} (#{report['token_index']} of {len(ring.tokens)}){walk}"
    )
    print(f"owner    {report['owner']}")
    if args.replicas > 1:
        print(f"replicas {', '.join(report['preference_list'])}")
    return 0


def _run_compat(args: argparse.Namespace) -> int:
    if args.mode == "ring":
        raise ConfigError("--servers is for the compatibility modes; use --nodes with --mode ring")
    if not args.servers:
        raise ConfigError(
            f"--mode {args.mode} needs --servers, e.g. "
            f'--servers "10.0.1.1:11211 600,10.0.1.2:11211 300"'
        )
    report = compat_report(args.mode, args.servers, args.key, args.replicas, key_hash=args.key_hash)
    if args.json:
        print_json(report)
    else:
        print_compat_report(report)
    return 0
