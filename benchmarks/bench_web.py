"""How long the simulator's API takes to answer, from the page's first state to the limits.

Two parts. First, each contender is one request through Starlette's TestClient (in process, no
sockets), so the figures are the server's own work: parsing, the library's placement and owners,
JSON. Second, the cheap routes under load: the app ``ringkit serve`` runs, in its own process
(its compute gate on threads, then on worker processes, as ``ringkit serve`` runs it), 40 maximal
simulation requests sent at once (63+1 nodes x 1024 vnodes, 20,000 keys), and while they are in
flight ``/api/meta`` and ``/`` asked again and again, one at a time, each timed. The same routes
are timed on the idle server first. Run by hand: ``python3 benchmarks/bench_web.py`` (needs the
web extra); ``--load-only`` skips the first part, ``--rounds N`` sets the loaded rounds,
``--workers threads|processes|both`` the gates compared.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from _harness import print_table, time_interleaved

SRC = Path(__file__).resolve().parents[1] / "src"

LIMIT_NODES = ",".join(f"n{i}" for i in range(63))
MAXIMAL = {"nodes": LIMIT_NODES, "vnodes": "1024", "keys": "20000", "add": "x"}

CASES: dict[str, tuple[str, dict[str, str]]] = {
    "page first state (3 nodes, 300 keys)": ("/api/ring", {}),
    "add D, 300 keys": ("/api/ring", {"add": "D"}),
    "add D, 128 vnodes": ("/api/ring", {"add": "D", "vnodes": "128"}),
    "add D, maglev": ("/api/ring", {"add": "D", "strategy": "maglev"}),
    "zipf, 128 vnodes": ("/api/ring", {"zipf": "1", "vnodes": "128"}),
    "lookup, 3 replicas": ("/api/lookup", {"key": "booking-0042", "replicas": "3"}),
    "limits: 63+1 nodes x 1024 vnodes, 20k keys": ("/api/ring", MAXIMAL),
}
HEAVY_REQUESTS = 40
CHEAP_ROUTES = ("/api/meta", "/")


def in_process() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Starlette 1.x prefers httpx2 for its TestClient
        from starlette.testclient import TestClient

    from ringkit.web.app import create_app

    client = TestClient(create_app())

    def request(path: str, params: dict[str, str]) -> None:
        response = client.get(path, params=params)
        assert response.status_code == 200, response.text

    contenders = {
        label: (lambda path=path, params=params: request(path, params))
        for label, (path, params) in CASES.items()
    }
    timings = time_interleaved(contenders, ops=1, repeats=5)
    baseline = "page first state (3 nodes, 300 keys)"
    print_table("API request time (one request per op)", timings, baseline, unit="ms")


def _get(url: str, timeout_s: float = 120.0) -> tuple[int, float]:
    """Return the status of GET `url` (body read in full) and its wall time."""
    start = time.perf_counter()
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as response:
            response.read()
            status = response.status
    except urllib.error.HTTPError as error:
        error.read()
        status = error.code
    return status, time.perf_counter() - start


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


# The app ``ringkit serve`` runs, with the compute gate's workers as threads or as processes.
_SERVER = """
import sys, uvicorn
from ringkit.web.app import create_app
from ringkit.web.budget import ComputeGate
app = create_app(gate=ComputeGate(processes=sys.argv[2] == "processes"))
uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning")
"""


def _start_server(pool: str) -> tuple[subprocess.Popen[bytes], str]:
    port = _free_port()
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    command = [sys.executable, "-c", _SERVER, str(port), pool]
    process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            _get(base + "/api/meta", timeout_s=2)
            return process, base
        except OSError:
            time.sleep(0.1)
    process.kill()
    raise RuntimeError("ringkit serve did not answer within 60 s")


def _loaded_round(base: str) -> tuple[dict[str, list[float]], list[int], float]:
    """Send the heavy requests at once; time the cheap routes in turn until all are answered."""
    heavy_url = f"{base}/api/ring?{urllib.parse.urlencode(MAXIMAL)}"
    statuses: list[int] = []
    lock = threading.Lock()

    def heavy() -> None:
        status, _ = _get(heavy_url)
        with lock:
            statuses.append(status)

    threads = [threading.Thread(target=heavy) for _ in range(HEAVY_REQUESTS)]
    start = time.perf_counter()
    for thread in threads:
        thread.start()
    time.sleep(0.2)  # let the heavy requests reach the server first
    cheap: dict[str, list[float]] = {route: [] for route in CHEAP_ROUTES}
    while any(thread.is_alive() for thread in threads):
        for route in CHEAP_ROUTES:
            status, elapsed_s = _get(base + route)
            assert status == 200, (route, status)
            cheap[route].append(elapsed_s)
    for thread in threads:
        thread.join()
    return cheap, statuses, time.perf_counter() - start


def under_load(rounds: int, pools: list[str]) -> None:
    print(f"\nCheap routes while {HEAVY_REQUESTS} maximal /api/ring requests are in flight")
    print("| workers | round | route | requests | median (ms) | max (ms) | idle median (ms) |")
    print("|---|---|---|---:|---:|---:|---:|")
    servers = {pool: _start_server(pool) for pool in pools}
    try:
        idle: dict[str, dict[str, list[float]]] = {}
        for pool, (_, base) in servers.items():
            _get(f"{base}/api/ring?{urllib.parse.urlencode(MAXIMAL)}")  # warm-up: imports, caches
            idle[pool] = {
                route: [_get(base + route)[1] for _ in range(20)] for route in CHEAP_ROUTES
            }
        for round_number in range(1, rounds + 1):
            for pool, (_, base) in servers.items():  # interleaved: a noisy minute hits both
                cheap, statuses, total_s = _loaded_round(base)
                for route, times in cheap.items():
                    print(
                        f"| {pool} | {round_number} | {route} | {len(times)} | "
                        f"{statistics.median(times) * 1e3:,.1f} | {max(times) * 1e3:,.1f} | "
                        f"{statistics.median(idle[pool][route]) * 1e3:,.1f} |"
                    )
                answered = {code: statuses.count(code) for code in sorted(set(statuses))}
                print(f"| {pool} | {round_number} | heavy: {answered} in {total_s:.1f} s | | | | |")
    finally:
        for process, _ in servers.values():
            process.terminate()
            process.wait(timeout=10)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--load-only", action="store_true")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--workers",
        choices=["threads", "processes", "both"],
        default="both",
        help="the compute gate's workers under load (default: both, interleaved)",
    )
    args = parser.parse_args()
    if not args.load_only:
        in_process()
    pools = ["threads", "processes"] if args.workers == "both" else [args.workers]
    under_load(args.rounds, pools)


if __name__ == "__main__":
    main()
