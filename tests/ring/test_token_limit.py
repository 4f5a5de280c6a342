"""Every layout that materialises tokens refuses more than ``max_tokens`` before allocating.

The sizes here would need gigabytes to petabytes: were anything built before the check, the test
would end in a MemoryError (or swap), not in the ConfigError it asserts.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ringkit import HashRing, Maglev
from ringkit.cli import main
from ringkit.compat.ketama import ketama
from ringkit.compat.uhashring import uhashring
from ringkit.errors import ConfigError
from ringkit.placement import MAX_TOKENS, check_token_count
from ringkit.sim.scenario_file import parse_scenario
from ringkit.strategies.allocation import AllocatedRing, allocate_tokens

LIMIT = r"the limit is 16,777,216 tokens \(≈ 201 MB\); pass max_tokens= to raise it"


def test_the_limit_is_two_to_the_24_tokens_about_200_mb() -> None:
    assert MAX_TOKENS == 16_777_216
    with pytest.raises(ConfigError, match=r"would need 50,000,000 tokens \(≈ 600 MB\); " + LIMIT):
        check_token_count(50_000_000)


@pytest.mark.parametrize(
    ("nodes", "vnodes", "needed"),
    [
        ({"a": 1e12}, 160, r"160,000,000,000,000 tokens \(≈ 1.9 PB\)"),
        (["a", "b", "c"], 50_000_000, r"150,000,000 tokens \(≈ 1.8 GB\)"),
        ({"a": 1e300}, 160, r"~1.6e\+302 tokens \(≈ ~1.9e\+303 B\)"),
    ],
)
def test_hash_ring_refuses_huge_weights_and_vnodes(nodes: object, vnodes: int, needed: str) -> None:
    # Regression: HashRing({"a": 1e12}) ended in a MemoryError
    with pytest.raises(ConfigError, match=rf"a ring of vnodes={vnodes} would need {needed}; "):
        HashRing(nodes, vnodes=vnodes)  # type: ignore[arg-type]


def test_weights_too_large_for_a_float_are_a_config_error() -> None:
    with pytest.raises(ConfigError, match=r"vnodes x weight must be a finite number"):
        HashRing({"a": 1.7e308})


def test_changes_keep_the_rings_limit() -> None:
    ring = HashRing(["a"], vnodes=1000, max_tokens=2500)
    assert ring.max_tokens == 2500 and len(ring.add("b").tokens) == 2000
    with pytest.raises(ConfigError, match=r"would need 3,000 tokens .* the limit is 2,500"):
        ring.add("b").add("c")
    with pytest.raises(ConfigError, match=r"would need 3,000 tokens"):
        ring.reweight("a", 3.0)
    with pytest.raises(ConfigError, match=r"would need 3,000 tokens"):
        ring.add("b", tokens=range(2000))
    with pytest.raises(ConfigError, match=r"would need 2 tokens .* the limit is 1 token"):
        HashRing.from_tokens({"a": [1, 2]}, max_tokens=1)
    with pytest.raises(ConfigError, match=r"would need 2,000 tokens"):
        HashRing.from_dict(HashRing(["a", "b"], vnodes=1000).to_dict(), max_tokens=1999)


def test_the_limit_is_raised_with_max_tokens() -> None:
    ring = HashRing(["a", "b"], vnodes=10, max_tokens=20)
    assert len(ring.tokens) == 20
    with pytest.raises(ConfigError, match=r"max_tokens must be an int >= 1, got 0"):
        HashRing(["a"], max_tokens=0)


def test_maglev_allocation_and_uhashring_refuse_huge_tables() -> None:
    with pytest.raises(ConfigError, match=r"a maglev table of table_size=50000017 would need"):
        Maglev(["a"], table_size=50_000_017)
    assert len(Maglev(["a"], table_size=7, max_tokens=7).table) == 7
    with pytest.raises(ConfigError, match=r"tokens=20000000 per node would need 20,000,000"):
        AllocatedRing(["a", "b"], tokens=20_000_000)
    with pytest.raises(ConfigError, match=r"tokens=16 per node would need 32 tokens"):
        allocate_tokens(HashRing(["a"], vnodes=16, max_tokens=31), "b", tokens=16)
    with pytest.raises(ConfigError, match=r"a uhashring ring of vnodes=160 would need"):
        uhashring({"a": 10**6, "b": 10**6})


def test_cli_lookup_with_50_million_vnodes_is_a_usage_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # Regression: `ringkit lookup --vnodes 50000000` ended in a MemoryError
    with pytest.raises(SystemExit) as exit_info:
        main(["lookup", "k", "--vnodes", "50000000"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "--vnodes: one node of --vnodes 50000000 would need 50,000,000 tokens (≈ 600 MB)" in err
    assert "Traceback" not in err


def test_cli_ring_too_large_in_all_is_one_error_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["lookup", "k", "--nodes", "a,b,c,d", "--vnodes", "10000000"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("ringkit: error: a ring of vnodes=10000000 would need 40,000,000")
    assert len(err.strip().splitlines()) == 1


def test_scenario_weight_1e9_is_refused(tmp_path: Path) -> None:
    # Regression: a TOML weight of 1e9 ended in a MemoryError
    text = "nodes = {A = 1e9, B = 1}\n[keys]\ncount = 30\n"
    with pytest.raises(ConfigError, match=r"big\.toml: strategy: a ring of vnodes=160 would need"):
        parse_scenario(text, "big.toml")
    path = tmp_path / "big.toml"
    path.write_text(text)
    assert main(["simulate", str(path)]) == 1


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("nodes = 100000000\n", r"x\.toml: nodes: 100,000,000 nodes would need 100,000,000 tokens"),
        ("nodes = 3\n[keys]\nwidth = 100000000\n", r"x\.toml: keys width must be an int in"),
        (
            'nodes = 3\n[strategy]\nname = "multiprobe"\nprobes = 1000000000000\n',
            r"x\.toml: strategy: multiprobe with probes=1000000000000 would need",
        ),
        (
            'nodes = 3\n[strategy]\nname = "maglev"\ntable_size = 1000000000039\n',
            r"x\.toml: strategy: a maglev table of table_size=1000000000039 would need",
        ),
    ],
)
def test_scenario_sizes_are_refused_before_building(text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_scenario(text, "x.toml")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["compare", "--nodes", "1000000000"], "1,000,000,000 nodes would need"),
        (["sweep", "--nodes", "100000000", "--vnodes", "1"], "200 seeded rings of 100,000,000"),
        (["advise", "--nodes", "100000000"], "200 seeded rings of 100,000,000 nodes would need"),
    ],
)
def test_cli_node_counts_past_the_limit_are_one_error_line(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert err.startswith("ringkit: error: ") and message in err
    assert len(err.strip().splitlines()) == 1


def test_counts_past_4300_digits_are_named_not_a_value_error() -> None:
    # Python refuses str() of an int past 4,300 digits: messages show such counts as 10**k.
    with pytest.raises(ConfigError, match=r"got ~1\.0e\+5000 x 1\.0"):
        HashRing(["a"], vnodes=10**5000)
    with pytest.raises(ConfigError, match=r"table_size=~1\.0e\+5000 would need ~1\.0e\+5000"):
        Maglev(["a"], table_size=10**5000)
    with pytest.raises(ConfigError, match=r"x\.toml: invalid TOML: Exceeds the limit"):
        parse_scenario("seed = 1" + "0" * 5000 + "\n", "x.toml")
    with pytest.raises(ConfigError, match=r"x\.toml: nodes: ~1\.0e\+3999 nodes would need"):
        parse_scenario("nodes = 1" + "0" * 3999 + "\n", "x.toml")


def test_ketama_continuum_is_counted_before_hashing() -> None:
    servers = [f"10.{i // 62500}.{i // 250 % 250}.{i % 250}:11211" for i in range(110_000)]
    with pytest.raises(ConfigError, match=r"ketama continuum of 110,000 servers would need"):
        ketama(servers)
