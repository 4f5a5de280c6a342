"""The Starlette app: the simulator page and its JSON API (needs the ``web`` extra).

Routes: ``/`` (the page), ``/static/*`` (its script and style), and ``GET /api/meta``,
``/api/ring``, ``/api/lookup``, ``/api/remedies`` (hot-key remedies, :mod:`ringkit.web.remedies`),
``/api/balancers`` (the load-balancer lesson, :mod:`ringkit.web.balancers`),
``/api/fail_zone`` (a zone failure, :mod:`ringkit.web.zones`) and, for ``ringkit serve --store``,
``/api/live`` (a long poll
on a live ring, :mod:`ringkit.web.live`; documented in docs/web.md). Handlers only parse
(:mod:`ringkit.web.params`), call :mod:`ringkit.web.api` and answer JSON. A bad parameter is a
400 naming it; anything unexpected is a generic 500 and a log entry with the traceback, so no
internals reach the client. The computing handlers run on the threads of a
:class:`~ringkit.web.budget.ComputeGate` (one per core by default), never on the event loop, so
one slow request does not stall the others; past the gate's time budget a request is answered
503 with ``Retry-After`` instead of queueing without end.

>>> from starlette.testclient import TestClient
>>> client = TestClient(create_app())
>>> client.get("/api/lookup", params={"key": "booking-0001", "vnodes": "0"}).json()["error"]
{'param': 'vnodes', 'message': "vnodes must be in [1, 1024], got '0'", 'value': '0'}
"""

from __future__ import annotations

import contextlib
import html
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
from anyio import CapacityLimiter
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from ringkit.web import api
from ringkit.web.balancers import balancers_report, parse_balancers_query
from ringkit.web.budget import ComputeGate
from ringkit.web.live import LiveView
from ringkit.web.params import (
    ParamError,
    parse_fail_zone_query,
    parse_live_query,
    parse_lookup_query,
    parse_remedies_query,
    parse_ring_query,
)
from ringkit.web.remedies import remedies_report
from ringkit.web.zones import fail_zone_report

__all__ = ["LIVE_WAITERS", "STATIC", "create_app", "page_html"]

STATIC = Path(__file__).parent / "static"
# Long polls of /api/live waiting at once. Each waits on a thread of its own pool, never on the
# shared pool that files and other handlers use: 40 idle long polls took all 40 of anyio's
# default threads and made `/` and /api/live wait up to 28 s. Past this count a long poll is
# answered 503 with Retry-After (the page waits and asks again).
LIVE_WAITERS = 32
LIVE_RETRY_AFTER_S = 2
logger = logging.getLogger("ringkit.web")


async def _meta(request: Request) -> Response:
    # On the event loop (it only reads constants): no thread to wait for when the pool is busy.
    view: LiveView | None = request.app.state.live
    store = (
        None if view is None else f"{view.store.backend.describe()} (prefix {view.store.prefix})"
    )
    return JSONResponse({**api.meta(), "live": view is not None, "store": store})


async def _live(request: Request) -> Response:
    query = parse_live_query(request.query_params.multi_items())
    view: LiveView | None = request.app.state.live
    if view is None:
        raise ParamError(
            "store",
            "the live view needs a store, got none; start the server with "
            "ringkit serve --store etcd://HOST:PORT/PREFIX (or memory://NAME)",
            None,
        )
    # Blocking waits and lease reads run on threads, never on the event loop; the waits on
    # their own bounded pool (LIVE_WAITERS).
    if query.after_epoch is None:  # the current snapshot: no wait
        snapshot = await run_in_threadpool(view.wait_after, None, query.wait_s)
    else:
        waiters: CapacityLimiter = request.app.state.live_waiters
        try:
            waiters.acquire_nowait()  # at once, or never: a long poll must not queue
        except anyio.WouldBlock:
            raise HTTPException(
                503,
                f"{LIVE_WAITERS} live long polls are waiting already; retry",
                headers={"Retry-After": str(LIVE_RETRY_AFTER_S)},
            ) from None
        try:
            # The waiters' own threads (their count is bounded by the tokens just taken).
            snapshot = await anyio.to_thread.run_sync(
                view.wait_after,
                query.after_epoch,
                query.wait_s,
                limiter=request.app.state.live_threads,
            )
        finally:
            waiters.release()
    return JSONResponse(await run_in_threadpool(view.report, snapshot))


async def _ring(request: Request) -> Response:
    query = parse_ring_query(request.query_params.multi_items())
    return await _computed_json(request, api.ring_report, query)


async def _lookup(request: Request) -> Response:
    query = parse_lookup_query(request.query_params.multi_items())
    return await _computed_json(request, api.lookup_report, query)


async def _remedies(request: Request) -> Response:
    query = parse_remedies_query(request.query_params.multi_items())
    return await _computed_json(request, remedies_report, query)


async def _balancers(request: Request) -> Response:
    query = parse_balancers_query(request.query_params.multi_items())
    return await _computed_json(request, balancers_report, query)


async def _fail_zone(request: Request) -> Response:
    query = parse_fail_zone_query(request.query_params.multi_items())
    return await _computed_json(request, fail_zone_report, query)


