"""The import contract: no module imports a layer above its own, and no face imports another face.

The layers are read from the tables in docs/architecture.md, so the map a newcomer reads is the
map this test enforces: a module that fits no row, or an import that points up the table, fails
here with the file, the line and the rule it breaks. Every import counts, including those inside
functions, under ``TYPE_CHECKING`` and as an ``import_module("ringkit…")`` string: a lazy import
is still a dependency. The cache client (``ringkit.cluster``) has a second table of its own
layers, where no import may point up and no modules or rows may import each other round a loop.
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

# The CLI's `serve` command is how the web face is started and its `demo` command runs the demos:
# the imports from a face into another that the contract allows (docs/architecture.md).
FACE_EXCEPTIONS = frozenset(
    {
        ("ringkit.commands.serve", "ringkit.web"),
        ("ringkit.commands.demo", "ringkit.demos"),
        ("ringkit.commands.workers", "ringkit.demos"),
    }
)
CLUSTER = "ringkit.cluster"
CLUSTER_TABLE = "## Inside the cache client: cluster/'s import table"


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


def _modules(source: Path) -> set[str]:
    return {module_name(path, source) for path in source.rglob("*.py")}


def _imported_by_string(node: ast.Call) -> str | None:
    """Return the module of an ``import_module("ringkit…")`` call, None for any other call."""
    func = node.func
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
    if name != "import_module" or not node.args:
        return None
    first = node.args[0]
    return first.value if isinstance(first, ast.Constant) and isinstance(first.value, str) else None


def _names(node: ast.AST, importer: str, is_package: bool, modules: set[str]) -> list[str]:
    """Return the modules `node` imports (none when it is not an import)."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if isinstance(node, ast.ImportFrom):
        module = _absolute(node, importer, is_package)
        # `from ringkit import hashing` imports the module ringkit.hashing, and so does
        # `from ringkit.cluster.views import stores` import ringkit.cluster.views.stores.
        found = [f"{module}.{alias.name}" for alias in node.names]
        if module == "ringkit":
            return found
        return [name if name in modules else module for name in found]
    if isinstance(node, ast.Call):
        named = _imported_by_string(node)
        return [named] if named is not None else []
    return []


def imports_of(source: Path) -> list[Import]:
    """Return every import of a ringkit module by a ringkit module under `source`."""
    found = []
    modules = _modules(source)
    for path in sorted(source.rglob("*.py")):
        importer = module_name(path, source)
        is_package = path.name == "__init__.py"
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            for name in _names(node, importer, is_package, modules):
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


def read_cluster_layers(text: str) -> list[Layer]:
    """Return the rows of cluster/'s import table: ``| rank | `prefix`, … | what it holds |``."""
    start = text.index(CLUSTER_TABLE)
    end = text.find("\n## ", start + len(CLUSTER_TABLE))
    section = text[start : end if end != -1 else len(text)]
    layers = []
    for rank, cell in re.findall(r"^\|\s*(\d+)\s*\|([^|]*)\|", section, re.M):
        prefixes = tuple(re.findall(r"`(ringkit\.cluster[\w.]*)`", cell))
        layers.append(Layer(int(rank), prefixes, face=False))
    return layers


