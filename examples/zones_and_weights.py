"""Weights and zones: a bigger node gets more keys; replicas land in different zones first."""

from __future__ import annotations

from collections import Counter

import ringkit


def main() -> None:
    nodes = [
        ringkit.Node("eu-1a-big", weight=2.0, zone="eu-1a"),
        ringkit.Node("eu-1a-small", zone="eu-1a"),
        ringkit.Node("eu-1b-1", zone="eu-1b"),
        ringkit.Node("eu-1c-1", zone="eu-1c"),
    ]
    ring = ringkit.HashRing(nodes)
    counts = Counter(ring.node_for_many([f"k{i}" for i in range(20_000)]))
    for name, share in ring.shares().items():
        print(f"{name:12} fair {ring.fair_shares()[name]:.1%}  share {share:.1%}  "
              f"keys {counts[name]}")  # fmt: skip
    replicas = ring.nodes_for("booking:42", 3)
    zones = {node.name: node.zone for node in nodes}
    assert len({zones[name] for name in replicas}) == 3
    print("3 replicas of booking:42 in 3 zones:", replicas)


if __name__ == "__main__":
    main()
