"""Optional test dependencies: skip locally when missing, fail under CI (which installs them)."""

from __future__ import annotations

import importlib
import os
from types import ModuleType

import pytest


def require(module: str, install: str) -> ModuleType:
    """Return the imported `module`; skip locally, fail under ``CI=true``, when it is missing."""
    try:
        return importlib.import_module(module)
    except ImportError:
        message = f"{module} is not installed ({install})"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
