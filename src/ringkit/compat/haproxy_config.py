"""Read an HAProxy backend's consistent-hash layout from ``haproxy.cfg``.

Reads ``defaults``, ``backend`` and ``listen`` sections (a section takes the last ``defaults``
before it, or the one named by ``from``): ``balance`` (``hdr(name) [use_domain_only]``,
``uri [len N] [depth N] [whole] [path-only]``, ``url_param``, ``source``, ``hash EXPR``),
``hash-type``, ``hash-balance-factor``, ``option allbackups``, ``default-server`` (``weight``,
``disabled``, ``backup``), ``server`` (``id``, ``weight``, ``disabled``, ``backup``, and the
keywords that do not move keys: health checks, TLS, limits...) and ``server-template``. Other
directives of those sections do not place keys and are skipped; what would place keys in a way
ringkit does not model is refused with the file and line: ``hash-balance-factor`` (bounded
loads depend on live connection counts), ``balance random`` and every ``balance`` without
``hash-type consistent``, ``use-server``, an unknown server keyword.

What a request is hashed by: the header's first value (HAProxy splits a header at commas) for
``hdr``; for ``uri`` the part HAProxy hashes (up to ``?`` unless ``whole``, ``depth``
slashes, ``len`` bytes, the path alone with ``path-only``); the parameter's value for
``url_param``; the expression's value for ``hash``; the client address for ``source``.

>>> import pathlib, tempfile
>>> path = pathlib.Path(tempfile.mkdtemp(), "haproxy.cfg")
>>> _ = path.write_text('''
... backend web
...     balance hdr(X-User)
...     hash-type consistent
...     server a 10.0.0.1:80
...     server b 10.0.0.2:80 weight 2
... ''')
>>> haproxy_from_config(path, backend="web").node_for("user:42")
'b'
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from pathlib import Path

from ringkit.compat.haproxy import HAPROXY_MAX_WEIGHT, HAProxyRing
from ringkit.compat.haproxy_backend import (
    ConfiguredServer,
    HAProxyBackend,
    domain_only,
    first_value,
    parse_hash_type,
    uri_part,
)
from ringkit.errors import ConfigError

__all__ = ["haproxy_from_config", "read_haproxy_backend"]


def _words(*lines: str) -> frozenset[str]:
    return frozenset(word for line in lines for word in line.split())


_SECTIONS = _words(
    "global defaults frontend backend listen peers resolvers userlist mailers program",
    "http-errors ring cache fcgi-app log-forward",
)
# Server keywords that take one argument and do not move keys.
_SERVER_ARGS = _words(
    "addr agent-addr agent-inter agent-port agent-send alpn ca-file check-alpn check-proto",
    "check-sni ciphers ciphersuites cookie crl-file crt curves downinter error-limit fall",
    "fastinter init-addr inter log-proto max-reuse maxconn maxqueue minconn namespace npn",
    "observe on-error on-marked-down on-marked-up pool-conn-name pool-low-conn pool-max-conn",
    "pool-purge-delay port proto proxy-v2-options resolve-net resolve-opts resolve-prefer",
    "resolvers rise send-proxy-v2-ssl-cn-hdr shard sigalgs client-sigalgs sni source",
    "ssl-max-ver ssl-min-ver tcp-ut track usesrc verify verifyhost ws set-proxy-v2-tlv-fmt",
)
# Server keywords without an argument that do not move keys.
_SERVER_FLAGS = _words(
    "agent-check allow-0rtt check check-send-proxy check-ssl check-via-socks4 enabled",
    "force-sslv3 force-tlsv10 force-tlsv11 force-tlsv12 force-tlsv13 no-agent-check no-backup",
    "no-check no-check-ssl no-send-proxy no-send-proxy-v2 no-ssl no-ssl-reuse no-sslv3 no-tfo",
    "no-tls-tickets no-tlsv10 no-tlsv11 no-tlsv12 no-tlsv13 no-verifyhost non-stick redir",
    "send-proxy send-proxy-v2 ssl ssl-reuse stick tfo tls-tickets",
)


@dataclass(frozen=True, slots=True)
class _Settings:
    balance: tuple[str, ...] = ()
    balance_line: int = 0
    hash_type: tuple[str, ...] = ()
    hash_type_line: int = 0
    balance_factor: int = 0
    balance_factor_line: int = 0
    weight: int = 1
    disabled: bool = False
    backup: bool = False
    allbackups: bool = False


class _Reader:
    """One pass over the file: sections, defaults and the wanted backend's directives."""

    def __init__(self, path: Path, backend: str) -> None:
        self.path, self.backend = path, backend
        self.defaults: dict[str, _Settings] = {}
        self.last_defaults = _Settings()
        self.found: tuple[_Settings, list[ConfiguredServer], int] | None = None
        self.section_line = 0

    def fail(self, line: int, message: str) -> ConfigError:
        return ConfigError(f"{self.path}:{line}: {message}")

    def read(self) -> HAProxyBackend:
        section: str | None = None
        settings = _Settings()
        servers: list[ConfiguredServer] = []
        for number, words in _lines(self.path, self.fail):
            if words[0] in _SECTIONS:
                self._close(section, settings, servers)
                section, settings, servers = self._open(number, words)
                continue
            if section is not None and section.startswith(
                ("defaults", "backend", "listen", "wanted")
            ):
                settings = self._directive(number, words, settings, servers, section)
        self._close(section, settings, servers)
        return self._backend()

    def _open(
        self, number: int, words: list[str]
    ) -> tuple[str | None, _Settings, list[ConfiguredServer]]:
        kind = words[0]
        name = words[1] if len(words) > 1 else ""
        base = self.last_defaults
        if "from" in words[1:]:
            parent = words[words.index("from") + 1] if words[-1] != "from" else ""
            if parent not in self.defaults:
                raise self.fail(number, f"defaults section {parent!r} is not defined before it")
            base = self.defaults[parent]
        if kind == "defaults":
            return f"defaults:{name}", base, []
        if kind in ("backend", "listen") and name == self.backend:
            self.section_line = number
            if self.found is not None:
                raise self.fail(number, f"backend {name!r} is defined twice")
            return "wanted", base, []
        return (kind if kind in ("backend", "listen") else None), _Settings(), []

    def _close(
        self, section: str | None, settings: _Settings, servers: list[ConfiguredServer]
    ) -> None:
        if section is None:
            return
        if section.startswith("defaults:"):
            self.last_defaults = settings
            if section != "defaults:":
                self.defaults[section.split(":", 1)[1]] = settings
        elif section == "wanted":
            self.found = (settings, servers, self.section_line)

    def _directive(
        self,
        number: int,
        words: list[str],
        settings: _Settings,
        servers: list[ConfiguredServer],
        section: str,
    ) -> _Settings:
        keyword = words[0]
        if section.startswith("defaults") or section == "wanted":
            if keyword == "balance":
                return replace(settings, balance=tuple(words[1:]), balance_line=number)
            if keyword == "hash-type":
                return replace(settings, hash_type=tuple(words[1:]), hash_type_line=number)
            if keyword == "hash-balance-factor":
                value = words[1] if len(words) > 1 else ""
                if not value.isdigit():
                    raise self.fail(number, f"hash-balance-factor needs an integer, got {value!r}")
                return replace(settings, balance_factor=int(value), balance_factor_line=number)
            if keyword == "option" and words[1:2] == ["allbackups"]:
                return replace(settings, allbackups=True)
            if keyword == "no" and words[1:3] == ["option", "allbackups"]:
                return replace(settings, allbackups=False)
            if keyword == "default-server":
                return self._default_server(number, words[1:], settings)
        if section != "wanted":
            return settings
        if keyword == "server":
            servers.append(self._server(number, words, settings))
        elif keyword == "server-template":
            servers.extend(self._template(number, words, settings))
        elif keyword == "use-server":
            raise self.fail(number, "use-server picks servers by rule; ringkit models hashing only")
        return settings

    def _default_server(self, number: int, words: list[str], settings: _Settings) -> _Settings:
        server = self._params(number, words, settings, allow_id=False)
        return replace(settings, weight=server[1], disabled=server[2], backup=server[3])

    def _params(
        self, number: int, words: list[str], settings: _Settings, *, allow_id: bool = True
    ) -> tuple[int | None, int, bool, bool]:
        server_id, weight = None, settings.weight
        disabled, backup = settings.disabled, settings.backup
        index = 0
        while index < len(words):
            word = words[index]
            value = words[index + 1] if index + 1 < len(words) else None
            if word in ("id", "weight"):
                if value is None or not value.isdigit():
                    raise self.fail(
                        number, f"server keyword {word!r} needs an integer, got {value!r}"
                    )
                if word == "id":
                    if not allow_id:
                        raise self.fail(number, "'id' is not allowed here")
                    server_id = int(value)
                else:
                    weight = int(value)
                    if weight > HAPROXY_MAX_WEIGHT:
                        raise self.fail(number, f"weight must be in [0, 256], got {weight}")
                index += 2
            elif word in ("disabled", "backup", "enabled", "no-backup"):
                disabled = True if word == "disabled" else False if word == "enabled" else disabled
                backup = True if word == "backup" else False if word == "no-backup" else backup
                index += 1
            elif word in _SERVER_FLAGS:
                index += 1
            elif word in _SERVER_ARGS and value is not None:
                index += 2
            elif word in ("slowstart", "hash-key"):
                raise self.fail(
                    number,
                    f"server keyword {word!r} changes a server's points; ringkit does not model it",
                )
            else:
                raise self.fail(number, f"cannot read server keyword {word!r}")
        return server_id, weight, disabled, backup

    def _server(self, number: int, words: list[str], settings: _Settings) -> ConfiguredServer:
        if len(words) < 3:
            raise self.fail(number, "server needs a name and an address")
        server_id, weight, disabled, backup = self._params(number, words[3:], settings)
        return ConfiguredServer(words[1], words[2], server_id, weight, disabled, backup, number)

    def _template(
        self, number: int, words: list[str], settings: _Settings
    ) -> list[ConfiguredServer]:
        if len(words) < 4:
            raise self.fail(number, "server-template needs a prefix, a count or range, an address")
        found = re.fullmatch(r"(\d+)(?:-(\d+))?", words[2])
        if found is None:
            raise self.fail(
                number, f"server-template count must be N or LOW-HIGH, got {words[2]!r}"
            )
        low, high = (1, int(found[1])) if found[2] is None else (int(found[1]), int(found[2]))
        server_id, weight, disabled, backup = self._params(number, words[4:], settings)
        if server_id is not None:
            raise self.fail(number, "'id' on server-template is not read; give each server a line")
        return [
            ConfiguredServer(f"{words[1]}{i}", words[3], None, weight, disabled, backup, number)
            for i in range(low, high + 1)
        ]

    def _backend(self) -> HAProxyBackend:
        if self.found is None:
            raise ConfigError(f"{self.path}: no backend or listen section named {self.backend!r}")
        settings, servers, line = self.found
        return _hashing(self, settings, servers, line)


