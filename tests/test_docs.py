"""The docs stay honest: every public name and every CLI command appears in them (datasette), every
page is on the map, every link between pages lands on a page and a heading that exist, every
command line the docs show parses, and the outputs they show for the commands that need no
server are what the commands print."""

from __future__ import annotations

import argparse
import ast
import contextlib
import io
import re
import shlex
import textwrap
import unicodedata
from pathlib import Path

import pytest

import ringkit
from ringkit.cli import build_parser, main

ROOT = Path(__file__).resolve().parents[1]
DOCS_DIR = ROOT / "docs"
PAGES = sorted(DOCS_DIR.rglob("*.md"))
DOCS = "\n".join(path.read_text(encoding="utf-8") for path in PAGES)

_FENCE = re.compile(r"^[ \t]*(```|~~~)[^\n]*\n.*?^[ \t]*\1[ \t]*$", re.M | re.S)
_LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)|!\[[^\]]*\]\(([^)\s]+)\)")
_HEADING = re.compile(r"^(#{1,6})[ \t]+(.+?)[ \t]*#*[ \t]*$", re.M)


def _page_name(path: Path) -> str:
    return path.relative_to(DOCS_DIR).as_posix()


def _prose(text: str) -> str:
    """The text outside fenced code blocks (a '# comment' in a shell block is no heading)."""
    return _FENCE.sub("", text)


