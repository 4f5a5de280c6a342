"""Keep an nginx upstream in step with a live ring: render its servers into a file, reload.

nginx has no runtime API for upstream servers in its open-source build, so the pool is a file
the upstream block includes::

    upstream app {
        hash $http_x_key consistent;
        include /etc/nginx/ringkit-app.conf;   # written by `ringkit lb nginx`
    }

Each pass renders the proxied members (sorted by name, ``server HOST:PORT weight=W;``) and,
when that differs from what nginx last loaded, writes the file atomically (a temporary file
renamed over it) and runs the reload command (``nginx -s reload``: nginx starts new workers
on the new file and lets the old ones finish their requests, so a leaving member's requests
in flight complete). nginx's layout depends on the addresses *as written* and the weights,
not on order or ids (``ngx_http_upstream_hash_module``), which ``ringkit.compat``'s nginx
layout of :meth:`NginxController.servers` reproduces. An empty pool is not written: nginx
refuses an upstream without servers, so the last pool stays and the pass logs why.
"""

from __future__ import annotations

import logging
import os
import shlex
import subprocess
import tempfile
import threading
from collections.abc import Sequence
from pathlib import Path

from ringkit.compat import Continuum
from ringkit.compat.nginx import NginxServer, nginx
from ringkit.errors import BackendError, ConfigError
from ringkit.lb.follow import Follower, Following, read_members
from ringkit.lb.pool import NGINX_WEIGHTS, PoolServer, proxied
from ringkit.live import Store

__all__ = ["NginxController", "render_upstream"]

_log = logging.getLogger("ringkit.lb")
_HEADER = "# nginx upstream servers written by `ringkit lb nginx` from a live ring; do not edit\n"


def render_upstream(servers: Sequence[PoolServer]) -> str:
    """Return the ``server`` lines of `servers` for an upstream block to include.

    >>> print(render_upstream([PoolServer("w1", "10.0.0.1:80", 2)]), end="")
    # nginx upstream servers written by `ringkit lb nginx` from a live ring; do not edit
    server 10.0.0.1:80 weight=2;  # member w1
    """
    lines = [f"server {s.address} weight={s.weight};  # member {s.member}\n" for s in servers]
    return _HEADER + "".join(lines)


class NginxController(Following):
    """Keeps the upstream file `upstream_file` holding the live ring's proxied members.

    Running: ``start``, ``close``, a context manager. One pass now: ``reconcile``.
    Reading: ``servers`` (the pool nginx was last reloaded with), ``layout`` (its
    ``ringkit.compat`` nginx layout), ``last_error``.
    """

    def __init__(
        self,
        store: Store,
        upstream_file: str | os.PathLike[str],
        reload_command: str | Sequence[str],
        *,
        weight_scale: float | None = None,
        reload_timeout_s: float = 30.0,
        resync_s: float = 5.0,
    ) -> None:
        command = shlex.split(reload_command) if isinstance(reload_command, str) else reload_command
        if not command:
            raise ConfigError(f"reload_command must name a program, got {reload_command!r}")
        self._store, self._file, self._command = store, Path(upstream_file), list(command)
        self._weight_scale, self._reload_timeout_s = weight_scale, reload_timeout_s
        self._loaded: str | None = None
        self._servers: tuple[PoolServer, ...] = ()
        self._lock = threading.Lock()
        self._follower = Follower(
            store, self._pass, resync_s=resync_s, name=f"ringkit-lb-nginx-{self._file.name}"
        )

    def servers(self) -> tuple[PoolServer, ...]:
        """The servers nginx was last reloaded with, sorted by member."""
        return self._servers

    def layout(self) -> Continuum:
        """The upstream's own layout over :meth:`servers` (``ringkit.compat.nginx``).

        :raises ConfigError: when nginx has not been loaded with servers yet
        """
        return nginx([NginxServer(s.address, weight=s.weight) for s in self._servers])

    def _pass(self) -> None:
        self.reconcile()

    def reconcile(self) -> bool:
        """Run one pass now; return whether it wrote the file and reloaded nginx.

        :raises BackendError: when etcd cannot be read or the reload command fails
        :raises ConfigError: when a member's weight is not an integer >= 1 (naming it)
        """
        with self._lock:
            pool = proxied(
                read_members(self._store).members,
                weights=NGINX_WEIGHTS,
                weight_scale=self._weight_scale,
            )
            for name, why in pool.refused.items():
                _log.warning("upstream %s: not proxying %s (member %s)", self._file, why, name)
            if not pool.servers:
                _log.warning("upstream %s: no member to proxy; keeping the last pool", self._file)
                return False
            text = render_upstream(pool.servers)
            if text == self._loaded:
                return False
            self._write(text)
            self._reload()
            self._loaded, self._servers = text, pool.servers
            _log.info(
                "upstream %s: reloaded with %s",
                self._file,
                ", ".join(f"{s.member}={s.address}" for s in pool.servers),
            )
            return True

    def _write(self, text: str) -> None:
        try:
            if self._file.exists() and self._file.read_text() == text:
                return
            with tempfile.NamedTemporaryFile(
                "w", dir=self._file.parent, prefix=f".{self._file.name}.", delete=False
            ) as temporary:
                temporary.write(text)
            os.replace(temporary.name, self._file)
        except OSError as error:
            raise BackendError(
                f"upstream file {self._file} must be writable, got {error.strerror or error}"
            ) from error

    def _reload(self) -> None:
        shown = shlex.join(self._command)
        try:
            done = subprocess.run(
                self._command, capture_output=True, text=True, timeout=self._reload_timeout_s
            )
        except (OSError, subprocess.TimeoutExpired) as error:
            raise BackendError(f"reload command {shown!r} failed: {error}") from error
        if done.returncode != 0:
            raise BackendError(
                f"reload command {shown!r} must exit 0, got {done.returncode}: "
                f"{(done.stderr or done.stdout).strip()[:300]}"
            )
