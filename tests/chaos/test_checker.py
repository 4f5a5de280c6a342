"""The history checker on small hand-written histories: known violations found, legal ones kept.

Times are in arbitrary units; what matters is which operations surely precede which.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.chaos.checker import check
from tests.chaos.history import Op, Window


def op(
    kind: str,
    value: str | int | None,
    start: int,
    end: int,
    outcome: str = "ok",
    *,
    process: int = 0,
    key: str = "k",
    final: bool = False,
) -> Op:
    return Op(process, kind, key, value, start, end, outcome, final)


def kinds(ops: list[Op], *, strict: bool = True) -> list[str]:
    return [anomaly.kind for anomaly in check(ops, strict=strict).violations]


def test_a_read_of_the_newest_acknowledged_value_is_legal() -> None:
    assert kinds([op("set", "a", 0, 1), op("set", "b", 2, 3), op("get", "b", 4, 5)]) == []


def test_a_read_missing_an_acknowledged_write_is_a_lost_write() -> None:
    history = [op("set", "a", 0, 1), op("get", None, 2, 3, process=1)]
    verdict = check(history, strict=True)
    assert [a.kind for a in verdict.violations] == ["lost"]
    assert verdict.violations[0].superseded_by == history[0]
    assert verdict.violations[0].stale_for_ns == 1


def test_a_read_of_an_overwritten_value_is_stale() -> None:
    history = [op("set", "a", 0, 1), op("set", "b", 2, 3), op("get", "a", 4, 5, process=1)]
    assert kinds(history) == ["stale"]


def test_a_deleted_value_read_again_is_resurrected() -> None:
    history = [op("set", "a", 0, 1), op("delete", None, 2, 3), op("get", "a", 4, 5)]
    assert kinds(history) == ["resurrected"]


def test_a_value_nobody_wrote_yet_is_a_phantom() -> None:
    assert kinds([op("get", "a", 0, 1), op("set", "a", 2, 3)]) == ["phantom"]
    assert kinds([op("get", "zzz", 0, 1)]) == ["phantom"]


def test_writes_concurrent_with_the_read_may_or_may_not_be_seen() -> None:
    base = [op("set", "a", 0, 1), op("set", "b", 2, 6)]
    assert kinds([*base, op("get", "a", 3, 4)]) == []  # b not acknowledged when the read began
    assert kinds([*base, op("get", "b", 3, 4)]) == []  # b may have taken effect already
    assert kinds([*base, op("get", "a", 7, 8)]) == ["stale"]


def test_concurrent_writes_may_be_applied_in_either_order() -> None:
    writes = [op("set", "a", 0, 5, process=1), op("set", "b", 1, 4, process=2)]
    assert kinds([*writes, op("get", "a", 6, 7)]) == []
    assert kinds([*writes, op("get", "b", 6, 7)]) == []


def test_a_write_of_unknown_outcome_may_take_effect_late_or_never() -> None:
    unknown = [op("set", "a", 0, 1), op("set", "b", 2, 3, "unknown"), op("set", "c", 4, 5)]
    assert kinds([*unknown, op("get", "b", 6, 7)]) == []  # applied after c, e.g. a resumed server
    assert kinds([*unknown, op("get", "c", 6, 7)]) == []  # or never
    assert kinds([*unknown, op("get", "a", 6, 7)]) == ["stale"]  # but a was surely replaced by c


def test_a_failed_write_never_happened() -> None:
    assert kinds([op("set", "a", 0, 1, "fail"), op("get", "a", 2, 3)]) == ["phantom"]


def test_an_unknown_delete_may_explain_a_miss() -> None:
    history = [op("set", "a", 0, 1), op("delete", None, 2, 3, "unknown"), op("get", None, 4, 5)]
    assert kinds(history) == []


def test_a_failed_read_says_nothing() -> None:
    assert kinds([op("set", "a", 0, 1), op("get", None, 2, 3, "fail")]) == []


def test_keys_are_checked_apart() -> None:
    history = [op("set", "a", 0, 1, key="x"), op("get", None, 2, 3, key="y")]
    assert kinds(history) == []


def test_with_the_defaults_stale_reads_are_counted_and_final_reads_judged() -> None:
    history = [
        op("set", "a", 0, 1),
        op("set", "b", 2, 3),
        op("get", "a", 10, 11, process=1),  # a process that never noticed: allowed, counted
        op("delete", None, 20, 21),
        op("get", "b", 30, 31, process=1, final=True),  # after the repair: a violation
    ]
    verdict = check(history, strict=False)
    assert [a.kind for a in verdict.stale] == ["stale"]
    assert verdict.stale[0].stale_for_ns == 7
    assert [a.kind for a in verdict.violations] == ["resurrected"]
    assert verdict.stale_max_ms == 7 / 1e6


def test_with_the_defaults_a_process_must_read_its_own_writes() -> None:
    history = [op("set", "a", 0, 1, process=1), op("set", "b", 2, 3), op("get", "a", 4, 5)]
    assert [a.kind for a in check(history, strict=False).violations] == ["stale"]
    history = [op("set", "a", 0, 1), op("delete", None, 2, 3), op("get", "a", 4, 5)]
    assert [a.kind for a in check(history, strict=False).violations] == ["resurrected"]


def test_with_the_defaults_a_server_marked_down_must_be_repaired_before_it_serves() -> None:
    writes = [op("set", "a", 0, 1), op("set", "b", 10, 11)]  # s2 hung from 5 to 20: missed b
    hung = [Window("s2", 5, 20)]

    def read_from_s2(marked_down_ns: int | None) -> Op:
        return Op(1, "get", "k", "a", 30, 31, "ok", server="s2", marked_down_ns=marked_down_ns)

    noticed = check([*writes, read_from_s2(12)], strict=False, windows=hung)
    assert [(a.kind, a.unrepaired) for a in noticed.violations] == [("stale", True)]
    assert "s2 answered, which the reader had marked down since" in noticed.violations[0].describe()
    never_noticed = check([*writes, read_from_s2(None)], strict=False, windows=hung)
    assert never_noticed.violations == [] and len(never_noticed.stale) == 1
    noticed_an_older_failure = check([*writes, read_from_s2(2)], strict=False, windows=hung)
    assert noticed_an_older_failure.violations == []


def test_phantoms_are_violations_even_with_the_defaults() -> None:
    assert [a.kind for a in check([op("get", "x", 0, 1)], strict=False).violations] == ["phantom"]


def test_counters_stay_within_the_increments_begun_and_acknowledged() -> None:
    seed = op("set", 0, 0, 1)
    incrs = [op("incr", 1, 2, 3), op("incr", 2, 4, 5), op("incr", None, 6, 9, "unknown")]
    legal = [op("get", 2, 7, 8), op("get", 3, 10, 11)]  # the unknown one may have counted
    assert kinds([seed, *incrs, *legal]) == []
    verdict = check([seed, *incrs, op("get", 4, 10, 11), op("get", 1, 12, 13)], strict=True)
    assert [a.kind for a in verdict.violations] == ["counter_high"]
    assert [a.kind for a in verdict.counter_low] == ["counter_low"]  # counted, never a violation


NEAR_TTL = 20  # a near-cache's ttl_s, in the units of these histories


def near(history: list[Op], *, strict: bool = True) -> list[str]:
    return [a.kind for a in check(history, strict=strict, near_ttl_ns=NEAR_TTL).violations]


def test_a_near_cache_may_hide_another_process_write_up_to_its_ttl() -> None:
    writes = [op("set", "a", 0, 1, process=1), op("set", "b", 2, 3, process=2)]
    assert near([*writes, op("get", "a", 20, 21)]) == []  # b acknowledged 17 before: hidden
    verdict = check([*writes, op("get", "a", 20, 21)], strict=True, near_ttl_ns=NEAR_TTL)
    assert [(a.kind, a.stale_for_ns) for a in verdict.near_hidden] == [("stale", 17)]
    assert near([*writes, op("get", "a", 24, 25)]) == ["stale"]  # 21 after the ack: beyond
    assert near([*writes, op("get", "a", 24, 25)], strict=False) == []  # the defaults' stale
    deleted = [op("set", "a", 0, 1, process=1), op("delete", None, 2, 3, process=1)]
    assert near([*deleted, op("get", "a", 22, 23)]) == []
    assert near([*deleted, op("get", "a", 24, 25)]) == ["resurrected"]
    written = [op("set", "a", 2, 3, process=1)]
    assert near([*written, op("get", None, 22, 23)]) == []
    assert near([*written, op("get", None, 24, 25)]) == ["lost"]


def test_a_near_cache_never_hides_the_reader_own_writes() -> None:
    writes = [op("set", "a", 0, 1, process=1), op("set", "b", 2, 3)]
    own = [op("get", "a", 4, 5)]  # within the bound, but p0 wrote b itself
    assert near([*writes, *own]) == ["stale"]
    [anomaly] = check([*writes, *own], strict=False, near_ttl_ns=NEAR_TTL).violations
    assert anomaly.own_write_missed  # a violation even with the defaults
    unknown = [op("set", "a", 0, 1, process=1), op("delete", None, 2, 3, "unknown")]
    assert near([*unknown, op("get", "a", 4, 5)]) == []  # a write that raised may never apply
    assert near([op("set", "a", 0, 1), op("get", None, 4, 5)]) == ["lost"]


def test_final_reads_come_from_a_fresh_client_without_the_near_cache_bound() -> None:
    writes = [op("set", "a", 0, 1, process=1), op("set", "b", 2, 3, process=2)]
    assert near([*writes, op("get", "a", 10, 11, process=-1, final=True)]) == ["stale"]


def test_a_near_cache_lowers_the_counter_floor_only_for_reads_of_other_increments() -> None:
    seed = op("set", 0, 0, 1, process=-1)
    incrs = [op("incr", 1, 2, 3, process=1), op("incr", 2, 4, 5, process=1)]
    cached = check([seed, *incrs, op("get", 1, 10, 11)], strict=True, near_ttl_ns=NEAR_TTL)
    assert cached.violations == cached.counter_low == []  # the count read 9 ago, cached
    own = check([seed, *incrs, op("get", 1, 10, 11, process=1)], strict=True, near_ttl_ns=NEAR_TTL)
    assert [a.kind for a in own.counter_low] == ["counter_low"]


def test_a_split_counter_incr_answers_one_part_bounded_above_only() -> None:
    seed = op("set", 0, 0, 1, process=-1)
    incrs = [op("incr", 1, 2, 3), op("incr", 1, 4, 5, process=1), op("incr", 2, 6, 7)]
    summed = [op("get", 3, 8, 9, process=2)]
    verdict = check([seed, *incrs, *summed], strict=True, split_counters=True)
    assert verdict.violations == verdict.counter_low == []  # incr answered 1: its part's count
    assert [a.kind for a in check([seed, *incrs], strict=True).counter_low] == ["counter_low"] * 2
    twice = check([seed, *incrs, op("incr", 5, 10, 11)], strict=True, split_counters=True)
    assert [a.kind for a in twice.violations] == ["counter_high"]  # a part above the total
    low_sum = check([seed, *incrs, op("get", 2, 8, 9)], strict=True, split_counters=True)
    assert [a.kind for a in low_sum.counter_low] == ["counter_low"]


def test_an_anomaly_describes_the_read_and_what_it_missed() -> None:
    history = [op("set", "a", 0, 1_000_000), op("get", None, 3_000_000, 4_000_000, process=2)]
    [anomaly] = check(history, strict=True).violations
    assert anomaly.describe() == (
        "lost: p2 get k -> None [ok] @3.0..4.0 ms missed p0 set k 'a' [ok] @0.0..1.0 ms "
        "acknowledged 2.0 ms before the read began"
    )


@given(st.lists(st.tuples(st.booleans(), st.integers(0, 3)), min_size=1, max_size=30))
def test_a_sequential_history_replayed_against_a_register_is_legal(
    steps: list[tuple[bool, int]],
) -> None:
    """Operations one after another, reads returning the register's state: never flagged."""
    state: str | None = None
    history: list[Op] = []
    for time, (write, choice) in enumerate(steps):
        if write and choice == 0:
            history.append(op("delete", None, 2 * time, 2 * time + 1))
            state = None
        elif write:
            state = f"v{time}"
            history.append(op("set", state, 2 * time, 2 * time + 1))
        else:
            history.append(op("get", state, 2 * time, 2 * time + 1, process=choice))
    assert check(history, strict=True).violations == []


