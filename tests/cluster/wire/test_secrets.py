"""Secrets stay out of views, server keys, files, reprs and errors.

Every test against Redis runs real redis-servers that require the password ``p@ss:w/rd``
(``--requirepass``): the characters a URL's user part cannot hold unencoded.
"""

from __future__ import annotations

import json
import stat
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
import redis

from ringkit import HashRing
from ringkit.cli import main
from ringkit.cluster import ClusterView, EtcdViewStore, ShardedClient
from ringkit.cluster.wire.credentials import PASSWORD_ENV
from ringkit.cluster.wire.urls import parse_url
from ringkit.errors import BackendError, ConfigError
from ringkit.live.urls import parse_store_url
from tests.cluster.helpers import memory_urls
from tests.servers import Server, free_port, redis_server

PASSWORD = "p@ss:w/rd"
ENCODED = quote(PASSWORD, safe="")  # p%40ss%3Aw%2Frd, as redis-py's from_url expects it
# Every form of the secret that must never be shown, and fragments a partial leak would show.
SHOWN_NEVER = (PASSWORD, ENCODED, "p@ss", "w/rd", "p%40ss", "w%2Frd")
NAMES = ("s1", "s2", "s3")

New = Callable[..., Any]


def _leaks(text: str) -> list[str]:
    return [secret for secret in SHOWN_NEVER if secret in text]


def _url(server: Server, *, secret: bool = True) -> str:
    return f"redis://{f':{ENCODED}@' if secret else ''}{server.address}/0"


def _admin(server: Server) -> redis.Redis:
    return redis.Redis(host=server.host, port=server.port, password=PASSWORD)


@pytest.fixture(scope="module")
def locked_trio() -> Iterator[list[Server]]:
    with ExitStack() as stack:
        yield [stack.enter_context(redis_server(password=PASSWORD)) for _ in NAMES]


@pytest.fixture
def locked(locked_trio: list[Server]) -> dict[str, Server]:
    """Three empty redis-servers that require PASSWORD, by server name."""
    for server in locked_trio:
        with _admin(server) as admin:
            admin.flushall()
    return dict(zip(NAMES, locked_trio, strict=True))


def _server_keys(server: Server) -> str:
    """Return every ringkit key of `server` as text: view, audit log, checkpoint, index."""
    parts = []
    with _admin(server) as admin:
        for key in admin.scan_iter(match="ringkit:*"):
            kind = admin.type(key)
            if kind == b"string":
                parts.append(admin.get(key) or b"")
            elif kind == b"list":
                parts.extend(admin.lrange(key, 0, -1))
            elif kind == b"zset":
                parts.extend(admin.zrange(key, 0, -1))
            elif kind == b"hash":
                parts.extend(b"%s=%s" % item for item in admin.hgetall(key).items())
            elif kind == b"set":
                parts.extend(admin.smembers(key))
    return b"\n".join(parts).decode(errors="replace")


# -- a password reaches the server, and nothing else ------------------------------------------


def test_percent_encoded_password_with_at_colon_slash_authenticates(
    new: New, locked: dict[str, Server]
) -> None:
    urls = {name: _url(locked[name]) for name in ("s1", "s2")}
    client = new(HashRing(list(urls)), urls, replicas=2)
    client.set_many({f"k{i}": i for i in range(50)})
    assert client.get_many([f"k{i}" for i in range(50)]) == {f"k{i}": i for i in range(50)}
    assert client.down_servers == []
    assert parse_url(urls["s1"]).password == PASSWORD  # decoded as redis-py decodes it


def test_view_repr_and_json_hold_no_password(new: New) -> None:
    urls = {"a": "redis://admin:hunter2@127.0.0.1:1/0", "b": "memory://item10-view-b"}
    client = new(HashRing(list(urls)), urls)  # nothing is contacted yet
    view = client.view
    for shown in (repr(view), repr(view.servers), view.to_json().decode(), repr(client)):
        assert "hunter2" not in shown and "admin" not in shown.replace("admin:***", ""), shown
    assert view.servers["a"] == "redis://127.0.0.1:1/0"
    assert client.server("a").url.password == "hunter2"  # used to connect, never published


