"""The ring in a dozen lines: place keys, add a node, see that only the new node gained keys."""

from __future__ import annotations

import ringkit


def main() -> None:
    ring = ringkit.HashRing(["cache-a", "cache-b", "cache-c"])
    keys = [f"booking:{i}" for i in range(10_000)]
    before = ring.node_for_many(keys)
    bigger = ring.add("cache-d")
    after = bigger.node_for_many(keys)
    moved = [(old, new) for old, new in zip(before, after, strict=True) if old != new]
    assert all(new == "cache-d" for _, new in moved)  # keys move only to the new node
    print(f"moved {len(moved) / len(keys):.1%} of the keys, all to cache-d "
          f"(its share of the ring: {bigger.shares()['cache-d']:.1%})")  # fmt: skip
    print("preference list of booking:42:", bigger.nodes_for("booking:42", 3))


if __name__ == "__main__":
    main()
