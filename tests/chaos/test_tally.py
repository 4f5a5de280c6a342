"""``make chaos`` splits by seed range and adds up: the plan, the run lines and their table."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.chaos import __main__ as chaos_main
from tests.chaos.__main__ import main, planned
from tests.chaos.checker import Anomaly, Verdict
from tests.chaos.history import Op
from tests.chaos.run import Case, RunResult
from tests.chaos.tally import RunTally, read_tallies, table

KINDS = ["calm", "restart", "membership"]


def test_seed_ranges_add_up_to_the_whole_run_set() -> None:
    whole = planned(KINDS, 0, 20, None, None)
    halves = planned(KINDS, 0, 10, None, None) + planned(KINDS, 10, 10, None, None)
    assert sorted(whole, key=repr) == sorted(halves, key=repr)
    # A seed names its case: rerunning one seed alone runs the same case.
    assert planned(["restart"], 11, 1, None, None) == [
        run for run in whole if run[0] == 11 and run[1].fault == "restart"
    ]


def _result(seed: int, case: Case, violations: int, stale: int) -> RunResult:
    read = Op(0, "get", "k:1", None, 10, 20, "ok")
    verdict = Verdict(
        violations=[Anomaly("lost", read)] * violations,
        stale=[Anomaly("stale", read)] * stale,
        reads=40,
        operations=100,
    )
    return RunResult(seed, case, ["restart s1 empty"] * 3, verdict, {}, [])


def test_the_table_adds_up_the_lines_each_run_prints(tmp_path: Path) -> None:
    runs = [
        _result(0, Case("restart", "redis", "defaults"), 0, 2),
        _result(1, Case("restart", "memcached", "split"), 1, 14),
        _result(2, Case("calm", "redis", "quorum"), 0, 0),
    ]
    log = tmp_path / "chaos.log"
    log.write_text("\n".join(["starting", *(run.line for run in runs), "  lost: p0 ..."]))
    tallies = read_tallies([log])
    assert [(t.seed, t.label, t.violations, t.stale) for t in tallies] == [
        (0, "restart/redis/defaults", 0, 2),
        (1, "restart/memcached/split", 1, 14),
        (2, "calm/redis/quorum", 0, 0),
    ]
    lines = table(tallies).splitlines()
    assert lines[2] == "| calm | 1 | 100 | 40 | 3 | 0 | 0 | 0 |"  # FAULTS order, not the log's
    assert lines[3] == "| restart | 2 | 200 | 80 | 6 | 1 | 1 | 16 |"
    assert lines[4] == "| total | 3 | 300 | 120 | 9 | 1 | 1 | 16 |"
    assert main(["--tally", str(log)]) == 1  # a violation in any log fails the tally
    assert RunTally.parse("== restart: 2 runs") is None


def test_jobs_run_the_same_plan_and_print_the_table(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    ran: list[tuple[int, str]] = []

    def fake_run(seed: int, case: Case, settings: object) -> RunResult:
        ran.append((seed, case.label))
        return _result(seed, case, 0, seed % 2)

    monkeypatch.setattr(chaos_main, "_run", fake_run)
    assert main(["--runs", "4", "--faults", "calm,pause", "--jobs", "3"]) == 0
    expected = [(seed, case.label) for seed, case in planned(["calm", "pause"], 0, 4, None, None)]
    assert sorted(ran) == sorted(expected)
    out = capsys.readouterr().out
    assert "| pause | 4 | 400 | 160 | 12 | 0 | 0 | 2 |" in out
    assert out.endswith("0 run(s) with violations\n")
