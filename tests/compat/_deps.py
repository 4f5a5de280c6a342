"""Optional test dependencies: skip locally when missing, fail under CI (which installs them)."""

from __future__ import annotations

import importlib
from types import ModuleType

from tests.servers import unavailable


def require(module: str, install: str) -> ModuleType:
    """Return the imported `module`; skip locally, fail under ``CI=true``, when it is missing."""
    try:
        return importlib.import_module(module)
    except ImportError:
        unavailable(f"{module} is not installed ({install})")
