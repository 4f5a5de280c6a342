"""A live-ring member that samples its own ownership, for the ownership checker (not collected).

Usage: ``python -m tests.chaos_live.worker URL NAME HANDOFF TTL_S KEYS OUT``. The member joins
with `HANDOFF` (``default`` or ``exclusive``) and calls ``owns(key)`` for each of `KEYS` keys
in a loop, at least every few milliseconds, timing each call with CLOCK_MONOTONIC (one clock
for every process of the machine). A run of True answers is written to `OUT` as one JSON line
when it ends: the *end* of its first True call and the *start* of its last (the span in which
the member surely owned the key) and the fencing token it held. Open runs are also written
every `CHECKPOINT_S` (a SIGKILL loses at most that much); the checker keeps the longest line of
each run. SIGTERM leaves gracefully, sampling on until ``leave()`` has returned.

The member's transition log (``member.log_transitions()``, timestamps read under the lock
``owns`` decides under) goes to `OUT` with ``.transitions`` before its suffix: each
transition as it was logged, and at every checkpoint the intervals still open, so the checker
can check the library's own record beside the samples.
"""

from __future__ import annotations

import json
import signal
import sys
import threading
import time
from typing import IO

import ringkit.live
from ringkit.live import TransitionLog

SAMPLE_SLEEP_S = 0.002
CHECKPOINT_S = 0.2


def key_names(count: int) -> list[str]:
    return [f"tenant-{i:03d}" for i in range(count)]


class Runs:
    """Each key's current run of True samples, written out when the run ends."""

    def __init__(self, out: IO[str], name: str) -> None:
        self._out, self._name = out, name
        self._open: dict[str, tuple[float, float, int | None]] = {}
        self._lock = threading.Lock()

    def sample(self, key: str, started: float, ended: float, owned: bool, token: object) -> None:
        with self._lock:
            run = self._open.get(key)
            if owned and run is None:
                self._open[key] = (ended, started, token if isinstance(token, int) else None)
            elif owned and run is not None and token == run[2]:
                self._open[key] = (run[0], started, run[2])
            elif owned and run is not None:  # a new interval began unseen (a pause, say)
                self._write(key, run)
                self._open[key] = (ended, started, token if isinstance(token, int) else None)
            elif run is not None:
                self._write(key, run)
                del self._open[key]

    def _write(self, key: str, run: tuple[float, float, int | None]) -> None:
        line = {"member": self._name, "key": key, "start": run[0], "end": run[1], "token": run[2]}
        self._out.write(json.dumps(line) + "\n")
        self._out.flush()

    def checkpoint(self) -> None:
        with self._lock:
            for key, run in self._open.items():
                self._write(key, run)

    def close(self) -> None:
        with self._lock:
            for key, run in self._open.items():
                self._write(key, run)
            self._open.clear()


class Transitions:
    """Writes the member's transition log, and its open intervals at each checkpoint."""

    def __init__(self, out: IO[str], name: str, log: TransitionLog) -> None:
        self._out, self._name, self._log = out, name, log

    def checkpoint(self) -> None:
        lines = [
            {
                "member": self._name,
                "key": t.key,
                "owned": t.owned,
                "at_ns": t.at_ns,
                "epoch": t.epoch,
                "token": t.token,
                "last_owned_ns": t.last_owned_ns,
            }
            for t in self._log.drain()
        ]
        lines += [
            {
                "member": self._name,
                "key": i.key,
                "open": True,
                "since_ns": i.since_ns,
                "last_owned_ns": i.last_owned_ns,
                "token": i.token,
            }
            for i in self._log.open_intervals()
        ]
        self._out.write("".join(json.dumps(line) + "\n" for line in lines))
        self._out.flush()


def transitions_path(path: str) -> str:
    """Where the worker writing samples to `path` writes its transition log."""
    stem, dot, suffix = path.rpartition(".")
    return f"{stem}.transitions.{suffix}" if dot else f"{path}.transitions"


def main(url: str, name: str, handoff: str, ttl_s: float, keys: int, path: str) -> None:
    store = ringkit.live.connect(url)
    member = store.join(name, ttl_s=ttl_s, handoff=handoff)
    log = member.log_transitions()
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    names = key_names(keys)
    # The transition file first: the pool waits for the samples file to know the member joined.
    with open(transitions_path(path), "a") as logged, open(path, "a") as out:
        runs = Runs(out, name)
        transitions = Transitions(logged, name, log)

        def sample_all() -> None:
            for key in names:
                started = time.monotonic()
                owned = member.owns(key)
                ended = time.monotonic()
                token = member.fencing_token(key) if owned else None
                runs.sample(key, started, ended, owned and token is not None, token)
            if time.monotonic() - checkpointed[0] >= CHECKPOINT_S:
                runs.checkpoint()
                transitions.checkpoint()
                checkpointed[0] = time.monotonic()
            time.sleep(SAMPLE_SLEEP_S)

        checkpointed = [time.monotonic()]
        while not stop.is_set():
            sample_all()
        # Graceful: leaving, handoff callbacks, mark, revoke; owns() is sampled throughout.
        leaving = threading.Thread(target=member.leave)
        leaving.start()
        while leaving.is_alive():
            sample_all()
        sample_all()
        runs.close()
        transitions.checkpoint()
    store.close()


if __name__ == "__main__":
    main(
        sys.argv[1],
        sys.argv[2],
        sys.argv[3],
        float(sys.argv[4]),
        int(sys.argv[5]),
        sys.argv[6],
    )
