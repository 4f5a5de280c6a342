"""``ringkit simulate``: the default Gatepass run, scenario files, JSON, plots and errors."""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path

import pytest

from ringkit import HashRing, Modulo
from ringkit.cli import main
from tests.plotting import require_matplotlib

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
KEYS = [f"booking-{i:04d}" for i in range(1, 301)]


def _json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict:  # type: ignore[type-arg]
    assert main(list(argv)) == 0
    return json.loads(capsys.readouterr().out)  # type: ignore[no-any-return]


def _moved(before: list[str], after: list[str]) -> float:
    return sum(a != b for a, b in zip(before, after, strict=True)) / len(before)


def test_default_json_is_the_librarys_answer(capsys: pytest.CaptureFixture[str]) -> None:
    data = _json(capsys, "simulate", "--json")
    assert data["hasher"] == "fnv1a_32_mix"
    assert data["keys"] == KEYS
    steps = data["steps"]
    assert [(s["vnodes"], s["event"]) for s in steps] == [
        (v, e) for v in (1, 8, 32, 128) for e in ("start", "add D", "remove B")
    ]
    for v in (1, 8, 32, 128):
        rings = [HashRing(["A", "B", "C"], vnodes=v, hasher="fnv1a_32_mix")]
        rings += [rings[0].add("D"), rings[0].add("D").remove("B")]
        mods = [Modulo(["A", "B", "C"], hasher="fnv1a_32_mix")]
        mods += [mods[0].add("D"), mods[0].add("D").remove("B")]
        ours = [s for s in steps if s["vnodes"] == v]
        for i, step in enumerate(ours):
            owners = rings[i].node_for_many(KEYS)
            counts = {n: Counter(owners)[n] for n in rings[i]}
            assert step["nodes"] == list(rings[i])
            assert step["keys_per_node"] == counts
            assert step["busiest_ratio"] == pytest.approx(
                max(counts.values()) / (300 / len(counts))
            )
            if i == 0:
                assert step["moved_ring"] == 0 and step["moved_modulo"] == 0
                continue
            assert step["moved_ring"] == _moved(rings[i - 1].node_for_many(KEYS), owners)
            assert step["moved_modulo"] == _moved(
                mods[i - 1].node_for_many(KEYS), mods[i].node_for_many(KEYS)
            )
    ring = HashRing(["A", "B", "C"], vnodes=128, hasher="fnv1a_32_mix")
    assert data["trace"]["key"] == "booking-0001"
    assert data["trace"]["owner"] == ring.node_for("booking-0001")


def test_default_run_shows_the_gatepass_claims(capsys: pytest.CaptureFixture[str]) -> None:
    steps = _json(capsys, "simulate", "--json")["steps"]
    by = {(s["vnodes"], s["event"]): s for s in steps}
    for v in (32, 128):
        # Adding D moves D's share of the keys: 1/4 in expectation. Its sd is the sd of D's
        # share (cv_exact(4, V) / 4: 0.038 at V=32, 0.019 at V=128) plus binomial noise over 300
        # keys (0.025): 0.046 and 0.031; the bounds are 3 sigma at V=32.
        assert 0.11 <= by[(v, "add D")]["moved_ring"] <= 0.39
        # hash % N keeps a key only when h % 3 == h % 4 (h mod 12 in {0, 1, 2}): 1/4 stays, so
        # 3/4 move, +-0.075 (3 binomial sd over 300 keys).
        assert 0.675 <= by[(v, "add D")]["moved_modulo"] <= 0.825
        assert by[(v, "add D")]["moved_ring"] < by[(v, "add D")]["moved_modulo"] / 2
    # One token each: three uniform spacings; P(largest <= 1.25/3) = 1 - 3(7/12)^2 + 3(1/6)^2
    # = 0.06, so "well above fair" (> 1.25x) holds for 94% of rings. With 128 the busiest node's
    # sd (share cv 0.072 plus 0.082 key noise) puts 1.30 above 2.5 sigma.
    assert by[(1, "start")]["busiest_ratio"] > 1.25
    assert by[(128, "start")]["busiest_ratio"] < 1.30
    assert by[(128, "start")]["busiest_ratio"] < by[(1, "start")]["busiest_ratio"]


