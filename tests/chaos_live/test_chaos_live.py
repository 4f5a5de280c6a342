"""The ownership checker: its rules on hand-made histories, and one short run on real etcd.

The long runs are ``make chaos-live`` (``python -m tests.chaos_live``).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.chaos_live.checker import Run, check
from tests.chaos_live.run import Settings, run_once
from tests.servers import require_binary


def test_two_members_owning_one_key_at_once_is_an_overlap() -> None:
    verdict = check([Run("a", "k", 0.0, 2.0, 1), Run("b", "k", 1.5, 3.0, 2)])
    assert [(o.members, o.seconds) for o in verdict.overlaps] == [(("a", "b"), 0.5)]
    assert verdict.longest_overlap_s == 0.5


def test_touching_spans_and_replicas_are_no_overlap() -> None:
    assert check([Run("a", "k", 0.0, 1.0, 1), Run("b", "k", 1.0, 2.0, 2)]).overlaps == []
    both = [Run("a", "k", 0.0, 2.0, 1), Run("b", "k", 1.0, 3.0, 2)]
    assert check(both, replicas=2).overlaps == []


def test_a_token_not_above_the_previous_owners_is_an_error() -> None:
    verdict = check([Run("a", "k", 0.0, 1.0, 5), Run("b", "k", 1.2, 2.0, 5)])
    assert verdict.token_errors == ["k: b took over from a with token 5, not above 5"]
    assert check([Run("a", "k", 0.0, 1.0, 5), Run("a", "k", 1.2, 2.0, 5)]).token_errors == []
    fell = check([Run("a", "k", 0.0, 1.0, 5), Run("a", "k", 1.2, 2.0, 4)])
    assert fell.token_errors == ["k: token fell from 5 to 4"]


def test_the_longest_time_a_key_had_no_owner_is_a_gap() -> None:
    verdict = check([Run("a", "k", 0.0, 1.0, 1), Run("b", "k", 1.75, 2.0, 2)])
    assert verdict.longest_gap_s == pytest.approx(0.75)


@pytest.mark.timeout(150)
def test_exclusive_members_never_overlap_under_graceful_changes(tmp_path: Path) -> None:
    require_binary("etcd", "etcd-server")
    settings = Settings(load_s=6.0, tail_s=3.0, etcd_members=1)
    result = run_once("exclusive", "graceful", 7, settings, tmp_path)
    print(result.line)
    assert result.faults and result.verdict.runs > 0, result.line
    assert result.verdict.overlaps == [], result.line
    assert result.verdict.token_errors == [], result.line
    assert result.verdict.longest_gap_s <= settings.ttl_s + 1, result.line