@st.composite
def linearized_histories(draw: st.DrawFn) -> list[Op]:
    """Overlapping operations, each taking effect at one instant inside its call, in that order.

    A write of unknown outcome takes effect at some instant after its invocation, or never.
    """
    count = draw(st.integers(1, 25))
    planned = []
    for n in range(count):
        kind = draw(st.sampled_from(["set", "set", "delete", "get", "get"]))
        start, length = draw(st.integers(0, 40)), draw(st.integers(0, 10))
        unknown = kind != "get" and draw(st.booleans()) and draw(st.booleans())
        late = draw(st.integers(0, 60))
        point = None if unknown and late > 50 else start + min(late, length if not unknown else 60)
        planned.append((n, kind, start, start + length, point, unknown))
    state: str | None = None
    results: dict[int, str | None] = {}
    for n, kind, *_ in sorted((p for p in planned if p[4] is not None), key=lambda p: (p[4], p[0])):
        if kind == "set":
            state = f"v{n}"
        elif kind == "delete":
            state = None
        else:
            results[n] = state
    history = []
    for n, kind, start, end, _, unknown in planned:
        value = f"v{n}" if kind == "set" else results.get(n)
        history.append(op(kind, value, start, end, "unknown" if unknown else "ok", process=n % 3))
    return history


@given(linearized_histories())
def test_a_linearizable_concurrent_history_is_accepted(history: list[Op]) -> None:
    assert check(history, strict=True).violations == []


def test_op_refuses_an_unknown_outcome() -> None:
    with pytest.raises(ValueError, match="outcome must be one of ok, fail, unknown, got 'maybe'"):
        op("get", None, 0, 1, "maybe")
