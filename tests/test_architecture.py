"""The import contract: no module imports a layer above its own, and no face imports another face.

The layers are read from the table in docs/architecture.md, so the map a newcomer reads is the
map this test enforces: a module that fits no row, or an import that points up the table, fails
here with the file, the line and the rule it breaks. Every import counts, including those inside
functions and under ``TYPE_CHECKING``: a lazy import is still a dependency.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "src" / "ringkit"
ARCHITECTURE = ROOT / "docs" / "architecture.md"

# The CLI's `serve` command is how the web face is started: the one import from a face into
# another that the contract allows (docs/architecture.md, "Faces").
FACE_EXCEPTIONS = frozenset({("ringkit.commands.serve", "ringkit.web")})


@dataclass(frozen=True, slots=True)
class Layer:
    rank: int
    prefixes: tuple[str, ...]
    face: bool


@dataclass(frozen=True, slots=True)
class Import:
    importer: str
    imported: str
    path: Path
    line: int


def read_layers(text: str) -> list[Layer]:
    """Return the layers of the module-map table: rows ``| rank | `prefix`, … | face? | … |``."""
    layers = []
    for row in re.findall(r"^\|\s*(\d+)\s*\|([^|]*)\|\s*(face|library)\s*\|", text, re.M):
        rank, cell, kind = row
        prefixes = tuple(re.findall(r"`(ringkit[\w.]*)`", cell))
        layers.append(Layer(int(rank), prefixes, kind == "face"))
    return layers


def module_name(path: Path, source: Path) -> str:
    parts = path.relative_to(source.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _absolute(node: ast.ImportFrom, importer: str, is_package: bool) -> str:
    if node.level == 0:
        return node.module or ""
    base = importer.split(".")
    base = base if is_package else base[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join([*base, node.module] if node.module else base)


def imports_of(source: Path) -> list[Import]:
    """Return every import of a ringkit module by a ringkit module under `source`."""
    found = []
    for path in sorted(source.rglob("*.py")):
        importer = module_name(path, source)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                module = _absolute(node, importer, path.name == "__init__.py")
                # `from ringkit import hashing` imports the module ringkit.hashing.
                package = module == "ringkit"
                names = [f"{module}.{a.name}" for a in node.names] if package else [module]
            else:
                continue
            for name in names:
                if name == "ringkit" or name.startswith("ringkit."):
                    found.append(Import(importer, name, path, node.lineno))
    return found


def layer_of(module: str, layers: list[Layer]) -> Layer | None:
    """Return the layer whose longest prefix matches `module`, or None."""
    best: tuple[int, Layer] | None = None
    for layer in layers:
        for prefix in layer.prefixes:
            matches = module == prefix or module.startswith(prefix + ".")
            if matches and (best is None or len(prefix) > best[0]):
                best = (len(prefix), layer)
    return best[1] if best else None


def _allowed(item: Import) -> bool:
    return any(
        item.importer == importer and (item.imported + ".").startswith(imported + ".")
        for importer, imported in FACE_EXCEPTIONS
    )


def violations(source: Path, layers: list[Layer]) -> list[str]:
    """Return one message per import that breaks the contract (empty when it holds)."""
    problems = []
    for item in imports_of(source):
        if item.importer == "ringkit":
            continue  # the package's __init__ re-exports the public API of every layer
        here, there = layer_of(item.importer, layers), layer_of(item.imported, layers)
        where = f"{item.path.relative_to(source.parent)}:{item.line}"
        if here is None:
            problems.append(f"{where}: module {item.importer} is in no layer of the map")
            continue
        if item.imported == "ringkit":
            # The whole public API: a face may take it, a library module would import every
            # layer above its own.
            if not here.face:
                problems.append(f"{where}: {item.importer} imports the whole ringkit package")
            continue
        if there is None:
            if item.imported.count(".") == 1:
                continue  # `from ringkit import __version__`: a name of the package, not a module
            problems.append(f"{where}: {item.imported} is in no layer of the map")
            continue
        if there.rank > here.rank:
            problems.append(
                f"{where}: {item.importer} (layer {here.rank}) imports {item.imported} "
                f"(layer {there.rank}), a layer above it"
            )
        elif here.face and there.face and here != there and not _allowed(item):
            problems.append(f"{where}: face {item.importer} imports face {item.imported}")
    return problems


@pytest.fixture(scope="module")
def layers() -> list[Layer]:
    found = read_layers(ARCHITECTURE.read_text(encoding="utf-8"))
    assert len(found) >= 8, "docs/architecture.md lost its module-map table"
    return found


def test_every_import_points_down_the_layers(layers: list[Layer]) -> None:
    assert violations(SOURCE, layers) == []


def test_every_module_is_on_the_map(layers: list[Layer]) -> None:
    unmapped = [
        module_name(path, SOURCE)
        for path in SOURCE.rglob("*.py")
        if layer_of(module_name(path, SOURCE), layers) is None and path.parent != SOURCE.parent
    ]
    assert [name for name in unmapped if name != "ringkit"] == []


def _write(tree: Path, name: str, text: str) -> None:
    path = tree / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def test_an_upward_import_is_caught(tmp_path: Path, layers: list[Layer]) -> None:
    # The contract must be able to fail: the ring importing the cache client is reported.
    tree = tmp_path / "ringkit"
    _write(tree, "__init__.py", "")
    _write(tree, "ring.py", "from ringkit.cluster.client import ShardedClient\n")
    _write(tree, "cluster/__init__.py", "")
    _write(tree, "cluster/client.py", "from ringkit.ring import HashRing\n")
    ring, cluster = layer_of("ringkit.ring", layers), layer_of("ringkit.cluster", layers)
    assert ring is not None and cluster is not None
    assert violations(tree, layers) == [
        f"ringkit/ring.py:1: ringkit.ring (layer {ring.rank}) imports ringkit.cluster.client "
        f"(layer {cluster.rank}), a layer above it"
    ]


def test_a_face_importing_another_face_is_caught(tmp_path: Path, layers: list[Layer]) -> None:
    tree = tmp_path / "ringkit"
    _write(tree, "__init__.py", "")
    _write(tree, "web/api.py", "def lookup():\n    from ringkit.commands import lookup\n")
    _write(tree, "commands/lookup.py", "")
    _write(tree, "commands/serve.py", "from ringkit.web.app import create_app\n")
    assert violations(tree, layers) == [
        "ringkit/web/api.py:2: face ringkit.web.api imports face ringkit.commands"
    ]


def test_relative_imports_resolve(tmp_path: Path) -> None:
    tree = tmp_path / "ringkit"
    _write(tree, "__init__.py", "")
    _write(tree, "sim/__init__.py", "from .scenario import run\n")
    _write(tree, "sim/scenario.py", "from ..ring import HashRing\n")
    found = {(i.importer, i.imported) for i in imports_of(tree)}
    assert ("ringkit.sim", "ringkit.sim.scenario") in found
    assert ("ringkit.sim.scenario", "ringkit.ring") in found
