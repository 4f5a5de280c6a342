"""A backend's servers as a running HAProxy sees them: ``show servers state`` on its socket.

The runtime API's ``show servers state BACKEND`` prints one line per server with its numeric
id, name, address, operational state, administrative state and user weight (the same fields
``server-state-file`` keeps across reloads). A server is in the consistent-hash tree when it is
not STOPPED (a failed health check), in no maintenance or drain state, and weighs >= 1
(``srv_currently_usable``); the others' points are out of the tree.

>>> text = '''1
... # be_id be_name srv_id srv_name srv_addr srv_op_state srv_admin_state srv_uweight x
... 3 web 1 a 10.0.0.1 2 0 1 1
... 3 web 2 b 10.0.0.2 0 0 1 1
... 3 web 4 c 10.0.0.3 2 1 1 1
... '''
>>> [(s.name, s.id, s.usable) for s in parse_servers_state(text, "web")]
[('a', 1, True), ('b', 2, False), ('c', 4, False)]
"""

from __future__ import annotations

import socket
from dataclasses import dataclass

from ringkit.errors import BackendError, ConfigError

__all__ = ["RuntimeServer", "parse_servers_state", "read_servers_state"]

_STOPPED = 0  # SRV_ST_STOPPED: down by health check
# SRV_ADMF_FMAINT | IMAINT | FDRAIN | IDRAIN | RMAINT: maintenance or drain, eweight 0.
_OUT_OF_TREE = 0x01 | 0x02 | 0x08 | 0x10 | 0x20
_CONFIG_MAINT = 0x04  # SRV_ADMF_CMAINT: 'disabled' in the configuration
_COLUMNS = (
    "be_name",
    "srv_id",
    "srv_name",
    "srv_addr",
    "srv_op_state",
    "srv_admin_state",
    "srv_uweight",
)


@dataclass(frozen=True, slots=True)
class RuntimeServer:
    """One server of ``show servers state``: id, name, address, weight and whether it routes."""

    name: str
    id: int
    address: str
    weight: int
    usable: bool
    forced_id: bool | None = None  # srv_f_forced_id: the id was given (None: not reported)


def parse_servers_state(text: str, backend: str) -> list[RuntimeServer]:
    """Return the servers of `backend` in ``show servers state`` output `text`, in id order.

    :raises ConfigError: when the output has no such backend or cannot be read
    """
    lines = [line for line in text.splitlines() if line.strip()]
    header = next((line for line in lines if line.startswith("#")), None)
    if header is None:
        raise ConfigError(f"not 'show servers state' output: {text[:200]!r}")
    columns = header.lstrip("# ").split()
    try:
        at = {name: columns.index(name) for name in _COLUMNS}
    except ValueError as error:
        raise ConfigError(f"'show servers state' header lacks a column: {error}") from None
    forced_at = "srv_f_forced_id" in columns
    servers = []
    for line in lines:
        fields = line.split()
        if line.startswith("#") or len(fields) < len(columns) - 1 or len(fields) < 8:
            continue
        if fields[at["be_name"]] != backend:
            continue
        admin = int(fields[at["srv_admin_state"]])
        weight = int(fields[at["srv_uweight"]])
        usable = (
            int(fields[at["srv_op_state"]]) != _STOPPED
            and not admin & (_OUT_OF_TREE | _CONFIG_MAINT)
            and weight >= 1
        )
        name, server_id = fields[at["srv_name"]], int(fields[at["srv_id"]])
        forced = fields[columns.index("srv_f_forced_id")] == "1" if forced_at else None
        servers.append(
            RuntimeServer(name, server_id, fields[at["srv_addr"]], weight, usable, forced)
        )
    if not servers:
        raise ConfigError(f"HAProxy reports no servers for backend {backend!r}")
    return sorted(servers, key=lambda server: server.id)


def read_servers_state(
    address: str, backend: str, *, timeout_s: float = 5.0
) -> list[RuntimeServer]:
    """Ask the HAProxy runtime API at `address` (a UNIX socket path or host:port) for a backend.

    :raises BackendError: naming the socket when it does not answer within `timeout_s`
    :raises ConfigError: when the answer has no such backend
    """
    family, target = _target(address)
    chunks = []
    try:
        with socket.socket(family, socket.SOCK_STREAM) as sock:
            sock.settimeout(timeout_s)
            sock.connect(target)
            sock.sendall(f"show servers state {backend}\n".encode())
            while chunk := sock.recv(65536):
                chunks.append(chunk)
    except OSError as error:
        raise BackendError(
            f"HAProxy runtime socket {address!r} did not answer within {timeout_s} s: {error}"
        ) from None
    text = b"".join(chunks).decode(errors="replace")
    if text.startswith(("Can't find backend", "Unknown command")):
        raise ConfigError(f"HAProxy at {address!r} answered: {text.strip()}")
    return parse_servers_state(text, backend)


def _target(address: str) -> tuple[socket.AddressFamily, str | tuple[str, int]]:
    host, colon, port = address.rpartition(":")
    if colon and port.isdigit() and "/" not in address:
        return socket.AF_INET, (host.strip("[]") or "127.0.0.1", int(port))
    return socket.AF_UNIX, address
