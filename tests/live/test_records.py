"""Records are input: a bad or foreign record under the prefix is skipped, never obeyed.

Each record is written straight through the service's API, as an operator's ``etcdctl put``
would. A store that is running keeps following the ring, a store that connects afterwards
starts, both skip the same record (listed in ``snapshot.skipped``) and hold the same ring.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ringkit.live
from ringkit.errors import ConfigError
from ringkit.live import Snapshot, Store
from ringkit.live.records import decode_member_record
from ringkit.live.snapshot import MemberInfo

pytestmark = pytest.mark.timeout(60)


def put(store: Store, key: str, value: bytes) -> int:
    """Write `key` without a lease, whatever is there; return the revision of the write."""
    ok, record = store.backend.put_unless_newer(store.prefix + key, value, 2**62)
    assert ok
    return record.mod_revision


def member_json(name: str, **changed: object) -> bytes:
    info = MemberInfo(name, "active", None, 1.0, None, (11, 22, 33), 5.0, 0, "etcdctl")
    fields = json.loads(info.encode())
    fields.update(changed)
    return json.dumps(fields).encode()


BAD_RECORDS = {
    "negative weight": ("members/bad", member_json("bad", weight=-1), "finite weight > 0"),
    "zone a list": ("members/bad", member_json("bad", zone=["z1"]), "zone that is a name"),
    "negative token": ("members/bad", member_json("bad", tokens=[-5]), "got -5"),
    "token 2**64": ("members/bad", member_json("bad", tokens=[2**64]), "in [0, 2**64)"),
    "weight nan": ("members/bad", member_json("bad", weight="nan"), "got 'nan'"),
    "token 1e400": (
        "members/bad",
        member_json("bad").replace(b"[11, 22, 33]", b"[1e400]"),
        "got inf",
    ),
    "table a list": ("table", b"[]", "table record"),
    "not JSON": ("members/bad", b"\xff{not json", "must be JSON"),
}


@pytest.mark.parametrize("variant", sorted(BAD_RECORDS))
def test_a_bad_record_is_skipped_and_the_ring_goes_on(store_url: str, variant: str) -> None:
    key, value, reason = BAD_RECORDS[variant]
    with ringkit.live.connect(store_url) as running:
        a = running.join("a", ttl_s=5)
        revision = put(running, key, value)
        running.wait_for(lambda s: s.revision >= revision)
        # A store that connects now starts (it used to raise), and both follow later changes.
        with ringkit.live.connect(store_url) as fresh:
            b = fresh.join("b", ttl_s=5)
            seen = running.wait_for(lambda s: "b" in s.ring)
            snap = fresh.wait_for(lambda s: s.revision >= seen.revision)
            assert set(snap.ring) == set(seen.ring) == {"a", "b"}
            assert snap.ring == seen.ring
            for store_snap in (snap, seen):
                assert [r.key for r in store_snap.skipped] == [running.prefix + key]
                assert reason in store_snap.skipped[0].reason, store_snap.skipped[0].reason
            assert a.owns("k") != b.owns("k")
            b.close()
        # Deleting the bad record clears it from every snapshot.
        running.backend.delete(running.prefix + key)
        running.wait_for(lambda s: not s.skipped)
        with ringkit.live.connect(store_url) as later:
            assert not later.snapshot().skipped and list(later.snapshot().ring) == ["a"]
        a.close()


def test_a_record_naming_another_member_is_skipped_by_every_store(store_url: str) -> None:
    """A record at members/zzz that says it is w1 must not compete with w1's own record."""
    with ringkit.live.connect(store_url) as running:
        w1 = running.join("w1", ttl_s=5)
        running.join("w2", ttl_s=5)
        revision = put(running, "members/zzz", member_json("w1", tokens=[5, 6, 7]))
        followed = running.wait_for(lambda s: s.revision >= revision)
        with ringkit.live.connect(store_url) as late:
            snap = late.snapshot()
            assert snap.ring == followed.ring and set(snap.ring) == {"w1", "w2"}
            assert snap.members["w1"].tokens == w1.info.tokens
            for each in (snap, followed):
                assert [r.key for r in each.skipped] == [running.prefix + "members/zzz"]
                assert "must name the member its key names ('zzz'), got 'w1'" in (
                    each.skipped[0].reason
                )
        w1.close()


