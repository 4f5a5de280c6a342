"""Real servers for tests: start memcached / redis-server on a free loopback port, then stop it.

A missing binary skips the test locally and fails it under CI (``CI=true``): CI installs the
Debian packages, so a missing one there is a broken setup, never a reason to pass.
"""

from __future__ import annotations

import ctypes.util
import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

import pytest

__all__ = [
    "Server",
    "free_port",
    "memcached_server",
    "redis_server",
    "require_binary",
    "require_library",
    "serve",
    "stop",
    "unavailable",
    "wait_for_port",
]


@dataclass(frozen=True)
class Server:
    """A running server process on loopback."""

    host: str
    port: int
    process: subprocess.Popen[bytes]

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"


def unavailable(message: str) -> NoReturn:
    """Skip the test locally; fail it under ``CI=true``, where every dependency is installed."""
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)


def require_binary(name: str, package: str) -> str:
    """Return the path of `name`; skip locally, fail under CI, when it is not installed."""
    path = shutil.which(name)
    if path is None:
        unavailable(f"{name} is not installed (apt-get install -y {package})")
    return path


def require_library(name: str, package: str) -> str:
    """Return the path of shared library `name` (``libNAME.so``); skip or fail when missing."""
    path = ctypes.util.find_library(name)
    if path is None:
        unavailable(f"lib{name} is not installed (apt-get install -y {package})")
    return path


def free_port() -> int:
    """Return a TCP port on 127.0.0.1 that is free right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_for_port(
    port: int, process: subprocess.Popen[bytes], *, timeout_s: float = 10.0, log: Path | None = None
) -> None:
    """Return once `process` accepts connections on `port`; raise if it exits or never does.

    `log` (the process's own log file, if it writes one) is quoted in the error.
    """
    detail = f": {log.read_text()}" if log is not None and log.exists() else ""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"server exited with status {process.returncode} before "
                               f"listening on port {port}{detail}")  # fmt: skip
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"server did not listen on port {port} within {timeout_s} s{detail}")


def stop(process: subprocess.Popen[bytes]) -> None:
    """Terminate `process`, killing it if it has not exited within 5 s."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@contextmanager
def serve(command: list[str], port: int) -> Iterator[Server]:
    """Run `command` (a server listening on loopback `port`) for the duration of the block."""
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for_port(port, process)
        yield Server("127.0.0.1", port, process)
    finally:
        stop(process)


@contextmanager
def memcached_server(memory_mb: int = 64, port: int | None = None) -> Iterator[Server]:
    """Run a memcached on `port` (default: a free loopback port) for the duration of the block."""
    binary = require_binary("memcached", "memcached")
    port = free_port() if port is None else port
    # -u root: memcached refuses to run as root otherwise (tests run as root in CI).
    command = [binary, "-l", "127.0.0.1", "-p", str(port), "-U", "0", "-m", str(memory_mb)]
    if os.geteuid() == 0:
        command += ["-u", "root"]
    with serve(command, port) as server:
        yield server


@contextmanager
def redis_server(port: int | None = None) -> Iterator[Server]:
    """Run a redis-server on `port` (default: a free one), without persistence, for the block."""
    binary = require_binary("redis-server", "redis-server")
    port = free_port() if port is None else port
    command = [
        binary,
        "--port",
        str(port),
        "--bind",
        "127.0.0.1",
        "--save",
        "",
        "--appendonly",
        "no",
        "--protected-mode",
        "no",
    ]
    with serve(command, port) as server:
        yield server
