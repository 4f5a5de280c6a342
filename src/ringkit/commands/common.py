"""Argument helpers shared by the subcommands.

The argument types here are used by the parsers of :mod:`ringkit.commands.parsers`, which
``--help`` builds, so the library's token checks are imported only when a value is parsed.
"""

from __future__ import annotations

import argparse
import json
import math
from typing import Any

from ringkit.commands.parsers.names import STRATEGY_NAMES
from ringkit.errors import ConfigError

__all__ = [
    "check_draw_size",
    "finite_number",
    "node_list",
    "positive_int",
    "print_json",
    "seed_int",
    "shown_url",
    "strategy_list",
    "vnode_counts",
    "vnodes_per_node",
]

# What a command-line tool says about a size past the token limit (it has no max_tokens flag).
_TOKEN_FIX = "use fewer vnodes (the library takes max_tokens= for larger rings)"


def node_list(text: str) -> list[str]:
    """Parse ``a,b,c`` into node names; refuse empty names.

    >>> node_list("A, B,C")
    ['A', 'B', 'C']
    """
    names = [part.strip() for part in text.split(",")]
    if not text.strip() or any(not name for name in names):
        raise argparse.ArgumentTypeError(f"expected comma-separated node names, got {text!r}")
    return names


def positive_int(text: str) -> int:
    """Parse an int >= 1 for argparse."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def vnodes_per_node(text: str) -> int:
    """Parse a vnode count for argparse: an int >= 1 that one node's tokens can hold.

    The whole ring (every node's vnodes) is checked again by the library when it is built.
    """
    from ringkit.placement import check_token_count

    value = positive_int(text)
    try:
        check_token_count(value, what=f"one node of --vnodes {value}", fix=_TOKEN_FIX)
    except ConfigError as error:
        raise argparse.ArgumentTypeError(str(error)) from None
    return value


def check_draw_size(draws: int, nodes: int, vnodes: int, replicas: int) -> None:
    """Refuse seeded ring draws whose arrays would pass the token limit (one line, exit 1).

    Every draw keeps one share per node; with replicas each ring's tokens are also drawn and
    sorted (``ringkit.stats.draw_shares`` batches rings, so one ring is what counts).
    """
    from ringkit.placement import check_token_count, count_text

    cells = max(draws * nodes, nodes * vnodes if replicas > 1 else 0)
    what = f"{count_text(draws)} seeded rings of {count_text(nodes)} nodes" + (
        f" x {count_text(vnodes)} vnodes" if replicas > 1 else ""
    )
    check_token_count(cells, what=what, fix="use fewer --draws, --nodes or --vnodes")


def seed_int(text: str) -> int:
    """Parse a random seed for argparse: an int >= 0 (numpy's seeds are non-negative).

    >>> seed_int("7")
    7
    """
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"seed must be >= 0, got {value}")
    return value


def finite_number(text: str) -> float:
    """Parse a finite number for argparse (``inf`` and ``nan`` are refused).

    >>> finite_number("1.25")
    1.25
    """
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"expected a finite number, got {text!r}")
    return value


def strategy_list(text: str) -> list[str]:
    """Parse ``ring,jump`` into strategy names; refuse an empty list or an empty name.

    Unknown names are the library's to refuse, as for ``--strategy``'s siblings.

    >>> strategy_list("ring, jump")
    ['ring', 'jump']
    """
    names = [part.strip() for part in text.split(",")]
    if not text.strip() or any(not name for name in names):
        raise argparse.ArgumentTypeError(
            f"expected comma-separated strategy names, got {text!r}; known: "
            + ", ".join(STRATEGY_NAMES)
        )
    return names


def print_json(data: Any) -> None:
    """Print `data` as indented JSON."""
    print(json.dumps(data, indent=2, sort_keys=False))


def refuse(message: str) -> ConfigError:
    """Return a ConfigError for a bad argument combination (printed as ``ringkit: error:``)."""
    return ConfigError(message)


def shown_url(url: str) -> str:
    """Return a store URL without its credentials, to print.

    >>> shown_url("etcd://ops:s3cret@h1:2379/ring"), shown_url("memory://demo")
    ('etcd://h1:2379/ring', 'memory://demo')
    """
    scheme, sep, rest = url.partition("://")
    return f"{scheme}{sep}{rest.rpartition('@')[2]}" if "@" in rest else url


def vnode_counts(text: str) -> list[int]:
    """Parse ``1,8,32`` (or ``1-1024`` for the powers of two in that range) into vnode counts."""
    from ringkit.placement import MAX_TOKENS

    try:
        if "-" in text:
            low, high = (int(part) for part in text.split("-", 1))
            values = [2**i for i in range(high.bit_length()) if low <= 2**i <= high]
        else:
            values = [int(part) for part in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected comma-separated integers or LOW-HIGH, got {text!r}"
        ) from None
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"vnodes must be >= 1, got {text!r}")
    if max(values) > MAX_TOKENS:
        raise argparse.ArgumentTypeError(
            f"vnodes must be at most {MAX_TOKENS:,} (the token limit), got {text!r}"
        )
    return values