def anchor_of(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces become hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link keeps its text only
    text = text.replace("`", "").strip().lower()
    kept = []
    for char in text:
        category = unicodedata.category(char)
        if char in " -_" or category[0] in "LN":
            kept.append(char)
    return "".join(kept).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    found: set[str] = set()
    seen: dict[str, int] = {}
    for _, heading in _HEADING.findall(_prose(path.read_text(encoding="utf-8"))):
        slug = anchor_of(heading)
        count = seen.get(slug, 0)
        found.add(slug if count == 0 else f"{slug}-{count}")
        seen[slug] = count + 1
    return found


def _relative_links() -> list[tuple[str, str]]:
    links = []
    for page in PAGES:
        for match in _LINK.finditer(_prose(page.read_text(encoding="utf-8"))):
            target = match.group(1) or match.group(2)
            if not re.match(r"^[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto: …
                links.append((_page_name(page), target))
    return links


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
    index = (DOCS_DIR / "index.md").read_text(encoding="utf-8")
    for page in PAGES:
        name = _page_name(page)
        if name != "index.md":
            assert f"({name})" in index, f"docs/index.md does not link {name}"


def test_every_page_says_first_what_the_reader_will_have() -> None:
    # A manual page opens with its promise: the paragraph after the title says what the reader
    # gets (a tutorial's result, a recipe's outcome, a reference's scope), never a bare table.
    for page in PAGES:
        blocks = [b for b in page.read_text(encoding="utf-8").split("\n\n") if b.strip()]
        assert blocks[0].startswith("# "), f"{_page_name(page)} does not start with its title"
        assert not blocks[1].startswith(("|", "```", "#", "![", "- ")), (
            f"{_page_name(page)} opens without a first sentence"
        )


@pytest.mark.parametrize(("page", "target"), _relative_links())
def test_every_relative_link_resolves_to_a_file_and_heading(page: str, target: str) -> None:
    path_part, _, anchor = target.partition("#")
    source = DOCS_DIR / page
    destination = (source.parent / path_part).resolve() if path_part else source
    assert destination.exists(), f"{page} links {target}: no such file"
    assert ROOT in destination.parents, f"{page} links {target}: outside the repository"
    if anchor:
        assert destination.suffix == ".md", f"{page} links {target}: an anchor in a non-page"
        assert anchor in anchors(destination), f"{page} links {target}: no such heading"


def test_the_anchor_rule_is_githubs() -> None:
    assert anchor_of("Rebalancing on Redis: `benchmarks/bench_rebalance.py`") == (
        "rebalancing-on-redis-benchmarksbench_rebalancepy"
    )
    assert anchor_of("Driving the proxy from the live ring: `ringkit lb`") == (
        "driving-the-proxy-from-the-live-ring-ringkit-lb"
    )
    assert anchor_of("`GET /api/live`") == "get-apilive"


# ---- the command lines the docs show ----------------------------------------------------------


def _code_blocks() -> list[tuple[str, str]]:
    blocks = []
    for page in [ROOT / "README.md", *PAGES]:
        for match in _FENCE.finditer(page.read_text(encoding="utf-8")):
            # A block inside a list item is indented as its fence is: take that indent off.
            blocks.append((page.relative_to(ROOT).as_posix(), textwrap.dedent(match.group(0))))
    return blocks


def _command_lines(block: str) -> list[str]:
    """Each ``ringkit …`` command of a shell or console block, continuations joined."""
    console = block.startswith("```console")
    lines = block.splitlines()[1:-1]
    commands = []
    current = ""
    variables: dict[str, str] = {}
    for line in lines:
        if console and not current and not line.startswith("$ "):
            continue  # a console block's output, not a command
        line = line.removeprefix("$ ")
        assignment = re.match(r"^([A-Z_]+)=(\S+)$", line.strip())
        if assignment and not current:  # SERVERS=… on a line of its own, used as "$SERVERS" below
            variables[assignment[1]] = assignment[2].replace(
                "$" + assignment[1], variables.get(assignment[1], "")
            )
            continue
        for name, value in variables.items():
            line = line.replace("$" + name, value)
        if current:
            current += " " + line.strip()
        elif re.match(r"^(\w+=\S+ )*ringkit \w", line):
            current = line.strip()
        else:
            continue
        if current.endswith("\\"):
            current = current[:-1].rstrip()
            continue
        commands.append(current)
        current = ""
    return commands


def _documented_command_lines() -> list[tuple[str, str]]:
    return [(page, line) for page, block in _code_blocks() for line in _command_lines(block)]


def _argv(line: str) -> list[str]:
    line = re.sub(r"\s+#\s.*$", "", line)  # a trailing comment
    words = shlex.split(line)
    while words and re.match(r"^\w+=", words[0]):  # VAR=value before the command
        words.pop(0)
    assert words[0] == "ringkit"
    return words[1:]


@pytest.mark.parametrize(("page", "line"), _documented_command_lines())
def test_every_documented_command_line_parses(page: str, line: str) -> None:
    parser = build_parser()
    stderr = io.StringIO()
    try:
        with contextlib.redirect_stderr(stderr):
            parser.parse_args(_argv(line))
    except (SystemExit, argparse.ArgumentError) as error:
        pytest.fail(f"{page}: `{line}` does not parse ({error}): {stderr.getvalue()}")


# Commands that need no server, no file and no clock: their documented output is checked verbatim.
_PURE = {"lookup"}


def _console_examples() -> list[tuple[str, str, str]]:
    examples = []
    for page, block in _code_blocks():
        if not block.startswith("```console"):
            continue
        body = block.splitlines()[1:-1]
        for start, line in enumerate(body):
            if not line.startswith("$ ringkit "):
                continue
            output = []
            for following in body[start + 1 :]:
                if following.startswith("$ "):
                    break
                output.append(following)
            command = line[2:]
            if _argv(command)[0] in _PURE and output and not any("…" in o for o in output):
                examples.append((page, command, "\n".join(output).rstrip()))
    return examples


@pytest.mark.parametrize(("page", "command", "expected"), _console_examples())
def test_documented_output_is_what_the_command_prints(
    page: str, command: str, expected: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "100")
    stdout = io.StringIO()
    with contextlib.redirect_stdout(stdout):
        status = main(_argv(command))
    assert status == 0
    printed = "\n".join(line.rstrip() for line in stdout.getvalue().rstrip().splitlines())
    assert printed == expected, f"{page}: `{command}` prints otherwise"


def test_the_output_check_has_examples() -> None:
    assert len(_console_examples()) >= 3


def _leaf_parsers(
    parser: argparse.ArgumentParser, path: tuple[str, ...] = ()
) -> list[tuple[str, argparse.ArgumentParser]]:
    subparsers = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subparsers:
        return [(" ".join(path), parser)]
    leaves = []
    for name, sub in subparsers[0].choices.items():
        leaves.extend(_leaf_parsers(sub, (*path, name)))
    return leaves


@pytest.mark.parametrize(("command", "parser"), _leaf_parsers(build_parser()))
def test_the_cli_reference_lists_every_option_of_every_command(
    command: str, parser: argparse.ArgumentParser
) -> None:
    page = (DOCS_DIR / "reference" / "cli.md").read_text(encoding="utf-8")
    start = page.index(f"## `ringkit {command}`")
    following = page.find("\n## ", start + 1)
    section = page[start : following if following != -1 else len(page)]
    for action in parser._actions:
        for option in action.option_strings:
            if option not in ("-h", "--help"):
                assert f"`{option}`" in section, f"reference/cli.md: ringkit {command} {option}"


def _runnable_lookups() -> list[tuple[str, str]]:
    # A lookup reads no server; those that read a proxy's file or socket need one, so they only
    # parse (above).
    return [
        (page, line)
        for page, line in _documented_command_lines()
        if _argv(line)[0] == "lookup" and not {"--config", "--socket"} & set(_argv(line))
    ]


@pytest.mark.parametrize(("page", "line"), _runnable_lookups())
def test_every_documented_lookup_runs(page: str, line: str) -> None:
    stdout = io.StringIO()
    with contextlib.redirect_stdout(stdout):
        status = main(_argv(line))
    assert status == 0, f"{page}: `{line}` exited {status}"
    assert "owner" in stdout.getvalue()


def _python_blocks() -> list[tuple[str, str]]:
    # Doctest blocks (>>>) are run by the doctest collection; these are the scripts and snippets.
    found = []
    for page, block in _code_blocks():
        body = "\n".join(block.splitlines()[1:-1])
        if block.startswith("```python") and not body.lstrip().startswith(">>>"):
            found.append((page, body))
    return found


@pytest.mark.parametrize(("page", "code"), _python_blocks())
def test_every_python_block_is_python(page: str, code: str) -> None:
    try:
        compile(code, page, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    except SyntaxError as error:
        pytest.fail(f"{page}: a python block does not compile: {error}")
