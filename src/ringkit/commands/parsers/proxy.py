"""``--mode haproxy|nginx`` of ``lookup`` and ``plan``: the arguments that name a proxy's pool."""

from __future__ import annotations

import argparse

__all__ = ["PROXY_MODES", "add_proxy_arguments"]

PROXY_MODES = ("haproxy", "nginx")


def add_proxy_arguments(parser: argparse.ArgumentParser) -> None:
    """Add ``--config``, ``--backend``, ``--upstream``, ``--socket`` and ``--hash-type``."""
    add = parser.add_argument
    add("--config", metavar="FILE", help="haproxy / nginx: the proxy's configuration file")
    add("--backend", metavar="NAME", help="haproxy: the backend (or listen section) to read")
    add("--upstream", metavar="NAME", help="nginx: the upstream to read")
    add(
        "--socket",
        metavar="SOCK",
        help="haproxy: the runtime API socket (path or host:port); servers, ids, weights and "
        "states come from 'show servers state'",
    )
    add(
        "--hash-type",
        metavar="WORDS",
        help="haproxy with --socket and no --config: the backend's hash-type, e.g. \"consistent "
        'crc32" (default: "consistent", sdbm with avalanche)',
    )