def test_views_and_server_keys_hold_no_secret(new: New, locked: dict[str, Server]) -> None:
    urls = {name: _url(locked[name]) for name in ("s1", "s2")}
    client = new(HashRing(list(urls)), urls, replicas=2)
    client.set_many({f"k{i}": i for i in range(200)})
    report = client.add_server("s3", _url(locked["s3"]))
    assert report.outcome == "done"
    view = client.view
    for shown in (repr(view), repr(view.servers), view.to_json().decode(), repr(client)):
        assert _leaks(shown) == [], shown
    assert dict(view.servers) == {name: _url(locked[name], secret=False) for name in NAMES}
    for name in NAMES:
        held = _server_keys(locked[name])
        assert "ringkit" not in held or _leaks(held) == [], name
        with _admin(locked[name]) as admin:
            published = ClusterView.from_json(admin.get("ringkit:view") or b"")
        assert published.epoch == view.epoch and dict(published.servers) == dict(view.servers)
    assert client.get_many([f"k{i}" for i in range(200)]) == {f"k{i}": i for i in range(200)}


@pytest.mark.parametrize("given", ["default", "name", "address", "environment"])
def test_client_opens_servers_learnt_from_a_view_with_its_credentials(
    new: New, locked: dict[str, Server], given: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = {name: _url(locked[name]) for name in ("s1", "s2")}
    writer = ShardedClient(HashRing(list(first)), first)
    writer.set_many({f"k{i}": i for i in range(100)})
    writer.add_server("s3", _url(locked["s3"]))  # s3 reaches other clients through the view
    writer.close()
    public = {name: _url(locked[name], secret=False) for name in ("s1", "s2")}
    credentials: dict[str, str] | None = {
        "default": {"*": PASSWORD},
        "name": {name: PASSWORD for name in NAMES},
        "address": {locked[name].address: PASSWORD for name in NAMES},
        "environment": None,
    }[given]
    if given == "environment":
        monkeypatch.setenv(PASSWORD_ENV, PASSWORD)
    reader = new(HashRing(list(public)), public, credentials=credentials)
    assert reader.get_many([f"k{i}" for i in range(100)]) == {f"k{i}": i for i in range(100)}
    assert reader.epoch == 3 and "s3" in reader.view.servers and reader.down_servers == []
    assert _leaks(repr(reader)) == []


def test_a_server_without_its_password_says_how_to_give_it(
    new: New, locked: dict[str, Server]
) -> None:
    public = {"s1": _url(locked["s1"], secret=False)}
    client = new(HashRing(list(public)), public)
    with pytest.raises(BackendError, match="AuthenticationError") as caught:
        client.get("k")
    assert "credentials=" in str(caught.value) and "RINGKIT_REDIS_PASSWORD" in str(caught.value)


def test_credentials_are_checked_and_never_shown() -> None:
    urls = memory_urls(2)
    with pytest.raises(ConfigError, match=r"credentials\['s1'\] must be a password"):
        ShardedClient(HashRing(list(urls)), urls, credentials={"s1": 5})  # type: ignore[dict-item]
    with pytest.raises(ConfigError, match="memory:// servers take no password"):
        ShardedClient(HashRing(list(urls)), urls, credentials={"s1": PASSWORD})
    client = ShardedClient(HashRing(list(urls)), urls, credentials={"*": PASSWORD})
    assert _leaks(repr(client._credentials)) == [] and "'*'" in repr(client._credentials)


@pytest.mark.parametrize(
    "text",
    [
        "redis://:zq@xk@h:x/0",  # a literal '@' in the password, and a bad port
        "redis://zquser:zq@xk:vv@h/0",  # no port
        "redis://zq@xk@h:1/0",  # a user part without ':'
        "memcached://:zq@xk@h:11211",  # memcached takes none
        "redis://:zq@xk@h:99999/0",  # port out of range
        "http://:zq@xk@h:1/0",
    ],
)
def test_url_errors_show_no_part_of_the_user_part(text: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_url(text)
    message = str(caught.value)
    assert "zq" not in message and "xk" not in message and "vv" not in message, message
    assert "***@h" in message


@pytest.mark.parametrize(
    "text", ["etcd://ops:zq@xk@h:99999/x", "etcd://ops:zq/xk@h:1/x", "etcd://ops:zq@xk@/x"]
)
def test_store_url_errors_show_no_part_of_the_password(text: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_store_url(text)
    message = str(caught.value)
    assert "zq" not in message and "xk" not in message, message


def test_password_with_a_literal_at_sign_is_used_whole() -> None:
    url = parse_url("redis://admin:zq@xk@h:1/0")
    assert (url.username, url.password, url.host) == ("admin", "zq@xk", "h")
    assert repr(url) == "ServerURL('redis://admin:***@h:1/0')"


def test_rebalance_files_are_0600_and_nothing_shows_the_secret(
    locked: dict[str, Server],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    first = {name: _url(locked[name]) for name in ("s1", "s2")}
    writer = ShardedClient(HashRing(list(first)), first)
    writer.set_many({f"k{i}": i for i in range(100)})
    view_file, audit_file = tmp_path / "view.json", tmp_path / "audit.jsonl"
    view_file.write_text("{}")
    view_file.chmod(0o644)  # an older file's wider mode is not kept
    listing = ",".join(f"{name}={url}" for name, url in first.items())
    command = ["rebalance", "--servers", listing, "--add", f"s3={_url(locked['s3'])}"]
    files = ["--write-view", str(view_file), "--audit", str(audit_file)]
    assert main([*command, *files, "--no-progress", "--json"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out)["outcome"] == "done" and _leaks(out + err) == []
    for written in (view_file, audit_file):
        assert stat.S_IMODE(written.stat().st_mode) == 0o600, written
        assert _leaks(written.read_text()) == [], written
    assert sorted(ClusterView.from_json(view_file.read_bytes()).servers) == list(NAMES)
    # The view file names no secret; this process gives it from the environment.
    monkeypatch.setenv(PASSWORD_ENV, PASSWORD)
    assert main(["rebalance", "--view", str(view_file), "--status", "--json"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out)["epoch"] == 3 and _leaks(out + err) == []
    for server in locked.values():
        assert _leaks(_server_keys(server)) == []
    writer.close()


def test_cli_errors_do_not_echo_secrets(
    locked: dict[str, Server], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["rebalance", "--servers", f"redis://:{ENCODED}@h:1/0", "--status"])
    assert exit_info.value.code == 2
    assert "expected NAME=URL" in (err := capsys.readouterr().err) and _leaks(err) == []
    down = f"redis://:{ENCODED}@127.0.0.1:{free_port()}/0"
    wrong = f"redis://:{quote('p@ss:w/rdX', safe='')}@{locked['s1'].address}/0"
    for url in (f"redis://:{PASSWORD}@h:1/0", f"redis://:{ENCODED}@h:x/0", down, wrong):
        assert main(["rebalance", "--servers", f"s1={url}", "--status"]) == 1
        err = capsys.readouterr().err
        assert err.startswith("ringkit: error:") and _leaks(err) == [], err


# -- bad view JSON and bad file paths are clear errors, never tracebacks ------------------------


def _view_dict() -> dict[str, Any]:
    servers = {"a": "memory://item14-a", "b": "memory://item14-b"}
    return ClusterView(3, HashRing(["a", "b"]), servers, 1).to_dict()


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("replicas", "2", "field 'replicas' must be an int >= 1, got '2'"),
        ("replicas", "two", "field 'replicas' must be an int >= 1, got 'two'"),
        ("replicas", 0, "field 'replicas' must be an int >= 1, got 0"),
        ("epoch", "3", "field 'epoch' must be an int >= 0, got '3'"),
        ("servers", ["memory://a", "memory://b"], "field 'servers' must be a JSON object"),
        ("servers", {"a": 5, "b": "memory://b"}, "field 'servers' must be a JSON object"),
        ("placement", [], "field 'placement' must be a HashRing description"),
        ("change", "add", "field 'change' must be a JSON object"),
        ("state", 1, "field 'state' must be one of stable, moving, rolling_back, got 1"),
        ("previous", [[[]]], "field 'previous' must be a HashRing description"),
    ],
)
def test_view_json_with_a_bad_field_names_it(
    field: str, value: object, message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = _view_dict()
    data[field] = value
    with pytest.raises(ConfigError, match=message):
        ClusterView.from_json(json.dumps(data))
    path = tmp_path / "view.json"
    path.write_text(json.dumps(data))
    assert main(["rebalance", "--view", str(path), "--status"]) == 1
    assert message in capsys.readouterr().err


def test_view_json_nested_too_deeply_is_a_clear_error() -> None:
    with pytest.raises(ConfigError, match="cluster view is not valid JSON: nested too deeply"):
        ClusterView.from_json("[" * 100_000 + "]" * 100_000)


def _memory_cluster() -> tuple[ShardedClient, str, str]:
    urls = memory_urls(3)
    first = {name: urls[name] for name in ("s1", "s2")}
    client = ShardedClient(HashRing(list(first)), first)
    client.set_many({f"k{i}": i for i in range(100)})
    return client, ",".join(f"{n}={u}" for n, u in first.items()), f"s3={urls['s3']}"


@pytest.mark.parametrize("flag", ["--write-view", "--audit"])
@pytest.mark.parametrize("where", ["missing directory", "a directory"])
def test_bad_file_path_fails_before_the_rebalance_starts(
    flag: str, where: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    client, listing, add = _memory_cluster()
    path = tmp_path / "missing" / "out.json" if where == "missing directory" else tmp_path
    assert main(["rebalance", "--servers", listing, "--add", add, flag, str(path)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("ringkit: error: cannot write") and str(path) in err, err
    assert client.refresh_view().epoch == 1  # only the first client's view: nothing moved
    assert client.view.state == "stable" and sorted(client.view.servers) == ["s1", "s2"]


def test_report_is_printed_when_the_view_file_fails_after_the_rebalance(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    client, listing, add = _memory_cluster()
    path = tmp_path / "gone" / "view.json"
    # The directory exists when checked, and is gone by the time the view is written.
    monkeypatch.setattr("ringkit.commands.rebalance.check_view_path", lambda _: None)
    status = main(["rebalance", "--servers", listing, "--add", add, "--write-view", str(path)])
    out, err = capsys.readouterr()
    assert status == 1 and out.startswith("done: epoch 3"), out
    assert f"cannot write file {str(path)!r}" in err
    assert client.refresh_view().epoch == 3


def test_audit_write_failing_midway_keeps_the_rebalance_and_its_report(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    client, listing, add = _memory_cluster()
    audit = tmp_path / "audit.jsonl"
    audit.symlink_to("/dev/full")  # Linux: opens, and every write fails with ENOSPC
    assert main(["rebalance", "--servers", listing, "--add", add, "--audit", str(audit)]) == 0
    out, err = capsys.readouterr()
    assert out.startswith("done: epoch 3") and "warning: cannot append to audit file" in err
    assert client.refresh_view().epoch == 3


# -- upgrading: views an older ringkit stored with secrets are rewritten without them ------------


def _with_secrets(view: ClusterView, urls: dict[str, str]) -> bytes:
    """Return `view` as an older ringkit stored it: JSON with its servers' inline secrets."""
    return json.dumps({**view.to_dict(), "servers": urls}, separators=(",", ":")).encode()


def test_resume_rewrites_a_servers_view_stored_with_secrets(
    locked: dict[str, Server], capsys: pytest.CaptureFixture[str]
) -> None:
    urls = {name: _url(locked[name]) for name in NAMES}
    client = ShardedClient(HashRing(list(urls)), urls)
    client.set_many({f"k{i}": i for i in range(50)})
    client.close()
    listing = ",".join(f"{name}={url}" for name, url in urls.items())
    assert main(["rebalance", "--servers", listing, "--remove", "s3", "--no-progress"]) == 0
    done = ClusterView.from_json(_admin(locked["s1"]).get("ringkit:view") or b"")
    for server in locked.values():
        with _admin(server) as admin:
            admin.set("ringkit:view", _with_secrets(done, urls))
    assert _leaks(_server_keys(locked["s1"])) != []
    capsys.readouterr()
    assert main(["rebalance", "--servers", listing, "--resume", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["outcome"] == "nothing"
    for server in locked.values():
        assert _leaks(_server_keys(server)) == []


def test_etcd_view_stored_with_secrets_is_the_same_view_rewritten(etcd_url: str) -> None:
    store = EtcdViewStore(etcd_url)
    try:
        urls = {"a": "redis://:hunter2@127.0.0.1:7001/0", "b": "redis://:hunter2@127.0.0.1:7002/0"}
        view = ClusterView(3, HashRing(["a", "b"]), urls)
        swapped, _ = store.backend.swap(store.key, _with_secrets(view, urls), 0, 0)
        assert swapped
        store.publish(view)  # the same view: no conflict, and stored without the secret
        _, records = store.backend.get_prefix(store.key)
        assert records and all(b"hunter2" not in record.value for record in records)
        assert store.load() == view
    finally:
        store.close()
