"""``etcds://``: a live ring over an etcd that serves its clients with TLS, as production ones do.

The certificates are made here with the openssl command line: a CA, a server certificate for
127.0.0.1 signed by it, and a client certificate for etcd's ``--client-cert-auth``.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

import ringkit.live
from ringkit.errors import BackendError, ConfigError
from tests.servers import EtcdTLS, etcd_cluster, require_binary

pytestmark = pytest.mark.timeout(90)


@dataclass(frozen=True)
class Certificates:
    ca: Path
    server: tuple[Path, Path]
    client: tuple[Path, Path]


def _sign(openssl: str, directory: Path, name: str, subject: str, extension: str) -> None:
    """Make `name`.key and `name`.pem, signed by the CA in `directory`."""
    key, request, certificate = (directory / f"{name}.{ext}" for ext in ("key", "csr", "pem"))
    extensions = directory / f"{name}.ext"
    extensions.write_text(extension + "\n")
    subprocess.run(
        [openssl, "req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
         "-nodes", "-keyout", key, "-out", request, "-subj", subject],
        check=True, capture_output=True,
    )  # fmt: skip
    subprocess.run(
        [openssl, "x509", "-req", "-in", request, "-CA", directory / "ca.pem",
         "-CAkey", directory / "ca.key", "-CAcreateserial", "-out", certificate, "-days", "1",
         "-extfile", extensions],
        check=True, capture_output=True,
    )  # fmt: skip


@pytest.fixture(scope="module")
def certificates(tmp_path_factory: pytest.TempPathFactory) -> Certificates:
    openssl = require_binary("openssl", "openssl")
    directory = tmp_path_factory.mktemp("tls")
    subprocess.run(
        [openssl, "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
         "-nodes", "-keyout", directory / "ca.key", "-out", directory / "ca.pem", "-days", "1",
         "-subj", "/CN=ringkit test CA"],
        check=True, capture_output=True,
    )  # fmt: skip
    _sign(openssl, directory, "server", "/CN=127.0.0.1", "subjectAltName=IP:127.0.0.1")
    _sign(openssl, directory, "client", "/CN=ringkit", "extendedKeyUsage=clientAuth")
    return Certificates(
        directory / "ca.pem",
        (directory / "server.pem", directory / "server.key"),
        (directory / "client.pem", directory / "client.key"),
    )


@pytest.fixture(scope="module")
def tls_etcd_url(certificates: Certificates) -> Iterator[str]:
    """An etcd serving TLS with a certificate the system does not trust (our own CA)."""
    cert, key = certificates.server
    with etcd_cluster(1, tls=EtcdTLS(str(cert), str(key))) as cluster:
        yield cluster.url("tls")


def test_etcds_with_the_servers_ca_joins_and_watches(
    tls_etcd_url: str, certificates: Certificates
) -> None:
    url = f"{tls_etcd_url}?ca={certificates.ca}"
    with (
        ringkit.live.connect(url) as watcher,
        ringkit.live.connect(url) as store,
        store.join("a", ttl_s=5),
        store.join("b", ttl_s=5),
    ):
        seen = watcher.wait_for(lambda s: set(s.ring) == {"a", "b"}, timeout_s=10)
        assert {info.state for info in seen.members.values()} == {"active"}


def test_etcds_without_the_ca_is_refused_naming_the_host_and_cause(tls_etcd_url: str) -> None:
    """The system CAs do not know ours: the handshake fails, and the message says so."""
    with pytest.raises(
        BackendError, match=r"etcd at 127\.0\.0\.1:\d+ is unreachable over TLS: .*unknown CA"
    ):
        ringkit.live.connect(tls_etcd_url)


def test_a_certificate_for_another_name_is_a_name_mismatch(
    tls_etcd_url: str, certificates: Certificates
) -> None:
    """The server's certificate names 127.0.0.1 only: reached as localhost, it must not pass."""
    url = tls_etcd_url.replace("127.0.0.1", "localhost") + f"?ca={certificates.ca}"
    with pytest.raises(BackendError, match=r"etcd at localhost:\d+ .*\(name mismatch\)"):
        ringkit.live.connect(url)


@pytest.mark.parametrize("what", ["ca", "cert", "key"])
def test_a_file_that_is_not_pem_is_a_config_error_naming_it(
    tls_etcd_url: str, certificates: Certificates, what: str
) -> None:
    """``?ca=/dev/zero`` never ends: it is refused after a bounded read, not a MemoryError."""
    files = {"ca": str(certificates.ca), "cert": str(certificates.client[0]),
             "key": str(certificates.client[1])}  # fmt: skip
    files[what] = "/dev/zero"
    query = "&".join(f"{name}={path}" for name, path in files.items())
    with pytest.raises(ConfigError, match=rf"{what} file must be a PEM .*, got '/dev/zero'"):
        ringkit.live.connect(f"{tls_etcd_url}?{query}")


def test_a_missing_ca_file_is_a_config_error_naming_it(tls_etcd_url: str) -> None:
    with pytest.raises(ConfigError, match=r"ca file must be readable, got '/nonexistent/ca\.pem'"):
        ringkit.live.connect(f"{tls_etcd_url}?ca=/nonexistent/ca.pem")


def test_client_certificate_auth(certificates: Certificates) -> None:
    cert, key = certificates.server
    demanding = EtcdTLS(str(cert), str(key), trusted_ca_file=str(certificates.ca))
    with etcd_cluster(1, tls=demanding) as cluster:
        client_cert, client_key = certificates.client
        url = f"{cluster.url('mtls')}?ca={certificates.ca}"
        store_url = f"{url}&cert={client_cert}&key={client_key}"
        with ringkit.live.connect(store_url) as store, store.join("a", ttl_s=5):
            assert list(store.snapshot().ring) == ["a"]
        with pytest.raises(BackendError, match="is unreachable over TLS: etcd refused the client"):
            ringkit.live.connect(url)  # no client certificate: etcd closes the handshake
