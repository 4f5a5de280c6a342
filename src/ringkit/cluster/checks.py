"""The small rules of the cache client's options, each written once, each failing one way.

An option of the wrong type and an option out of range are one mistake to the user, "this
value cannot be used", so every rule here raises :class:`~ringkit.errors.ConfigError` (a
``ValueError``) naming the option and the value given, whatever was wrong with it. ``bool`` is
refused wherever a number is asked for: ``True`` is an ``int`` to Python, never a count or a
duration to a user. Keys and values keep their own ``TypeError`` (``key must be str or
bytes``): they are data, not options.

>>> positive_int("replicas", 2)
2
>>> positive_int("replicas", True)
Traceback (most recent call last):
...
ringkit.errors.ConfigError: replicas must be an int >= 1, got True
>>> positive_seconds("ttl_s", 0.5)
0.5
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, TypeGuard, TypeVar

from ringkit.errors import ConfigError

__all__ = [
    "callables",
    "instance_or_none",
    "int_in_range",
    "is_flag",
    "mapping",
    "non_negative_int",
    "non_negative_seconds",
    "one_of",
    "positive_int",
    "positive_int_or_none",
    "positive_seconds",
    "positive_seconds_or_none",
    "text",
]

T = TypeVar("T")


def _is_number(value: object) -> TypeGuard[int | float]:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def positive_int(label: str, value: object) -> int:
    """Return `value` if it is an int >= 1.

    :raises ConfigError: naming `label` and the value otherwise
    """
    if isinstance(value, int) and not isinstance(value, bool) and value >= 1:
        return value
    raise ConfigError(f"{label} must be an int >= 1, got {value!r}")


def positive_int_or_none(label: str, value: object) -> int | None:
    """Return `value` if it is None or an int >= 1.

    :raises ConfigError: naming `label` and the value otherwise
    """
    if value is None or (isinstance(value, int) and not isinstance(value, bool) and value >= 1):
        return value
    raise ConfigError(f"{label} must be an int >= 1 or None, got {value!r}")


def int_in_range(label: str, value: object, low: int, high: int, why: str = "") -> int:
    """Return `value` if it is an int in [`low`, `high`]; `why` explains the bounds.

    :raises ConfigError: naming `label`, the range and the value otherwise
    """
    if isinstance(value, int) and not isinstance(value, bool) and low <= value <= high:
        return value
    reason = f" ({why})" if why else ""
    raise ConfigError(f"{label} must be an int in [{low}, {high}]{reason}, got {value!r}")


def positive_seconds(label: str, value: object) -> float:
    """Return `value` if it is a finite number of seconds > 0.

    :raises ConfigError: naming `label` and the value otherwise (also for NaN and infinity)
    """
    if _is_number(value) and math.isfinite(value) and value > 0:
        return value
    raise ConfigError(f"{label} must be a number > 0, got {value!r}")


def positive_seconds_or_none(label: str, value: object) -> float | None:
    """Return `value` if it is None or a finite number of seconds > 0.

    :raises ConfigError: naming `label` and the value otherwise
    """
    if value is None:
        return None
    if _is_number(value) and math.isfinite(value) and value > 0:
        return value
    raise ConfigError(f"{label} must be a number > 0 or None, got {value!r}")


def non_negative_seconds(label: str, value: object) -> float:
    """Return `value` if it is a finite number of seconds >= 0.

    :raises ConfigError: naming `label` and the value otherwise
    """
    if _is_number(value) and math.isfinite(value) and value >= 0:
        return value
    raise ConfigError(f"{label} must be a number >= 0, got {value!r}")


def non_negative_int(label: str, value: object) -> int:
    """Return `value` if it is an int >= 0.

    :raises ConfigError: naming `label` and the value otherwise
    """
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    raise ConfigError(f"{label} must be an int >= 0, got {value!r}")


def callables(label: str, values: Iterable[object]) -> tuple[Callable[..., Any], ...]:
    """Return `values` as a tuple if each is callable.

    :raises ConfigError: naming `label` and the first value that is not
    """
    found: list[Callable[..., Any]] = []
    for value in values:
        if not callable(value):
            raise ConfigError(f"each of {label} must be callable, got {value!r}")
        found.append(value)
    return tuple(found)


def is_flag(label: str, value: object) -> bool:
    """Return `value` if it is a bool (1 and "yes" are not).

    :raises ConfigError: naming `label` and the value otherwise
    """
    if not isinstance(value, bool):
        raise ConfigError(f"{label} must be True or False, got {value!r}")
    return value


def one_of(label: str, value: object, choices: Sequence[str]) -> str:
    """Return `value` if it is one of `choices`.

    :raises ConfigError: naming `label`, the choices and the value otherwise
    """
    if not isinstance(value, str) or value not in choices:
        raise ConfigError(f"{label} must be one of {', '.join(choices)}, got {value!r}")
    return value


def instance_or_none(label: str, value: object, kind: type[T]) -> T | None:
    """Return `value` if it is None or a `kind`.

    :raises ConfigError: naming `label`, the kind and the value otherwise
    """
    if value is not None and not isinstance(value, kind):
        raise ConfigError(f"{label} must be a {kind.__name__} or None, got {value!r}")
    return value


def mapping(label: str, value: object, of: str) -> Mapping[Any, Any]:
    """Return `value` if it is a mapping; `of` says what it maps (``"node name to URL"``).

    The message names the type given, never its contents: a mapping of credentials holds
    passwords.

    :raises ConfigError: naming `label` and the type of the value otherwise
    """
    if not isinstance(value, Mapping):
        raise ConfigError(f"{label} must be a mapping of {of}, got {type(value).__name__}")
    return value


def text(label: str, value: object) -> str:
    """Return `value` if it is a str.

    The message names the type given, never the value: bytes given for a URL may hold its
    password.

    :raises ConfigError: naming `label` and the type of the value otherwise
    """
    if not isinstance(value, str):
        raise ConfigError(f"{label} must be a str, got {type(value).__name__}")
    return value
