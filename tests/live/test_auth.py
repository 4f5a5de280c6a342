"""etcd's user/password authentication through an ``etcd://user:password@…`` URL."""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

import ringkit.live
from ringkit.errors import BackendError
from tests.servers import EtcdCluster, etcd_server

pytestmark = pytest.mark.timeout(60)


def _gateway(cluster: EtcdCluster, path: str, body: dict[str, object]) -> None:
    """POST to etcd's v3 JSON gateway (user and role administration, as etcdctl does)."""
    request = urllib.request.Request(
        f"http://127.0.0.1:{cluster.client_ports[0]}/v3/{path}",
        data=json.dumps(body).encode(),
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=5) as reply:
        reply.read()


@pytest.fixture
def secured() -> Iterator[EtcdCluster]:
    # Tokens expire after 1 s idle here (300 s by default), so a test can outlive one.
    with etcd_server(("--auth-token-ttl", "1")) as cluster:
        _gateway(cluster, "auth/user/add", {"name": "root", "password": "s3cret"})
        _gateway(cluster, "auth/user/grant", {"user": "root", "role": "root"})
        _gateway(cluster, "auth/enable", {})
        yield cluster


def test_a_member_joins_with_user_and_password(secured: EtcdCluster) -> None:
    url = f"etcd://root:s3cret@{secured.endpoints}/auth"
    with ringkit.live.connect(url) as store:
        member = store.join("a", ttl_s=2)
        assert list(store.snapshot().ring) == ["a"] and member.owns("k")


def test_a_wrong_password_is_a_backend_error(secured: EtcdCluster) -> None:
    with pytest.raises(BackendError, match=r"must accept user 'root', got: .*authentication"):
        ringkit.live.connect(f"etcd://root:wrong@{secured.endpoints}/auth")


def test_an_expired_token_is_renewed(secured: EtcdCluster) -> None:
    import time

    url = f"etcd://root:s3cret@{secured.endpoints}/auth"
    with ringkit.live.connect(url) as store, ringkit.live.connect(url) as watcher:
        time.sleep(2.5)  # both stores idle: their tokens expire
        member = store.join("late", ttl_s=2)
        watcher.wait_for(lambda s: "late" in s.ring, timeout_s=10)
        assert member.owns("k")


def test_repr_never_shows_the_password(secured: EtcdCluster) -> None:
    with ringkit.live.connect(f"etcd://root:s3cret@{secured.endpoints}/auth") as store:
        assert "s3cret" not in repr(store) and "root" not in repr(store)
        assert secured.endpoints in repr(store)


def test_the_cli_reads_the_password_from_a_file_or_the_environment(
    secured: EtcdCluster,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Never only from argv, where every user of ``ps`` reads it."""
    from ringkit.cli import main

    url = f"etcd://root@{secured.endpoints}/auth"
    secret = tmp_path / "password"
    secret.write_text("s3cret\n")
    assert main(["ring", "status", "--store", url, "--etcd-password-file", str(secret)]) == 0
    assert "no members" in capsys.readouterr().out
    monkeypatch.setenv("RINGKIT_ETCD_PASSWORD", "s3cret")
    assert main(["ring", "status", "--store", url, "--json"]) == 0
    assert '"epoch"' in capsys.readouterr().out
    monkeypatch.delenv("RINGKIT_ETCD_PASSWORD")
    assert main(["ring", "status", "--store", url]) == 1
    error = capsys.readouterr().err
    assert "etcd user 'root' needs a password" in error and "RINGKIT_ETCD_PASSWORD" in error
