"""``ringkit plan``, called in-process: tables, JSON, exit codes and error messages."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from rich.console import Console

from ringkit import FixedPartitions, HashRing, diff
from ringkit.cli import main
from ringkit.commands.plan import _steps
from ringkit.strategies.registry import STRATEGY_NAMES, StrategyOptions, build_placement


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    status = main(list(argv))
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def test_plan_prints_the_tables(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, err = run(capsys, "plan", "--nodes", "A,B,C", "--add", "D", "--vnodes", "32",
                           "--keys", "2000")  # fmt: skip
    assert status == 0 and err == ""
    assert "ring: 3 -> 4 nodes (+D)" in out
    for title in ("moved copies", "per source -> destination", "largest transfers", "plan:"):
        assert title in out
    assert "optimum (fair-share change)" in out and "hash % N, same nodes" in out
    assert " 25.000% " in out  # the optimum for one node joining three
    assert " 75.000% " in out  # hash % 3 -> hash % 4 moves three keys in four


def test_plan_json_matches_the_library(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = run(capsys, "plan", "--nodes", "A,B,C", "--add", "D", "--vnodes", "16",
                         "--replicas", "2", "--keys", "500", "--seed", "7", "--json",
                         "--max-streams", "1")  # fmt: skip
    assert status == 0
    report = json.loads(out)
    old = HashRing(["A", "B", "C"], vnodes=16)
    movement = diff(old, old.add("D"), replicas=2)
    assert report["movement"]["moved_fraction"] == movement.moved_fraction
    assert report["movement"]["modulo_fraction"] == movement.modulo_fraction
    assert report["movement"]["keys_total"] == 500
    assert report["plan"]["transfers"] == len(movement.arcs)
    assert report["plan"]["max_streams_per_source"] == 1
    assert {p["destination"] for p in report["pairs"]} == {"D"}
    assert sum(p["keys"] for p in report["pairs"]) == report["movement"]["keys_moved"]
    assert report["change"] == {"add": ["D"], "remove": [], "strategy": "ring", "vnodes": 16,
                                "hasher": "xxh3_64", "seed": 7}  # fmt: skip


def test_plan_seed_changes_the_key_sample_only(capsys: pytest.CaptureFixture[str]) -> None:
    reports = []
    for seed in ("1", "2"):
        _, out, _ = run(capsys, "plan", "--add", "D", "--keys", "300", "--seed", seed, "--json")
        reports.append(json.loads(out))
    assert reports[0]["movement"]["moved_fraction"] == reports[1]["movement"]["moved_fraction"]
    assert reports[0]["movement"]["keys_moved"] != reports[1]["movement"]["keys_moved"]


def test_plan_over_modulo_is_a_key_sample(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = run(capsys, "plan", "--strategy", "modulo", "--remove", "B", "--keys",
                         "1000", "--json")  # fmt: skip
    assert status == 0
    report = json.loads(out)
    assert report["basis"] == "keys"
    assert report["movement"]["keys_moved"] == report["movement"]["modulo_keys_moved"]
    assert all(t["start"] is None for t in report["largest_transfers"])


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--nodes", "A,B"], "nothing to plan: give --add and/or --remove"),
        (["--nodes", "A,B", "--remove", "Z"], "node 'Z' is not in the ring"),
        (["--nodes", "A,B", "--add", "B"], "node 'B' is already in the ring"),
        (
            ["--nodes", "A", "--remove", "A"],
            "--remove A leaves no nodes; a plan needs a node after the change",
        ),
        (["--add", "D", "--setup-s", "-1"], "setup_s must be a finite number >= 0, got -1.0"),
        (["--add", "D", "--bandwidth", "0"], "bandwidth_bytes_per_s must be a finite number > 0"),
    ],
)
def test_bad_changes_exit_1_with_the_message(
    capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    status, out, err = run(capsys, "plan", "--keys", "10", *argv)
    assert status == 1 and out == ""
    assert err.startswith("ringkit: error: ") and message in err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--keys", "0"], "must be >= 1, got 0"),
        (["--max-streams", "0"], "must be >= 1, got 0"),
        (["--vnodes", "-3"], "must be >= 1, got -3"),
        (["--hasher", "xxh64"], "invalid choice: 'xxh64'"),
        (["--nodes", "A,,B"], "expected comma-separated node names, got 'A,,B'"),
    ],
)
def test_usage_errors_exit_2(
    capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    with pytest.raises(SystemExit) as raised:
        main(["plan", "--add", "D", *argv])
    assert raised.value.code == 2
    assert message in capsys.readouterr().err


def test_large_samples_show_a_progress_bar_on_a_terminal(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(Console, "is_terminal", property(lambda self: True))
    results = _steps(True, [("first step", lambda: 1), ("second step", lambda: 2)])
    assert results == [1, 2]
    assert "step" in capsys.readouterr().err  # drawn on stderr, never on stdout


def test_small_samples_run_without_a_progress_bar(capsys: pytest.CaptureFixture[str]) -> None:
    assert _steps(False, [("only step", lambda: "done")]) == ["done"]
    assert capsys.readouterr().err == ""


def test_plan_builds_replica_tables_with_the_replicas_given(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # Fixed partitions keep a replica table: --replicas reaches the placement, not only the diff.
    argv = ["plan", "--strategy", "fixed", "--nodes", "A,B,C,D", "--add", "E", "--replicas", "3"]
    status, out, err = run(capsys, *argv, "--keys", "500", "--json")
    assert status == 0, err
    report = json.loads(out)
    old = FixedPartitions(["A", "B", "C", "D"], replicas=3)
    movement = diff(old, old.add("E"), replicas=3)
    assert report["replicas"] == 3
    assert report["movement"]["moved_fraction"] == movement.moved_fraction


def test_plan_refuses_an_option_the_strategy_does_not_use(
    capsys: pytest.CaptureFixture[str],
) -> None:
    status, out, err = run(capsys, "plan", "--strategy", "modulo", "--vnodes", "8", "--add", "D")
    assert status == 1 and out == ""
    assert err.startswith("ringkit: error: ") and "vnodes" in err


def _plan_json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, Any]:
    status, out, err = run(capsys, "plan", *argv, "--json")
    assert status == 0, err
    report: dict[str, Any] = json.loads(out)
    return report


@pytest.mark.parametrize("replicas", [1, 2, 3])
@pytest.mark.parametrize("strategy", STRATEGY_NAMES)
def test_plan_exact_moved_fraction_agrees_with_its_key_sample(
    strategy: str, replicas: int, capsys: pytest.CaptureFixture[str]
) -> None:
    """Regression: plan's exact figure and its own key sample must tell the same story.

    Each sampled key moves a fraction X of its copies, with mean p (the exact figure) and
    Var(X) <= p(1 - p); the mean of n keys is within 4 standard errors, 4·sqrt(p(1-p)/n),
    except with probability < 1e-4 (Chebyshev gives 1/16 without normality; the CLT 6e-5).
    """
    keys = 4000
    report = _plan_json(capsys, "--strategy", strategy, "--nodes", "A,B,C,D", "--add", "E",
                        "--replicas", str(replicas), "--keys", str(keys))  # fmt: skip
    moved = report["movement"]
    p = moved["moved_fraction"]
    copies = keys * min(replicas, len(report["nodes_after"]))
    sampled = moved["keys_moved"] / copies
    bound = 4 * math.sqrt(max(p * (1 - p), 1 / keys) / keys)
    assert abs(sampled - p) <= bound, (strategy, replicas, p, sampled, bound)


@pytest.mark.parametrize("strategy", ["fixed", "allocated", "ring"])
def test_plan_with_replicas_agrees_with_the_api_diff(
    strategy: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Regression: --replicas reaches every strategy, as in the Python API."""
    report = _plan_json(capsys, "--strategy", strategy, "--nodes", "n1,n2,n3,n4", "--add", "n5",
                        "--replicas", "3", "--keys", "2000")  # fmt: skip
    old = build_placement(strategy, ["n1", "n2", "n3", "n4"], StrategyOptions(replicas=3))
    movement = diff(old, old.add("n5"), replicas=3)
    assert report["movement"]["moved_fraction"] == movement.moved_fraction
    assert report["plan"]["transfers"] == len(movement.arcs)


