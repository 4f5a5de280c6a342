"""The public surface: ``ringkit.__all__`` is sorted, complete and importable (httpx's test)."""

from __future__ import annotations

import ringkit


def _isort_key(name: str) -> tuple[int, str]:
    # The order ruff's RUF022 keeps: CONSTANTS, then CamelCase, then everything else.
    if name.isupper():
        return (0, name)
    return (1, name) if name[:1].isupper() else (2, name)


def test_all_is_sorted_and_every_name_exists() -> None:
    assert ringkit.__all__ == sorted(ringkit.__all__, key=_isort_key)
    for name in ringkit.__all__:
        assert hasattr(ringkit, name), name


def test_every_public_member_is_exported() -> None:
    # dir(), not vars(): most names load lazily, so vars() holds only those loaded so far.
    public = {
        name
        for name in dir(ringkit)
        if not name.startswith("_")
        and getattr(getattr(ringkit, name), "__module__", "").startswith("ringkit")
    }
    assert public <= set(ringkit.__all__)
    assert set(ringkit._LAZY) <= set(ringkit.__all__)


def test_errors_subclass_the_builtins_they_refine() -> None:
    assert issubclass(ringkit.ConfigError, ValueError)
    assert issubclass(ringkit.EmptyRingError, LookupError)
    assert issubclass(ringkit.UnknownNodeError, KeyError)
    assert issubclass(ringkit.DuplicateNodeError, ValueError)
    assert issubclass(ringkit.CapacityError, RuntimeError)
    assert issubclass(ringkit.UnsupportedError, NotImplementedError)
    assert issubclass(ringkit.ParamError, ringkit.ConfigError)
    assert issubclass(ringkit.QuorumError, ringkit.BackendError)
    assert issubclass(ringkit.StaleViewError, RuntimeError)
    assert issubclass(ringkit.ViewConflictError, RuntimeError)
    assert all(
        issubclass(error, ringkit.RingkitError)
        for error in (ringkit.ConfigError, ringkit.BackendError, ringkit.UnknownNodeError)
    )


def test_every_error_class_lives_in_ringkit_errors() -> None:
    # One tree: an exception class defined anywhere else in the package is a stray.
    import ast
    from pathlib import Path

    source = Path(ringkit.__file__).parent
    strays = [
        f"{path.relative_to(source)}:{node.lineno} {node.name}"
        for path in source.rglob("*.py")
        if path.name != "errors.py"
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.ClassDef) and node.name.endswith(("Error", "Exception"))
    ]
    assert strays == []
