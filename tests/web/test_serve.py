"""``ringkit serve``: binds loopback by default, prints the URL, hints at the extra when missing."""

from __future__ import annotations

import sys
from typing import Any

import pytest

from ringkit.cli import main

uvicorn = pytest.importorskip("uvicorn", reason="needs the web extra")


@pytest.fixture(autouse=True)
def _ports_are_free(monkeypatch: pytest.MonkeyPatch) -> None:
    # These tests stub uvicorn and must not depend on ports 8000 / 8123 being free on the
    # machine; the busy-port refusal has its own test on a port it holds itself.
    monkeypatch.setattr("ringkit.commands.serve.check_port_free", lambda host, port: None)


def test_serve_binds_loopback_and_prints_the_url(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    calls: list[dict[str, Any]] = []
    monkeypatch.setattr(uvicorn, "run", lambda app, **options: calls.append(options))
    assert main(["serve"]) == 0
    assert calls == [{"host": "127.0.0.1", "port": 8000, "log_level": "warning"}]
    assert "http://127.0.0.1:8000/" in capsys.readouterr().out


def test_serve_takes_host_and_port(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    calls: list[dict[str, Any]] = []
    monkeypatch.setattr(uvicorn, "run", lambda app, **options: calls.append(options))
    assert main(["serve", "--host", "::1", "--port", "8123"]) == 0
    assert (calls[0]["host"], calls[0]["port"]) == ("::1", 8123)
    assert "http://[::1]:8123/" in capsys.readouterr().out


@pytest.mark.parametrize("port", ["0", "65536", "-1", "http", "٨٠"])
def test_serve_refuses_a_bad_port(port: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["serve", "--port", port])
    assert exit_info.value.code == 2
    assert f"port must be in [1, 65535], got {port!r}" in capsys.readouterr().err


def test_serve_without_the_web_extra_prints_a_one_line_hint(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "uvicorn", None)  # makes `import uvicorn` fail
    assert main(["serve"]) == 1
    err = capsys.readouterr().err
    assert err == "ringkit: error: ringkit serve needs the web extra: pip install 'ringkit[web]'\n"