async def _computed_json(
    request: Request, function: Callable[[Any], dict[str, Any]], query: object
) -> Response:
    """Return ``function(query)`` as JSON, computed and encoded through the app's gate (a 503
    past its budget).

    Encoding a maximal answer (20,000 keys, 65,536 tokens) is CPU work too: done on the event
    loop, it holds up every other request while it runs, /api/meta included.
    """
    # Encoded on the loop, 40 maximal requests at once made /api/meta take 10.8 s.
    gate: ComputeGate = request.app.state.gate
    body = await gate.run(_encoded, function, query)
    return Response(body, media_type="application/json")


def _encoded(function: Callable[[Any], dict[str, Any]], query: object) -> bytes:
    # JSONResponse's own encoding, off the event loop.
    content = function(query)
    return json.dumps(content, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode()


def page_html() -> str:
    """Return the page with its selects filled and the documented defaults selected.

    The script fills the controls from /api/meta too; rendering the choices here means the page
    shows the defaults before its script runs (a slow network, a screenshot, no JavaScript), not
    whichever option a browser selects first.
    """
    page = (STATIC / "index.html").read_text(encoding="utf-8")
    meta = api.meta()
    choices = {
        "hasher": [hasher["name"] for hasher in meta["hashers"]],
        "strategy": meta["strategies"],
    }
    for select, names in choices.items():
        default = meta["defaults"][select]
        options = "".join(
            f'<option value="{html.escape(name)}"{" selected" if name == default else ""}>'
            f"{html.escape(name)}</option>"
            for name in names
        )
        empty = f'<select id="{select}"></select>'
        if empty not in page:
            raise RuntimeError(f"index.html has no empty {empty}")
        page = page.replace(empty, f'<select id="{select}">{options}</select>')
    return page


async def _bad_param(request: Request, error: Exception) -> Response:
    assert isinstance(error, ParamError)
    body = {"error": {"param": error.param, "message": error.message, "value": error.value}}
    return JSONResponse(body, status_code=400)


async def _http_error(request: Request, error: Exception) -> Response:
    assert isinstance(error, HTTPException)
    body = {"error": {"param": None, "message": error.detail, "value": None}}
    return JSONResponse(body, status_code=error.status_code, headers=error.headers)


async def _unexpected(request: Request, error: Exception) -> Response:
    # Never show the client a traceback; the log has it.
    logger.error("unexpected error on %s", request.url, exc_info=error)
    message = "internal error; see the server log"
    body = {"error": {"param": None, "message": message, "value": None}}
    return JSONResponse(body, status_code=500)


def _metrics_of(registry: Any) -> Callable[[Request], Awaitable[Response]]:
    """The /metrics endpoint: `registry` in Prometheus' text format, at that path exactly.

    A route rather than prometheus_client's mounted ASGI app, which answers ``/metrics`` with a
    redirect to ``/metrics/``.
    """
    from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

    async def metrics(request: Request) -> Response:
        body = await anyio.to_thread.run_sync(generate_latest, registry)
        return Response(body, media_type=CONTENT_TYPE_LATEST)

    return metrics


def create_app(
    live: LiveView | None = None,
    *,
    gate: ComputeGate | None = None,
    metrics_registry: Any | None = None,
) -> Starlette:
    """Return the app: the page at ``/``, its files at ``/static``, the API under ``/api``.

    With `live`, ``/api/live`` shows that store and the page switches to the live view. `gate`
    caps the API's concurrent computations and times them (default: one per core, 10 s); the
    app closes it when it shuts down. With `metrics_registry` (a ``prometheus_client``
    registry), ``/metrics`` answers its metrics in Prometheus's text format.
    """
    gate = ComputeGate() if gate is None else gate

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        gate.warm()  # worker processes start now, not on the first request
        yield
        gate.close()

    page = page_html()

    async def _page(request: Request) -> Response:
        # From memory, on the event loop: no thread to wait for, whatever else is running.
        return HTMLResponse(page)

    routes = [
        Route("/", _page, methods=["GET"]),
        Route("/api/meta", _meta, methods=["GET"]),
        Route("/api/ring", _ring, methods=["GET"]),
        Route("/api/lookup", _lookup, methods=["GET"]),
        Route("/api/remedies", _remedies, methods=["GET"]),
        Route("/api/fail_zone", _fail_zone, methods=["GET"]),
        Route("/api/balancers", _balancers, methods=["GET"]),
        Route("/api/live", _live, methods=["GET"]),
        Mount("/static", StaticFiles(directory=STATIC), name="static"),
    ]
    if metrics_registry is not None:
        routes.append(Route("/metrics", _metrics_of(metrics_registry), methods=["GET"]))
    handlers = {ParamError: _bad_param, HTTPException: _http_error, Exception: _unexpected}
    app = Starlette(routes=routes, exception_handlers=handlers, lifespan=lifespan)
    app.state.live, app.state.gate = live, gate
    app.state.live_waiters = CapacityLimiter(LIVE_WAITERS)
    app.state.live_threads = CapacityLimiter(LIVE_WAITERS)
    return app
