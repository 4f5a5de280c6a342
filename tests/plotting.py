"""matplotlib for the ``--plot`` tests: skipped locally when missing, a failure under CI.

CI installs the ``plot`` extra, so a missing matplotlib there is a broken setup.
"""

from __future__ import annotations

import importlib.util
import os

import pytest

__all__ = ["require_matplotlib"]


def require_matplotlib() -> None:
    """Skip the calling test when matplotlib is missing (fail instead under ``CI=true``)."""
    if importlib.util.find_spec("matplotlib") is not None:
        return
    if os.environ.get("CI"):
        pytest.fail("matplotlib is missing under CI; install the 'plot' extra")
    pytest.skip("matplotlib is not installed (pip install 'ringkit[plot]')")
