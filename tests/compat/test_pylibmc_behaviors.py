"""from_pylibmc_behaviors against a real pylibmc client over real memcached servers.

Keys are written through pylibmc with the behaviors under test; each memcached is then read
directly, and the server holding each key must be the one the returned layout names.
"""

from __future__ import annotations

import pytest

from ringkit.compat import from_pylibmc_behaviors
from ringkit.errors import ConfigError
from tests.compat.test_ketama_clients import _holders, _keys, _memcacheds, _pylibmc

WEIGHTS = (1, 2, 3, 5)


@pytest.mark.parametrize(
    ("behaviors", "weighted"),
    [
        ({"ketama": True}, False),
        ({"ketama": True, "hash": "fnv1a_32", "tcp_nodelay": True}, False),
        ({"hash": "crc", "ketama_weighted": True}, True),  # ketama_weighted sets md5 over crc
        ({"ketama": True, "distribution": "consistent ketama spy"}, False),
    ],
    ids=["ketama", "ketama-fnv1a_32", "weighted-crc-overridden", "spy"],
)
def test_pylibmc_plain_ketama_placement_reproduced_from_its_behaviors(
    behaviors: dict[str, object], weighted: bool
) -> None:
    # Regression: the CLI and docs assumed weighted ketama, which agreed with a
    # pylibmc client using behaviors={"ketama": True} on 21 of 60 keys.
    pylibmc = _pylibmc()
    with _memcacheds(len(WEIGHTS)) as servers:
        specs = [
            f"{server.address}:{weight}" if weighted else server.address
            for server, weight in zip(servers, WEIGHTS, strict=True)
        ]
        client = pylibmc.Client(specs, behaviors=behaviors)
        keys = _keys(5_000, "-".join(map(str, behaviors)))
        for start in range(0, len(keys), 1000):
            assert not client.set_multi({key: b"1" for key in keys[start : start + 1000]})
        holders = _holders(servers, keys)
    layout = from_pylibmc_behaviors(specs, behaviors)
    assert len(holders) == len(keys)
    assert [holders[key] for key in keys] == layout.node_for_many(keys)


@pytest.mark.parametrize(
    ("behaviors", "message"),
    [
        ({}, r"pylibmc behavior distribution='modula' places keys without ketama"),
        ({"ketama": True, "distribution": "random"}, r"distribution='random' places keys"),
        ({"ketama": True, "hash": "hsieh"}, r"pylibmc behavior hash='hsieh' is not reproduced"),
        ({"ketama": True, "ketama_hash": "crc"}, r"ketama_hash='crc' is not reproduced"),
        ({"ketama": True, "_sort_hosts": 1}, r"pylibmc behaviors '_sort_hosts' change placement"),
        ({"ketama": True, "ketamma": 1}, r"pylibmc behaviors 'ketamma' change placement or are"),
    ],
)
def test_from_pylibmc_behaviors_refuses_what_it_cannot_reproduce_by_name(
    behaviors: dict[str, object], message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        from_pylibmc_behaviors(["a:11211", "b:11211"], behaviors)


def test_from_pylibmc_behaviors_weights_need_weighted_ketama() -> None:
    with pytest.raises(ConfigError, match=r"server weights need weighted ketama, got weights on"):
        from_pylibmc_behaviors(["a:11211:2", "b:11211"], {"ketama": True})
    assert from_pylibmc_behaviors(["a:11211:2", "b:11211"], {"ketama_weighted": True}).node_for("k")
