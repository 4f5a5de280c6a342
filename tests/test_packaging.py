"""The wheel a user installs: its metadata, what it ships, and that it installs and runs.

Built with the build backend itself (hatchling, as ``pip install`` and ``python -m build`` do),
into a temporary directory; installed with ``--no-index --no-deps`` into a bare virtualenv, where
``ringkit --version`` and ``ringkit --help`` must work with none of the dependencies installed
(they import nothing but the package).
"""

from __future__ import annotations

import email.parser
import re
import subprocess
import sys
import venv
import zipfile
from email.message import Message
from pathlib import Path

import pytest

import ringkit

ROOT = Path(__file__).resolve().parents[1]
REPOSITORY = "https://github.com/ringkit/ringkit"


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    builder = pytest.importorskip("hatchling.builders.wheel", reason="needs the dev extra")
    out = tmp_path_factory.mktemp("wheel")
    (path,) = builder.WheelBuilder(str(ROOT)).build(directory=str(out), versions=["standard"])
    return Path(path)


def _metadata(wheel: Path) -> Message:
    with zipfile.ZipFile(wheel) as archive:
        name = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
        return email.parser.Parser().parsestr(archive.read(name).decode())


def test_the_metadata_names_version_license_author_urls_and_classifiers(wheel: Path) -> None:
    trove = pytest.importorskip("trove_classifiers")
    metadata = _metadata(wheel)
    assert metadata["Version"] == ringkit.__version__ == "0.2.0"
    assert metadata["License-Expression"] == "MIT"
    assert metadata["Author"]
    urls = dict(url.split(", ", 1) for url in metadata.get_all("Project-URL", []))
    assert {"Homepage", "Documentation", "Source", "Issues", "Changelog"} <= set(urls)
    assert all(url.startswith(REPOSITORY) for url in urls.values())
    classifiers = metadata.get_all("Classifier", [])
    assert "Typing :: Typed" in classifiers
    assert [c for c in classifiers if c not in trove.classifiers] == []


def test_the_readme_links_work_on_a_package_index_page(wheel: Path) -> None:
    # A package index shows the README without the repository around it: relative links break.
    description = _metadata(wheel).get_payload()
    assert isinstance(description, str)
    targets = re.findall(r"\]\(([^)\s]+)\)", description)
    assert targets, "the README has no links?"
    assert [t for t in targets if not t.startswith(("https://", "http://", "#"))] == []


def test_the_wheel_ships_the_package_data_and_no_dangling_docs_path(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        page = archive.read("ringkit/web/static/index.html").decode()
    assert "ringkit/py.typed" in names
    assert any(n.startswith("ringkit/sim/scenarios/") and n.endswith(".toml") for n in names)
    assert not any(n.startswith("docs/") for n in names)
    # The page is read off a wheel too: its links to the documentation are the repository's.
    assert re.findall(r"(?<![/\w])docs/\w+\.md", page) == []


@pytest.mark.installs
def test_the_wheel_installs_and_its_command_runs_without_the_dependencies(
    wheel: Path, tmp_path: Path
) -> None:
    environment = tmp_path / "venv"
    venv.create(environment, with_pip=False)
    python = environment / "bin" / "python"
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "-q",
         "--no-index", "--no-deps", str(wheel)],
        check=True,
    )  # fmt: skip
    version = subprocess.run(
        [environment / "bin" / "ringkit", "--version"], capture_output=True, text=True, check=True
    )
    assert version.stdout.strip() == f"ringkit {ringkit.__version__}"
    usage = subprocess.run(
        [environment / "bin" / "ringkit", "--help"], capture_output=True, text=True, check=True
    )
    assert "simulate" in usage.stdout
