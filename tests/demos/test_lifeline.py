"""A demo's children die with it, even when it is killed with SIGKILL (Linux).

A parent process starts a child through ``tied_to_parent`` (as the demos start etcd, memcached
and redis-server) and is killed with SIGKILL, which runs none of its cleanup: the child must
be gone soon after. Without the wrapper the same child keeps running, which is what a ``kill
-9`` of ``ringkit demo workers`` used to leave behind.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ringkit.demos.lifeline import tied_to_parent

pytestmark = [
    pytest.mark.timeout(60),
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's"),
]

# A parent that starts `sleep 600` (tied to it or not), prints the child's pid and waits.
PARENT = """
import subprocess, sys, time
from ringkit.demos.lifeline import tied_to_parent
command = ["sleep", "600"]
child = subprocess.Popen(tied_to_parent(command) if sys.argv[1] == "tied" else command)
print(child.pid, flush=True)
time.sleep(600)
"""


def _running(pid: int) -> bool:
    try:  # a zombie waiting for its new parent to reap it runs no more
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _child_after_killing_its_parent(how: str, *, grace_s: float) -> bool:
    """Start the parent, SIGKILL it, and say whether its child still runs `grace_s` later."""
    parent = subprocess.Popen(
        [sys.executable, "-c", PARENT, how], stdout=subprocess.PIPE, text=True
    )
    assert parent.stdout is not None
    child = int(parent.stdout.readline())
    try:
        deadline = time.monotonic() + 10
        # The child has become `sleep` (the wrapper has asked for its signal, then exec'd).
        while Path(f"/proc/{child}/comm").read_text().strip() != "sleep":
            assert time.monotonic() < deadline
            time.sleep(0.05)
        parent.kill()
        parent.wait()
        deadline = time.monotonic() + grace_s
        while _running(child) and time.monotonic() < deadline:
            time.sleep(0.05)
        return _running(child)
    finally:
        parent.kill()
        parent.wait()
        if _running(child):
            os.kill(child, signal.SIGKILL)


def test_a_tied_child_dies_with_its_killed_parent() -> None:
    assert _child_after_killing_its_parent("tied", grace_s=10) is False


def test_an_untied_child_outlives_it() -> None:  # what the test above guards against
    # The kernel signals a tied child as its parent dies: it is gone in milliseconds, so a
    # second without its parent tells the two apart (the tied test's 10 s held a worker idle).
    assert _child_after_killing_its_parent("untied", grace_s=1) is True


def test_the_command_is_run_as_given() -> None:
    out = subprocess.run(tied_to_parent(["/bin/echo", "a b", "c"]), capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout == "a b c\n"


def test_the_test_suites_server_guard_sees_through_the_wrapper(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from tests import markers

    monkeypatch.setitem(markers._current, "unmarked_test", "tests/x.py::test_y")
    with pytest.raises(RuntimeError, match="starts /usr/bin/etcd but is not marked 'server'"):
        markers._refuse_unmarked_servers(
            "subprocess.Popen", (None, tied_to_parent(["/usr/bin/etcd", "--name", "x"]))
        )
    markers._refuse_unmarked_servers("subprocess.Popen", (None, tied_to_parent(["sleep", "1"])))
