"""Which tests start a server: the ``server`` marker, applied at collection, and its guard.

``make check`` runs ``pytest -m "not server and not installs"``: every test that starts no real
server (nor installs a package), in about a minute. A test is marked when its function, one of
its fixtures, or a function either calls (followed through the test modules, by static reading
of their source) uses a helper that starts a server (:data:`STARTERS`), or when its parameters
choose a server backend. Nobody has to
remember the marker; a test the reading misses is caught when it runs: a guard (a Python audit
hook on ``subprocess.Popen``) refuses to start a server binary in a test not marked ``server``,
with a message naming the test, so the selection cannot quietly start servers.

Beside it, ``installs`` marks by hand the few tests that build a virtualenv and install a package
into it (a pip subprocess, seconds of CPU): ``make check`` leaves them to ``make test`` too.
"""

from __future__ import annotations

import ast
import functools
import importlib.util
import os
import sys
from pathlib import Path
from typing import Any

import pytest

__all__ = ["INSTALLS", "SERVER", "STARTERS", "guard_server_binaries", "starts_servers"]

SERVER = "server"
INSTALLS = "installs"

# Helpers that start a real server, by their qualified names.
STARTERS = frozenset(
    {
        "tests.servers.serve",
        "tests.servers.memcached_server",
        "tests.servers.redis_server",
        "tests.servers.etcd_server",
        "tests.servers.etcd_cluster",
        "tests.web.serving.serving",
        "tests.compat._twemproxy.nutcracker",
        "tests.proxies.proxy",
        "tests.proxies.backends",
        "playwright.sync_api.sync_playwright",
    }
)
# Parameters (of fixtures or of parametrize) whose value chooses a server for the test.
_SERVER_PARAM_NAMES = frozenset({"backend", "kind", "store", "store_url", "url"})
_SERVER_PARAM_VALUES = frozenset({"redis", "memcached", "etcd"})
# Binaries the guard refuses to start outside a test marked ``server``.
SERVER_BINARIES = frozenset(
    {"memcached", "redis-server", "etcd", "nutcracker", "chromium", "haproxy", "nginx"}
)


class _Module:
    """One test module read once: what each imported name stands for, what each function uses."""

    def __init__(self, name: str, path: Path) -> None:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        self.imports: dict[str, str] = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parent = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                    base = f"{parent}.{base}" if base else parent
                for alias in node.names:
                    self.imports[alias.asname or alias.name] = f"{base}.{alias.name}"
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    self.imports[alias.asname or alias.name.partition(".")[0]] = (
                        alias.name if alias.asname else alias.name.partition(".")[0]
                    )
        tops = {
            node.name: node
            for node in tree.body
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
        }
        self.uses = {top: self._names_used(node, name, tops) for top, node in tops.items()}

    def _names_used(self, node: ast.AST, module: str, tops: dict[str, ast.AST]) -> set[str]:
        used: set[str] = set()
        for child in ast.walk(node):
            if isinstance(child, ast.Name):
                if child.id in self.imports:
                    used.add(self.imports[child.id])
                elif child.id in tops:
                    used.add(f"{module}.{child.id}")
            elif (
                isinstance(child, ast.Attribute)
                and isinstance(child.value, ast.Name)
                and child.value.id in self.imports
            ):
                used.add(f"{self.imports[child.value.id]}.{child.attr}")
        return used


@functools.cache
def _module(name: str) -> _Module | None:
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    if spec is None or spec.origin is None or not spec.origin.endswith(".py"):
        return None
    return _Module(name, Path(spec.origin))


def _starts_server(qualified: str, seen: set[str]) -> bool:
    if qualified in STARTERS:
        return True
    if qualified in seen or not qualified.startswith("tests."):
        return False
    seen.add(qualified)
    module_name, _, top = qualified.rpartition(".")
    module = _module(module_name)
    if module is None or top not in module.uses:
        return False
    return any(_starts_server(used, seen) for used in module.uses[top])


def _qualified(function: Any) -> str:
    return f"{function.__module__}.{function.__qualname__.partition('.')[0]}"


def starts_servers(item: pytest.Item) -> bool:
    """Return True when test `item` starts a server, by its source, fixtures and parameters."""
    if item.get_closest_marker(SERVER) is not None:
        return True
    function = getattr(item, "obj", None)
    if function is not None and _starts_server(_qualified(function), set()):
        return True
    callspec = getattr(item, "callspec", None)
    if callspec is not None and any(
        name in _SERVER_PARAM_NAMES and value in _SERVER_PARAM_VALUES
        for name, value in callspec.params.items()
        if isinstance(value, str)
    ):
        return True
    fixtureinfo = getattr(item, "_fixtureinfo", None)
    if fixtureinfo is None:
        return False
    return any(
        _starts_server(_qualified(definition.func), set())
        for name in item.fixturenames
        for definition in fixtureinfo.name2fixturedefs.get(name, ())
    )


_current: dict[str, str | None] = {"unmarked_test": None}
# The demos start their servers through this module (they die with the demo): see through it.
_LIFELINE = "ringkit.demos.lifeline"


def allow_servers(item: pytest.Item | None) -> None:
    """Record the running test: servers are allowed unless it is a test not marked ``server``."""
    unmarked = item is not None and item.get_closest_marker(SERVER) is None
    _current["unmarked_test"] = item.nodeid if unmarked else None


def _refuse_unmarked_servers(event: str, args: tuple[Any, ...]) -> None:
    if event != "subprocess.Popen" or _current["unmarked_test"] is None:
        return
    executable, argv = args[0], args[1]
    program = executable or (argv[0] if isinstance(argv, list | tuple) and argv else argv)
    if isinstance(argv, list | tuple) and _LIFELINE in argv[:3]:
        program = argv[argv.index(_LIFELINE) + 2]  # python -m LIFELINE PID PROGRAM …
    if os.path.basename(os.fsdecode(program or "")) in SERVER_BINARIES:
        raise RuntimeError(
            f"{_current['unmarked_test']} starts {program} but is not marked "
            f"{SERVER!r}: tests/markers.py did not see it; add @pytest.mark.{SERVER}"
        )


def guard_server_binaries() -> None:
    """Install the audit hook that refuses server binaries to tests not marked ``server``."""
    sys.addaudithook(_refuse_unmarked_servers)
