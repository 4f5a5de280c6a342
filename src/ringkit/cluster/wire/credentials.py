"""Credentials: the secrets a client opens its servers with, kept out of every view.

A cluster view is published on every server (``ringkit:view``), in etcd and in files, so it
carries server URLs *without* user or password. Each process opens the servers it learns from a
view with secrets from its own configuration, looked up for a server in this order (redis-py's
``from_url`` form, ``redis://[[user]:password@]host:port/db``, is only one source of them):

1. the user and password given inline in a URL this process was given (the constructor's
   server URLs, ``add_server``, ``ringkit rebalance --servers`` / ``--add``), percent-decoded
   as redis-py decodes them, so ``p%40ss%3Aw%2Frd`` is the password ``p@ss:w/rd``;
2. ``credentials[server name]``, then ``credentials["host:port"]`` (``"[::1]:6379"`` for IPv6);
3. ``credentials["*"]``, the default;
4. the environment variable ``RINGKIT_REDIS_PASSWORD`` (and ``RINGKIT_REDIS_USERNAME``), read
   when the client is built.

A secret is a password (str, taken as is: no decoding, any character) or a ``(user, password)``
pair for a Redis 6 ACL user. Only ``redis://`` and ``rediss://`` servers take one; memcached has
no authentication in its text protocol (memcached ``protocol.txt``), ``memory://`` none at all.

>>> found = Credentials({"*": "p@ss:w/rd"}, environ={})
>>> public = found.learn("a", "redis://:hunter2@127.0.0.1:6379/0")
>>> public
'redis://127.0.0.1:6379/0'
>>> found.apply("a", parse_url(public)).password
'hunter2'
>>> found.apply("b", parse_url("redis://10.0.0.2:6379/0")).password
'p@ss:w/rd'
>>> found
Credentials(3 secrets: '*', '127.0.0.1:6379', 'a')
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from ringkit.cluster.checks import mapping
from ringkit.cluster.wire.urls import ServerURL, parse_url, url_text
from ringkit.errors import ConfigError, format_names

__all__ = ["DEFAULT_KEY", "PASSWORD_ENV", "USERNAME_ENV", "Credentials", "Secret"]

DEFAULT_KEY = "*"
PASSWORD_ENV = "RINGKIT_REDIS_PASSWORD"
USERNAME_ENV = "RINGKIT_REDIS_USERNAME"
_AUTHENTICATED = ("redis", "rediss")


@dataclass(frozen=True, slots=True)
class Secret:
    """A user (None: Redis's ``default`` user) and a password; the password never in a repr."""

    username: str | None
    password: str = field(repr=False)


def _secret(key: str, value: object) -> Secret:
    """Return the secret `value` given for `key` (a password or a (user, password) pair).

    :raises ConfigError: naming `key` (never the value) when it is neither
    """
    if isinstance(value, str):
        return Secret(None, value)
    if (
        isinstance(value, tuple)
        and len(value) == 2
        and all(isinstance(part, str) for part in value)
    ):
        return Secret(value[0] or None, value[1])
    raise ConfigError(
        f"credentials[{key!r}] must be a password (str) or a (user, password) pair of str, "
        f"got {type(value).__name__}"
    )


def _address(url: ServerURL) -> str:
    return f"[{url.host}]:{url.port}" if ":" in url.host else f"{url.host}:{url.port}"


class Credentials:
    """The secrets of one process's servers, by server name, ``host:port`` or default.

    Giving: the constructor (``{key: secret}`` and the environment), ``learn`` (a URL's inline
    secret). Using: ``apply`` (the URL a server is opened with). Nothing here prints a secret.
    """

    def __init__(
        self,
        given: Mapping[str, str | tuple[str, str]] | None = None,
        *,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        given = mapping(
            "credentials", {} if given is None else given, "server name or host:port to a secret"
        )
        secrets = {str(key): _secret(str(key), value) for key, value in given.items()}
        env = os.environ if environ is None else environ
        password = env.get(PASSWORD_ENV)
        if password and DEFAULT_KEY not in secrets:
            secrets[DEFAULT_KEY] = Secret(env.get(USERNAME_ENV) or None, password)
        self._secrets = secrets

    def learn(self, name: str, url: str | ServerURL) -> str:
        """Remember the secret given inline in `url` for server `name`; return `url` without it.

        :raises ConfigError: when `url` does not parse (the message shows no secret)
        """
        parsed = url if isinstance(url, ServerURL) else parse_url(url)
        if parsed.password is not None or parsed.username is not None:
            secret = Secret(parsed.username, parsed.password or "")
            # A new dict, not an update: other threads may be reading the old one.
            self._secrets = {**self._secrets, name: secret, _address(parsed): secret}
        return url_text(parsed)

    def learn_all(self, servers: Mapping[str, str | ServerURL]) -> dict[str, str]:
        """Return `servers` without their inline secrets, remembering each (see ``learn``)."""
        return {name: self.learn(name, url) for name, url in servers.items()}

    def apply(self, name: str, url: ServerURL) -> ServerURL:
        """Return `url` with the secret of server `name`, if one is known and `url` has none."""
        if url.scheme not in _AUTHENTICATED or url.password is not None:
            return url
        secrets = self._secrets
        for key in (name, _address(url), DEFAULT_KEY):
            secret = secrets.get(key)
            if secret is not None:
                return replace(url, username=secret.username, password=secret.password)
        return url

    def check_known(self, servers: Mapping[str, ServerURL]) -> None:
        """Refuse secrets named for servers of `servers` that cannot take one (memcached).

        :raises ConfigError: naming the server and its scheme
        """
        for name, url in servers.items():
            if name in self._secrets and url.scheme not in _AUTHENTICATED:
                raise ConfigError(
                    f"credentials given for server {name!r}, but {url.scheme}:// servers take "
                    f"no password; remove credentials[{name!r}]"
                )

    def __repr__(self) -> str:
        keys = sorted(self._secrets)
        return f"Credentials({len(keys)} secrets: {format_names(keys)})"
