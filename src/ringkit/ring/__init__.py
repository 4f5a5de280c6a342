"""The hash ring: sorted tokens and their owners, searched for a key's point.

- :mod:`ringkit.ring.ring`: :class:`HashRing`, the placement (vnodes, weights, zones, arcs);
- :mod:`ringkit.ring.tokens`: the token table behind it and its search (prefix table, closures);
- :mod:`ringkit.ring.preference`: preference lists, the distinct nodes clockwise, zone-diverse;
- :mod:`ringkit.ring.format`: the JSON form ``to_dict`` / ``from_dict`` read and write;
- :mod:`ringkit.ring.trace`: the clockwise walk of one key (``HashRing.trace``);
- :mod:`ringkit.ring.shuffle`: shuffle sharding, a stable sub-ring per tenant
  (``HashRing.shuffle_shard``).

>>> from ringkit.ring import HashRing
>>> HashRing(["a", "b"]).nodes_for("k", 2) in (["a", "b"], ["b", "a"])
True
"""

from __future__ import annotations

from ringkit.ring.ring import Arc, HashRing, check_space, check_vnodes
from ringkit.ring.shuffle import shard_collision_probability
from ringkit.ring.tokens import DEFAULT_VNODES, SPACE_64, vnode_count, vnode_label

__all__ = [
    "DEFAULT_VNODES",
    "SPACE_64",
    "Arc",
    "HashRing",
    "check_space",
    "check_vnodes",
    "shard_collision_probability",
    "vnode_count",
    "vnode_label",
]
