"""The JSON form of a HashRing (version 1): what ``to_dict`` writes and ``from_dict`` reads.

::

    {"kind": "HashRing", "version": 1, "hasher": "xxh3_64", "vnodes": 160,
     "space": 18446744073709551616,
     "nodes": [{"name": "a", "weight": 1.0, "zone": "eu-1a", "address": "10.0.0.1:11211",
                "tokens": [40]}]}

``zone``, ``address`` and ``tokens`` (explicit tokens) appear only when set. Tokens and the
space are JSON integers (up to 2**64: Python reads them exactly; JavaScript needs BigInt).
A :class:`RingDescription` holds what the form says, so this module needs no ring to read or
write it: the ring builds one (``HashRing.to_dict``) or is built from one (``from_dict``).

>>> description = RingDescription.from_dict({"kind": "HashRing", "version": 1, "nodes": []})
>>> description.vnodes, description.hasher, description.space == SPACE_64
(160, 'xxh3_64', True)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ringkit.errors import ConfigError
from ringkit.hashing import DEFAULT_HASH
from ringkit.nodes import Node, coerce_nodes
from ringkit.ring.tokens import DEFAULT_VNODES, SPACE_64

__all__ = ["FORMAT_VERSION", "RingDescription"]

FORMAT_VERSION = 1


@dataclass(frozen=True, slots=True)
class RingDescription:
    """A ring as its JSON form states it: nodes, options and explicit tokens."""

    nodes: tuple[Node, ...]
    vnodes: object = DEFAULT_VNODES
    hasher: str = DEFAULT_HASH  # a registered name (hashing.registered_name)
    space: object = SPACE_64
    explicit: Mapping[str, Sequence[int]] | None = None

    def to_dict(self) -> dict[str, Any]:
        """Return the JSON-ready form."""
        explicit = self.explicit or {}
        nodes = []
        for node in self.nodes:
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
            "hasher": self.hasher,
            "vnodes": self.vnodes,
            "space": self.space,
            "nodes": nodes,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RingDescription:
        """Return what `data` describes (options are checked when the ring is built).

        :raises ConfigError: when `data` is not a version-1 HashRing description
        """
        if not isinstance(data, Mapping) or data.get("kind") != "HashRing":
            raise ConfigError(f"expected a HashRing description, got {_kind(data)}")
        if data.get("version") != FORMAT_VERSION:
            raise ConfigError(
                f"HashRing description version must be {FORMAT_VERSION}, "
                f"got {data.get('version')!r}"
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
        return cls(
            nodes,
            vnodes=data.get("vnodes", DEFAULT_VNODES),
            hasher=data.get("hasher", DEFAULT_HASH),
            space=data.get("space", SPACE_64),
            explicit=explicit,
        )


def _kind(data: object) -> str:
    if isinstance(data, Mapping):
        return f"kind={data.get('kind')!r}"
    return type(data).__name__
