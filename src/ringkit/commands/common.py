"""Argument helpers shared by the subcommands.

The argument types here are used by the parsers of :mod:`ringkit.commands.parsers`, which
``--help`` builds, so the library's token checks are imported only when a value is parsed.
"""

from __future__ import annotations

import argparse
import json
import math
import os
from typing import Any
from urllib.parse import quote

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
    "store_arguments",
    "store_password_argument",
    "store_url_with_password",
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
    from ringkit.live.urls import redacted

    return redacted(url)


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


#: The environment variable the commands read an etcd password from (never from argv).
PASSWORD_ENV = "RINGKIT_ETCD_PASSWORD"


def store_arguments(parser: argparse.ArgumentParser) -> None:
    """Add a required ``--store URL`` of a live ring and its ``--etcd-password-file``."""
    parser.add_argument(
        "--store",
        required=True,
        metavar="URL",
        help="etcd://[USER@]HOST:PORT[,HOST:PORT…]/PREFIX, etcds://… or memory://NAME",
    )
    store_password_argument(parser)


def store_password_argument(parser: argparse.ArgumentParser) -> None:
    """Add ``--etcd-password-file`` (the password of the ``user@`` in a store URL)."""
    parser.add_argument(
        "--etcd-password-file",
        metavar="PATH",
        help=f"read the etcd password of etcd://USER@… from this file (else ${PASSWORD_ENV}); "
        "a password in the URL itself is visible to every user of `ps`",
    )


def store_url_with_password(url: str, password_file: str | None) -> str:
    """Return `url` with the password of its ``user@`` filled in from a file or the environment.

    A URL that names a user without a password (``etcd://ops@h1:2379/ring``) takes it from
    `password_file` (its first line) or else ``$RINGKIT_ETCD_PASSWORD``, so the password never
    appears in a command line other users can read. Other URLs are returned unchanged.

    >>> store_url_with_password("memory://demo", None)
    'memory://demo'

    :raises ConfigError: when the file cannot be read, or a user has no password anywhere
    """
    scheme, sep, rest = url.partition("://")
    authority = rest.split("/", 1)[0]
    if not sep or "@" not in authority or ":" in authority.rpartition("@")[0]:
        if password_file is not None:
            raise ConfigError(
                f"--etcd-password-file needs a store URL with a user and no password "
                f"(etcd://USER@HOST:PORT/PREFIX), got {shown_url(url)!r}"
            )
        return url
    user, _, host_and_path = rest.partition("@")
    if password_file is not None:
        try:
            with open(password_file, encoding="utf-8") as file:
                password = file.readline().rstrip("\r\n")
        except (OSError, UnicodeDecodeError) as error:
            raise ConfigError(
                f"--etcd-password-file must be a readable text file, got {password_file!r}: "
                f"{getattr(error, 'strerror', None) or error}"
            ) from error
    elif os.environ.get(PASSWORD_ENV) is not None:
        password = os.environ[PASSWORD_ENV]
    else:
        raise ConfigError(
            f"etcd user {user!r} needs a password, got none; put it in a file named by "
            f"--etcd-password-file or in ${PASSWORD_ENV}"
        )
    return f"{scheme}://{user}:{quote(password, safe='')}@{host_and_path}"
