"""The live ring: members that join and leave, shared through etcd, seen at one epoch by all.

Processes that share a ring learn it from one authority, etcd: each member registers a record
under a lease it keeps alive (liveness), every store follows the records with a watch (no
polling), and each change under the ring's prefix is a new *epoch*, the etcd revision of that
change, at which every process builds the identical ring (Dynamo, DeCandia et al. 2007, gossips
membership instead; dskit's ring and tooz's partitioner keep it in a coordination service, as
here). ``memory://NAME`` is the same model inside one process. See docs/live.md.

>>> import ringkit.live
>>> store = ringkit.live.connect("memory://live-doctest")
>>> member = store.join("worker-1", ttl_s=5)
>>> snap = store.wait_for(lambda s: "worker-1" in s.ring)
>>> snap.members["worker-1"].state, member.owns("any-key")
('active', True)
>>> member.leave()
>>> store.close()
"""

from __future__ import annotations

from ringkit.live.change import Change, EmptySideMovement, MemberChange, movement_between
from ringkit.live.dispatch import Subscription
from ringkit.live.member import Member, choose_tokens
from ringkit.live.snapshot import STATES, MemberInfo, Snapshot
from ringkit.live.store import Store, connect, open_store_backend
from ringkit.live.transitions import OpenInterval, Transition, TransitionLog
from ringkit.live.urls import StoreURL, parse_store_url

__all__ = [
    "STATES",
    "Change",
    "EmptySideMovement",
    "Member",
    "MemberChange",
    "MemberInfo",
    "OpenInterval",
    "Snapshot",
    "Store",
    "StoreURL",
    "Subscription",
    "Transition",
    "TransitionLog",
    "choose_tokens",
    "connect",
    "movement_between",
    "open_store_backend",
    "parse_store_url",
]
