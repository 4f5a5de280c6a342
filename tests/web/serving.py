"""Serve an app with uvicorn on a free loopback port, in a thread, for the browser tests."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


@contextmanager
def serving(app: Any, **options: Any) -> Iterator[str]:
    """Run `app` until the block ends; yield its base URL (``http://127.0.0.1:PORT``).

    The socket is bound before uvicorn starts, so the port cannot be taken in between.
    """
    import uvicorn  # the web extra; the browser tests skip or fail without it

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", **options)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()
