"""Shared test configuration: hypothesis profiles and the ``server`` marker.

The hypothesis profiles ("dev", "check", "ci") are in ``tests/hypothesis_profiles.py``.
Real-server fixtures live in ``tests/servers.py``; ``tests/markers.py`` marks the tests that
start one, so that ``pytest -m "not server and not installs"`` (``make check``) runs every test
that starts no server and installs no package.
"""

from __future__ import annotations

import pytest

from tests.hypothesis_profiles import load_profile
from tests.markers import INSTALLS, SERVER, allow_servers, guard_server_binaries, starts_servers

load_profile()


@pytest.fixture(autouse=True)
def _piped_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    """Run every test as a command whose output is piped, whatever runs the tests.

    pytest-xdist's workers inherit ``COLUMNS=80`` and ``LINES=24``, which the CLI obeys (a
    user's ``COLUMNS`` is how they size its tables): under ``-n`` the tables were drawn 80 wide
    instead of a pipe's 120, and tests reading them failed only in parallel. A test about a
    width sets ``COLUMNS`` itself.
    """
    monkeypatch.delenv("COLUMNS", raising=False)
    monkeypatch.delenv("LINES", raising=False)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", f"{SERVER}: starts a real server or a browser (make test only)"
    )
    config.addinivalue_line(
        "markers", f"{INSTALLS}: installs a package into a new virtualenv (make test only)"
    )
    guard_server_binaries()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if starts_servers(item):
            item.add_marker(SERVER)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    allow_servers(item)  # before the fixtures of `item` start anything


@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item: pytest.Item) -> None:
    allow_servers(None)
