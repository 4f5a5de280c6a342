"""Child processes of a demo that die with it, even when it is killed with SIGKILL.

A demo starts servers (etcd, memcached, redis-server) and workers, and stops them on the way
out; a ``kill -9`` of the demo runs no way out, and its children would keep running, holding
ports and leases. On Linux the kernel can tell a child when its parent dies:
``prctl(PR_SET_PDEATHSIG, signal)`` (prctl(2)), which also survives the ``execve`` of a server
binary. :func:`tied_to_parent` runs a command through ``python -m ringkit.demos.lifeline``,
which asks for the signal and then becomes the command; a Python child that is ringkit's own
calls :func:`die_with_parent` itself. A parent that dies before the request is seen by the
child afterwards (its parent id is no longer the one it was given), so the child exits at once:
there is no window in which a child outlives the demo. Elsewhere (macOS, Windows) there is no
such request and commands run as given; the demo's own cleanup is then the only one.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys

__all__ = ["die_with_parent", "tied_to_parent"]

_PR_SET_PDEATHSIG = 1  # linux/prctl.h


def die_with_parent(parent_pid: int, how: signal.Signals = signal.SIGKILL) -> bool:
    """Ask the kernel to send `how` to this process when its parent dies; False if it cannot.

    Exits at once (status 1) when the parent, `parent_pid`, is already gone.
    """
    if not sys.platform.startswith("linux"):
        return False
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_PDEATHSIG, int(how), 0, 0, 0) != 0:
        return False
    if os.getppid() != parent_pid:  # the parent died before the request: it will not come
        os._exit(1)
    return True


def tied_to_parent(command: list[str]) -> list[str]:
    """Return `command` wrapped so that its process gets SIGKILL when this process dies.

    On Linux the wrapper is ``python -m ringkit.demos.lifeline PID COMMAND…``; elsewhere the
    command is returned unchanged.
    """
    if not sys.platform.startswith("linux"):
        return command
    return [sys.executable, "-m", "ringkit.demos.lifeline", str(os.getpid()), *command]


def _main(argv: list[str]) -> None:
    parent, binary, *arguments = argv
    die_with_parent(int(parent))
    os.execvp(binary, [binary, *arguments])  # a name is looked up on PATH, as Popen does


if __name__ == "__main__":
    _main(sys.argv[1:])
