"""Store URLs: where a live ring is kept, parsed and checked once at ``connect``.

Two schemes name an etcd cluster (``etcd://`` plain, ``etcds://`` TLS), with one or more
``HOST:PORT`` endpoints (the client fails over between them, as etcd's own clients do), optional
``user:password@`` credentials and a key prefix, the path, that lets several rings share one
cluster. ``etcds://`` takes the files etcdctl takes as query parameters: ``?ca=PATH`` (the CA
that signed the servers' certificates, etcdctl's ``--cacert``; the system's CAs when absent) and
``cert=PATH&key=PATH`` (a client certificate, for etcd's ``--client-cert-auth``).
``memory://NAME`` names an in-process store shared by the threads of one process.

>>> url = parse_store_url("etcd://ops:s3cret@h1:2379,h2:2379/rings/web")
>>> url.scheme, url.endpoints, url.prefix, url.user
('etcd', (('h1', 2379), ('h2', 2379)), '/rings/web/', 'ops')
>>> parse_store_url("etcds://h1:2379/web?ca=/etc/etcd/ca.pem").ca_file
'/etc/etcd/ca.pem'
>>> parse_store_url("memory://demo").name
'demo'
"""

from __future__ import annotations

from dataclasses import dataclass, field
from urllib.parse import parse_qsl, unquote

from ringkit.errors import ConfigError

__all__ = ["SCHEMES", "StoreURL", "parse_store_url", "redacted"]

SCHEMES = ("etcd", "etcds", "memory")
_DEFAULT_PORT = 2379
#: The query parameters of ``etcds://`` (etcdctl's ``--cacert``, ``--cert``, ``--key``).
TLS_PARAMETERS = ("ca", "cert", "key")


@dataclass(frozen=True, slots=True)
class StoreURL:
    """A parsed store URL. ``endpoints`` is empty for ``memory://``, ``name`` empty for etcd."""

    scheme: str
    endpoints: tuple[tuple[str, int], ...]
    prefix: str
    name: str = ""
    user: str | None = None
    password: str | None = field(default=None, repr=False)
    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None

    @property
    def tls(self) -> bool:
        """Whether the store is reached over TLS (``etcds://``)."""
        return self.scheme == "etcds"


def _bad(url: str, problem: str) -> ConfigError:
    # Never echo a password: the host starts after the *last* '@' (a password may hold one).
    shown = url.rpartition("@")[2] if "@" in url else url
    return ConfigError(
        f"store URL {problem}, got {shown!r}; use etcd://HOST:PORT[,HOST:PORT…]/PREFIX, "
        "etcds://…[?ca=PATH&cert=PATH&key=PATH] for TLS, or memory://NAME"
    )


def _tls_files(url: str, scheme: str, query: str) -> dict[str, str]:
    """The ``ca`` / ``cert`` / ``key`` files of an ``etcds://`` URL's query, checked."""
    if not query:
        return {}
    if scheme != "etcds":
        raise _bad(url, "takes query parameters only with etcds:// (TLS)")
    files: dict[str, str] = {}
    for name, value in parse_qsl(query, keep_blank_values=True, strict_parsing=False):
        if name not in TLS_PARAMETERS:
            allowed = ", ".join(TLS_PARAMETERS)
            raise _bad(url, f"query parameter must be one of {allowed} ({name!r})")
        if not value or name in files:
            raise _bad(url, f"query parameter {name!r} needs one file path")
        files[name] = value
    if ("cert" in files) != ("key" in files):
        raise _bad(url, "needs cert= and key= together (a client certificate and its key)")
    return files


def _endpoint(url: str, text: str) -> tuple[str, int]:
    host, colon, port_text = text.rpartition(":")
    if not colon:
        host, port_text = text, str(_DEFAULT_PORT)
    # An unencoded '/' in a password ends the authority early: this text may be part of it.
    shown = f" ({text!r})" if "@" not in url else ""
    if not host or host.startswith("[") != host.endswith("]"):
        raise _bad(url, f"needs a host in every endpoint{shown}")
    if not port_text.isdigit() or not 0 < int(port_text) < 65536:
        raise _bad(url, f"needs a port in [1, 65535]{shown}")
    return host.strip("[]"), int(port_text)


def parse_store_url(url: str) -> StoreURL:
    """Parse ``etcd[s]://[user:password@]h1:p1[,h2:p2…]/PREFIX[?ca=…]`` or ``memory://NAME``.

    The prefix always starts and ends with ``/`` (``/`` alone when the path is empty); a
    missing port means 2379. Runtime: O(len(url)).

    >>> parse_store_url("etcd://127.0.0.1:2379").prefix
    '/'
    >>> try:
    ...     parse_store_url("redis://x")
    ... except ConfigError as error:
    ...     print(str(error).split(";")[0])
    store URL scheme must be one of etcd, etcds, memory, got 'redis://x'

    :raises ConfigError: for another scheme, a missing host or name, a bad port, credentials
        without a password, or a query parameter other than etcds://'s ca, cert and key
    """
    if not isinstance(url, str):
        raise ConfigError(f"store URL must be str, got {type(url).__name__}")
    scheme, sep, rest = url.partition("://")
    if not sep or scheme not in SCHEMES:
        raise _bad(url, f"scheme must be one of {', '.join(SCHEMES)}")
    if scheme == "memory":
        if not rest or "/" in rest or "@" in rest:
            raise _bad(url, "memory:// needs a NAME without '/' or '@'")
        return StoreURL(scheme, (), "/", name=rest)
    rest, _, query = rest.partition("?")
    authority, _, path = rest.partition("/")
    user = password = None
    if "@" in authority:
        credentials, _, authority = authority.rpartition("@")
        user, colon, password = credentials.partition(":")
        if not user or not colon:
            raise _bad(url, "credentials must be user:password")
        user, password = unquote(user), unquote(password)
    if not authority:
        raise _bad(url, "needs at least one HOST:PORT")
    endpoints = tuple(_endpoint(url, part) for part in authority.split(","))
    prefix = "/" + "/".join(part for part in path.split("/") if part)
    prefix = prefix if prefix == "/" else prefix + "/"
    files = _tls_files(url, scheme, query)
    return StoreURL(
        scheme,
        endpoints,
        prefix,
        user=user,
        password=password,
        ca_file=files.get("ca"),
        cert_file=files.get("cert"),
        key_file=files.get("key"),
    )


def redacted(url: str) -> str:
    """Return a store URL without its credentials, to show (a repr, a log line, CLI output).

    >>> redacted("etcd://ops:s3cret@h1:2379/ring"), redacted("memory://demo")
    ('etcd://h1:2379/ring', 'memory://demo')
    """
    scheme, sep, rest = url.partition("://")
    return f"{scheme}{sep}{rest.rpartition('@')[2]}" if "@" in rest else url
