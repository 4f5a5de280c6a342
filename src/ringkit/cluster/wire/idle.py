"""The idle connections a blocking transport keeps for one server, forgotten in a forked child.

A call takes a connection with one ``list.pop`` and gives it back with one ``append``: both are
atomic in CPython, so the stack needs no lock and a call pays no ``getpid`` (pymemcache's
``Client`` pays neither either; redis-py's pool pays a lock, two ``getpid`` and its metrics
twice per command). A fork is caught once instead, by ``os.register_at_fork``: the child forgets
every stack, since their sockets are its parent's too (gunicorn's workers never share a
connection with their parent), and opens its own.

>>> idle = IdleConnections[str](max_idle=1)
>>> idle.give("a"), idle.give("b"), idle.take(), idle.take()
(True, False, 'a', None)
"""

from __future__ import annotations

import os
import weakref
from typing import Any, Generic, TypeVar

__all__ = ["IdleConnections"]

C = TypeVar("C")


class IdleConnections(Generic[C]):
    """At most `max_idle` connections waiting for their next call (thread-safe, fork-safe)."""

    __slots__ = ("__weakref__", "_idle", "_max_idle")

    def __init__(self, *, max_idle: int) -> None:
        self._max_idle = max_idle
        self._idle: list[C] = []
        _EVERY.add(self)

    def take(self) -> C | None:
        """Return an idle connection, or None when there is none (open one)."""
        try:
            return self._idle.pop()
        except IndexError:
            return None

    def give(self, connection: C) -> bool:
        """Keep `connection` for a later call; False when enough wait already (close it)."""
        idle = self._idle
        if len(idle) >= self._max_idle:  # two threads may both pass: one over, no harm
            return False
        idle.append(connection)
        return True

    def drain(self) -> list[C]:
        """Return every idle connection, keeping none (to close them)."""
        idle, self._idle = self._idle, []
        return idle

    def _forget(self) -> None:
        self._idle = []


# Every stack of this process, forgotten in a forked child.
_EVERY: weakref.WeakSet[IdleConnections[Any]] = weakref.WeakSet()


def _forget_every_stack() -> None:
    for stack in list(_EVERY):
        stack._forget()


os.register_at_fork(after_in_child=_forget_every_stack)