def _hashing(
    reader: _Reader, settings: _Settings, servers: list[ConfiguredServer], line: int
) -> HAProxyBackend:
    fail = reader.fail
    _check_balance(reader, settings, line)
    try:
        function, avalanche = parse_hash_type(settings.hash_type)
    except ConfigError as error:
        raise fail(settings.hash_type_line, str(error)) from None
    _check_servers(fail, servers)
    return HAProxyBackend(
        reader.backend,
        str(reader.path),
        tuple(servers),
        " ".join(settings.balance),
        "source" if settings.balance[0] == "source" else function,
        avalanche,
        settings.allbackups,
        _key_part(reader, settings),
    )


def _check_balance(reader: _Reader, settings: _Settings, line: int) -> None:
    fail = reader.fail
    if settings.balance_factor:
        raise fail(
            settings.balance_factor_line,
            "hash-balance-factor (consistent hashing with bounded loads) routes by live "
            "connection counts; ringkit cannot predict it",
        )
    if not settings.balance:
        raise fail(line, f"backend {reader.backend!r} has no balance: round robin hashes nothing")
    algorithm = settings.balance[0]
    hashing = algorithm in ("uri", "url_param", "source", "hash") or algorithm.startswith("hdr(")
    if not hashing:
        raise fail(
            settings.balance_line,
            f"balance {algorithm} is not a hash; ringkit reads hdr(), uri, url_param, source "
            "and hash with hash-type consistent",
        )
    if settings.hash_type[:1] != ("consistent",):
        raise fail(
            settings.balance_line,
            f"balance {algorithm} without 'hash-type consistent' is map-based (hash % total "
            "weight); add 'hash-type consistent'",
        )