def _row(module: str, layers: list[Layer]) -> str | None:
    """Name the row of `module` by its first prefix, None when it fits no row."""
    layer = layer_of(module, layers)
    return layer.prefixes[0] if layer is not None else None


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """Return one loop of `graph` as ``[a, b, …, a]``, or None when it has none."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for after in sorted(graph.get(node, ())):
            if state.get(after) == 1:
                return [*path[path.index(after) :], after]
            if after not in state and (loop := visit(after)) is not None:
                return loop
        state[node] = 2
        path.pop()
        return None

    for node in sorted(graph):
        if node not in state and (loop := visit(node)) is not None:
            return loop
    return None


def cluster_violations(source: Path, layers: list[Layer]) -> list[str]:
    """Return one message per import that breaks cluster/'s table, then any loop."""
    problems = []
    modules: dict[str, set[str]] = {}
    rows: dict[str, set[str]] = {}
    for item in imports_of(source):
        inside = item.importer.startswith(CLUSTER + ".")
        if not inside or not item.imported.startswith(CLUSTER):
            continue
        where = f"{item.path.relative_to(source.parent)}:{item.line}"
        if item.imported == CLUSTER:
            problems.append(f"{where}: {item.importer} imports the package face {CLUSTER}")
            continue
        here, there = layer_of(item.importer, layers), layer_of(item.imported, layers)
        if here is None or there is None:
            continue  # reported by the map's own test
        if there.rank > here.rank:
            problems.append(
                f"{where}: {item.importer} (cluster layer {here.rank}) imports "
                f"{item.imported} (cluster layer {there.rank}), a layer above it"
            )
        modules.setdefault(item.importer, set()).add(item.imported)
        row_here, row_there = _row(item.importer, layers), _row(item.imported, layers)
        if row_here is not None and row_there is not None and row_here != row_there:
            rows.setdefault(row_here, set()).add(row_there)
    for kind, graph in (("modules", modules), ("rows", rows)):
        if (loop := find_cycle(graph)) is not None:
            problems.append(f"{kind} import each other round a loop: {' -> '.join(loop)}")
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
        "ringkit/web/api.py:2: face ringkit.web.api imports face ringkit.commands.lookup"
    ]


def test_relative_imports_resolve(tmp_path: Path) -> None:
    tree = tmp_path / "ringkit"
    _write(tree, "__init__.py", "")
    _write(tree, "sim/__init__.py", "from .scenario import run\n")
    _write(tree, "sim/scenario.py", "from ..ring import HashRing\n")
    found = {(i.importer, i.imported) for i in imports_of(tree)}
    assert ("ringkit.sim", "ringkit.sim.scenario") in found
    assert ("ringkit.sim.scenario", "ringkit.ring") in found


@pytest.fixture(scope="module")
def cluster_layers() -> list[Layer]:
    found = read_cluster_layers(ARCHITECTURE.read_text(encoding="utf-8"))
    assert len(found) >= 7, "docs/architecture.md lost cluster/'s import table"
    return found


def test_cluster_imports_point_down_its_table_and_never_round_a_loop(
    cluster_layers: list[Layer],
) -> None:
    assert cluster_violations(SOURCE, cluster_layers) == []


def test_every_cluster_module_is_in_its_table(cluster_layers: list[Layer]) -> None:
    cluster = SOURCE / "cluster"
    names = [module_name(path, SOURCE) for path in cluster.rglob("*.py")]
    unmapped = [name for name in names if layer_of(name, cluster_layers) is None]
    assert [name for name in unmapped if name != CLUSTER] == []


def test_at_most_twelve_modules_sit_directly_in_cluster() -> None:
    # The faces, __init__ and the composition roots; every other concept has its sub-package.
    flat = sorted(path.name for path in (SOURCE / "cluster").glob("*.py"))
    assert len(flat) <= 12, flat


def package_loop(source: Path, package: str) -> list[str] | None:
    """One loop of imports among `package`'s modules (type-only imports count), or None."""
    graph: dict[str, set[str]] = {}
    for item in imports_of(source):
        inside = item.importer.startswith(package + ".")
        if inside and item.imported.startswith(package + "."):
            graph.setdefault(item.importer, set()).add(item.imported)
    return find_cycle(graph)


def test_no_two_modules_import_each_other_round_a_loop() -> None:
    # Where a lower module needs a higher one's object, it names what it asks of it as a
    # protocol (a live member's store, a simulator pass's scenario, a shard's ring), and the
    # higher one imports the lower, never the reverse; type-only imports count too.
    assert package_loop(SOURCE, "ringkit") is None


