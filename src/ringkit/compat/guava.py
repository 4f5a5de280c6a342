"""Guava's ``Hashing.consistentHash``: Java services' jump-style bucket choice, bit for bit.

Guava's function is the jump consistent hash of Lamping & Veach (2014) written with Java's
arithmetic: it draws its jumps from a 64-bit linear congruential generator seeded with the input
(``state = 2862933555777941757 * state + 1``, a double from the top 31 bits) and truncates
``(candidate + 1) / nextDouble()`` to a Java ``int``, saturating at ``Integer.MAX_VALUE``. The
paper's C++ rounds twice where Guava rounds once (``(b + 1) * (2**31 / x)`` against
``(b + 1) / (x / 2**31)``), so the two can only part where that quotient is within an ulp of an
integer; this module follows Guava's expression exactly.

Reference: google/guava ``guava/src/com/google/common/hash/Hashing.java`` (``consistentHash``,
``LinearCongruentialGenerator``) and the golden values of ``HashingTest``.

>>> [guava_consistent_hash(i, 100) for i in range(5)]
[0, 55, 62, 8, 45]
"""

from __future__ import annotations

from ringkit.errors import ConfigError

__all__ = ["guava_consistent_hash"]

_M64 = (1 << 64) - 1
_INT_MAX = (1 << 31) - 1


def guava_consistent_hash(key: int, buckets: int) -> int:
    """Return the bucket in [0, buckets) that Guava's ``consistentHash(key, buckets)`` returns.

    `key` is a Java ``long``: a signed 64-bit int, or an unsigned one (the same 64 bits, as
    ``HashCode.padToLong`` gives). Runtime: O(log buckets) expected.

    :raises ConfigError: when `buckets` < 1 or `key` does not fit in 64 bits
    :raises TypeError: when `key` or `buckets` is not an int
    """
    for name, value in (("key", key), ("buckets", buckets)):
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"{name} must be int, got {type(value).__name__}")
    if buckets < 1:
        raise ConfigError(f"buckets must be positive, got {buckets!r}")
    if not -(1 << 63) <= key <= _M64:
        raise ConfigError(f"key must fit in 64 bits (a Java long), got {key!r}")
    state = key & _M64
    candidate = 0
    while True:
        state = (2862933555777941757 * state + 1) & _M64
        next_double = ((state >> 33) + 1) / 2147483648.0
        # Java's (int) cast of a positive double saturates at Integer.MAX_VALUE.
        jump = min(int((candidate + 1) / next_double), _INT_MAX)
        if jump >= buckets:
            return candidate
        candidate = jump
