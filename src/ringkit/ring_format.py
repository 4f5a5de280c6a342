"""The JSON form of a HashRing: ``to_dict`` / ``from_dict`` (version 1).

::

    {"kind": "HashRing", "version": 1, "hasher": "xxh3_64", "vnodes": 160,
     "space": 18446744073709551616,
     "nodes": [{"name": "a", "weight": 1.0, "zone": "eu-1a", "address": "10.0.0.1:11211",
                "tokens": [40]}]}

``zone``, ``address`` and ``tokens`` (explicit tokens) appear only when set. Tokens and the
space are JSON integers (up to 2**64: Python reads them exactly; JavaScript needs BigInt).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ringkit.errors import ConfigError
from ringkit.hashing import HASHERS
from ringkit.nodes import Node, coerce_nodes

if TYPE_CHECKING:
    from ringkit.ring import HashRing

__all__ = ["FORMAT_VERSION", "ring_from_dict", "ring_to_dict"]

FORMAT_VERSION = 1


def ring_to_dict(ring: HashRing) -> dict[str, Any]:
    """Return the JSON-ready description of `ring`.

    :raises ConfigError: when the ring uses an unregistered hasher
    """
    if HASHERS.get(ring.hasher.name) != ring.hasher:
        raise ConfigError(
            f"cannot serialise a ring with the unregistered hasher {ring.hasher.name!r}; "
            f"known: {', '.join(sorted(HASHERS))}"
        )
    explicit = ring.explicit_tokens()
    nodes = []
    for node in ring.nodes:
        entry: dict[str, Any] = {"name": node.name, "weight": node.weight}
        if node.zone is not None:
            entry["zone"] = node.zone
        if node.address is not None:
            entry["address"] = node.address
        if node.name in explicit:
            entry["tokens"] = list(explicit[node.name])
        nodes.append(entry)
    return {
        "kind": "HashRing",
        "version": FORMAT_VERSION,
        "hasher": ring.hasher.name,
        "vnodes": ring.vnodes,
        "space": ring.space,
        "nodes": nodes,
    }


def ring_from_dict(data: Mapping[str, Any]) -> tuple[tuple[Node, ...], dict[str, Any]]:
    """Return the nodes and options (vnodes, hasher, space, explicit) a description holds.

    :raises ConfigError: when `data` is not a version-1 HashRing description
    """
    if not isinstance(data, Mapping) or data.get("kind") != "HashRing":
        raise ConfigError(f"expected a HashRing description, got {_kind(data)}")
    if data.get("version") != FORMAT_VERSION:
        raise ConfigError(
            f"HashRing description version must be {FORMAT_VERSION}, got {data.get('version')!r}"
        )
    try:
        entries: Sequence[Mapping[str, Any]] = data["nodes"]
        nodes = coerce_nodes(
            [
                Node(
                    e["name"],
                    weight=e.get("weight", 1.0),
                    zone=e.get("zone"),
                    address=e.get("address"),
                )
                for e in entries
            ]
        )
        explicit = {e["name"]: e["tokens"] for e in entries if "tokens" in e}
    except (KeyError, TypeError, AttributeError) as error:
        raise ConfigError(f"malformed HashRing description: missing or bad {error}") from None
    options = {
        "vnodes": data.get("vnodes", 160),
        "hasher": data.get("hasher", "xxh3_64"),
        "space": data.get("space", 1 << 64),
        "explicit": explicit,
    }
    return nodes, options


def _kind(data: object) -> str:
    if isinstance(data, Mapping):
        return f"kind={data.get('kind')!r}"
    return type(data).__name__
