"""Server URLs: the four fixed forms a sharded client accepts, parsed once and redacted in reprs.

The forms are ``redis://[[user]:password@]host:port/db``, ``rediss://…`` (Redis over TLS),
``memcached://host:port`` and ``memory://NAME`` (a process-wide named store: two clients that
name the same store share it). User and password are percent-decoded as redis-py's ``from_url``
decodes them (``%40`` is ``@``, ``%3A`` is ``:``, ``%2F`` is ``/``); a literal ``@`` in the
password works too, since the host starts after the *last* ``@`` (as in ``urllib.parse``).
Anything else is refused with a message that names the URL with its whole user part replaced
by ``***``: no part of a secret reaches an error, a log line or a repr. A URL's text as a view
publishes it (:func:`url_text`) has no user part at all (:mod:`ringkit.cluster.wire.credentials`).

>>> url = parse_url("redis://:s3cret@127.0.0.1:6379/2")
>>> url.scheme, url.host, url.port, url.db
('redis', '127.0.0.1', 6379, 2)
>>> url
ServerURL('redis://:***@127.0.0.1:6379/2')
>>> parse_url("redis://:p%40ss%3Aw%2Frd@h:1/0").password
'p@ss:w/rd'
>>> parse_url("memory://sessions").name
'sessions'
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from urllib.parse import unquote

from ringkit.cluster.checks import text as a_str
from ringkit.errors import ConfigError

__all__ = ["SCHEMES", "ServerURL", "parse_url", "redact", "url_text"]

SCHEMES = ("memcached", "memory", "redis", "rediss")

# The user part runs to the last "@" before the first "/" (greedy), as urllib.parse splits it.
_NETWORK = re.compile(
    r"^(?P<scheme>rediss?|memcached)://"
    r"(?:(?P<userinfo>[^/]*)@)?"
    r"(?P<host>\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_.-]+):(?P<port>[0-9]{1,5})"
    r"(?:/(?P<db>[0-9]{0,5}))?$"
)
_MEMORY = re.compile(r"^memory://(?P<name>[A-Za-z0-9_.:-]+)$")


def redact(text: str) -> str:
    """Return URL `text` with everything before its last ``@`` (after ``://``) as ``***``.

    Meant for text that may not parse: no part of a user or password survives, whatever
    characters it holds.

    >>> redact("redis://:hunter2@host:6379/0")
    'redis://***@host:6379/0'
    >>> redact("redis://:p@ss@host:x/0"), redact("h:1@x")
    ('redis://***@host:x/0', '***@x')
    >>> redact("memcached://host:11211")
    'memcached://host:11211'
    """
    scheme, sep, rest = text.partition("://")
    if not sep:
        scheme, rest = "", text
    if "@" not in rest:
        return text
    return f"{scheme}{sep}***@{rest.rpartition('@')[2]}"


@dataclass(frozen=True, slots=True)
class ServerURL:
    """A parsed server URL. The password is kept out of ``repr`` and ``str``."""

    scheme: str
    host: str = ""
    port: int = 0
    db: int = 0
    name: str = ""
    username: str | None = None
    password: str | None = field(default=None, repr=False)

    @property
    def tls(self) -> bool:
        """True for ``rediss://``."""
        return self.scheme == "rediss"

    def redacted(self) -> str:
        """Return the URL as text with the password shown as ``***``."""
        if self.scheme == "memory":
            return f"memory://{self.name}"
        auth = ""
        if self.password is not None:
            auth = f"{self.username or ''}:***@"
        path = f"/{self.db}" if self.scheme != "memcached" else ""
        return f"{self.scheme}://{auth}{self.host}:{self.port}{path}"

    def __repr__(self) -> str:
        return f"ServerURL({self.redacted()!r})"

    def __str__(self) -> str:
        return self.redacted()


def parse_url(text: str) -> ServerURL:
    """Parse one of the four URL forms into a :class:`ServerURL`.

    Runtime: O(len(text)).

    >>> parse_url("memcached://127.0.0.1:11211").port
    11211

    :raises ConfigError: when the URL is not one of the fixed forms (the message shows it
        with any password redacted)
    """
    text = a_str("server URL", text)
    memory = _MEMORY.match(text)
    if memory:
        return ServerURL("memory", name=memory["name"])
    match = _NETWORK.match(text)
    if match is None:
        raise ConfigError(
            f"server URL must be redis://[[user]:password@]host:port/db, rediss://…, "
            f"memcached://host:port or memory://NAME, got {redact(text)!r}"
        )
    port = int(match["port"])
    if not 1 <= port <= 65535:
        raise ConfigError(f"port must be in 1..65535, got {port} in {redact(text)!r}")
    scheme, userinfo = match["scheme"], match["userinfo"]
    if scheme == "memcached" and (match["db"] is not None or userinfo is not None):
        raise ConfigError(f"memcached URLs take no password or /db, got {redact(text)!r}")
    username: str | None = None
    password: str | None = None
    if userinfo is not None:
        user, colon, secret = userinfo.partition(":")
        if not colon:
            raise ConfigError(
                f"the user part of a redis URL must be [user]:password, got {redact(text)!r}"
            )
        # redis-py's from_url unquotes both (redis/connection.py, parse_url).
        username, password = unquote(user) or None, unquote(secret)
    host = match["host"].strip("[]")
    return ServerURL(
        scheme,
        host=host,
        port=port,
        db=int(match["db"]) if match["db"] else 0,
        username=username,
        password=password,
    )


def url_text(url: ServerURL) -> str:
    """Return `url` as text without user or password: the form a view publishes.

    Each process opens a server with secrets from its own configuration
    (:class:`~ringkit.cluster.wire.credentials.Credentials`), never from a view.

    >>> url_text(parse_url("redis://admin:pw@127.0.0.1:6379/2"))
    'redis://127.0.0.1:6379/2'
    """
    if url.scheme == "memory":
        return f"memory://{url.name}"
    host = f"[{url.host}]" if ":" in url.host else url.host
    path = "" if url.scheme == "memcached" else f"/{url.db}"
    return f"{url.scheme}://{host}:{url.port}{path}"
