"""``ringkit lookup --mode``: each system's placement from the command line."""

from __future__ import annotations

import json

import pytest

from ringkit.cli import main
from ringkit.compat import ketama
from tests.compat.ketama_vectors import SERVERS


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    status = main(["lookup", *argv])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def test_libmemcached_mode_prints_owner_hash_and_point(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = _run(capsys, "D[HE+cFXDK", "--mode", "libmemcached", "--servers", SERVERS)
    assert status == 0
    # libmemcached's vector: key hash 2117036136, continuum point 2117124014, server 10.0.1.3.
    assert f"hash     0x{2117036136:08x}" in out
    assert f"point    0x{2117124014:08x}" in out
    assert "owner    10.0.1.3:11211" in out


def test_wraparound_is_reported(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = _run(
        capsys, "VDEAAAAA", "--mode", "libmemcached", "--servers", SERVERS, "--json"
    )
    report = json.loads(out)
    assert status == 0 and report["wrapped"] and report["point_index"] == 0
    assert report["hash"] == "0xfffcd1b5"


@pytest.mark.parametrize(
    ("argv", "owner"),
    [
        (["--mode", "spy", "--servers", SERVERS], "10.0.1.5:11211"),
        (["--mode", "twemproxy", "--key-hash", "md5", "--servers", "a:1:1 x,b:2:1 y"], None),
        (["--mode", "envoy", "--servers", "127.0.0.1:90,127.0.0.1:91 2"], None),
        (["--mode", "cassandra", "--servers", "n1=-6000000000000000000,n2=0,n3=1"], None),
        (["--mode", "redis", "--servers", "a=0-8191,b=8192-16383"], "b"),
    ],
)
def test_other_modes(
    capsys: pytest.CaptureFixture[str], argv: list[str], owner: str | None
) -> None:
    key = "D[HE+cFXDK" if "spy" in argv else "key"
    status, out, err = _run(capsys, key, *argv, "--json")
    assert status == 0, err
    report = json.loads(out)
    assert report["owner"] == (owner or report["replicas"][0])


def test_cassandra_mode_lists_replicas(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = _run(
        capsys,
        "123",
        "--mode",
        "cassandra",
        "--replicas",
        "2",
        "--servers",
        "n1=-6000000000000000000,n2=0,n3=6000000000000000000",
    )
    assert status == 0
    assert "hash     -7468325962851647638" in out and "replicas n1, n2" in out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--mode", "libmemcached"], "--mode libmemcached needs --servers"),
        (["--servers", "a:1"], "--servers is for the compatibility modes"),
        (["--mode", "libmemcached", "--servers", "a:1 0"], "must be a whole number >= 1, got 0"),
        (
            ["--mode", "twemproxy", "--servers", "a:1", "--key-hash", "sha9"],
            "unknown key hash 'sha9'; known: crc16",
        ),
        (["--mode", "envoy", "--servers", "a:1 x"], "unparsable --servers item 'a:1 x'"),
        (["--mode", "redis", "--servers", "a"], "unparsable --servers item 'a'; expected 'node="),
        (
            ["--mode", "redis", "--servers", "a=0-1", "--key-hash", "md5"],
            "--key-hash is for libmemcached, spy and twemproxy, not 'redis'",
        ),
    ],
)
def test_bad_arguments(capsys: pytest.CaptureFixture[str], argv: list[str], message: str) -> None:
    status, _, err = _run(capsys, "k", *argv)
    assert status == 1
    assert message in err and err.startswith("ringkit: error: ")


def test_compat_report_refuses_an_unknown_mode() -> None:
    from ringkit.commands.compat_lookup import compat_report
    from ringkit.errors import ConfigError

    with pytest.raises(ConfigError, match="unknown mode 'memcache'; known: ring, libketama"):
        compat_report("memcache", "a:1", "k", 1)


# -- plain (unweighted) ketama from the command line, and pasted ellipses --------------------

_PLAIN = "cache-a:11211,cache-b:11212,cache-c:22122"


def test_lookup_libmemcached_assumed_weighted_ketama_now_unweighted_flag_matches_libmemcached(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # Regression: against plain ketama (pylibmc behaviors={"ketama": True}) the CLI
    # agreed on 21 of 60 keys, having no way to ask for it.
    from ringkit.commands.compat_lookup import compat_report
    from tests.compat import _libmemcached as lm

    keys = [f"user:{i}:{i * 7919 % 10007:x}" for i in range(10_000)]
    behaviors = [(lm.BEHAVIOR_DISTRIBUTION, lm.DISTRIBUTION_CONSISTENT_KETAMA)]
    with lm.client(_PLAIN, behaviors) as real:
        expected = real.servers_for(key.encode() for key in keys)
    # The CLI itself on the symptom's 60 keys, then the report it prints on all 10,000.
    for key, server in zip(keys[:60], expected, strict=False):
        status, out, _ = _run(
            capsys, key, "--mode", "libmemcached", "--unweighted", "--servers", _PLAIN, "--json"
        )
        assert status == 0 and json.loads(out)["owner"] == server, key
    # The report builds the continuum for its one key (2-3 ms): on 500 keys; the layout it
    # builds, once, on all 10,000.
    reports = [compat_report("libmemcached", _PLAIN, k, 1, weighted=False) for k in keys[:500]]
    assert [report["owner"] for report in reports] == expected[:500]
    layout = ketama(_PLAIN, variant="libmemcached", weighted=False)
    assert [layout.node_for(key) for key in keys] == expected


def test_lookup_unweighted_flag_refused_outside_libmemcached_and_spy(
    capsys: pytest.CaptureFixture[str],
) -> None:
    status, _, err = _run(
        capsys, "k", "--mode", "twemproxy", "--unweighted", "--servers", "a:1:1 mc1"
    )
    assert status == 1
    assert "--unweighted is for libmemcached and spy, not 'twemproxy'" in err


@pytest.mark.parametrize("placeholder", ["…", "...", " … "])
def test_lookup_servers_with_pasted_ellipsis_is_a_clear_error(
    capsys: pytest.CaptureFixture[str], placeholder: str
) -> None:
    # Regression: the docs' "10.0.1.1:11211 600,…" took "…" as a server name.
    servers = f"10.0.1.1:11211 600,{placeholder}"
    status, out, err = _run(capsys, "k", "--mode", "libmemcached", "--servers", servers)
    assert status == 1 and out == ""
    assert f"--servers item {placeholder.strip()!r} is a placeholder, not a server" in err
    assert "list every server" in err


def test_ketama_server_spec_ellipsis_is_a_clear_error() -> None:
    from ringkit.compat import ketama
    from ringkit.errors import ConfigError

    with pytest.raises(ConfigError, match=r"server spec '\.\.\.' is a placeholder, not a server"):
        ketama(["10.0.1.1:11211", "..."])
