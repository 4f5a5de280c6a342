"""Fast lookup paths: each placement's scalar closure, its batch form and a plain
reference written here agree on every key.

The bound closures (bucket tables, inlined hashes, lock-free reads) exist only for speed, so
each test computes the owner the slow, obvious way: a linear scan of the points for a continuum,
the paper's loop for jump hash, every probe against every token for multi-probe, every score
for rendezvous, the full clockwise walk with exact caps for bounded load.
"""

from __future__ import annotations

import bisect
import hashlib
import math
import pickle
import zlib
from fractions import Fraction

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from ringkit import BoundedLoad, HashRing, JumpHash, MultiProbe, Node, Rendezvous
from ringkit.compat import Continuum, envoy_ring, ketama
from ringkit.compat.envoy import xx_hash
from ringkit.hashing import Hasher, Key, encode_key, get_hasher
from ringkit.strategies.jump import _exit_bounds, _make_plain_lookup, jump_hash, jump_hash_many
from tests.hypothesis_profiles import examples
from tests.hypothesis_strategies import key_lists, node_name_sets, node_names

MASK64 = (1 << 64) - 1
HASHERS = st.sampled_from(["xxh3_64", "fnv1a_32", "murmur3_32", "md5"])
server_counts = st.integers(min_value=1, max_value=12)


def names_of(count: int) -> list[str]:
    return [f"cache-{i}:11211" for i in range(count)]


def first_at_or_after(points: list[int], point: int) -> int:
    """The index of the first point >= `point` by linear scan, wrapping to 0."""
    return next((i for i, p in enumerate(points) if p >= point), 0)


# -- continua (ketama, Envoy) --------------------------------------------------------------------


def continuum_reference(layout: Continuum, key: Key, key_hash: object) -> str:
    assert callable(key_hash)
    index = first_at_or_after(layout.points.tolist(), key_hash(encode_key(key)))
    return layout.nodes[int(layout.owners[index])].name


def md5_word(data: bytes) -> int:
    """libketama's key hash through hashlib, not the builtin module the lookup uses."""
    return int.from_bytes(hashlib.md5(data).digest()[:4], "little")


@given(
    count=server_counts,
    weights=st.lists(st.integers(1, 900), min_size=12, max_size=12),
    variant=st.sampled_from(["libketama", "libmemcached", "spy", "twemproxy"]),
    keys=key_lists,
)
def test_ketama_scalar_equals_batch_and_linear_scan(
    count: int, weights: list[int], variant: str, keys: list[Key]
) -> None:
    servers = dict(zip(names_of(count), weights, strict=False))
    hash_name = "fnv1a_64" if variant == "twemproxy" else "md5"
    layout = ketama(servers, variant=variant)
    key_hash = md5_word if hash_name == "md5" else layout.hasher.function
    scalar = [layout.node_for(key) for key in keys]
    assert scalar == layout.node_for_many(keys)
    assert scalar == [continuum_reference(layout, key, key_hash) for key in keys]


@given(count=server_counts, min_ring_size=st.integers(1, 300), keys=key_lists)
def test_envoy_scalar_equals_batch_and_linear_scan(
    count: int, min_ring_size: int, keys: list[Key]
) -> None:
    layout = envoy_ring(names_of(count), min_ring_size=min_ring_size)
    scalar = [layout.node_for(key) for key in keys]
    assert scalar == layout.node_for_many(keys)
    assert scalar == [continuum_reference(layout, key, xx_hash) for key in keys]


@given(
    points=st.lists(st.integers(0, 2**32 - 1), min_size=1, max_size=300),
    crowd=st.integers(0, 2**32 - 64),
    keys=key_lists,
)
def test_continuum_buckets_with_ties_and_crowds(
    points: list[int], crowd: int, keys: list[Key]
) -> None:
    """Equal points (owner order decides) and a crowded bucket (a bisect inside it) stay exact.

    Half the keys hash into the crowd, so the bucket table's bisect branch is taken.
    """
    crowded = points + list(range(crowd, crowd + 40, 3)) + points[:5]
    nodes = (Node("a"), Node("b"), Node("c"))
    owners = [i % 3 for i in range(len(crowded))]

    def near_crowd(data: bytes) -> int:
        h = zlib.crc32(data)
        return crowd + h % 48 if h & 1 else h

    hasher = Hasher("near-crowd", near_crowd, 32)
    layout = Continuum.from_points(
        nodes, crowded, owners, hasher=hasher, rebuild=lambda _: layout, kind="test continuum"
    )
    scalar = [layout.node_for(key) for key in keys]
    assert scalar == layout.node_for_many(keys)
    assert scalar == [continuum_reference(layout, key, near_crowd) for key in keys]


