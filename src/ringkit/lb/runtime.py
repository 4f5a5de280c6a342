"""HAProxy's runtime API: one command per connection to its admin socket, answers parsed.

HAProxy's ``stats socket PATH level admin`` (or ``ipv4@HOST:PORT``) takes one command per
connection in its non-interactive mode and closes the connection after the answer
(management.txt, section 9.3 "Unix Socket commands"). This module sends such commands within a
bounded time and reads ``show servers state`` (a server's id, address, operational and
administrative state, weight) and ``show stat`` (its current sessions). A socket that does not
answer within ``timeout_s`` is a :class:`BackendError` naming it; an answer that is not the
command's success is a :class:`BackendError` quoting HAProxy's words.
"""

from __future__ import annotations

import csv
import socket
import time
from dataclasses import dataclass

from ringkit.errors import BackendError

__all__ = ["HAProxyRuntime", "ServerState"]

#: Administrative state bits of ``show servers state`` (HAProxy's ``server-t.h``): forced,
#: inherited and resolver maintenance take a server out; forced or inherited drain give it
#: weight 0 while its sessions finish.
ADMIN_MAINT = 0x01 | 0x02 | 0x20
ADMIN_DRAIN = 0x08 | 0x10
#: Operational state ``SRV_ST_RUNNING``.
OP_RUNNING = 2


@dataclass(frozen=True, slots=True)
class ServerState:
    """One server of a backend as ``show servers state`` reports it."""

    name: str
    id: int
    host: str
    port: int
    op_state: int
    admin_state: int
    weight: int

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


def _parse_states(text: str, backend: str) -> list[ServerState]:
    """Parse ``show servers state BACKEND`` (format version 1)."""
    lines = text.strip("\n").splitlines()
    if not lines or lines[0].strip() != "1" or len(lines) < 2 or not lines[1].startswith("#"):
        raise BackendError(f"HAProxy answered 'show servers state {backend}' with {text[:200]!r}")
    columns = lines[1].lstrip("# ").split()
    states: list[ServerState] = []
    for line in lines[2:]:
        row = dict(zip(columns, line.split(), strict=False))
        port = row.get("srv_port", "0")
        states.append(
            ServerState(
                name=row["srv_name"],
                id=int(row["srv_id"]),
                host=row["srv_addr"],
                port=int(port) if port.isdigit() else 0,
                op_state=int(row["srv_op_state"]),
                admin_state=int(row["srv_admin_state"]),
                weight=int(row["srv_uweight"]),
            )
        )
    return states


class HAProxyRuntime:
    """An HAProxy admin socket: ``command``, ``servers``, ``sessions``.

    `address` is a Unix socket path, or ``HOST:PORT`` / ``ipv4@HOST:PORT`` for a TCP socket.
    """

    def __init__(self, address: str, *, timeout_s: float = 5.0) -> None:
        self.address = address
        self.timeout_s = timeout_s

    def __repr__(self) -> str:
        return f"HAProxyRuntime({self.address!r})"

    def _connect(self) -> socket.socket:
        target = self.address.removeprefix("ipv4@").removeprefix("unix@")
        host, colon, port = target.rpartition(":")
        if colon and port.isdigit() and not target.startswith(("/", ".")):
            return socket.create_connection((host, int(port)), timeout=self.timeout_s)
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout_s)
        try:
            sock.connect(target)
        except OSError:
            sock.close()
            raise
        return sock

    def command(self, text: str) -> str:
        """Send one command; return HAProxy's answer (the connection closes after it).

        :raises BackendError: when the socket cannot be reached or does not answer within
            ``timeout_s`` (the message names the socket)
        """
        deadline = time.monotonic() + self.timeout_s
        chunks: list[bytes] = []
        try:
            with self._connect() as sock:
                sock.sendall(text.encode() + b"\n")
                while True:
                    sock.settimeout(max(0.01, deadline - time.monotonic()))
                    chunk = sock.recv(65536)
                    if not chunk:
                        break
                    chunks.append(chunk)
        except OSError as error:  # TimeoutError is an OSError
            cause = error.strerror or type(error).__name__
            raise BackendError(
                f"HAProxy admin socket {self.address} must answer {text!r} within "
                f"{self.timeout_s:g} s, got {cause}"
            ) from error
        return b"".join(chunks).decode(errors="replace")

    def expect(self, text: str, *successes: str) -> str:
        """Send `text`; return the answer when it is empty or starts with one of `successes`.

        :raises BackendError: quoting HAProxy's answer otherwise
        """
        answer = self.command(text).strip()
        if answer and not answer.startswith(successes):
            raise BackendError(f"HAProxy refused {text!r}: {answer.splitlines()[0]}")
        return answer

    def servers(self, backend: str) -> list[ServerState]:
        """Return the servers of `backend` (``show servers state``).

        :raises BackendError: when the backend does not exist or the socket does not answer
        """
        answer = self.command(f"show servers state {backend}")
        if answer.strip() in {"Can't find backend.", "No such backend."}:
            raise BackendError(f"HAProxy at {self.address} has no backend {backend!r}")
        return _parse_states(answer, backend)

    def sessions(self, backend: str) -> dict[str, int]:
        """Return the current sessions of each server of `backend` (``show stat``'s scur)."""
        answer = self.command(f"show stat {backend} 4 -1")
        lines = answer.strip("\n").splitlines()
        if not lines or not lines[0].startswith("# "):
            raise BackendError(f"HAProxy answered 'show stat {backend}' with {answer[:200]!r}")
        rows = csv.DictReader([lines[0][2:], *lines[1:]])
        return {
            row["svname"]: int(row["scur"] or 0) + int(row["qcur"] or 0)
            for row in rows
            if row.get("pxname") == backend
        }