def test_default_table_output(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", "--vnodes", "128"]) == 0
    out = capsys.readouterr().out
    ring = HashRing(["A", "B", "C"], vnodes=128, hasher="fnv1a_32_mix")
    counts = Counter(ring.node_for_many(KEYS))
    assert "vnodes=128 · ring · fnv1a_32_mix · 300 keys" in out
    assert "moved (hash % N)" in out
    assert f"│ start    │ A    │  {counts['A']:>3} │" in out
    moved = _moved(ring.node_for_many(KEYS), ring.add("D").node_for_many(KEYS))
    assert f"moved {moved * 100:.1f}% of keys, a balanced placement 25.0%" in out
    point = ring.hasher.function(b"booking-0001")
    assert f"Look up booking-0001: hash = 0x{point:08x} → walk clockwise" in out
    assert f"→ node {ring.node_for('booking-0001')}" in out


def test_options_of_the_default_run(capsys: pytest.CaptureFixture[str]) -> None:
    data = _json(
        capsys,
        "simulate",
        "--json",
        "--vnodes",
        "4",
        "--keys",
        "50",
        "--hasher",
        "xxh3_64",
        "--trace",
        "booking-0007",
    )
    assert data["hasher"] == "xxh3_64"
    assert len(data["keys"]) == 50
    assert {s["vnodes"] for s in data["steps"]} == {4}
    assert data["trace"]["owner"] == HashRing(["A", "B", "C"], vnodes=4).node_for("booking-0007")


@pytest.mark.parametrize("path", sorted(EXAMPLES.glob("*.toml")), ids=lambda p: p.name)
def test_examples_run(path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", str(path)]) == 0
    assert "start" in capsys.readouterr().out
    data = _json(capsys, "simulate", str(path), "--json")
    assert data["steps"][0]["event"] == "start"
    assert data["keys"]["count"] > 0


def test_scenario_json_has_balance_by_three_metrics(capsys: pytest.CaptureFixture[str]) -> None:
    data = _json(capsys, "simulate", str(EXAMPLES / "hot-keys.toml"), "--json", "--seed", "3")
    step = data["steps"][0]
    assert set(step["balance"]) == {"keys", "bytes", "requests"}
    assert data["keys"]["seed"] == 3
    assert step["hot_keys"][0]["key"] == "event-page-00001"
    assert step["balance"]["requests"]["busiest"] == step["hot_keys"][0]["node"]


def test_cascade_output(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", str(EXAMPLES / "cascade.toml")]) == 0
    out = capsys.readouterr().out
    assert "cascade: node-03 → " in out
    assert "no cascade: every survivor stayed under its capacity" in out


def test_scenario_error_is_one_line_exit_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text('[[events]]\ntype = "explode"\nnode = "A"\n')
    assert main(["simulate", str(bad)]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == (
        f"ringkit: error: {bad}: events[0].type must be one of add, remove, reweight, fail, "
        "stale, fail_zone; got 'explode'\n"
    )


def test_plot_png_and_svg(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    require_matplotlib()
    png, svg = tmp_path / "run.png", tmp_path / "run.svg"
    assert main(["simulate", "--vnodes", "1,128", "--plot", str(png)]) == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert main(["simulate", str(EXAMPLES / "hot-keys.toml"), "--plot", str(svg)]) == 0
    assert b"<svg" in svg.read_bytes()[:500]
    assert f"plot written to {svg}" in capsys.readouterr().out


def test_plot_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    assert main(["simulate", "--plot", str(tmp_path / "run.gif")]) == 1
    assert "--plot file must end in .png or .svg, got" in capsys.readouterr().err
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib now fails
    assert main(["simulate", "--plot", str(tmp_path / "run.png")]) == 1
    assert capsys.readouterr().err == (
        "ringkit: error: --plot needs matplotlib; install it with: pip install 'ringkit[plot]'\n"
    )


def test_bad_vnodes_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["simulate", "--vnodes", "0,8"])
    assert exit_info.value.code == 2
    assert "vnodes must be >= 1, got '0,8'" in capsys.readouterr().err


def test_default_run_options_are_refused_with_a_file(capsys: pytest.CaptureFixture[str]) -> None:
    path = str(EXAMPLES / "gatepass.toml")
    assert main(["simulate", path, "--keys", "10"]) == 1
    assert capsys.readouterr().err == (
        "ringkit: error: --keys applies to the default run only, got 10; set keys.count in the "
        "scenario file\n"
    )
    assert main(["simulate", path, "--trace", "k"]) == 1
    assert "--trace applies to the default run only, got 'k'" in capsys.readouterr().err


def test_baseline_equal_to_strategy_gets_its_own_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "same.toml"
    path.write_text('[strategy]\nname = "modulo"\n[[events]]\ntype = "add"\nnode = "D"\n')
    step = _json(capsys, "simulate", str(path), "--json")["steps"][1]
    assert step["moved_modulo"] == step["moved_baseline"]
    assert "stale_None" not in step


def test_simulate_several_files_runs_each_in_turn(capsys: pytest.CaptureFixture[str]) -> None:
    """Regression: ``ringkit simulate examples/*.toml`` failed: one file only."""
    paths = [str(EXAMPLES / "gatepass.toml"), str(EXAMPLES / "cascade.toml")]
    assert main(["simulate", *paths, "--json"]) == 0
    docs = json.loads(capsys.readouterr().out)
    alone = [_json(capsys, "simulate", path, "--json") for path in paths]
    assert docs == alone
    assert main(["simulate", *paths]) == 0
    out = capsys.readouterr().out
    assert "gatepass" in out and "cascade" in out


def test_simulate_loads_bundled_scenarios_by_name(capsys: pytest.CaptureFixture[str]) -> None:
    """Regression: the examples were not in the wheel; they ship inside the package."""
    assert main(["simulate", "--list"]) == 0
    listed = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in listed] == [
        "cascade",
        "gatepass",
        "hot-key-remedies",
        "hot-keys",
        "load-balancers",
        "zone-failure",
    ]
    by_name = _json(capsys, "simulate", "gatepass", "--json")
    assert by_name == _json(capsys, "simulate", str(EXAMPLES / "gatepass.toml"), "--json")
    assert main(["simulate", "gatepas"]) == 1
    assert capsys.readouterr().err == (
        "ringkit: error: no scenario file or bundled scenario 'gatepas'; "
        "bundled: cascade, gatepass, hot-key-remedies, hot-keys, load-balancers, zone-failure\n"
    )
