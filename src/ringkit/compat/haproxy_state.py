"""A backend's servers as a running HAProxy sees them: ``show servers state`` on its socket.

HAProxy's runtime API (``stats socket PATH level admin``, or ``ipv4@HOST:PORT``) takes one
command per connection in its non-interactive mode and closes the connection after the answer
(management.txt, section 9.3 "Unix Socket commands"). :func:`runtime_command` sends one such
command within a bounded time; :func:`read_servers_state` asks ``show servers state BACKEND``,
which prints one line per server with its numeric id, name, address, port, operational state,
administrative state and user weight (the fields ``server-state-file`` keeps across reloads).
This module is ringkit's one reader of that answer: the layouts of ``ringkit.compat`` and the
load-balancer control plane of ``ringkit.lb`` both read servers through it.

A server is in the consistent-hash tree when it is not STOPPED (a failed health check), in no
maintenance or drain state, and weighs >= 1 (``srv_currently_usable``); the others' points are
out of the tree.

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
import time
from dataclasses import dataclass

from ringkit.errors import BackendError, ConfigError

__all__ = [
    "ADMIN_DRAIN",
    "ADMIN_MAINT",
    "OP_RUNNING",
    "ServerState",
    "parse_servers_state",
    "read_servers_state",
    "runtime_command",
]

#: Administrative state bits of ``show servers state`` (HAProxy's ``server-t.h``): forced,
#: inherited and resolver maintenance take a server out; forced or inherited drain give it
#: weight 0 while its sessions finish.
ADMIN_MAINT = 0x01 | 0x02 | 0x20
ADMIN_DRAIN = 0x08 | 0x10
_CONFIG_MAINT = 0x04  # SRV_ADMF_CMAINT: 'disabled' in the configuration
#: Operational state ``SRV_ST_RUNNING``.
OP_RUNNING = 2
_STOPPED = 0  # SRV_ST_STOPPED: down by health check
_COLUMNS = (
    "be_name",
    "srv_id",
    "srv_name",
    "srv_addr",
    "srv_op_state",
    "srv_admin_state",
    "srv_uweight",
)
# A backend HAProxy does not know: its answers across the versions ringkit is tested with.
_NO_BACKEND = ("Can't find backend", "No such backend")


@dataclass(frozen=True, slots=True)
class ServerState:
    """One server of a backend as ``show servers state`` reports it.

    `host` is ``srv_addr`` (an IP address once HAProxy resolved a name), `port` is ``srv_port``
    (0 when the answer has no such column), `forced_id` is ``srv_f_forced_id``: whether the id
    was given rather than numbered by position (None when not reported).
    """

    name: str
    id: int
    host: str
    port: int
    op_state: int
    admin_state: int
    weight: int
    forced_id: bool | None = None

    @property
    def address(self) -> str:
        """``host:port`` (IPv6 hosts in brackets)."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"

    @property
    def in_maintenance(self) -> bool:
        """Whether an administrator (or a parent) put the server in maintenance."""
        return bool(self.admin_state & ADMIN_MAINT)

    @property
    def draining(self) -> bool:
        """Whether the server is draining: no new requests, current sessions finish."""
        return bool(self.admin_state & ADMIN_DRAIN)

    @property
    def serving(self) -> bool:
        """Whether the server takes new requests (up, not in maintenance, not draining)."""
        return self.op_state == OP_RUNNING and not self.in_maintenance and not self.draining

    @property
    def usable(self) -> bool:
        """Whether the server's points are in the consistent-hash tree (``srv_currently_usable``).

        Unlike :attr:`serving`, a server still starting counts, and a server ``disabled`` in the
        configuration or weighing 0 does not.
        """
        return (
            self.op_state != _STOPPED
            and not self.admin_state & (ADMIN_MAINT | ADMIN_DRAIN | _CONFIG_MAINT)
            and self.weight >= 1
        )


def parse_servers_state(text: str, backend: str) -> list[ServerState]:
    """Return the servers of `backend` in ``show servers state`` output `text`, in id order.

    A backend with no servers answers the header alone: an empty list.

    :raises ConfigError: when the output cannot be read, or lists servers of other backends only
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
    port_at = columns.index("srv_port") if "srv_port" in columns else None
    forced_at = columns.index("srv_f_forced_id") if "srv_f_forced_id" in columns else None
    rows = [
        fields
        for fields in (line.split() for line in lines if not line.startswith("#"))
        if len(fields) >= len(columns) - 1 and len(fields) >= 8
    ]
    servers = [
        ServerState(
            name=fields[at["srv_name"]],
            id=int(fields[at["srv_id"]]),
            host=fields[at["srv_addr"]],
            port=int(fields[port_at]) if port_at is not None and fields[port_at].isdigit() else 0,
            op_state=int(fields[at["srv_op_state"]]),
            admin_state=int(fields[at["srv_admin_state"]]),
            weight=int(fields[at["srv_uweight"]]),
            forced_id=fields[forced_at] == "1" if forced_at is not None else None,
        )
        for fields in rows
        if fields[at["be_name"]] == backend
    ]
    if rows and not servers:
        raise ConfigError(f"HAProxy reports no servers for backend {backend!r}")
    return sorted(servers, key=lambda server: server.id)


def runtime_command(address: str, command: str, *, timeout_s: float = 5.0) -> str:
    """Send one `command` to the runtime API at `address`; return HAProxy's whole answer.

    `address` is a Unix socket path, or ``HOST:PORT`` / ``ipv4@HOST:PORT`` for a TCP socket.
    The whole exchange, connecting included, takes at most `timeout_s`.

    :raises BackendError: when the socket cannot be reached or does not answer within
        `timeout_s` (the message names the socket)
    """
    deadline = time.monotonic() + timeout_s
    chunks: list[bytes] = []
    try:
        with _connect(address, timeout_s) as sock:
            sock.sendall(command.encode() + b"\n")
            while True:
                sock.settimeout(max(0.01, deadline - time.monotonic()))
                chunk = sock.recv(65536)
                if not chunk:
                    break
                chunks.append(chunk)
    except OSError as error:  # TimeoutError is an OSError
        cause = error.strerror or type(error).__name__
        raise BackendError(
            f"HAProxy admin socket {address} must answer {command!r} within "
            f"{timeout_s:g} s, got {cause}"
        ) from error
    return b"".join(chunks).decode(errors="replace")


def read_servers_state(address: str, backend: str, *, timeout_s: float = 5.0) -> list[ServerState]:
    """Ask the runtime API at `address` for the servers of `backend`, in id order.

    :raises BackendError: when the socket does not answer within `timeout_s`, or HAProxy has
        no such backend
    :raises ConfigError: when the answer cannot be read
    """
    answer = runtime_command(address, f"show servers state {backend}", timeout_s=timeout_s)
    if answer.strip().startswith(_NO_BACKEND):
        raise BackendError(f"HAProxy at {address} has no backend {backend!r}")
    return parse_servers_state(answer, backend)


def _connect(address: str, timeout_s: float) -> socket.socket:
    target = address.removeprefix("ipv4@").removeprefix("unix@")
    host, colon, port = target.rpartition(":")
    if colon and port.isdigit() and "/" not in target and not target.startswith("."):
        return socket.create_connection((host.strip("[]") or "127.0.0.1", int(port)), timeout_s)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(timeout_s)
    try:
        sock.connect(target)
    except OSError:
        sock.close()
        raise
    return sock
