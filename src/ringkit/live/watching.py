"""The watch a store follows its prefix with, and its re-creation when it breaks or goes silent.

One :class:`PrefixWatch` per store. Each (re)creation starts from the revision after the
store's and gets a new *generation*: calls still arriving from an earlier watch (its stream
may deliver after it was replaced) are dropped, so events are applied from one stream at a
time, in revision order. A broken watch is resumed on a background thread until the store
closes; before each attempt the store gets to check what etcd still holds (a compacted
history or a restored etcd need a fresh read, not a watch from the old revision).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence

from ringkit.live.backend import Backend, Event, WatchHandle

__all__ = ["PrefixWatch", "compacted"]

_log = logging.getLogger("ringkit.live")
#: The pause between attempts to resume a broken watch.
RESUME_DELAY_S = 0.1


def compacted(error: BaseException | None) -> bool:
    """Whether `error` (or its cause) says the revision asked for was compacted away."""
    while error is not None:
        if "compact" in (type(error).__name__ + str(error)).lower():
            return True
        error = error.__cause__
    return False


class PrefixWatch:
    """A store's watch of its prefix: ``start`` (again), resumed when broken, ``close``.

    It watches the keys under `prefix`, or from `prefix` up to `range_end` (excluded).
    `from_revision()` gives the revision to watch from; `on_events` gets each batch of the
    current generation. `before_resume(compacted)` runs before a broken watch is opened again
    and returns whether it should be (False: the store opened it itself, as a recovery does).
    """

    def __init__(
        self,
        backend: Backend,
        prefix: str,
        *,
        from_revision: Callable[[], int],
        on_events: Callable[[Sequence[Event]], None],
        before_resume: Callable[[bool], bool],
        range_end: str | None = None,
    ) -> None:
        self._backend, self._prefix, self._range_end = backend, prefix, range_end
        self._from_revision, self._on_events = from_revision, on_events
        self._before_resume = before_resume
        self._lock = threading.Lock()
        self._handle: WatchHandle | None = None
        self._generation = 0
        self._error: BaseException | None = None
        self._closed = False

    def start(self, *, replace: bool = False) -> None:
        """Watch from `from_revision()`; with `replace`, on another endpoint than the last.

        Calls from any earlier watch are dropped from now on.
        """
        with self._lock:
            if self._closed:
                return  # closing: the client is going away (see close)
            self._generation += 1
            generation = self._generation

            def on_events(events: Sequence[Event]) -> None:
                if generation == self._generation:
                    self._on_events(events)

            def on_error(error: Exception) -> None:
                if generation == self._generation:
                    self._broke(error)

            self._handle = self._backend.watch(
                self._prefix,
                self._from_revision(),
                on_events,
                on_error,
                replacing=self._handle if replace else None,
                range_end=self._range_end,
            )

    def _broke(self, error: Exception) -> None:
        if self._closed:
            return
        self._error = error
        _log.info("watch of %s broke (%s); resuming", self._backend.describe(), error)
        threading.Thread(target=self._resume, name="ringkit-live-resume", daemon=True).start()

    def _resume(self) -> None:
        """Watch again from the next revision, on whichever endpoint answers, until closed."""
        while not self._closed:
            time.sleep(RESUME_DELAY_S)
            try:
                if self._before_resume(compacted(self._error)):
                    self.start(replace=True)
                self._error = None
                return
            except Exception as error:  # any failure: try again; a store never stops following
                self._error = error
                _log.info("resuming the watch failed: %r", error)

    def close(self) -> None:
        """Cancel the watch; no watch is opened again after this."""
        with self._lock:  # no watch is being opened while it is cancelled
            self._closed = True
            if self._handle is not None:
                self._handle.cancel()
