"""HAProxy's runtime API as the load-balancer control plane drives it: an admin socket object.

:class:`HAProxyRuntime` holds a socket address and a bound on each exchange, and sends the
commands the controller needs: ``add server``, ``set server``, ``del server`` (``command``,
``expect``), ``show servers state`` (``servers``) and ``show stat`` (``sessions``, a server's
current sessions). Sending a command and reading ``show servers state`` are
``ringkit.compat.haproxy_state``'s, the one reader of HAProxy's runtime state, so that the
layout ringkit predicts and the pool it drives see the same servers. A socket that does not
answer within ``timeout_s`` is a :class:`BackendError` naming it; an answer that is not the
command's success is a :class:`BackendError` quoting HAProxy's words.
"""

from __future__ import annotations

import csv

from ringkit.compat.haproxy_state import (
    ServerState,
    read_servers_state,
    runtime_command,
)
from ringkit.errors import BackendError

__all__ = ["HAProxyRuntime", "ServerState"]


class HAProxyRuntime:
    """An HAProxy admin socket: ``command``, ``servers``, ``sessions``.

    `address` is a Unix socket path, or ``HOST:PORT`` / ``ipv4@HOST:PORT`` for a TCP socket.
    """

    def __init__(self, address: str, *, timeout_s: float = 5.0) -> None:
        self.address = address
        self.timeout_s = timeout_s

    def __repr__(self) -> str:
        return f"HAProxyRuntime({self.address!r})"

    def command(self, text: str) -> str:
        """Send one command; return HAProxy's answer (the connection closes after it).

        :raises BackendError: when the socket cannot be reached or does not answer within
            ``timeout_s`` (the message names the socket)
        """
        return runtime_command(self.address, text, timeout_s=self.timeout_s)

    def expect(self, text: str, *successes: str) -> str:
        """Send `text`; return the answer when it is empty or starts with one of `successes`.

        :raises BackendError: quoting HAProxy's answer otherwise
        """
        answer = self.command(text).strip()
        if answer and not answer.startswith(successes):
            raise BackendError(f"HAProxy refused {text!r}: {answer.splitlines()[0]}")
        return answer

    def servers(self, backend: str) -> list[ServerState]:
        """Return the servers of `backend` (``show servers state``), in id order.

        :raises BackendError: when the backend does not exist or the socket does not answer
        """
        return read_servers_state(self.address, backend, timeout_s=self.timeout_s)

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