def _check_servers(
    fail: Callable[[int, str], ConfigError], servers: list[ConfiguredServer]
) -> None:
    names: dict[str, ConfiguredServer] = {}
    ids: dict[int, ConfiguredServer] = {}
    for server in servers:
        if server.name in names:
            raise fail(server.line, f"server {server.name!r} is defined twice")
        names[server.name] = server
        if server.id is not None and server.id in ids:
            first = ids[server.id]
            raise fail(
                server.line,
                f"servers {first.name!r} (line {first.line}) and {server.name!r} both have "
                f"id {server.id}",
            )
        if server.id is not None:
            ids[server.id] = server


def _key_part(reader: _Reader, settings: _Settings) -> Callable[[bytes], bytes] | None:
    algorithm, options = settings.balance[0], list(settings.balance[1:])
    if algorithm.startswith("hdr("):
        if options and options != ["use_domain_only"]:
            raise reader.fail(settings.balance_line, f"cannot read balance option {options[0]!r}")
        return domain_only if options else first_value
    if algorithm != "uri":
        return None
    length = depth = 0
    whole = path_only = False
    while options:
        word = options.pop(0)
        if word in ("len", "depth"):
            value = options.pop(0) if options else ""
            if not value.isdigit() or int(value) <= 0:
                raise reader.fail(settings.balance_line, f"balance uri {word} needs an integer > 0")
            length, depth = (int(value), depth) if word == "len" else (length, int(value))
        elif word in ("whole", "path-only"):
            whole, path_only = whole or word == "whole", path_only or word == "path-only"
        else:
            raise reader.fail(settings.balance_line, f"cannot read balance uri option {word!r}")
    return uri_part(length, depth, whole, path_only)


