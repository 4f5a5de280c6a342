"""How soon an HAProxy backend follows a live ring: from the etcd write to the proxy's routing.

    python benchmarks/bench_lb.py                 # 20 joins and 20 leaves, one etcd, one HAProxy
    python benchmarks/bench_lb.py --changes 50

One etcd (Debian's etcd-server) and one HAProxy (Debian's haproxy, admin socket, ``balance
hdr(X-Key)`` with ``hash-type consistent``) on loopback, three members behind it and a
``ringkit lb``-style :class:`HAProxyController` following the ring in a thread. Each change is
a probe member joining (with an address whose backend answers its name) and then leaving:

- join: timed from the moment before ``store.join`` writes the record to the first request,
  for a key the controller's layout gives the probe, that the probe's backend answers;
- leave: from before ``member.leave()`` to the first request for that key answered by
  another backend (HAProxy drained the probe: its points left the ring).

Requests go through HAProxy one at a time, as fast as they come back. Reported: median and
p99 over the changes, in milliseconds.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT))

from tests.lb.proxies import haproxy, name_servers, owner_of  # noqa: E402
from tests.servers import etcd_server  # noqa: E402

import ringkit.live  # noqa: E402
from ringkit.lb import HAProxyController  # noqa: E402

KEYS = [f"user-{i}" for i in range(2000)]


def _until(condition: object, timeout_s: float = 30.0) -> float:
    """Poll `condition` as fast as requests return; return the monotonic time it became true."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():  # type: ignore[operator]
            return time.monotonic()
    raise TimeoutError(f"not reached within {timeout_s} s")


def _percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def run(changes: int) -> tuple[list[float], list[float]]:
    """Return the join and leave times (seconds) of `changes` probe members."""
    joins: list[float] = []
    leaves: list[float] = []
    with (
        etcd_server() as etcd,
        name_servers(["a", "b", "c", "probe"]) as backends,
        haproxy() as proxy,
    ):
        url = etcd.url("bench-lb")
        with ringkit.live.connect(url) as members, ringkit.live.connect(url) as store:
            for name in ("a", "b", "c"):
                members.join(name, data={"address": backends[name].address}, ttl_s=5)
            with HAProxyController(store, str(proxy.socket), "be", drain_timeout_s=5) as lb:
                _until(lambda: len(lb.servers()) == 3)
                for index in range(changes):
                    name = f"probe-{index}"
                    started = time.monotonic()
                    member = members.join(
                        name, data={"address": backends["probe"].address}, ttl_s=5
                    )

                    def routed(name: str = name) -> bool:
                        if name not in {s.name for s in lb.servers()}:
                            return False
                        key = next(k for k in KEYS if lb.layout().node_for(k) == name)
                        return owner_of(proxy.port, key) == "probe"

                    joins.append(_until(routed) - started)
                    key = next(k for k in KEYS if lb.layout().node_for(k) == name)
                    started = time.monotonic()
                    member.leave()
                    leaves.append(_until(lambda key=key: owner_of(proxy.port, key) != "probe"))
                    leaves[-1] -= started
                    _until(lambda name=name: name not in {s.name for s in lb.servers()})
    return joins, leaves


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--changes", type=int, default=20)
    args = parser.parse_args()
    joins, leaves = run(args.changes)
    print(f"{args.changes} changes (etcd write to HAProxy routing), ms")
    print(f"{'change':<8} {'median':>8} {'p99':>8} {'min':>8} {'max':>8}")
    for label, values in (("join", joins), ("leave", leaves)):
        ms = [v * 1000 for v in values]
        print(
            f"{label:<8} {statistics.median(ms):8.1f} {_percentile(ms, 0.99):8.1f} "
            f"{min(ms):8.1f} {max(ms):8.1f}"
        )


if __name__ == "__main__":
    main()
