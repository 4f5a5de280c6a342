"""Token allocation: a ring whose tokens are chosen by a planner instead of hashed.

Cassandra's allocator (CASSANDRA-7032) places each new node's tokens where they most improve the
spread of ownership; ringkit's planner does the same with its own greedy, balancing keyspace or
observed load, primary or replicated ownership:

- :mod:`~ringkit.strategies.allocation.allocator`: :func:`allocate_tokens` and
  :class:`AllocatedRing`, the placement;
- :mod:`~ringkit.strategies.allocation.measure`: what is balanced (keyspace, or load samples);
- :mod:`~ringkit.strategies.allocation.replicated`: replicated ownership and where to cut for it.

>>> len(AllocatedRing(["a", "b"], tokens=4).ring.tokens)
8
"""

from __future__ import annotations

from ringkit.strategies.allocation.allocator import (
    DEFAULT_TOKENS,
    STRATEGY,
    AllocatedRing,
    allocate_tokens,
)
from ringkit.strategies.allocation.replicated import replicated_shares

__all__ = ["DEFAULT_TOKENS", "STRATEGY", "AllocatedRing", "allocate_tokens", "replicated_shares"]
