"""The dispatcher: one thread per store that calls subscribers with each change, in order.

Changes are queued by the thread that follows the coordination service and delivered by this
one, so a slow subscriber never stalls the watch, and subscribers are called one at a time, in
epoch order: a subscriber can keep state without a lock. An exception in one is logged and
does not stop the others. ``wait_delivered(epoch)`` lets a member leave only once its handoff
callbacks have run (the same idea as dskit's lifecycler waiting for its ring to settle).

>>> calls = []
>>> dispatcher = Dispatcher("doctest")
>>> subscription = dispatcher.subscribe(lambda change: calls.append(change))
>>> dispatcher.wait_delivered(0, timeout_s=1)
True
>>> dispatcher.close()
"""

from __future__ import annotations

import asyncio
import logging
import queue
import threading
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ringkit.live.change import Change

__all__ = ["Dispatcher", "Subscription"]

_log = logging.getLogger("ringkit.live")


class Subscription:
    """A subscriber's registration: ``cancel()`` stops further calls.

    `on_close`, if given, is called once when the store closes (ends an async iteration).
    """

    def __init__(
        self,
        dispatcher: Dispatcher,
        callback: Callable[[Change], None],
        on_close: Callable[[], None] | None = None,
        after_epoch: int = 0,
    ) -> None:
        self._dispatcher, self.callback, self.on_close = dispatcher, callback, on_close
        self.after_epoch = after_epoch

    def cancel(self) -> None:
        """Stop calling the callback (a call under way finishes)."""
        self._dispatcher.unsubscribe(self)


class Dispatcher:
    """Calls subscribers with each queued change on one thread, in order.

    Feeding: ``put``, ``call_soon``. Subscribing: ``subscribe``, ``changes``, ``unsubscribe``,
    ``after_delivery``. Waiting: ``wait_delivered``, ``delivered``. ``close`` (the thread ends
    after the changes already queued).

    `delivered` is the epoch the store started at: every change up to it counts as delivered.
    """

    def __init__(self, name: str, *, delivered: int = 0) -> None:
        self._lock = threading.Condition()
        self._subscribers: list[Subscription] = []
        # SimpleQueue: put and get in C, no Python condition around them (every change in
        # every member process goes through here).
        self._queue: queue.SimpleQueue[Change | Callable[[], None] | None] = queue.SimpleQueue()
        self._delivered = delivered
        self._hooks: list[Callable[[int], None]] = []
        self._closed = False
        self._thread = threading.Thread(target=self._run, name=f"ringkit-live-dispatch-{name}")
        self._thread.daemon = True
        self._thread.start()

    def put(self, change: Change) -> None:
        """Queue `change` for every subscriber."""
        self._queue.put(change)

    def call_soon(self, function: Callable[[], None]) -> None:
        """Call `function` on the dispatcher thread, after the changes queued before it."""
        self._queue.put(function)

    def flush(self, *, timeout_s: float) -> bool:
        """Block until everything queued before the call is done; return whether it was."""
        done = threading.Event()
        self._queue.put(done.set)
        return done.wait(timeout_s)

    def after_delivery(self, hook: Callable[[int], None]) -> Callable[[], None]:
        """Call `hook(epoch)` once every subscriber has been called for each epoch.

        Returns a function that removes the hook. The hook runs on the dispatcher thread and
        must not block (a release mark's writer only wakes its own thread).
        """
        with self._lock:
            self._hooks.append(hook)

        def remove() -> None:
            with self._lock:
                if hook in self._hooks:
                    self._hooks.remove(hook)

        return remove

    @property
    def delivered(self) -> int:
        """The epoch every subscriber has been called for (the store's start, at first)."""
        return self._delivered

    def subscribe(
        self,
        callback: Callable[[Change], None],
        on_close: Callable[[], None] | None = None,
        *,
        after_epoch: int = 0,
    ) -> Subscription:
        """Call `callback(change)` for every change to an epoch later than `after_epoch`.

        The store passes the epoch of the snapshot its caller can already see, so a change that
        is still queued for delivery when the subscription starts is not replayed to it.
        """
        subscription = Subscription(self, callback, on_close, after_epoch)
        with self._lock:
            self._subscribers.append(subscription)
        return subscription

    def unsubscribe(self, subscription: Subscription) -> None:
        """Stop calling `subscription` (nothing happens when it is not subscribed)."""
        with self._lock:
            if subscription in self._subscribers:
                self._subscribers.remove(subscription)

    async def changes(self, *, after_epoch: int = 0) -> AsyncIterator[Change]:
        """Yield every change to an epoch later than `after_epoch` to an asyncio task.

        This thread hands each change to the running loop; iteration ends on ``close``.
        """
        loop = asyncio.get_running_loop()
        inbox: asyncio.Queue[Change | None] = asyncio.Queue()

        def hand_over(change: Change) -> None:
            loop.call_soon_threadsafe(inbox.put_nowait, change)

        def end() -> None:
            loop.call_soon_threadsafe(inbox.put_nowait, None)

        subscription = self.subscribe(hand_over, end, after_epoch=after_epoch)
        try:
            while not self._closed:
                change = await inbox.get()
                if change is None:
                    return
                yield change
        finally:
            subscription.cancel()

    def wait_delivered(self, epoch: int, *, timeout_s: float = 10.0) -> bool:
        """Block until every subscriber has been called for `epoch`; return whether it was."""
        with self._lock:
            return self._lock.wait_for(lambda: self._delivered >= epoch, timeout=timeout_s)

    def _run(self) -> None:
        while (change := self._queue.get()) is not None:
            if callable(change):
                try:
                    change()
                except Exception:  # a member's bookkeeping must not stop the changes
                    _log.exception("live ring task %r failed", change)
                continue
            with self._lock:
                subscribers = list(self._subscribers)
            for subscription in subscribers:
                if change.new.epoch <= subscription.after_epoch:
                    continue  # the subscriber started from a snapshot that already held it
                try:
                    subscription.callback(change)
                except Exception:  # a subscriber's bug must not stop the others
                    _log.exception("live ring subscriber %r failed", subscription.callback)
            with self._lock:
                self._delivered = max(self._delivered, change.new.epoch)
                self._lock.notify_all()
                hooks = list(self._hooks)
            for hook in hooks:
                hook(self._delivered)
        with self._lock:
            subscribers = list(self._subscribers)
        for subscription in subscribers:
            if subscription.on_close is not None:
                try:
                    subscription.on_close()
                except Exception:  # e.g. its event loop already closed: nothing to end
                    _log.debug("closing subscriber %r failed", subscription.callback)

    def close(self) -> None:
        """Deliver what is queued, tell subscribers the store closed, and end the thread."""
        self._closed = True
        self._queue.put(None)
