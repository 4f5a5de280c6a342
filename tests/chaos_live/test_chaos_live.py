"""The ownership checker: its rules on hand-made histories, and one short run on real etcd.

The long runs are ``make chaos-live`` (``python -m tests.chaos_live``).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.chaos_live.checker import Run, check, load_transition_runs
from tests.chaos_live.run import RunResult, Settings, run_once
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


def test_a_lower_token_inside_an_overlap_is_a_stale_token_not_an_error() -> None:
    """A lagging member begins an interval from the older epoch while the newer owner owns.

    The default mode allows that overlap; the lagging member's token is below the newer
    owner's, so storage refuses its writes. Without the overlap it is an error.
    """
    lagging = [Run("w0", "k", 10.0, 10.5, 24), Run("w1", "k", 10.2, 10.3, 23)]
    verdict = check(lagging)
    assert verdict.token_errors == []
    assert verdict.stale_tokens == ["k: token fell from 24 to 23"]
    after = check([Run("w0", "k", 10.0, 10.5, 24), Run("w1", "k", 10.6, 10.7, 23)])
    assert after.token_errors == ["k: token fell from 24 to 23"] and after.stale_tokens == []
    # Single True answers (no sure span) a moment apart: within the lag, a stale token.
    flapping = [Run("w5", "k", 31.658, 31.658, 19), Run("w0", "k", 31.661, 31.661, 18)]
    assert check(flapping).token_errors == ["k: token fell from 19 to 18"]
    assert check(flapping, lag_s=1.0).stale_tokens == ["k: token fell from 19 to 18"]


def test_the_longest_time_a_key_had_no_owner_is_a_gap() -> None:
    verdict = check([Run("a", "k", 0.0, 1.0, 1), Run("b", "k", 1.75, 2.0, 2)])
    assert verdict.longest_gap_s == pytest.approx(0.75)


def write_log(path: Path, lines: list[dict[str, object]]) -> Path:
    path.write_text("".join(json.dumps(line) + "\n" for line in lines) + '{"cut sh')
    return path


def gain(member: str, at_ns: int, token: int, key: str = "k") -> dict[str, object]:
    return {
        "member": member,
        "key": key,
        "owned": True,
        "at_ns": at_ns,
        "epoch": token,
        "token": token,
        "last_owned_ns": at_ns - 1,
    }


def loss(member: str, at_ns: int, last_ns: int, token: int) -> dict[str, object]:
    return {
        "member": member,
        "key": "k",
        "owned": False,
        "at_ns": at_ns,
        "epoch": token + 1,
        "token": token,
        "last_owned_ns": last_ns,
    }


def test_a_transition_log_becomes_runs_from_gain_to_the_last_true_answer(tmp_path: Path) -> None:
    a = write_log(
        tmp_path / "a.transitions.jsonl",
        [
            gain("a", 1_000_000_000, 3),
            {
                "member": "a",
                "key": "k",
                "open": True,
                "since_ns": 1_000_000_000,
                "last_owned_ns": 1_500_000_000,
                "token": 3,
            },
            loss("a", 2_100_000_000, 2_000_000_000, 3),
            gain("a", 4_000_000_000, 9),  # still open at the last checkpoint below
            {
                "member": "a",
                "key": "k",
                "open": True,
                "since_ns": 4_000_000_000,
                "last_owned_ns": 4_250_000_000,
                "token": 9,
            },
        ],
    )
    runs = load_transition_runs([a, tmp_path / "missing.transitions.jsonl"])
    assert runs == [Run("a", "k", 1.0, 2.0, 3), Run("a", "k", 4.0, 4.25, 9)]


def test_overlaps_and_tokens_in_the_transition_logs_are_reported_apart(tmp_path: Path) -> None:
    a = write_log(
        tmp_path / "a.jsonl",
        [gain("a", 1_000_000_000, 3), loss("a", 3_100_000_000, 3_000_000_000, 3)],
    )
    still = {"member": "b", "key": "k", "open": True, "since_ns": 2_500_000_000}
    b = write_log(
        tmp_path / "b.jsonl",
        [gain("b", 2_500_000_000, 3), {**still, "last_owned_ns": 4_000_000_000, "token": 3}],
    )
    samples = [Run("a", "k", 1.0, 2.0, 3), Run("b", "k", 3.5, 4.0, 4)]
    verdict = check(samples, transitions=load_transition_runs([a, b]))
    assert verdict.overlaps == [] and verdict.token_errors == []
    assert verdict.transition_runs == 2
    assert [(o.members, round(o.seconds, 3)) for o in verdict.transition_overlaps] == [
        (("a", "b"), 0.5)
    ]
    # b began while a still owned: an overlap, so its token is stale rather than an error.
    assert verdict.transition_stale_tokens == ["k: b took over from a with token 3, not above 3"]
    assert verdict.transition_token_errors == []


def assert_exclusive(result: RunResult) -> None:
    """What every exclusive run must show: faults injected and samples taken, no key with two
    owners in the samples or the transition logs, tokens that only grow between owners."""
    print(result.line)
    assert result.faults and result.verdict.runs > 0, result.line
    assert result.verdict.overlaps == [], result.line
    assert result.verdict.transition_overlaps == [], result.line
    assert result.verdict.token_errors == [], result.line
    assert result.verdict.transition_token_errors == [], result.line
    assert result.verdict.stale_tokens == result.verdict.transition_stale_tokens == []


@pytest.mark.timeout(150)
def test_exclusive_members_never_overlap_under_graceful_changes(tmp_path: Path) -> None:
    require_binary("etcd", "etcd-server")
    settings = Settings(load_s=6.0, tail_s=3.0, etcd_members=1)
    result = run_once("exclusive", "graceful", 7, settings, tmp_path)
    assert_exclusive(result)
    assert result.verdict.transition_runs > 0, result.line
    assert result.verdict.longest_gap_s <= settings.ttl_s + 1, result.line


@pytest.mark.timeout(150)
def test_exclusive_members_never_overlap_when_one_is_paused_past_its_lease(tmp_path: Path) -> None:
    """SIGSTOP of a member process past its TTL, exclusive mode: its lease ends, and its gainers
    read the release marks once instead of following them (nobody still in the ring held its
    arcs); woken, it registers again and waits for the others' marks. No key ever has two
    owners, and tokens only grow."""
    require_binary("etcd", "etcd-server")
    settings = Settings(load_s=8.0, tail_s=3.0, etcd_members=1)
    result = run_once("exclusive", "worker_stop", 3, settings, tmp_path)
    assert_exclusive(result)


@pytest.mark.timeout(150)
def test_a_member_paused_past_its_lease_overlaps_no_longer_than_the_default_bound(
    tmp_path: Path,
) -> None:
    """SIGSTOP of a member process past its TTL, in the default mode: after waking it registers
    again and owns at once, in a new interval with a new token, never in the one from before
    the pause (which would span the time the next owner held the key)."""
    require_binary("etcd", "etcd-server")
    settings = Settings(load_s=8.0, tail_s=3.0, etcd_members=1)
    result = run_once("default", "worker_stop", 3, settings, tmp_path)
    print(result.line)
    assert result.faults and result.verdict.runs > 0, result.line
    current_within_s = settings.ttl_s / 2  # the default: half the smallest TTL
    assert result.verdict.longest_overlap_s <= current_within_s, result.line
    assert all(o.seconds <= current_within_s for o in result.verdict.transition_overlaps)
    assert result.verdict.token_errors == [], result.line
    assert result.verdict.transition_token_errors == [], result.line


@pytest.mark.timeout(180)
def test_exclusive_members_never_overlap_when_an_etcd_member_hangs(tmp_path: Path) -> None:
    """SIGSTOP of one member of a 3-member etcd (a hung VM), exclusive mode: the release marks a
    process sends where it applies a change may go to the hung member and get no answer (the
    release thread then writes them elsewhere); no key ever has two owners, and tokens only
    grow."""
    require_binary("etcd", "etcd-server")
    settings = Settings(load_s=8.0, tail_s=3.0, etcd_members=3)
    result = run_once("exclusive", "etcd_stop", 3, settings, tmp_path)
    assert_exclusive(result)
