"""Hypothesis profiles, and the example counts of tests that fix their own.

Profiles: "dev" (the default locally), "ci" (more examples, selected when CI=true) and "check"
(``make check``'s: the contributor's loop, half of dev's examples; ``make test`` and CI search
as deeply as before). ``HYPOTHESIS_PROFILE`` picks one by name.

A test that fixes its own ``max_examples`` (a state machine whose every example is many steps,
a property that builds rings per example) overrides the profile; :func:`examples` gives it its
count back under the profile: all of it under "dev" and "ci" (today's numbers), half under
"check".
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

__all__ = ["examples", "load_profile"]

_DEV_EXAMPLES = 40

settings.register_profile("dev", max_examples=_DEV_EXAMPLES, deadline=None)
settings.register_profile("check", max_examples=_DEV_EXAMPLES // 2, deadline=None)
settings.register_profile(
    "ci",
    max_examples=150,
    deadline=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)


def load_profile() -> None:
    """Load the profile ``HYPOTHESIS_PROFILE`` names, else "ci" under CI=true, else "dev"."""
    default = "ci" if os.environ.get("CI") else "dev"
    settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", default))


def examples(count: int) -> int:
    """Return `count` scaled by the loaded profile: never more than `count`, at least 1."""
    fraction = min(1.0, settings.default.max_examples / _DEV_EXAMPLES)
    return max(1, round(count * fraction))