# -- jump hash ---------------------------------------------------------------------------------


def jump_reference(key: int, buckets: int) -> int:
    """Lamping & Veach 2014, figure 1, transcribed."""
    b, j = -1, 0
    while j < buckets:
        b = j
        key = (key * 2862933555777941757 + 1) & MASK64
        j = int((b + 1) * (float(1 << 31) / float((key >> 33) + 1)))
    return b


@given(count=st.integers(1, 300), hasher=HASHERS, keys=key_lists)
def test_jump_scalar_equals_batch_and_paper(count: int, hasher: str, keys: list[Key]) -> None:
    placement = JumpHash([f"n{i}" for i in range(count)], hasher=hasher)
    function = get_hasher(hasher).function
    scalar = [placement.node_for(key) for key in keys]
    assert scalar == placement.node_for_many(keys)
    assert scalar == [f"n{jump_reference(function(encode_key(key)), count)}" for key in keys]
    assert pickle.loads(pickle.dumps(placement)).node_for_many(keys) == scalar


@given(
    hashes=st.lists(st.integers(0, MASK64), min_size=1, max_size=80),
    buckets=st.integers(1, 2**31 - 1),
)
def test_jump_hash_many_equals_jump_hash(hashes: list[int], buckets: int) -> None:
    many = jump_hash_many(np.array(hashes, dtype=np.uint64), buckets).tolist()
    assert (
        many
        == [jump_hash(h, buckets) for h in hashes]
        == [jump_reference(h, buckets) for h in hashes]
    )


# -- multi-probe ---------------------------------------------------------------------------------


def splitmix64(z: int) -> int:
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
    return z ^ (z >> 31)


def multiprobe_reference(names: list[str], probes: int, hasher: Hasher, key: Key) -> str:
    """Appleton & O'Reilly 2015: every probe against every token, the first closest wins."""
    tokens = sorted((hasher.point(name.encode()), name) for name in names)
    h1 = hasher.point(encode_key(key))
    best: tuple[int, str] | None = None
    for i in range(probes):
        probe = splitmix64((h1 + i * 0x9E3779B97F4A7C15) & MASK64)
        token, name = tokens[first_at_or_after([t for t, _ in tokens], probe)]
        distance = (token - probe) & MASK64
        if best is None or distance < best[0]:
            best = (distance, name)
    assert best is not None
    return best[1]


@given(count=st.integers(1, 40), probes=st.integers(1, 25), hasher=HASHERS, keys=key_lists)
def test_multiprobe_scalar_equals_batch_and_reference(
    count: int, probes: int, hasher: str, keys: list[Key]
) -> None:
    names = [f"n{i}" for i in range(count)]
    placement = MultiProbe(names, probes=probes, hasher=hasher)
    scalar = [placement.node_for(key) for key in keys]
    assert scalar == placement.node_for_many(keys)
    resolved = get_hasher(hasher)
    assert scalar == [multiprobe_reference(names, probes, resolved, key) for key in keys]
    assert pickle.loads(pickle.dumps(placement)).node_for_many(keys) == scalar


def test_multiprobe_equal_tokens_go_to_the_first_name() -> None:
    """Two nodes on one token (a constant hash): the tie goes to the name that sorts first."""
    constant = Hasher("constant", lambda data: 7, 64)
    placement = MultiProbe(["b", "a", "c"], hasher=constant)
    assert {placement.node_for(key) for key in ("x", "y", b"z", 5)} == {"a"}
    assert placement.node_for_many(["x", "y"]) == ["a", "a"]


# -- rendezvous ----------------------------------------------------------------------------------


def fmix64(z: int) -> int:
    z = ((z ^ (z >> 33)) * 0xFF51AFD7ED558CCD) & MASK64
    z = ((z ^ (z >> 33)) * 0xC4CEB9FE1A85EC53) & MASK64
    return z ^ (z >> 33)


def rendezvous_reference(nodes: list[Node], hasher: Hasher, key: Key) -> str:
    """Thaler & Ravishankar: every node's score; the logarithmic method for unequal weights."""
    h = hasher.function(encode_key(key))
    uniform = len({node.weight for node in nodes}) == 1
    scored = []
    for node in nodes:
        z = fmix64(h ^ hasher.function(node.name.encode()))
        score = z if uniform else -node.weight / math.log(((z >> 11) + 0.5) / (1 << 53))
        scored.append((score, node.name))
    return max(scored)[1]  # equal scores: the larger name


