"""Ketama against real clients: pylibmc (libmemcached) and nutcracker (twemproxy) over memcached.

Keys are written through the client or proxy; then each memcached is read directly, and the
server that holds a key must be the one ringkit names. Everything runs on loopback.
"""

from __future__ import annotations

import contextlib
import random
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager

import pytest

from ringkit.compat import ketama
from ringkit.compat.hashkit import TWEMPROXY_HASHES
from tests.compat._deps import require
from tests.compat._twemproxy import nutcracker
from tests.servers import Server, memcached_server

WEIGHTS = (1, 2, 3, 5)


def _pylibmc():  # type: ignore[no-untyped-def]
    return require("pylibmc", "pip install pylibmc; it needs libmemcached-dev")


@contextmanager
def _memcacheds(count: int) -> Iterator[list[Server]]:
    with ExitStack() as stack:
        yield [stack.enter_context(memcached_server()) for _ in range(count)]


def _keys(count: int, prefix: str) -> list[str]:
    rng = random.Random(prefix)
    keys = [f"{prefix}:{i}:{rng.getrandbits(48):x}" for i in range(count - 200)]
    # UTF-8 keys (bytes >= 0x80): twemproxy's hashes read them through a signed char.
    return keys + [f"{prefix}:ключ:{i}:é" for i in range(200)]


def _holders(servers: list[Server], keys: list[str]) -> dict[str, str]:
    """Read every memcached directly; return key -> address of the server that holds it."""
    pylibmc = _pylibmc()
    found: dict[str, str] = {}
    for server in servers:
        direct = pylibmc.Client([server.address])
        for start in range(0, len(keys), 1000):
            for key in direct.get_multi(keys[start : start + 1000]):
                assert key not in found, f"{key!r} is on two servers"
                found[key] = server.address
    return found


@pytest.mark.parametrize("variant", ["libmemcached", "spy"])
def test_pylibmc_places_10000_keys_where_ringkit_says(variant: str) -> None:
    pylibmc = _pylibmc()
    behaviors: dict[str, object] = {"ketama_weighted": True}
    if variant == "spy":
        behaviors["distribution"] = "consistent ketama spy"
    with _memcacheds(len(WEIGHTS)) as servers:
        specs = [
            f"{server.address}:{weight}" for server, weight in zip(servers, WEIGHTS, strict=True)
        ]
        client = pylibmc.Client(specs, behaviors=behaviors)
        assert client.behaviors["ketama_weighted"]
        keys = _keys(10_000, variant)
        for start in range(0, len(keys), 1000):
            assert not client.set_multi({key: b"1" for key in keys[start : start + 1000]})
        holders = _holders(servers, keys)
        layout = ketama(
            {server.address: w for server, w in zip(servers, WEIGHTS, strict=True)}, variant=variant
        )
        assert len(holders) == len(keys)
        assert [holders[key] for key in keys] == layout.node_for_many(keys)


def test_nutcracker_places_keys_where_ringkit_says_for_every_key_hash() -> None:
    pylibmc = _pylibmc()
    # 10,000 keys with the default hash (fnv1a_64) and 1,000 with each of the others.
    counts = {name: 10_000 if name == "fnv1a_64" else 1_000 for name in TWEMPROXY_HASHES}
    with _memcacheds(len(WEIGHTS)) as servers:
        lines = [
            f"{server.address}:{w} mc{i}"
            for i, (server, w) in enumerate(zip(servers, WEIGHTS, strict=True))
        ]
        # One pool per key hash; the first server has no alias (its label is host:port).
        lines[0] = lines[0].rsplit(" ", 1)[0]
        pools = {f"pool_{name}": (name, lines) for name in counts}
        with nutcracker(pools) as ports:
            for name, count in counts.items():
                proxy = pylibmc.Client([f"127.0.0.1:{ports[f'pool_{name}']}"])
                keys = _keys(count, name)
                for start in range(0, len(keys), 500):
                    assert not proxy.set_multi({key: b"1" for key in keys[start : start + 500]})
            wrong = {}
            for name, count in counts.items():
                keys = _keys(count, name)
                holders = _holders(servers, keys)
                layout = ketama(",".join(lines), variant="twemproxy", hash=name)
                assert len(holders) == len(keys), name
                ours = layout.node_for_many(keys)
                wrong[name] = sum(
                    holders[key] != mine for key, mine in zip(keys, ours, strict=True)
                )
            assert wrong == dict.fromkeys(counts, 0)


def test_nutcracker_auto_eject_matches_remove() -> None:
    # twemproxy ejects a failing server and rebuilds the continuum over the live ones, weights
    # renormalised: ringkit's layout.remove(server) must then place keys where nutcracker does.
    pylibmc = _pylibmc()
    with _memcacheds(len(WEIGHTS)) as servers:
        lines = [
            f"{s.address}:{w} mc{i}" for i, (s, w) in enumerate(zip(servers, WEIGHTS, strict=True))
        ]
        layout = ketama(",".join(lines), variant="twemproxy")
        dead = servers[2]
        dead.process.terminate()
        dead.process.wait(timeout=10)
        with nutcracker({"pool": ("fnv1a_64", lines)}, auto_eject=True) as ports:
            proxy = pylibmc.Client([f"127.0.0.1:{ports['pool']}"])
            doomed = [k for k in _keys(200, "doomed") if layout.node_for(k) == dead.address]
            # Requests for the dead server's keys fail; the first failure ejects it
            # (server_failure_limit: 1). pylibmc reports some failures as misses, so the proof
            # is below: every later key is stored, on a live server, where remove() says.
            for key in doomed[:5]:
                with contextlib.suppress(pylibmc.Error):
                    proxy.set(key, b"1")
            # Those failures can also mark the proxy itself as failed inside this libmemcached
            # client (per-client state, "disabled until timed retry"): go on with a fresh client.
            proxy = pylibmc.Client([f"127.0.0.1:{ports['pool']}"])
            keys = _keys(5_000, "ejected")
            for start in range(0, len(keys), 500):
                assert not proxy.set_multi({key: b"1" for key in keys[start : start + 500]})
            live = [server for server in servers if server is not dead]
            holders = _holders(live, keys)
        ejected = layout.remove(dead.address)
        assert len(holders) == len(keys)
        assert [holders[key] for key in keys] == ejected.node_for_many(keys)
        # Weights are renormalised over the live servers, so some keys also move between
        # survivors: the rebuild is not "dead server's keys go to the next point" alone.
        before = layout.node_for_many(keys)
        between_live = [
            key for key, old in zip(keys, before, strict=True)
            if old != dead.address and holders[key] != old
        ]  # fmt: skip
        assert between_live
