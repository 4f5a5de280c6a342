"""The pool and the id table: who is proxied with what weight, and ids that never collide."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ringkit.errors import ConfigError
from ringkit.lb import (
    HAPROXY_WEIGHTS,
    MAX_SERVER_ID,
    NGINX_WEIGHTS,
    PoolServer,
    assign_ids,
    ids_key,
    proxied,
    read_ids,
    render_upstream,
)
from ringkit.live import MemberInfo
from ringkit.live.memory import MemoryBackend
from tests.hypothesis_profiles import examples

_names = itertools.count()


def member(
    name: str, *, weight: float = 1.0, data: object = None, state: str = "active"
) -> MemberInfo:
    if data is None:
        data = {"address": f"127.0.0.1:{8000 + len(name)}"}
    return MemberInfo(name, state, None, weight, data, (), 5.0, 1)


def test_members_with_an_address_are_proxied_and_others_refused_by_name() -> None:
    pool = proxied(
        {
            "a": member("a"),
            "b": member("b", data={"zone": "x"}),
            "c": member("c", data={"address": "no-port"}),
            "d": member("d", state="leaving"),
            "e": member("e", state="joining"),
        },
        weights=HAPROXY_WEIGHTS,
    )
    assert [s.member for s in pool.servers] == ["a"]
    assert pool.leaving == {"d"}
    assert set(pool.refused) == {"b", "c"}
    assert "member 'b' must have data {'address': 'host:port'}" in pool.refused["b"]
    assert "'no-port'" in pool.refused["c"]


@pytest.mark.parametrize("weight", [0.5, 257.0, 0.0, 1.5])
def test_a_weight_haproxy_cannot_take_refuses_the_pool_naming_the_member(weight: float) -> None:
    with pytest.raises(ConfigError, match=r"member 'w' weight must be an integer in \[1, 256\]"):
        proxied({"w": member("w", weight=weight)}, weights=HAPROXY_WEIGHTS)


def test_weight_scale_sends_rounded_scaled_weights() -> None:
    pool = proxied(
        {"a": member("a", weight=0.5), "b": member("b", weight=1.26)},
        weights=HAPROXY_WEIGHTS,
        weight_scale=10,
    )
    assert [s.weight for s in pool.servers] == [5, 13]
    with pytest.raises(ConfigError, match=r"member 'a' .* weight_scale 1000 = 500"):
        proxied({"a": member("a", weight=0.5)}, weights=HAPROXY_WEIGHTS, weight_scale=1000)


def test_nginx_takes_any_integer_weight_from_one() -> None:
    pool = proxied({"a": member("a", weight=1000.0)}, weights=NGINX_WEIGHTS)
    assert pool.servers[0].weight == 1000
    with pytest.raises(ConfigError, match=r"member 'a' weight must be an integer in >= 1"):
        proxied({"a": member("a", weight=2.5)}, weights=NGINX_WEIGHTS)


def test_render_upstream_writes_one_server_line_per_member() -> None:
    text = render_upstream([PoolServer("a", "10.0.0.1:80", 1), PoolServer("b", "[::1]:81", 3)])
    assert text.splitlines()[1:] == [
        "server 10.0.0.1:80 weight=1;  # member a",
        "server [::1]:81 weight=3;  # member b",
    ]


def test_ids_key_refuses_a_backend_name_with_a_slash() -> None:
    with pytest.raises(ConfigError, match=r"backend name must be .* got 'a/b'"):
        ids_key("/p/", "a/b")


def _table() -> tuple[MemoryBackend, str]:
    """The shared memory:// service (each one starts a thread) and a fresh id table key."""
    return MemoryBackend.named("lb-ids-tests"), f"/p{next(_names)}/lb/be/ids"


def test_ids_are_kept_per_member_and_lowest_free_first() -> None:
    backend, key = _table()
    first = assign_ids(backend, key, wanted=["a", "b"], alive={"a": 1, "b": 2}, revision=2)
    assert dict(first.ids) == {"a": 1, "b": 2}
    again = assign_ids(backend, key, wanted=["b", "a"], alive={"a": 1, "b": 2}, revision=5)
    assert dict(again.ids) == {"a": 1, "b": 2}
    reserved = assign_ids(
        backend, key, wanted=["a", "b", "c"], alive={"a": 1, "b": 2, "c": 6}, revision=6,
        reserved={3},
    )  # fmt: skip
    assert reserved.ids["c"] == 4


def test_an_id_is_reused_only_after_its_member_has_gone() -> None:
    backend, key = _table()
    assign_ids(backend, key, wanted=["a", "b"], alive={"a": 1, "b": 2}, revision=2)
    # A controller whose read is older than b's record cannot drop b.
    stale = assign_ids(backend, key, wanted=["a", "c"], alive={"a": 1, "c": 1}, revision=1)
    assert stale.ids["c"] == 3
    # Gone at a later revision, but its server is still in the proxy: kept.
    held = assign_ids(backend, key, wanted=["a"], alive={"a": 1}, revision=9, in_proxy={"b"})
    assert "b" in held.ids
    gone = assign_ids(backend, key, wanted=["a", "d"], alive={"a": 1, "d": 10}, revision=10)
    assert gone.ids == {"a": 1, "d": 2}
    assert read_ids(backend, key)[0].keys() == {"a", "d"}


def test_slots_hand_out_only_the_declared_ids() -> None:
    backend, key = _table()
    result = assign_ids(
        backend, key, wanted=["a", "b", "c"], alive={"a": 1, "b": 1, "c": 1}, revision=1,
        choices={101, 102},
    )  # fmt: skip
    assert dict(result.ids) == {"a": 101, "b": 102}
    assert result.unplaced == ("c",)


def test_max_server_id_keeps_haproxy_points_within_32_bits() -> None:
    assert MAX_SERVER_ID * 4096 + 4095 < 2**32


@settings(max_examples=examples(60))
@given(
    st.lists(
        st.tuples(st.sampled_from(["join", "leave"]), st.sampled_from("abcdefg"), st.booleans()),
        max_size=30,
    )
)
def test_two_controllers_never_give_one_id_to_two_live_members(
    events: list[tuple[str, str, bool]],
) -> None:
    """Members join and leave; two controllers (one reading a revision behind) allocate."""
    backend, key = _table()
    alive: dict[str, int] = {}
    history: list[dict[str, int]] = [{}]
    for revision, (kind, name, stale) in enumerate(events, start=1):
        if kind == "join" and name not in alive:
            alive[name] = revision
        elif kind == "leave":
            alive.pop(name, None)
        history.append(dict(alive))
        seen_at = revision - 1 if stale else revision
        seen = history[seen_at]
        result = assign_ids(backend, key, wanted=seen, alive=seen, revision=seen_at)
        table = read_ids(backend, key)[0]
        live_ids = [table[n]["id"] for n in alive if n in table]
        assert len(live_ids) == len(set(live_ids)), (table, alive)
        assert all(1 <= i <= MAX_SERVER_ID for i in result.ids.values())
