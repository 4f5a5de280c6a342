"""Read an nginx upstream's ``hash ... consistent`` layout from its configuration file.

Finds ``upstream NAME { ... }`` at any depth (``http``, ``stream``, or a file that holds only
the upstream, as an included ``conf.d`` file does) and reads ``hash KEY consistent`` and its
``server`` lines: the address as written, ``weight=N``, ``down``, and the parameters that do not
move keys (``max_fails``, ``fail_timeout``, ``max_conns``). Keepalive and zone directives are
skipped. Refused, naming the file and line: ``hash`` without ``consistent`` (nginx then takes
``crc32 % total weight`` over the peers), another balancing method, ``backup`` (which ``hash``
does not allow), ``resolve`` / ``service`` (addresses from DNS), ``include`` inside the upstream.

>>> import pathlib, tempfile
>>> path = pathlib.Path(tempfile.mkdtemp(), "upstream.conf")
>>> _ = path.write_text('''
... upstream pool {
...     hash $http_x_user consistent;
...     server 127.0.0.1:8081;
...     server 127.0.0.1:8082 weight=2 max_fails=3;
... }
... ''')
>>> nginx_from_config(path, upstream="pool").node_for("user:42")
'127.0.0.1:8082'
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from ringkit.compat._continuum import Continuum
from ringkit.compat.nginx import NginxServer, nginx
from ringkit.errors import ConfigError

__all__ = ["NginxUpstream", "nginx_from_config", "read_nginx_upstream"]

_TOKEN = re.compile(r"""#[^\n]*|"(?:\\.|[^"\\])*"|'(?:\\.|[^'\\])*'|[{};]|[^\s{};"'#]+""")
_SKIPPED = frozenset(
    ("keepalive", "keepalive_requests", "keepalive_time", "keepalive_timeout", "zone")
)
_UNMOVING = frozenset(("max_fails", "fail_timeout", "max_conns"))


@dataclass(frozen=True, slots=True)
class ConfiguredNginxServer:
    """A ``server`` line: the server and the line it is on."""

    server: NginxServer
    line: int


@dataclass(frozen=True, slots=True)
class NginxUpstream:
    """One upstream's hash key expression and servers as read from a configuration file."""

    name: str
    path: str
    key: str
    servers: tuple[ConfiguredNginxServer, ...]

    def layout(self) -> Continuum:
        """Return the consistent-hash layout of the upstream's servers."""
        return nginx([entry.server for entry in self.servers])

    def with_servers(self, servers: Sequence[NginxServer]) -> NginxUpstream:
        """Return this upstream with another server list."""
        return replace(self, servers=tuple(ConfiguredNginxServer(s, 0) for s in servers))


def _tokens(text: str) -> Iterator[tuple[str, int]]:
    line = 1
    position = 0
    for found in _TOKEN.finditer(text):
        line += text.count("\n", position, found.start())
        position = found.start()
        token = found.group()
        if token.startswith("#"):
            continue
        if token[:1] in "\"'":
            token = re.sub(r"\\(.)", r"\1", token[1:-1])
        yield token, line


def _directives(path: Path, text: str) -> Iterator[tuple[list[str], int, str]]:
    """Yield (words, line, ending) where ending is ``;``, ``{`` or ``}``."""
    words: list[str] = []
    start = 0
    for token, line in _tokens(text):
        if token in (";", "{", "}"):
            if token == "}" and words:
                raise ConfigError(f"{path}:{start}: directive {words[0]!r} has no ';' at the end")
            yield words, start or line, token
            words, start = [], 0
        else:
            words.append(token)
            start = start or line
    if words:
        raise ConfigError(f"{path}:{start}: directive {words[0]!r} has no ';' at the end")


def _server(path: Path, line: int, words: list[str]) -> NginxServer:
    if len(words) < 2:
        raise ConfigError(f"{path}:{line}: server needs an address")
    weight, down = 1, False
    for word in words[2:]:
        name, _, value = word.partition("=")
        if name == "weight" and value.isdigit() and int(value) >= 1:
            weight = int(value)
        elif word == "down":
            down = True
        elif name in _UNMOVING and value:
            continue
        elif word == "backup":
            raise ConfigError(
                f"{path}:{line}: 'backup' is not allowed with hash (nginx refuses it)"
            )
        elif name in ("resolve", "service"):
            raise ConfigError(
                f"{path}:{line}: server {name!r} takes addresses from DNS; "
                "ringkit hashes the address as written only"
            )
        else:
            raise ConfigError(f"{path}:{line}: cannot read server parameter {word!r}")
    return NginxServer(words[1], weight=weight, down=down)


def read_nginx_upstream(path: str | os.PathLike[str], *, upstream: str) -> NginxUpstream:
    """Return upstream `upstream` of nginx configuration file `path`.

    :raises ConfigError: naming the file and line, for a construct ringkit does not model
        (module docstring), or when there is no such upstream
    """
    where = Path(path)
    try:
        text = where.read_text()
    except OSError as error:
        raise ConfigError(f"cannot read {where}: {error.strerror}") from None
    found_line, body = _upstream_body(where, text, upstream)
    key = ""
    servers: list[ConfiguredNginxServer] = []
    for words, line in body:
        if words[0] == "hash":
            if words[2:] != ["consistent"]:
                raise ConfigError(
                    f"{where}:{line}: 'hash' without 'consistent' is crc32 modulo "
                    "the total weight; ringkit reads hash KEY consistent"
                )
            key = words[1]
        elif words[0] == "server":
            servers.append(ConfiguredNginxServer(_server(where, line, words), line))
        elif words[0] not in _SKIPPED:
            raise ConfigError(f"{where}:{line}: cannot read {words[0]!r} in an upstream")
    if not key:
        raise ConfigError(
            f"{where}:{found_line}: upstream {upstream!r} has no "
            "'hash KEY consistent' (round robin hashes nothing)"
        )
    return NginxUpstream(upstream, str(where), key, tuple(servers))


def _upstream_body(
    where: Path, text: str, upstream: str
) -> tuple[int, list[tuple[list[str], int]]]:
    """Return the line of ``upstream NAME {`` and the directives directly inside it."""
    depth, inside, found_line = 0, 0, 0
    body: list[tuple[list[str], int]] = []
    for words, line, ending in _directives(where, text):
        if ending == "}":
            depth -= 1
            inside = 0 if inside and depth < inside else inside
        elif ending == "{":
            depth += 1
            if words[:2] == ["upstream", upstream]:
                if found_line:
                    raise ConfigError(f"{where}:{line}: upstream {upstream!r} is defined twice")
                inside, found_line = depth, line
        elif inside and depth == inside and words:
            body.append((words, line))
    if not found_line:
        raise ConfigError(f"{where}: no upstream named {upstream!r}")
    return found_line, body


def nginx_from_config(path: str | os.PathLike[str], *, upstream: str) -> Continuum:
    """Return the layout of upstream `upstream` in `path` (node names: addresses as written).

    ``node_for`` takes the value of the upstream's hash key expression for a request.

    :raises ConfigError: naming the file and line, for a construct ringkit does not model
    """
    return read_nginx_upstream(path, upstream=upstream).layout()
