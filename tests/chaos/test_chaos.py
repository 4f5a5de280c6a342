"""The short chaos run of the normal test suite: each case of `CI_CASES` once, seeded.

Real servers, three client processes and a nemesis (see ``run.py``); the guarantee checked is
the one docs/cluster.md states for the case's configuration, less the violation categories
``cases.TOLERATED`` lists until their fixes land. The long run is ``make chaos``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.chaos.cases import CI_CASES, TOLERATED
from tests.chaos.run import Case, Settings, run_once
from tests.servers import require_binary

SHORT = Settings(load_s=2.5, tail_s=1.0)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("case", CI_CASES, ids=lambda case: case.label)
def test_chaos_history_meets_the_guarantee(case: Case, tmp_path: Path) -> None:
    require_binary("redis-server" if case.backend == "redis" else "memcached", case.backend)
    result = run_once(case, 16, SHORT, tmp_path)
    print(result.line)  # shown with -s, and in the report of a failure
    assert result.faults, "the nemesis injected no fault"
    assert result.verdict.reads >= 10, result.line  # a loaded machine runs few; none is a bug
    violations = [a for a in result.verdict.violations if a.category not in TOLERATED]
    assert violations == [], "\n".join([result.line, *result.excerpts(violations)])
