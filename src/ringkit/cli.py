"""The ``ringkit`` command: a thin shell over the library.

Each subcommand lives in its own module under ``ringkit.commands``, and its arguments in a module
of the same name under ``ringkit.commands.parsers``, imported here by name, which offers
``register(subparsers)``: it adds the parser and sets ``run``, a function ``(args) -> exit
status`` that imports the command's module when it runs. So ``ringkit --help`` loads argparse and
the parsers only, never numpy, rich or the cache client. Optional extras (Starlette and uvicorn
for ``serve``, matplotlib for ``--plot``) are imported only when a command needs them, so a
missing extra gives a one-line install hint instead of breaking every command. This module only
parses, dispatches and turns a ``RingkitError`` into ``ringkit: error: <message>`` with exit
status 1 (usage errors exit 2, as argparse does). ``--debug`` shows the traceback instead.

Output goes where a command-line tool's output goes: into ``head``, which closes the pipe early
(a quiet exit, no ``BrokenPipeError`` traceback), and onto terminals whose encoding is ASCII
(characters it cannot show are replaced, never an ``UnicodeEncodeError``; bars use ``#``).
"""

from __future__ import annotations

import argparse
import codecs
import io
import os
import sys
from collections.abc import Sequence
from types import ModuleType

from ringkit import __version__
from ringkit.commands.parsers import (
    advise,
    compare,
    demo,
    lb,
    lookup,
    plan,
    rebalance,
    ring,
    serve,
    simulate,
    sweep,
)
from ringkit.commands.parsers.names import docs_page
from ringkit.errors import RingkitError

__all__ = ["COMMANDS", "HASHER_WARNINGS", "build_parser", "main"]

# One parser module per subcommand, in the order ``--help`` lists them; each has
# register(subparsers).
COMMANDS: tuple[ModuleType, ...] = (
    lookup,
    demo,
    simulate,
    sweep,
    advise,
    compare,
    plan,
    rebalance,
    ring,
    lb,
    serve,
)


def build_parser() -> argparse.ArgumentParser:
    """Return the argument parser with every subcommand registered."""
    parser = argparse.ArgumentParser(
        prog="ringkit",
        description="Consistent hashing: look up keys, simulate rings, plan migrations.",
    )
    parser.add_argument("--version", action="version", version=f"ringkit {__version__}")
    parser.add_argument("--debug", action="store_true", help="show tracebacks on errors")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for command in COMMANDS:
        command.register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ringkit command with `argv` (default: ``sys.argv[1:]``); return the exit status."""
    parser = build_parser()
    arguments = sys.argv[1:] if argv is None else list(argv)
    undecodable = next((a for a in arguments if not _is_text(a)), None)
    if undecodable is not None:
        # Before this, bytes that are not UTF-8 reached encode() as surrogates
        parser.error(f"argument {_shown_bytes(undecodable)} is not UTF-8 text")
    args = parser.parse_args(arguments)
    if args.command is None:
        parser.print_help()
        return 2
    _replace_unencodable()
    warning = HASHER_WARNINGS.get(getattr(args, "hasher", None) or "")
    if warning is not None:
        print(f"ringkit: warning: {warning}", file=sys.stderr)
    try:
        status: int = args.run(args)
        sys.stdout.flush()  # a closed pipe fails here, inside the try, not at interpreter exit
    except RingkitError as error:
        if args.debug:
            raise
        print(f"ringkit: error: {error}", file=sys.stderr)
        return 1
    except BrokenPipeError:
        # Before this, `ringkit simulate --json | head -1` ended in a traceback
        _discard_stdout()
        return 1
    return status


def _is_text(argument: str) -> bool:
    """Return True when `argument` is text (not bytes Python decoded as lone surrogates)."""
    try:
        argument.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _shown_bytes(argument: str) -> str:
    """Return the bytes `argument` came from, as ``b'...'``, to name it in an error."""
    try:
        return repr(os.fsencode(argument))
    except UnicodeEncodeError:  # a lone surrogate passed as a str, not from the command line
        return ascii(argument)


# What an ASCII stdout shows for the few non-ASCII characters ringkit prints; others become "?".
_ASCII = {"×": "x", "·": "-", "–": "-", "—": "-", "→": "->", "…": "...", "≥": ">=", "≤": "<="}


def _ascii_fallback(error: UnicodeError) -> tuple[str, int]:
    """Encode-error handler: spell the characters of `_ASCII` in ASCII, others as ``?``."""
    if not isinstance(error, UnicodeEncodeError):
        raise error
    bad = error.object[error.start : error.end]
    return "".join(_ASCII.get(char, "?") for char in bad), error.end


codecs.register_error("ringkit-ascii", _ascii_fallback)


# Before this, fnv1a_32 gave four nodes 44.7/18.3/24.9/12.1% at 160 vnodes, unannounced
HASHER_WARNINGS = {
    "fnv1a_32": "fnv1a_32 clusters the tokens of similar short labels, so shares can be far"
    " from fair; use fnv1a_32_mix or xxh3_64 unless a client needs fnv1a_32"
    f" ({docs_page('ring.md')})",
}


def _replace_unencodable() -> None:
    """Let stdout replace what its encoding cannot show (``PYTHONIOENCODING=ascii``)."""
    # Before this, simulate crashed with UnicodeEncodeError on an ASCII-only stdout
    if isinstance(sys.stdout, io.TextIOWrapper) and sys.stdout.errors == "strict":
        try:
            "█·×–→".encode(sys.stdout.encoding)
        except (UnicodeEncodeError, LookupError):
            sys.stdout.reconfigure(errors="ringkit-ascii")


def _discard_stdout() -> None:
    """Point stdout at devnull so the interpreter's final flush does not fail again.

    The recipe of the Python docs (``signal`` module, "Note on SIGPIPE").
    """
    try:
        descriptor = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):
        return  # a captured stdout (tests) has no descriptor to replace
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, descriptor)
    os.close(devnull)
