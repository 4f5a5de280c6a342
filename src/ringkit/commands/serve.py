"""``ringkit serve``: run the interactive simulator page and its JSON API on this machine.

Binds 127.0.0.1 unless ``--host`` says otherwise, prints the URL, then serves until interrupted.
With ``--store URL`` (a ``ringkit.live`` store) the page shows that live ring and follows its
changes; the store is opened before the server starts, so a bad or unreachable store exits 1
with its message. ``--compute-workers`` and ``--budget-s`` size the API's
:class:`~ringkit.web.budget.ComputeGate`: how many computations run at once, and how long a
request may wait and compute before it is answered 503 with ``Retry-After``. Needs the ``web``
extra (Starlette and uvicorn); without it the command prints a one-line install hint and exits 1.
"""

from __future__ import annotations

import argparse
import errno
import socket
import sys
from typing import TYPE_CHECKING, Any

import ringkit.live
from ringkit.commands.common import (
    refuse,
    shown_url,
    store_url_with_password,
)

if TYPE_CHECKING:
    from ringkit.web.live import LiveView

__all__ = ["INSTALL_HINT", "check_port_free", "page_url"]

INSTALL_HINT = "ringkit serve needs the web extra: pip install 'ringkit[web]'"


def page_url(host: str, port: int) -> str:
    """Return the URL to open for a server bound to `host`:`port`.

    >>> page_url("127.0.0.1", 8000), page_url("::1", 8080)
    ('http://127.0.0.1:8000/', 'http://[::1]:8080/')
    """
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}/"


def check_port_free(host: str, port: int) -> None:
    """Bind `host`:`port` once and release it, before the URL is printed.

    uvicorn reports a busy port only after the URL is on screen, as ``[Errno 98]`` and exit 3.

    :raises ConfigError: when the port is in use or the address cannot be bound
    """
    # Before this, a busy port printed the URL, then uvicorn's error, and exited 3
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as error:
        raise refuse(f"cannot bind {host!r}: {error.strerror}") from None
    family, kind, proto, _name, address = infos[0]
    with socket.socket(family, kind, proto) as probe:
        # uvicorn sets SO_REUSEADDR too: a port in TIME_WAIT is free for it, and so for us.
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(address)
        except OSError as error:
            if error.errno == errno.EADDRINUSE:
                raise refuse(
                    f"port {port} on {host} is in use; choose another with --port"
                ) from None
            raise refuse(f"cannot bind {host}:{port}: {error.strerror}") from None


def run(args: argparse.Namespace) -> int:
    """Serve the page on ``args.host``:``args.port`` until interrupted; return the exit status."""
    try:
        import uvicorn

        from ringkit.web.app import create_app
        from ringkit.web.budget import DEFAULT_BUDGET_S, ComputeGate
        from ringkit.web.live import LiveView
    except ImportError:
        print(f"ringkit: error: {INSTALL_HINT}", file=sys.stderr)
        return 1
    if args.metrics and args.store is None:
        raise refuse("--metrics shows a live ring's metrics: give --store URL as well")
    registry = _metrics_registry() if args.metrics else None
    check_port_free(args.host, args.port)
    store_url = (
        None if args.store is None else store_url_with_password(args.store, args.etcd_password_file)
    )
    live = (
        None
        if store_url is None
        else LiveView(ringkit.live.connect(store_url, metrics_registry=registry))
    )
    what = "simulator" if live is None else f"live ring of {shown_url(args.store)}"
    print(f"ringkit {what} on {page_url(args.host, args.port)} (Ctrl+C to stop)", flush=True)
    options: dict[str, Any] = {"host": args.host, "port": args.port, "log_level": "warning"}
    budget_s = DEFAULT_BUDGET_S if args.budget_s is None else args.budget_s
    # Worker processes: a computation holding the GIL in this process slows every cheap request.
    gate = ComputeGate(workers=args.compute_workers, budget_s=budget_s, processes=True)
    try:
        if live is None:
            uvicorn.run(create_app(gate=gate), **options)
        else:
            app = create_app(live, gate=gate, metrics_registry=registry)
            _serve_live(uvicorn, app, live, options)
    except KeyboardInterrupt:
        pass  # uvicorn re-raises the Ctrl+C it handled: stopping is how serving ends
    finally:
        if live is not None:
            live.close()
    return 0


def _metrics_registry() -> Any:
    """Return a registry for the live ring's metrics, or refuse when the extra is missing."""
    try:
        from prometheus_client import CollectorRegistry
    except ImportError:
        raise refuse("--metrics needs prometheus_client: pip install 'ringkit[metrics]'") from None
    return CollectorRegistry()


def _serve_live(uvicorn: Any, app: Any, live: LiveView, options: dict[str, Any]) -> None:
    """Serve `app`; on Ctrl+C, first answer every long poll of ``/api/live`` (close `live`).

    uvicorn waits for requests in flight before it stops, and a long poll waits up to 30 s.
    """

    class LiveServer(uvicorn.Server):  # type: ignore[misc]
        def handle_exit(self, sig: int, frame: Any) -> None:
            live.close()  # wakes the waiting requests, which answer at once
            super().handle_exit(sig, frame)

    LiveServer(uvicorn.Config(app, timeout_graceful_shutdown=2, **options)).run()
