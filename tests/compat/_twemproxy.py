"""Debian's nutcracker (twemproxy) on loopback, in front of real memcached servers."""

from __future__ import annotations

import subprocess
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from tests.servers import (
    STARTS_ON_FREE_PORTS,
    distinct_free_ports,
    free_port_below_ephemeral,
    require_binary,
    stop,
    wait_for_port,
)


@contextmanager
def nutcracker(
    pools: dict[str, tuple[str, Sequence[str]]], *, auto_eject: bool = False
) -> Iterator[dict[str, int]]:
    """Run nutcracker with one ketama pool per entry ``name: (key hash, server lines)``.

    Server lines are nutcracker's own (``127.0.0.1:11212:3 alias``). Yields each pool's port.
    `auto_eject` ejects a server after one failure and keeps it out for a minute.
    """
    binary = require_binary("nutcracker", "nutcracker")
    # A free port can be taken by another process's outgoing connection before nutcracker binds
    # it (it then exits with status 1): start again on new ports, a bounded number of times.
    for attempt in range(STARTS_ON_FREE_PORTS):
        *listen, stats = distinct_free_ports(len(pools) + 1, free_port_below_ephemeral)
        ports = dict(zip(pools, listen, strict=True))
        with tempfile.TemporaryDirectory() as directory:
            config, log = Path(directory, "nutcracker.yml"), Path(directory, "nutcracker.log")
            config.write_text(_config(pools, ports, auto_eject))
            command = [binary, "-c", str(config), "-o", str(log),
                       "-s", str(stats), "-a", "127.0.0.1"]  # fmt: skip
            process = subprocess.Popen(
                command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
            )
            try:
                try:
                    for port in ports.values():
                        wait_for_port(port, process, log=log)
                except RuntimeError:
                    if attempt + 1 == STARTS_ON_FREE_PORTS:
                        raise
                    continue
                yield ports
                return
            finally:
                stop(process)


def _config(
    pools: dict[str, tuple[str, Sequence[str]]], ports: dict[str, int], auto_eject: bool
) -> str:
    """nutcracker's YAML: one ketama pool per entry, listening on its port."""
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
    return "\n".join(lines) + "\n"