def test_ring_status_counts_skipped_records(
    store_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from ringkit.cli import main

    with ringkit.live.connect(store_url) as store, store.join("a", ttl_s=5):
        revision = put(store, "members/bad", member_json("bad", weight=-1))
        store.wait_for(lambda s: s.revision >= revision)
        assert main(["ring", "status", "--store", store_url]) == 0
        out = capsys.readouterr().out
        assert "1 records skipped" in out and f"{store.prefix}members/bad" in out
        assert main(["ring", "status", "--store", store_url, "--json"]) == 0
        report = json.loads(capsys.readouterr().out)
        assert [r["key"] for r in report["skipped"]] == [f"{store.prefix}members/bad"]


def test_ring_status_counts_invalid_release_records_with_the_others(
    store_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from ringkit.cli import main

    with ringkit.live.connect(store_url) as store, store.join("a", ttl_s=5):
        put(store, "members/bad", member_json("bad", weight=-1))
        put(store, "_released/a", b'{"name": "a", "epoch": -5}')
        revision = put(store, "_released/b", b'{"name": "someone else", "epoch": 3}')
        assert main(["ring", "status", "--store", store_url]) == 0
        out = capsys.readouterr().out
        assert "3 records skipped" in out, out
        assert "_released/a: release mark epoch must be an int >= 0, got -5" in out, out
        assert main(["ring", "status", "--store", store_url, "--json"]) == 0
        report = json.loads(capsys.readouterr().out)
        expected = [f"{store.prefix}{key}" for key in ("_released/a", "_released/b", "members/bad")]
        assert [r["key"] for r in report["skipped"]] == expected
        assert report["skipped"][1]["mod_revision"] == revision
        # A store reads the marks when it connects (and while a member waits): one connected
        # now forgets one once it is valid or deleted.
        put(store, "_released/a", b'{"name": "a", "epoch": 1}')
        store.backend.delete(store.prefix + "_released/b")
        with ringkit.live.connect(store_url) as later:
            later.wait_for(lambda s: len(later.skipped_records()) == 1)
            assert [r.key for r in later.skipped_records()] == [f"{store.prefix}members/bad"]


def test_a_join_that_times_out_revokes_its_lease(
    store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with ringkit.live.connect(store_url) as store:

        def never(*_args: object, **_kwargs: object) -> object:
            raise TimeoutError("no snapshot satisfied the condition")

        monkeypatch.setattr(store, "wait_for", never)
        with pytest.raises(TimeoutError):
            store.join("a", ttl_s=30)
        monkeypatch.undo()
        # The record is gone at once, not after its 30 s lease: the name is free again.
        _, records = store.backend.get_prefix(store.prefix + "members/")
        assert records == []
        store.join("a", ttl_s=5).close()


def test_a_new_store_starts_from_the_current_members_not_history(store_url: str) -> None:
    """Ghosts: members that left long ago are never replayed to a store that connects now."""
    with ringkit.live.connect(store_url) as first:
        for name in ("a", "b", "c"):
            first.join(name, ttl_s=5).leave()
        first.wait_for(lambda s: not s.members)
    with ringkit.live.connect(store_url) as fresh, ringkit.live.connect(store_url) as other:
        changes: list[ringkit.live.Change] = []
        fresh.subscribe(changes.append)
        assert not fresh.snapshot().members and fresh.snapshot().epoch > 0
        d = other.join("d", ttl_s=5)
        snap = fresh.wait_for(lambda s: len(s.ring) > 0)
        assert list(snap.ring) == ["d"]
        fresh.wait_delivered(snap.epoch)
        assert [sorted(c.new.members) for c in changes] == [["d"]]
        d.close()


_json = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False)
    | st.text(max_size=4),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=8,
)
_fields = st.fixed_dictionaries(
    {},
    optional={
        "name": st.sampled_from(["a", "b"]) | _json,
        "state": st.sampled_from(["joining", "active", "leaving"]) | _json,
        "zone": st.sampled_from([None, "z1"]) | _json,
        "weight": st.floats(min_value=0.1, max_value=10) | _json,
        "data": _json,
        "tokens": st.lists(st.integers(0, 2**64 - 1), min_size=1, max_size=6) | _json,
        "ttl_s": st.floats(min_value=1, max_value=60) | _json,
        "holder": st.text(max_size=4) | _json,
    },
)


@settings(max_examples=200, deadline=None)
@given(records=st.lists(_fields | st.binary(max_size=40).map(lambda raw: {"raw": raw}), max_size=3))
def test_any_record_is_decoded_or_skipped_and_the_ring_always_builds(
    records: list[dict[str, object]],
) -> None:
    """Whatever bytes sit under members/, decoding refuses with ConfigError or the ring builds."""
    members: dict[str, MemberInfo] = {}
    for index, fields in enumerate(records):
        key = f"/p/members/{'ab'[index % 2]}{index}"
        raw = fields.get("raw")
        value = raw if isinstance(raw, bytes) else json.dumps(fields).encode()
        try:
            info = decode_member_record(key, value, 0, "/p/members/")
        except ConfigError:
            continue
        assert info.name == key.rsplit("/", 1)[1]
        members[info.name] = info
    snapshot = Snapshot.build(1, members, None)
    assert set(snapshot.active) <= set(members)


@settings(max_examples=100, deadline=None)
@given(
    tokens=st.lists(st.integers(0, 2**64 - 1), min_size=1, max_size=8, unique=True),
    weight=st.floats(min_value=0.01, max_value=100),
    zone=st.sampled_from([None, "z1"]),
)
def test_a_record_ringkit_writes_is_read_back_exactly(
    tokens: list[int], weight: float, zone: str | None
) -> None:
    info = MemberInfo("w1", "active", zone, weight, {"k": [1]}, tuple(sorted(tokens)), 5.0, 9, "h")
    assert decode_member_record("/p/members/w1", info.encode(), 9, "/p/members/") == info
