"""Argument helpers shared by the subcommands."""

from __future__ import annotations

import argparse
import json
from typing import Any

from ringkit.errors import ConfigError

__all__ = ["node_list", "positive_int", "print_json", "shown_url", "vnode_counts"]


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
    return values