def _lines(path: Path, fail: Callable[[int, str], ConfigError]) -> Iterable[tuple[int, list[str]]]:
    try:
        text = Path(path).read_text()
    except OSError as error:
        raise ConfigError(f"cannot read {path}: {error.strerror}") from None
    for number, raw in enumerate(text.splitlines(), start=1):
        try:
            lexer = shlex.shlex(raw, posix=True)
            lexer.whitespace_split, lexer.commenters = True, "#"
            words = [os.path.expandvars(word) if "$" in word else word for word in lexer]
        except ValueError as error:
            raise fail(number, f"cannot read line: {error}") from None
        if words:
            yield number, words


def read_haproxy_backend(path: str | os.PathLike[str], *, backend: str) -> HAProxyBackend:
    """Return backend (or listen section) `backend` of HAProxy configuration file `path`.

    :raises ConfigError: naming the file and line, for a construct ringkit does not model
        (module docstring), or when there is no such backend
    """
    return _Reader(Path(path), backend).read()


def haproxy_from_config(path: str | os.PathLike[str], *, backend: str) -> HAProxyRing:
    """Return the layout of backend `backend` in `path` over the servers HAProxy routes to.

    Servers are numbered as HAProxy's configuration check numbers them (disabled ones count);
    ``node_for`` takes what the backend's ``balance`` hashes (module docstring).

    :raises ConfigError: naming the file and line, for a construct ringkit does not model
    """
    return read_haproxy_backend(path, backend=backend).layout()
