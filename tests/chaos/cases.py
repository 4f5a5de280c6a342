"""Which fault kinds run where: the one list to edit when a fix lands.

`CI_CASES` run once each inside the normal test suite (``tests/chaos/test_chaos.py``): the cases
whose guarantee the current code meets. `PENDING` are the cases that still find violations,
each with the issue 16 item that fixes it; move a case to `CI_CASES` when its fix has merged
(``make chaos FAULTS=pause`` first, to see 20 seeds pass). ``make chaos`` runs every kind.
"""

from __future__ import annotations

from tests.chaos.nemesis import BACKENDS, FAULTS
from tests.chaos.run import CONFIGS, Case

__all__ = ["CI_CASES", "PENDING", "long_cases"]

CI_CASES: list[Case] = [
    Case("kill", "memcached", "read_all"),
]

#: Cases that violate their guarantee today, and why (issue 16 item).
PENDING: dict[Case, str] = {}


def long_cases(fault: str) -> list[Case]:
    """Every backend and configuration `fault` applies to, in a fixed order."""
    return [Case(fault, backend, config) for backend in BACKENDS[fault] for config in CONFIGS]


assert set(BACKENDS) == set(FAULTS)