@given(
    count=st.integers(1, 70),  # past the 24 nodes scored in plain integers, the 64 packed
    weighted=st.booleans(),
    hasher=HASHERS,
    keys=key_lists,
)
def test_rendezvous_scalar_equals_batch_and_reference(
    count: int, weighted: bool, hasher: str, keys: list[Key]
) -> None:
    nodes = [Node(f"n{i}", weight=1 + (i % 3) * 0.5 if weighted else 1) for i in range(count)]
    placement = Rendezvous(nodes, hasher=hasher)
    scalar = [placement.node_for(key) for key in keys]
    assert scalar == placement.node_for_many(keys)
    assert scalar == [placement.nodes_for(key, 1)[0] for key in keys]
    resolved = get_hasher(hasher)
    assert scalar == [rendezvous_reference(nodes, resolved, key) for key in keys]
    assert pickle.loads(pickle.dumps(placement)).node_for_many(keys) == scalar


# -- bounded load --------------------------------------------------------------------------------


def bounded_reference(ring: HashRing, factor: float, held: dict[str, int], key: Key) -> str:
    """Mirrokni et al. 2018: the first node clockwise whose load is below its exact cap."""
    total_weight = sum(Fraction(node.weight) for node in ring.nodes)
    weight = {node.name: Fraction(node.weight) for node in ring.nodes}
    total = sum(held.values())
    for name in ring.nodes_for(key, len(ring)):
        cap = math.ceil(Fraction(factor) * (total + 1) * weight[name] / total_weight)
        if held.get(name, 0) < cap:
            return name
    raise AssertionError("the caps add up to more than the load: some node has room")


@given(
    count=st.integers(1, 8),
    factor=st.sampled_from([1.01, 1.25, 2.0]),
    load=st.lists(st.text(max_size=4), max_size=40),
    keys=key_lists,
)
def test_bounded_scalar_equals_batch_and_walk(
    count: int, factor: float, load: list[str], keys: list[Key]
) -> None:
    ring = HashRing([Node(f"n{i}", weight=1 + i % 2) for i in range(count)], vnodes=8)
    bounded = BoundedLoad(ring, balance_factor=factor)
    held: dict[str, int] = {}
    for key in load:  # hot keys pile load on a few nodes, so some owners are at their cap
        name = bounded.acquire(key)
        held[name] = held.get(name, 0) + 1
    scalar = [bounded.node_for(key) for key in keys]
    assert scalar == bounded.node_for_many(keys)
    assert scalar == [bounded_reference(ring, factor, held, key) for key in keys]
    assert bounded.loads() == {**dict.fromkeys(ring, 0), **held}  # lookups counted nothing


# -- 16-bit digest buckets, jump exit bounds, packed probes -------------------------------------


def bisect_reference(points: list[int], owners: list[str], point: int) -> str:
    """The owner of the first point >= `point`, wrapping: a plain bisect, no bucket table."""
    index = bisect.bisect_left(points, point)
    return owners[index if index < len(points) else 0]


@settings(max_examples=examples(5), deadline=None)
@given(
    count=st.integers(150, 250),
    variant=st.sampled_from(["libketama", "libmemcached", "spy"]),
    removed=st.integers(0, 149),
    keys=key_lists,
)
def test_ketama_md5_buckets_crowded_and_after_add_remove(
    count: int, variant: str, removed: int, keys: list[Key]
) -> None:
    """Hundreds of servers put points in many 16-bit buckets, so the bounded bisect runs.

    At 150-250 servers (24,000-40,000 points) a key's bucket holds points 30-45% of the time;
    the layout after adding a server and after removing one answers as a plain bisect does.
    """
    layout = ketama(names_of(count), variant=variant)
    added = layout.add("10.9.9.9:11212")
    for step in (layout, added, added.remove(names_of(count)[removed])):
        points, owners = step.points.tolist(), [step.nodes[i].name for i in step.owners.tolist()]
        expected = [bisect_reference(points, owners, md5_word(encode_key(key))) for key in keys]
        assert [step.node_for(key) for key in keys] == expected
        assert step.node_for_many(keys) == expected


@settings(max_examples=examples(30))
@given(names=node_name_sets, added=node_names, keys=key_lists)
def test_ketama_md5_lookup_after_add_and_remove(
    names: list[str], added: str, keys: list[Key]
) -> None:
    layout = ketama(names, variant="libketama")
    grown = layout.add(added) if added not in names else layout
    for step in (layout, grown, grown.remove(names[0])):
        if not len(step):
            continue
        points, owners = step.points.tolist(), [step.nodes[i].name for i in step.owners.tolist()]
        expected = [bisect_reference(points, owners, md5_word(encode_key(key))) for key in keys]
        assert [step.node_for(key) for key in keys] == expected


