"""The docs stay honest: every public name and every CLI command appears in them (datasette)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import ringkit
from ringkit.cli import build_parser

ROOT = Path(__file__).resolve().parents[1]
DOCS = "\n".join(path.read_text() for path in sorted((ROOT / "docs").glob("*.md")))


@pytest.mark.parametrize("name", [n for n in ringkit.__all__ if not n.startswith("__")])
def test_every_public_name_is_documented(name: str) -> None:
    assert re.search(rf"\b{re.escape(name)}\b", DOCS), f"{name} is not mentioned in docs/"


def _commands() -> list[str]:
    parser = build_parser()
    subparsers = next(a for a in parser._actions if a.dest == "command")
    return sorted(subparsers.choices)  # type: ignore[arg-type]


@pytest.mark.parametrize("command", _commands())
def test_every_command_is_documented(command: str) -> None:
    assert f"ringkit {command}" in DOCS, f"`ringkit {command}` is not mentioned in docs/"


def test_every_docs_page_is_linked_from_the_index() -> None:
    index = (ROOT / "docs" / "index.md").read_text()
    for page in sorted((ROOT / "docs").glob("*.md")):
        if page.name != "index.md":
            assert f"({page.name})" in index, f"docs/index.md does not link {page.name}"
