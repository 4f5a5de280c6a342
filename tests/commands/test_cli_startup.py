"""``ringkit --help`` answers without loading the library: checked through ``sys.modules``.

Never by timing (the machine running the tests is shared): ``benchmarks/bench_cli_startup.py``
measures the time. What made ``--help`` slow was importing numpy (through ``import ringkit``),
rich and every command's module to build the parser.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import ringkit
from ringkit.cli import build_parser
from ringkit.commands.parsers import names

SRC = Path(ringkit.__file__).resolve().parents[1]
HEAVY = ("numpy", "rich", "xxhash", "ringkit.hashing", "ringkit.cluster", "ringkit.live")


def _subcommands(
    parser: argparse.ArgumentParser, path: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                yield from _subcommands(child, (*path, name))


COMMAND_PATHS = [path for path, _ in _subcommands(build_parser())]

_PROBE = """
import json, sys
from ringkit.cli import main
try:
    main(sys.argv[1:])
except SystemExit as stop:
    code = stop.code
heavy = sorted(name for name in {heavy!r} if name in sys.modules)
print(json.dumps({{"code": code, "heavy": heavy}}), file=sys.stderr)
"""


def _help_probe(path: tuple[str, ...]) -> dict[str, object]:
    result = subprocess.run(
        [sys.executable, "-c", _PROBE.format(heavy=HEAVY), *path, "--help"],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONPATH": str(SRC)},
    )
    assert "usage: ringkit" in result.stdout
    probe: dict[str, object] = json.loads(result.stderr.strip().splitlines()[-1])
    return probe


@pytest.mark.parametrize("path", COMMAND_PATHS, ids=lambda path: " ".join(path) or "ringkit")
def test_every_help_loads_neither_numpy_nor_rich_nor_the_library(path: tuple[str, ...]) -> None:
    assert _help_probe(path) == {"code": 0, "heavy": []}


def test_every_subcommand_runs_a_function_its_module_defines() -> None:
    # The parsers name the command's module as a string: a renamed module or function would
    # only fail when that command runs, so every one is resolved here.
    for path, parser in _subcommands(build_parser()):
        run = parser.get_default("run")
        if run is None:
            continue
        module_name, _, function = run.__qualname__.rpartition(".")
        assert callable(getattr(importlib.import_module(module_name), function)), path


def test_the_names_the_parsers_copy_are_the_librarys() -> None:
    from ringkit.cluster.rebalance.options import DEFAULT_PAGE_BYTES
    from ringkit.commands.compat_lookup import COMPAT_MODES
    from ringkit.hashing import DEFAULT_HASH, HASHERS
    from ringkit.lb import DEFAULT_DRAIN_TIMEOUT_S
    from ringkit.movement import plan
    from ringkit.ring import DEFAULT_VNODES
    from ringkit.sim.compare import CHANGES
    from ringkit.strategies.registry import STRATEGY_NAMES

    assert tuple(sorted(HASHERS)) == names.HASH_NAMES
    assert names.DEFAULT_HASH == DEFAULT_HASH
    assert names.DEFAULT_VNODES == DEFAULT_VNODES
    assert names.STRATEGY_NAMES == STRATEGY_NAMES
    assert names.COMPAT_MODES == COMPAT_MODES
    assert names.CHANGES == CHANGES
    assert names.DEFAULT_MAX_STREAMS == plan.DEFAULT_MAX_STREAMS
    assert names.DEFAULT_SETUP_S == plan.DEFAULT_SETUP_S
    assert names.DEFAULT_BANDWIDTH_BYTES_PER_S == plan.DEFAULT_BANDWIDTH_BYTES_PER_S
    assert names.DEFAULT_DRAIN_TIMEOUT_S == DEFAULT_DRAIN_TIMEOUT_S
    assert names.DEFAULT_PAGE_BYTES == DEFAULT_PAGE_BYTES


def test_a_help_text_points_at_documentation_a_wheel_user_can_open() -> None:
    # The wheel ships no docs/: a relative docs/ path in --help is a dead end off a checkout.
    texts = [parser.format_help() for _, parser in _subcommands(build_parser())]
    relative = [text for text in texts if "(docs/" in text or " docs/" in text]
    assert relative == []
    assert any(names.DOCS_URL in text.replace("\n", "") for text in texts)