def test_a_loop_within_a_package_is_caught(tmp_path: Path) -> None:
    tree = tmp_path / "ringkit"
    _write(tree, "live/__init__.py", "")
    _write(tree, "live/store.py", "from ringkit.live.member import Member\n")
    _write(tree, "live/member.py", "if TYPE_CHECKING:\n    from ringkit.live.store import Store\n")
    loop = package_loop(tree, "ringkit.live")
    assert loop is not None and set(loop) == {"ringkit.live.store", "ringkit.live.member"}


def _cluster_tree(tmp_path: Path, files: dict[str, str]) -> Path:
    tree = tmp_path / "ringkit"
    _write(tree, "__init__.py", "")
    _write(tree, "cluster/__init__.py", "")
    for name, text in files.items():
        _write(tree, f"cluster/{name}", text)
    return tree


def test_an_upward_import_inside_cluster_is_caught(
    tmp_path: Path, cluster_layers: list[Layer]
) -> None:
    # The codec reaching up to the reader: caught even though it hides under TYPE_CHECKING.
    tree = _cluster_tree(
        tmp_path,
        {
            "values/__init__.py": "",
            "values/codec.py": (
                "from typing import TYPE_CHECKING\n"
                "if TYPE_CHECKING:\n"
                "    from ringkit.cluster.core.reader import Reader\n"
            ),
            "core/__init__.py": "",
            "core/reader.py": "from ringkit.cluster.values.codec import ValueCodec\n",
        },
    )
    values = layer_of("ringkit.cluster.values", cluster_layers)
    core = layer_of("ringkit.cluster.core", cluster_layers)
    assert values is not None and core is not None
    assert cluster_violations(tree, cluster_layers) == [
        f"ringkit/cluster/values/codec.py:3: ringkit.cluster.values.codec (cluster layer "
        f"{values.rank}) imports ringkit.cluster.core.reader (cluster layer {core.rank}), "
        "a layer above it",
        "modules import each other round a loop: ringkit.cluster.core.reader -> "
        "ringkit.cluster.values.codec -> ringkit.cluster.core.reader",
        "rows import each other round a loop: ringkit.cluster.core -> "
        "ringkit.cluster.values -> ringkit.cluster.core",
    ]


def test_a_loop_within_one_layer_is_caught(tmp_path: Path, cluster_layers: list[Layer]) -> None:
    # Two modules of one row importing each other break no order, but they are one concept
    # split in two (or two tangled): the loop is reported.
    tree = _cluster_tree(
        tmp_path,
        {
            "core/__init__.py": "",
            "core/servers.py": "from ringkit.cluster.core.health import ServerHealth\n",
            "core/health.py": "def probe():\n    from ringkit.cluster.core import servers\n",
        },
    )
    assert cluster_violations(tree, cluster_layers) == [
        "modules import each other round a loop: ringkit.cluster.core.health -> "
        "ringkit.cluster.core.servers -> ringkit.cluster.core.health"
    ]


def test_an_import_module_string_counts(tmp_path: Path, cluster_layers: list[Layer]) -> None:
    tree = _cluster_tree(
        tmp_path,
        {
            "values/__init__.py": "",
            "values/keys.py": (
                "import importlib\n"
                "def client():\n"
                "    return importlib.import_module('ringkit.cluster.client')\n"
            ),
            "client.py": "",
        },
    )
    values = layer_of("ringkit.cluster.values", cluster_layers)
    client = layer_of("ringkit.cluster.client", cluster_layers)
    assert values is not None and client is not None
    assert cluster_violations(tree, cluster_layers) == [
        f"ringkit/cluster/values/keys.py:3: ringkit.cluster.values.keys (cluster layer "
        f"{values.rank}) imports ringkit.cluster.client (cluster layer {client.rank}), "
        "a layer above it"
    ]


def test_a_module_importing_the_cluster_face_is_caught(
    tmp_path: Path, cluster_layers: list[Layer]
) -> None:
    tree = _cluster_tree(tmp_path, {"client.py": "from ringkit.cluster import ShardedClient\n"})
    assert cluster_violations(tree, cluster_layers) == [
        "ringkit/cluster/client.py:1: ringkit.cluster.client imports the package face "
        "ringkit.cluster"
    ]
