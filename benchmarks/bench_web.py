"""How long the simulator's API takes to answer, from the page's first state to the limits.

Each contender is one request through Starlette's TestClient (in process, no sockets), so the
figures are the server's own work: parsing, the library's placement and owners, JSON. Run by
hand: ``python3 benchmarks/bench_web.py`` (needs the web extra).
"""

from __future__ import annotations

import sys
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from _harness import print_table, time_interleaved

with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # Starlette 1.x prefers httpx2 for its TestClient
    from starlette.testclient import TestClient

from ringkit.web.app import create_app

LIMIT_NODES = ",".join(f"n{i}" for i in range(63))

CASES: dict[str, tuple[str, dict[str, str]]] = {
    "page first state (3 nodes, 300 keys)": ("/api/ring", {}),
    "add D, 300 keys": ("/api/ring", {"add": "D"}),
    "add D, 128 vnodes": ("/api/ring", {"add": "D", "vnodes": "128"}),
    "add D, maglev": ("/api/ring", {"add": "D", "strategy": "maglev"}),
    "zipf, 128 vnodes": ("/api/ring", {"zipf": "1", "vnodes": "128"}),
    "lookup, 3 replicas": ("/api/lookup", {"key": "booking-0042", "replicas": "3"}),
    "limits: 63+1 nodes x 1024 vnodes, 20k keys": (
        "/api/ring",
        {"nodes": LIMIT_NODES, "vnodes": "1024", "keys": "20000", "add": "x"},
    ),
}


def main() -> None:
    client = TestClient(create_app())

    def request(path: str, params: dict[str, str]) -> None:
        response = client.get(path, params=params)
        assert response.status_code == 200, response.text

    contenders = {
        label: (lambda path=path, params=params: request(path, params))
        for label, (path, params) in CASES.items()
    }
    timings = time_interleaved(contenders, ops=1, repeats=5)
    print_table("API request time (one request per op)", timings, "page first state (3 nodes, "
                "300 keys)", unit="ms")  # fmt: skip


if __name__ == "__main__":
    main()
