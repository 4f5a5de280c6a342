"""Debian's nutcracker (twemproxy) on loopback, in front of real memcached servers."""

from __future__ import annotations

import subprocess
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from tests.servers import free_port, require_binary, stop, wait_for_port


@contextmanager
def nutcracker(
    pools: dict[str, tuple[str, Sequence[str]]], *, auto_eject: bool = False
) -> Iterator[dict[str, int]]:
    """Run nutcracker with one ketama pool per entry ``name: (key hash, server lines)``.

    Server lines are nutcracker's own (``127.0.0.1:11212:3 alias``). Yields each pool's port.
    `auto_eject` ejects a server after one failure and keeps it out for a minute.
    """
    binary = require_binary("nutcracker", "nutcracker")
    ports = {name: free_port() for name in pools}
    lines = []
    for name, (key_hash, servers) in pools.items():
        lines += [
            f"{name}:",
            f"  listen: 127.0.0.1:{ports[name]}",
            f"  hash: {key_hash}",
            "  distribution: ketama",
            "  timeout: 4000",
            f"  auto_eject_hosts: {'true' if auto_eject else 'false'}",
            "  server_failure_limit: 1",
            "  server_retry_timeout: 60000",
            "  servers:",
        ]
        lines += [f"   - {server}" for server in servers]
    with tempfile.TemporaryDirectory() as directory:
        config, log = Path(directory, "nutcracker.yml"), Path(directory, "nutcracker.log")
        config.write_text("\n".join(lines) + "\n")
        command = [
            binary,
            "-c",
            str(config),
            "-o",
            str(log),
            "-s",
            str(free_port()),
            "-a",
            "127.0.0.1",
        ]
        process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            for port in ports.values():
                wait_for_port(port, process, log=log)
            yield ports
        finally:
            stop(process)