def test_plan_with_replicas_at_least_the_node_count_says_placements_cannot_differ(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Regression: the README's 3 nodes, replicas 3 showed 25.9% vs 25.0% unexplained."""
    report = _plan_json(capsys, "--add", "D", "--replicas", "3", "--keys", "500")
    assert len(report["notes"]) == 1
    assert report["notes"][0].startswith("replicas 3 >= 3 nodes before: every node holds")
    _, out, _ = run(capsys, "plan", "--add", "D", "--replicas", "3", "--keys", "500")
    assert "note: replicas 3 >= 3 nodes before" in out
    assert _plan_json(capsys, "--nodes", "A", "--add", "B", "--keys", "100")["notes"]
    assert _plan_json(capsys, "--add", "D", "--keys", "100")["notes"] == []


def test_plan_removing_every_node_is_refused_plainly(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, err = run(capsys, "plan", "--nodes", "A,B", "--remove", "A,B")
    assert (status, out) == (1, "")
    assert (
        err
        == "ringkit: error: --remove A,B leaves no nodes; a plan needs a node after the change\n"
    )


def test_plan_over_a_key_sample_shows_no_exact_figure_no_arcs_and_pluralises(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Regression: modulo showed a sampled 75.207% as exact, "arcs 0" and "1 waves"."""
    status, out, _ = run(capsys, "plan", "--strategy", "modulo", "--add", "D", "--keys", "2000")
    assert status == 0
    row = next(line for line in out.splitlines() if "this placement" in line)
    assert row.split("│")[2].strip() == "-"  # the exact column is empty: the figure is sampled
    assert "arcs" not in out
    assert "in 1 wave " in out and "-> 4 destinations" in out
    status, out, _ = run(capsys, "plan", "--nodes", "A,B", "--remove", "B", "--keys", "200")
    assert "2 -> 1 node (-B)" in out and "arcs" in out


def test_plan_progress_pulses_through_the_slow_step_instead_of_sitting_at_0_percent(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Regression: the bar sat at 0% through the diff, which reports no progress."""
    monkeypatch.setattr(Console, "is_terminal", property(lambda self: True))
    assert _steps(True, [("drawing", lambda: 1), ("diffing", lambda: 2)]) == [1, 2]
    err = capsys.readouterr().err
    assert "step 2 of 2" in err and "0%" not in err