@given(buckets=st.integers(1, 65_536), data=st.data())
def test_jump_exit_bounds_are_exact(buckets: int, data: st.DataObject) -> None:
    """The state bound of each bucket is where the paper's next jump starts to leave."""
    bounds = _exit_bounds(buckets)
    assert len(bounds) == buckets
    sample = data.draw(st.lists(st.integers(0, buckets - 1), max_size=50))
    for b in [0, buckets - 1, *sample]:
        bound = bounds[b]
        d = bound >> 33
        assert bound == d << 33
        assert int((b + 1) * (float(1 << 31) / d)) >= buckets
        assert d == 1 << 31 or int((b + 1) * (float(1 << 31) / (d + 1))) < buckets


@given(count=st.integers(1, 200), grow=st.integers(1, 3), hasher=HASHERS, keys=key_lists)
def test_jump_lookup_after_add_and_remove(
    count: int, grow: int, hasher: str, keys: list[Key]
) -> None:
    function = get_hasher(hasher).function
    placement = JumpHash([f"n{i}" for i in range(count)], hasher=hasher)
    grown = placement
    for i in range(grow):
        grown = grown.add(f"n{count + i}")
    for step in (placement, grown, grown.remove(f"n{count + grow - 1}")):
        size = len(step)
        expected = [f"n{jump_reference(function(encode_key(key)), size)}" for key in keys]
        assert [step.node_for(key) for key in keys] == expected


@given(count=st.integers(1, 40), hasher=HASHERS, keys=key_lists)
def test_jump_plain_lookup_past_the_bound_tables(count: int, hasher: str, keys: list[Key]) -> None:
    """Past _BOUND_TABLE_MAX buckets the plain inlined loop answers: the paper's results too."""
    function = get_hasher(hasher).function
    names = tuple(f"n{i}" for i in range(count))
    lookup = _make_plain_lookup(function, names)
    expected = [f"n{jump_reference(function(encode_key(key)), count)}" for key in keys]
    assert [lookup(key) for key in keys] == expected


def multiprobe_bisect_reference(names: list[str], probes: int, hasher: Hasher, key: Key) -> str:
    """``multiprobe_reference`` with each probe's successor found by bisect (many tokens)."""
    tokens = sorted((hasher.point(name.encode()), name) for name in names)
    points = [t for t, _ in tokens]
    h1 = hasher.point(encode_key(key))
    best: tuple[int, str] | None = None
    for i in range(probes):
        probe = splitmix64((h1 + i * 0x9E3779B97F4A7C15) & MASK64)
        index = bisect.bisect_left(points, probe)
        token, name = tokens[index if index < len(points) else 0]
        distance = (token - probe) & MASK64
        if best is None or distance < best[0]:
            best = (distance, name)
    assert best is not None
    return best[1]


@settings(max_examples=examples(10), deadline=None)
@given(
    count=st.integers(3000, 6000),
    probes=st.sampled_from([1, 2, 21, 40]),
    hasher=HASHERS,
    keys=key_lists,
)
def test_multiprobe_probes_past_a_crowded_bucket(
    count: int, probes: int, hasher: str, keys: list[Key]
) -> None:
    """Thousands of tokens fill 5-9% of the 16-bit buckets, so many keys have a probe past its
    bucket's first token (the negative distance that makes the lookup bisect).
    """
    names = [f"n{i}" for i in range(count)]
    placement = MultiProbe(names, probes=probes, hasher=hasher)
    resolved = get_hasher(hasher)
    expected = [multiprobe_bisect_reference(names, probes, resolved, key) for key in keys]
    assert [placement.node_for(key) for key in keys] == expected


@given(
    names=node_name_sets,
    added=node_names,
    probes=st.integers(1, 25),
    hasher=HASHERS,
    keys=key_lists,
)
def test_multiprobe_lookup_after_add_and_remove(
    names: list[str], added: str, probes: int, hasher: str, keys: list[Key]
) -> None:
    placement = MultiProbe(names, probes=probes, hasher=hasher)
    grown = placement.add(added) if added not in names else placement
    resolved = get_hasher(hasher)
    for step in (placement, grown, grown.remove(names[0])):
        if not len(step):
            continue
        current = [node.name for node in step.nodes]
        expected = [multiprobe_reference(current, probes, resolved, key) for key in keys]
        assert [step.node_for(key) for key in keys] == expected
