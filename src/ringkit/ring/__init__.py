"""The hash ring: sorted tokens and their owners, searched for a key's point.

- :mod:`ringkit.ring.ring`: :class:`HashRing`, the placement (vnodes, weights, zones, arcs);
- :mod:`ringkit.ring.tokens`: the token table behind it and its search (prefix table, closures);
- :mod:`ringkit.ring.preference`: preference lists, the distinct nodes clockwise, zone-diverse;
- :mod:`ringkit.ring.format`: the JSON form ``to_dict`` / ``from_dict`` read and write.

>>> from ringkit.ring import HashRing
>>> HashRing(["a", "b"]).nodes_for("k", 2) in (["a", "b"], ["b", "a"])
True
"""

from __future__ import annotations

from ringkit.ring.ring import Arc, HashRing, check_space, check_vnodes
from ringkit.ring.tokens import DEFAULT_VNODES, SPACE_64, vnode_count, vnode_label

__all__ = [
    "DEFAULT_VNODES",
    "SPACE_64",
    "Arc",
    "HashRing",
    "check_space",
    "check_vnodes",
    "vnode_count",
    "vnode_label",
]
