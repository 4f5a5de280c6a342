"""Regions of the key space: the sets of points a member holds, as sorted intervals.

An exclusive member compares what it holds at each epoch (did it gain anything, what did it
lose, what became owned), once per change in every member process. A region is a sorted list
of disjoint closed intervals of points ``[first, last]`` held as two uint64 arrays, so that
union, intersection and difference are a few numpy passes rather than Python loops over a
member's arcs (160 per member by default: the loops cost 1-2 ms of CPU per change in each
process, which ten processes on two cores pay one after another).

Points are those of the 64-bit hash space, ``0 .. 2**64 - 1``. An arc ``(start, end]`` that
wraps past the top is the two intervals ``[start + 1, 2**64 - 1]`` and ``[0, end]``; a ring
over a smaller space (ketama's 2**32) only ever uses the low part, the same way in every ring
compared.

>>> a = Region.of_arcs([Arc(10, 20, "a", 10)])
>>> b = Region.of_arcs([Arc(15, 30, "a", 15)])
>>> a.intersect(b).intervals(), a.subtract(b).intervals(), a.union(b).intervals()
([(16, 20)], [(11, 15)], [(11, 30)])
>>> Region.of_arcs([Arc(2**64 - 6, 4, "a", 10)]).intervals()
[(0, 4), (18446744073709551611, 18446744073709551615)]
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import numpy.typing as npt

from ringkit.ring import Arc, HashRing

__all__ = ["SPACE", "Region"]

#: The points of the hash space: a region holds some of ``0 .. SPACE - 1``.
SPACE = 2**64
_TOP = np.uint64(SPACE - 1)
_ONE = np.uint64(1)

Points = npt.NDArray[np.uint64]


class Region:
    """A set of points: sorted, disjoint, non-adjacent closed intervals ``[first, last]``."""

    __slots__ = ("firsts", "lasts")

    def __init__(self, firsts: Points, lasts: Points) -> None:
        """`firsts` and `lasts` must already be normalised (see :meth:`of_intervals`)."""
        self.firsts, self.lasts = firsts, lasts

    # -- making ----------------------------------------------------------------------------------

    @classmethod
    def empty(cls) -> Region:
        return cls(np.empty(0, np.uint64), np.empty(0, np.uint64))

    @classmethod
    def whole(cls) -> Region:
        return cls(np.zeros(1, np.uint64), np.full(1, _TOP, np.uint64))

    @classmethod
    def of_intervals(cls, firsts: Points, lasts: Points) -> Region:
        """The union of the closed intervals ``[firsts[i], lasts[i]]`` (any order, overlaps)."""
        keep = firsts <= lasts
        firsts, lasts = firsts[keep], lasts[keep]
        if len(firsts) == 0:
            return cls.empty()
        order = np.argsort(firsts, kind="stable")
        firsts, lasts = firsts[order], lasts[order]
        reach = np.maximum.accumulate(lasts)  # the furthest point covered so far
        # A new interval starts where a first lies beyond the reach before it plus one (the
        # subtraction cannot wrap: it is taken only where first > reach).
        before = reach[:-1]
        starts = np.empty(len(firsts), dtype=bool)
        starts[0] = True
        starts[1:] = (firsts[1:] > before) & (firsts[1:] - np.minimum(firsts[1:], before) > _ONE)
        at = np.flatnonzero(starts)
        ends = np.append(at[1:] - 1, len(firsts) - 1)
        return cls(firsts[at], reach[ends])

    @classmethod
    def of_arcs(cls, arcs: Iterable[Arc]) -> Region:
        """The points of `arcs`, each ``(start, end]`` of ``length`` points (wrapping or not)."""
        firsts: list[int] = []
        lasts: list[int] = []
        for arc in arcs:
            if arc.length >= SPACE or (arc.start == arc.end and arc.length):
                return cls.whole()
            if arc.length == 0:
                continue  # a token tied with another's: it owns no point
            if arc.start < arc.end:
                firsts.append(arc.start + 1)
                lasts.append(arc.end)
            else:  # wraps past the top of the circle
                if arc.start < SPACE - 1:
                    firsts.append(arc.start + 1)
                    lasts.append(SPACE - 1)
                firsts.append(0)
                lasts.append(arc.end)
        return cls.of_intervals(np.array(firsts, np.uint64), np.array(lasts, np.uint64))

    @classmethod
    def of_member(cls, ring: HashRing, name: str) -> Region:
        """The points `name` owns in `ring` (its arcs, read from the token table at once)."""
        if name not in ring:
            return cls.empty()
        tokens, owners = ring.tokens, ring.token_owners
        position = [node.name for node in ring.nodes].index(name)
        if len(tokens) and tokens[0] == tokens[-1]:  # every token at one point
            return cls.whole() if int(owners[0]) == position else cls.empty()
        at = np.flatnonzero(owners == position)
        ends = tokens[at]
        starts = tokens[at - 1]  # at 0: the last token, the arc that wraps past the top
        inside = starts < ends  # ties (start == end) own no point
        wraps = starts > ends
        top = wraps & (starts < _TOP)
        firsts = np.concatenate(
            [starts[inside] + _ONE, starts[top] + _ONE, np.zeros(wraps.sum(), np.uint64)]
        )
        lasts = np.concatenate([ends[inside], np.full(top.sum(), _TOP, np.uint64), ends[wraps]])
        return cls.of_intervals(firsts, lasts)

    # -- combining -------------------------------------------------------------------------------

    def union(self, other: Region) -> Region:
        return Region.of_intervals(
            np.concatenate([self.firsts, other.firsts]), np.concatenate([self.lasts, other.lasts])
        )

    def complement(self) -> Region:
        """The points not in this region."""
        if len(self.firsts) == 0:
            return Region.whole()
        # Gaps: before the first interval, between neighbours, after the last. Neighbours are
        # never adjacent, so every inner gap holds a point.
        firsts = np.concatenate([[np.uint64(0)], self.lasts + _ONE])
        lasts = np.concatenate([self.firsts - _ONE, [_TOP]])
        keep = np.ones(len(firsts), dtype=bool)
        keep[0] = self.firsts[0] > 0
        keep[-1] = self.lasts[-1] < _TOP
        return Region(firsts[keep], lasts[keep])

    def intersect(self, other: Region) -> Region:
        if len(self.firsts) == 0 or len(other.firsts) == 0:
            return Region.empty()
        # Each interval of this region meets a run of the other's: from the first that ends
        # at or after its first point to the last that starts at or before its last. Every
        # pair that meets gives one interval of the result, already sorted, disjoint and apart
        # (two of them lie in different intervals of one region or the other, which are apart).
        # A search per side, not the union of complements: half the numpy passes.
        first_met = np.searchsorted(other.lasts, self.firsts, side="left")
        past_met = np.searchsorted(other.firsts, self.lasts, side="right")
        counts = np.maximum(past_met - first_met, 0)
        total = int(counts.sum())
        if total == 0:
            return Region.empty()
        mine = np.repeat(np.arange(len(self.firsts)), counts)
        theirs = _runs(first_met, counts)  # the other's index of each pair
        return Region(
            np.maximum(self.firsts[mine], other.firsts[theirs]),
            np.minimum(self.lasts[mine], other.lasts[theirs]),
        )

    def subtract(self, other: Region) -> Region:
        if len(self.firsts) == 0 or len(other.firsts) == 0:
            return self
        return self.intersect(other.complement())

    # -- reading ---------------------------------------------------------------------------------

    def __bool__(self) -> bool:
        return len(self.firsts) > 0

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Region):
            return NotImplemented
        return bool(
            np.array_equal(self.firsts, other.firsts) and np.array_equal(self.lasts, other.lasts)
        )

    __hash__ = None  # type: ignore[assignment]

    def intervals(self) -> list[tuple[int, int]]:
        """The closed intervals, as Python ints."""
        return list(zip(self.firsts.tolist(), self.lasts.tolist(), strict=True))

    def holders(self, ring: HashRing) -> set[str]:
        """The members of `ring` that hold a point of this region (one replica each point).

        A point belongs to the first token at or after it (past the last token: the first).
        The tokens holding the points of ``[first, last]`` are those from the one holding
        ``first`` to the one holding ``last``; of tokens tied at one point only the first
        holds it, and the others are counted too (a holder too many, never one too few).

        >>> ring = HashRing.from_tokens({"a": [10], "b": [20], "c": [30]})
        >>> sorted(Region.of_arcs([Arc(12, 25, "x", 13)]).holders(ring))
        ['b', 'c']
        >>> sorted(Region.of_arcs([Arc(25, 5, "x", 2**64 - 20)]).holders(ring))
        ['a', 'c']
        """
        tokens, owners = ring.tokens, ring.token_owners
        if len(self.firsts) == 0 or len(tokens) == 0:
            return set()
        starts = np.searchsorted(tokens, self.firsts, side="left")
        stops = np.searchsorted(tokens, self.lasts, side="left")  # len(tokens): wraps to 0
        positions = np.unique(owners[_runs(starts, stops - starts + 1) % len(tokens)])
        names = [node.name for node in ring.nodes]
        return {names[int(position)] for position in positions}

    def arcs(self, name: str) -> tuple[Arc, ...]:
        """The region as arcs ``(start, end]`` of `name`, one arc where it wraps past the top."""
        parts = [(first - 1, last) for first, last in self.intervals()]  # as (start, end]
        if parts == [(-1, SPACE - 1)]:
            return (Arc(0, 0, name, SPACE),)
        if len(parts) > 1 and parts[0][0] == -1 and parts[-1][1] == SPACE - 1:
            (_, end), (start, _) = parts.pop(0), parts.pop()
            parts.append((start, end - SPACE))
        return tuple(
            Arc(lo % SPACE, hi % SPACE, name, hi - lo)
            for lo, hi in sorted(parts, key=lambda p: p[1])
        )

    def __repr__(self) -> str:
        return f"Region({self.intervals()!r})"


def _runs(starts: npt.NDArray[np.intp], counts: npt.NDArray[np.intp]) -> npt.NDArray[np.intp]:
    """The indices ``starts[i], starts[i] + 1, ...`` (``counts[i]`` of them) for every i, in order.

    >>> _runs(np.array([5, 0]), np.array([2, 3])).tolist()
    [5, 6, 0, 1, 2]
    """
    # Each run's first index, then one more per element of the run.
    runs: npt.NDArray[np.intp] = np.arange(int(counts.sum())) + np.repeat(
        starts - (np.cumsum(counts) - counts), counts
    )
    return runs
