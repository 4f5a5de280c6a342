"""Sweep, advice and comparison: the library and the sweep, advise and compare commands."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from ringkit import HashRing
from ringkit.advice import (
    advise,
    allocated_imbalance,
    formula_vnodes,
    ring_table_bytes,
    sweep,
)
from ringkit.cli import main
from ringkit.errors import ConfigError
from ringkit.sim import compare
from ringkit.stats import draw_shares, imbalance, worst_share
from ringkit.strategies.registry import STRATEGY_NAMES
from tests.plotting import require_matplotlib


def _json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict:  # type: ignore[type-arg]
    assert main(list(argv)) == 0
    return json.loads(capsys.readouterr().out)  # type: ignore[no-any-return]


def test_sweep_rows_follow_the_theory() -> None:
    rows = sweep(10, [1, 16, 256], draws=300, seed=1)
    assert [r.vnodes for r in rows] == [1, 16, 256]
    # Balance improves monotonically with vnodes, and the measured CV tracks Beta's exact CV:
    # 300 rings x 10 nodes estimate it with a relative standard error of ~1.3%; 6% is 4.5 sigma.
    assert rows[0].busiest_mean > rows[1].busiest_mean > rows[2].busiest_mean > 1.0
    for row in rows:
        assert row.cv == pytest.approx(row.cv_exact, rel=0.06)
        assert row.worst_theory == pytest.approx(worst_share(10, row.vnodes) * 10)
        assert row.busiest_mean <= row.busiest_p99 <= row.busiest_max
    # With one token the busiest node is the largest of 10 spacings: H_10 = 2.929 x fair on
    # average; 300 rings (sd ~1.2) estimate it within 0.07 (1 sd); 0.25 is 3.6 sigma.
    assert rows[0].busiest_mean == pytest.approx(rows[0].largest_theory, abs=0.25)


def test_formula_vnodes_inverts_worst_share() -> None:
    v = formula_vnodes(10, 1.10)
    assert worst_share(10, v) * 10 <= 1.10 < worst_share(10, v - 1) * 10
    assert formula_vnodes(1, 1.1) == 1
    with pytest.raises(ConfigError, match=r"target must be > 1 .*got 1\.0"):
        formula_vnodes(10, 1.0)


def test_advise_finds_the_smallest_passing_vnode_count() -> None:
    advice = advise(10, target=1.25, draws=200, seed=0)
    assert advice.vnodes is not None and advice.achieved is not None
    assert advice.achieved >= 0.99
    # The same seeded draws one step (of the ~1.5% bisection tolerance) below do not pass.
    below = imbalance(draw_shares(10, advice.vnodes - 3, 200, seed=0))
    assert np.mean(below <= 1.25) < 0.99
    assert advice.gossip_entries == 10 * advice.vnodes
    assert advice.seed_table_bytes == 10 * advice.vnodes * 40
    # ringkit's table: 8-byte token + 2-byte owner + at most 2 bytes of prefix per vnode.
    assert advice.table_bytes is not None
    assert 10 * 10 * advice.vnodes <= advice.table_bytes <= 12 * 10 * advice.vnodes + 64
    assert advice.join_transfers == advice.vnodes
    assert advice.join_sources == pytest.approx(10 * (1 - 0.9**advice.vnodes))
    # 2N = 20 nodes at 1.25 x fair need P >= 20 / 0.25 = 80 partitions.
    assert advice.partitions == 80
    assert advice.partitions_imbalance == 1.0
    assert advice.formula_vnodes == formula_vnodes(10, 1.25)


def test_ring_table_bytes_matches_a_real_ring() -> None:
    ring = HashRing([f"n{i}" for i in range(10)], vnodes=64)
    table = ring._table  # the arrays a ring holds
    real = table.tokens.nbytes + table.owners.nbytes + table.prefix.nbytes
    assert ring_table_bytes(10, 64) == real


def test_allocated_tokens_balance_with_enough_tokens() -> None:
    # With v >= n - 1 tokens a joiner can take its share from every node: exactly fair.
    assert allocated_imbalance(10, 9) == pytest.approx(1.0)
    assert allocated_imbalance(1, 1) == 1.0
    # One token takes from one node only: node 1 gives half its load to node 2, and so on.
    assert allocated_imbalance(3, 1) == pytest.approx(1.5)
    assert allocated_imbalance(10, 1) > allocated_imbalance(10, 4) >= 1.0


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"target": 1.0}, "target must be > 1"),
        ({"confidence": 0.0}, r"confidence must be in \(0, 1\], got 0.0"),
        ({"replicas": 11}, r"replicas must be in \[1, 10\] for 10 nodes, got 11"),
        ({"draws": 0}, "draws must be >= 1, got 0"),
    ],
)
def test_advise_refuses_bad_input(kwargs: dict[str, float], match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        advise(10, **kwargs)  # type: ignore[arg-type]


def test_compare_covers_every_registered_strategy() -> None:
    rows = compare(nodes=5, keys=3000, repeats=1)
    assert [r.strategy for r in rows] == list(STRATEGY_NAMES)
    by = {r.strategy: r for r in rows}
    assert by["ring"].optimum == pytest.approx(1 / 6)
    ring = HashRing([f"node-{i}" for i in range(1, 6)])
    keys = [f"key-0-{i}" for i in range(1, 3001)]
    after = ring.add("node-6")
    moved = (
        sum(
            a != b for a, b in zip(ring.node_for_many(keys), after.node_for_many(keys), strict=True)
        )
        / 3000
    )
    assert by["ring"].moved == moved
    # hash % N moves about N/(N+1) of the keys; 3 binomial sd over 3000 keys is 0.02.
    assert by["modulo"].moved == pytest.approx(5 / 6, abs=0.03)
    for row in rows:
        assert row.error is None
        assert row.memory_bytes is not None and row.memory_bytes > 0
        assert row.lookup_ns is not None and row.lookup_ns > 0


def test_compare_refuses_bad_input() -> None:
    with pytest.raises(ConfigError, match="change must be one of add, remove, got 'move'"):
        compare(change="move")
    with pytest.raises(ConfigError, match="unknown strategy 'magic'; known: "):
        compare(strategies=["magic"])
    with pytest.raises(ConfigError, match="nodes must be >= 2, got 1"):
        compare(nodes=1, change="remove")


def test_sweep_command(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    data = _json(capsys, "sweep", "--nodes", "5", "--vnodes", "1-8", "--draws", "50", "--json")
    rows = sweep(5, [1, 2, 4, 8], draws=50, seed=0)
    assert data["rows"] == [{k: getattr(row, k) for k in data["rows"][0]} for row in rows]
    assert main(["sweep", "--nodes", "5", "--vnodes", "1,64", "--draws", "50"]) == 0
    out = capsys.readouterr().out
    assert "5 nodes, 50 seeded rings per row" in out
    assert f"H_N = {rows[0].largest_theory:.3f} × fair" in out
    require_matplotlib()
    plot = tmp_path / "sweep.svg"
    assert (
        main(["sweep", "--nodes", "5", "--vnodes", "1,64", "--draws", "20", "--plot", str(plot)])
        == 0
    )
    assert b"<svg" in plot.read_bytes()[:500]


def test_advise_command(capsys: pytest.CaptureFixture[str]) -> None:
    data = _json(capsys, "advise", "--nodes", "8", "--target", "1.3", "--json")
    assert data["vnodes"] == advise(8, target=1.3).vnodes
    assert data["recommendation"] == "ring"
    assert main(["advise", "--nodes", "8", "--target", "1.3", "--static"]) == 0
    out = capsys.readouterr().out
    assert "The node count never changes: hash % N" in out
    assert "a ring is unnecessary overhead here." in out
    assert f"{data['vnodes']:,} vnodes" in out
    assert _json(capsys, "advise", "--nodes", "8", "--static", "--json")["recommendation"] == (
        "modulo"
    )
    assert main(["advise", "--target", "0.9"]) == 1
    assert "target must be > 1 (a multiple of the fair share), got 0.9" in capsys.readouterr().err


def test_compare_command(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    data = _json(
        capsys,
        "compare",
        "--nodes",
        "4",
        "--keys",
        "2000",
        "--repeats",
        "1",
        "--change",
        "remove",
        "--json",
    )
    assert [r["strategy"] for r in data["rows"]] == list(STRATEGY_NAMES)
    lib = {r.strategy: r for r in compare(nodes=4, keys=2000, repeats=1, change="remove")}
    for row in data["rows"]:
        assert row["moved"] == lib[row["strategy"]].moved
        assert row["busiest_ratio"] == lib[row["strategy"]].busiest_ratio
        assert row["optimum"] == 0.25
    subset = ["--strategies", "modulo,ring"]
    assert main(["compare", "--nodes", "4", "--keys", "2000", "--repeats", "1", *subset]) == 0
    out = capsys.readouterr().out
    assert "2,000 keys on 4 nodes, then add a node (least possible move 20.0%)" in out
    assert main(["compare", "--strategies", "nope", "--keys", "10"]) == 1
    assert "unknown strategy 'nope'" in capsys.readouterr().err
    require_matplotlib()
    plot = tmp_path / "compare.png"
    # Two strategies: the rows of every one are checked above; this is about the file.
    plotted = ["compare", "--nodes", "4", "--keys", "2000", "--repeats", "1", *subset]
    assert main([*plotted, "--plot", str(plot)]) == 0
    assert plot.read_bytes()[:4] == b"\x89PNG"


def test_advise_when_no_vnode_count_is_enough(capsys: pytest.CaptureFixture[str]) -> None:
    # 1.001 x fair needs millions of vnodes: none up to 4,096 passes, and the formula's count
    # (4.6M) is too large to draw, so it is reported without a measured confidence.
    advice = advise(10, target=1.001)
    assert advice.vnodes is None and advice.table_bytes is None
    assert advice.formula_vnodes == formula_vnodes(10, 1.001)
    assert advice.formula_confidence is None
    assert main(["advise", "--target", "1.001"]) == 0
    out = capsys.readouterr().out
    assert "none ≤ 4,096 vnodes" in out
    assert "≤ 1.001 not drawn" in out


def test_advice_has_a_recommendation_attribute_not_only_in_the_cli_json() -> None:
    """Regression: the recommendation existed only as a key the CLI added to its JSON."""
    assert advise(4, target=1.5, draws=20, seed=0).recommendation == "ring"
    static = advise(4, target=1.5, draws=20, seed=0, static=True)
    assert static.recommendation == "modulo"
    assert main(["advise", "--nodes", "4", "--draws", "20", "--static", "--json"]) == 0


def test_compare_explains_the_range_placements_busiest_node(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Regression: ranges showed 10x busiest with no word of why."""
    args = ["compare", "--nodes", "4", "--keys", "2000", "--repeats", "1"]
    assert main([*args, "--strategies", "ranges,ring"]) == 0
    out = capsys.readouterr().out
    assert "ranges: busiest" in out and "not a fault" in out and "split_hot()" in out
    assert main([*args, "--strategies", "ring"]) == 0
    assert "not a fault" not in capsys.readouterr().out


def test_compare_plot_clips_the_busiest_axis_and_labels_the_cut_bar() -> None:
    """Regression: the range placement's 10x bar squashed the others to the floor."""
    require_matplotlib()
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from ringkit.commands.compare import _BUSIEST_CLIP, _clip

    figure, ax = plt.subplots()
    ax.bar(range(3), [1.1, 10.0, 1.2])
    _clip(ax, [1.1, 10.0, 1.2], _BUSIEST_CLIP)
    assert ax.get_ylim() == (0.0, _BUSIEST_CLIP)
    assert [text.get_text() for text in ax.texts] == ["10.0×"]
    # Readable whole: white text wider than the bar read "0.0" on the white background.
    (label,) = ax.texts
    assert matplotlib.colors.to_rgb(label.get_color()) == (0.0, 0.0, 0.0)
    box = label.get_bbox_patch()
    assert box is not None and matplotlib.colors.to_rgb(box.get_facecolor()) == (1.0, 1.0, 1.0)
    plt.close(figure)
