"""The dispatcher delivers each change once, in order, and only epochs after a subscription."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from ringkit.live.dispatch import Dispatcher


def _change(epoch: int) -> Any:
    return SimpleNamespace(new=SimpleNamespace(epoch=epoch))


def test_a_subscription_skips_changes_its_starting_snapshot_already_held() -> None:
    # Regression: a subscriber made right after store.join() could be handed that join's change
    # when it was still queued (the async changes() test saw epoch 0 -> 1 instead of b's join).
    dispatcher = Dispatcher("test-after-epoch")
    seen_early: list[int] = []
    seen_late: list[int] = []
    dispatcher.subscribe(lambda change: seen_early.append(change.new.epoch))
    dispatcher.subscribe(lambda change: seen_late.append(change.new.epoch), after_epoch=1)
    for epoch in (1, 2, 3):
        dispatcher.put(_change(epoch))
    assert dispatcher.wait_delivered(3, timeout_s=5)
    dispatcher.close()
    assert seen_early == [1, 2, 3]
    assert seen_late == [2, 3]
