"""Scenario files: parsing, and one-line errors that name the file, the field and the choices."""

from __future__ import annotations

from pathlib import Path

import pytest

from ringkit.errors import ConfigError
from ringkit.sim import load_scenario, parse_scenario

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_full_scenario_parses() -> None:
    text = """
    name = "demo"
    seed = 9
    hot_keys = 3
    baseline = "none"
    nodes = {a = 1.0, b = 2.0}
    [keys]
    count = 50
    prefix = "user:"
    start = 0
    zipf = 1.2
    [keys.sizes]
    distribution = "uniform"
    low = 10
    high = 20
    [strategy]
    name = "ring"
    vnodes = 16
    hasher = "md5"
    [[events]]
    type = "add"
    node = "c"
    weight = 0.5
    [[events]]
    type = "fail"
    node = "a"
    capacity = 2
    load = "requests"
    [[events]]
    type = "stale"
    behind = 2
    """
    (scenario,) = parse_scenario(text, "demo.toml")
    assert scenario.name == "demo"
    assert scenario.baseline is None
    assert [(n.name, n.weight) for n in scenario.nodes] == [("a", 1.0), ("b", 2.0)]
    assert scenario.population.names(0, 2) == ["user:00", "user:01"]
    assert scenario.population.seed == 9
    assert scenario.population.sizes.distribution == "uniform"
    assert scenario.options.vnodes == 16
    assert scenario.options.hasher == "md5"
    assert [e.label for e in scenario.events] == ["add c", "fail a", "stale 2 behind"]
    assert scenario.events[1].capacity == 2
    assert scenario.events[1].load == "requests"


def test_node_count_names_nodes() -> None:
    (scenario,) = parse_scenario("nodes = 12", "n.toml")
    assert scenario.nodes[0].name == "node-01"
    assert scenario.nodes[-1].name == "node-12"


@pytest.mark.parametrize("path", sorted(EXAMPLES.glob("*.toml")), ids=lambda p: p.name)
def test_examples_parse(path: Path) -> None:
    assert load_scenario(path)


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("colour = 1", "bad.toml: unknown field 'colour'; accepted: name, seed"),
        ("[keys]\ncount = 0", r"bad.toml: keys.count must be an integer >= 1; got 0"),
        ("[keys]\ncount = 'x'", "bad.toml: keys.count must be an integer; got 'x'"),
        ("[keys]\nzipf = 11", r"bad.toml: keys.zipf must be a number in \[0, 10\]; got 11"),
        (
            "[keys.sizes]\ndistribution = 'zipf'",
            "bad.toml: keys.sizes.distribution must be one of fixed, uniform, lognormal, pareto; "
            "got 'zipf'",
        ),
        ("[keys.sizes]\nmedian = -3", "bad.toml: keys.sizes.median must be a number > 0; got -3"),
        ("nodes = 'abc'", "bad.toml: nodes must be a count >= 1, a list of names or a table"),
        ("nodes = {a = 0}", "bad.toml: nodes: weight of node 'a' must be finite and > 0, got 0"),
        ("[strategy]\nname = 'magic'", "bad.toml: strategy.name must be one of .*modulo.*ring"),
        ("[strategy]\nvnodes = 0", "bad.toml: strategy.vnodes must be an integer >= 1 or a list"),
        ("[strategy]\nhasher = 'crc'", "bad.toml: strategy.hasher: unknown hasher 'crc'; known:"),
        ("[strategy]\ncolour = 1", "bad.toml: unknown field 'strategy.colour'; accepted: name"),
        ("baseline = 'x'", "bad.toml: baseline must be one of .*none; got 'x'"),
        (
            "[[events]]\ntype = 'explode'\nnode = 'A'",
            "bad.toml: events.0..type must be one of add, remove, reweight, fail, stale, "
            "fail_zone; got 'explode'",
        ),
        (
            "[[events]]\ntype = 'remove'\nnode = 'Q'",
            r"bad.toml: events.0..node must be one of A, B, C; got 'Q'",
        ),
        (
            "[[events]]\ntype = 'add'\nnode = 'A'",
            r"bad.toml: events.0..node must be a node not yet added; got 'A'",
        ),
        ("[[events]]\ntype = 'add'", r"bad.toml: events.0..node must name a node; got None"),
        (
            "[[events]]\ntype = 'fail'\nnode = 'A'\ncapacity = 0.5",
            r"bad.toml: events.0..capacity must be a number > 1; got 0.5",
        ),
        (
            "[[events]]\ntype = 'fail'\nnode = 'A'\nload = 'cpu'",
            r"bad.toml: events.0..load must be one of keys, bytes, requests; got 'cpu'",
        ),
        (
            "[[events]]\ntype = 'stale'\nbehind = 0",
            r"bad.toml: events.0..behind must be an integer >= 1; got 0",
        ),
        ("events = 3", "bad.toml: events must be an array of tables"),
        ("hot_keys = -1", "bad.toml: hot_keys must be an integer >= 0; got -1"),
        ("nodes = [", "bad.toml: invalid TOML: "),
    ],
)
def test_bad_fields_are_named(text: str, match: str) -> None:
    with pytest.raises(ConfigError, match=match) as raised:
        parse_scenario(text, "bad.toml")
    assert "\n" not in str(raised.value)


def test_unreadable_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"missing\.toml: cannot read scenario file"):
        load_scenario(tmp_path / "missing.toml")
    binary = tmp_path / "binary.toml"
    binary.write_bytes(b"\xff\xfe\x00")
    with pytest.raises(ConfigError, match=r"binary\.toml: scenario file must be UTF-8 text"):
        load_scenario(binary)
