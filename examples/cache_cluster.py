"""A replicated cache on three in-process servers: a server fails, reads fall back, it returns."""

from __future__ import annotations

from ringkit import HashRing
from ringkit.cluster import ShardedClient, memory_store


def main() -> None:
    servers = {name: f"memory://example-{name}" for name in ("cache-a", "cache-b", "cache-c")}
    client = ShardedClient(HashRing(list(servers)), servers, replicas=2, dead_timeout_s=0)
    client.set_many({f"booking:{i}": {"seat": i} for i in range(100)})
    primary = client.replicas_for("booking:42")[0]
    memory_store(f"example-{primary}").unavailable = True  # the server goes down
    assert client.get("booking:42") == {"seat": 42}  # read from the second replica
    print(f"{primary} is down: {client.down_servers}; booking:42 still reads", end=" ")
    print(client.get("booking:42"))
    memory_store(f"example-{primary}").unavailable = False  # it comes back
    print("after a health check, down:", client.check_health())
    for name, stats in client.stats().items():
        print(
            f"{name}: {stats.calls} calls, {stats.hits} hits, {stats.errors} errors, "
            f"{stats.failovers} failovers, {stats.readmissions} readmissions"
        )


if __name__ == "__main__":
    main()
