"""Records are input: every record under a live ring's prefix is checked before it is used.

Anyone with write access to etcd (an operator with ``etcdctl``, a script, an older or newer
ringkit) can put any bytes under ``PREFIX/members/``. A store therefore reads each record as it
reads any untrusted input: a record that is not exactly what ringkit writes (a weight of -1 or
"nan", a zone that is a list, a token of -5, 2**64 or 1e400, a ``table`` holding ``[]``, bytes
that are not JSON, a member record whose ``name`` differs from the name its key gives) is
*skipped*: it takes no part in the ring, it is logged once with its key and the reason, and it
is listed in every snapshot's ``skipped`` (which ``ringkit ring status`` shows). The decision
depends on the record's bytes and key only, so every store skips the same records and builds
the same ring at each epoch (Kubernetes' API server validates objects the same way before they
enter its store; here the writer cannot be stopped, so the readers must agree to ignore).

>>> decode_member_record("/r/members/a", b'{"name": "w1"}', 0, "/r/members/")
... # doctest: +ELLIPSIS
Traceback (most recent call last):
...
ringkit.errors.ConfigError: member record /r/members/a must name the member its key ... got 'w1'
"""

from __future__ import annotations

import json
import math
from typing import Any

from ringkit.errors import ConfigError
from ringkit.live.snapshot import STATES, MemberInfo, SkippedRecord, decode_table
from ringkit.placement import MAX_TOKENS, Placement
from ringkit.ring import SPACE_64

__all__ = ["SkippedRecord", "decode_member_record", "decode_table_record", "strict_json"]

#: A record larger than this is not one ringkit wrote (160 tokens of 20 digits take ~4 KiB).
MAX_RECORD_BYTES = 1 << 22


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def strict_json(key: str, value: bytes) -> Any:
    """Parse `value` as standard JSON (no NaN or Infinity); ConfigError naming `key` if not."""
    if len(value) > MAX_RECORD_BYTES:
        raise ConfigError(
            f"record {key} must be at most {MAX_RECORD_BYTES} bytes, got {len(value)}"
        )
    try:
        return json.loads(value, parse_constant=_refuse_constant)
    except (ValueError, UnicodeDecodeError, RecursionError) as error:
        raise ConfigError(f"record {key} must be JSON, got {value[:40]!r} ({error})") from error


def _number(key: str, raw: dict[str, Any], field: str, *, low: float) -> float:
    value: object = raw.get(field)
    number = value if isinstance(value, (int, float)) and not isinstance(value, bool) else None
    if number is None or not math.isfinite(number) or not number > low:
        raise ConfigError(
            f"member record {key} must have a finite {field} > {low:g}, got {value!r}"
        )
    return float(number)


def _tokens(key: str, raw: dict[str, Any]) -> tuple[int, ...]:
    tokens = raw.get("tokens")
    if not isinstance(tokens, list) or not tokens or len(tokens) > MAX_TOKENS:
        shown = f"{len(tokens)} tokens" if isinstance(tokens, list) else repr(tokens)[:40]
        raise ConfigError(
            f"member record {key} must have a list of 1 to {MAX_TOKENS} tokens, got {shown}"
        )
    # A JSON 1e400 is a float (inf), 2.5 a float: only whole numbers in the space are tokens
    # (`type(t) is int` also refuses True). One pass of builtins: this runs per record write.
    if not all(type(t) is int for t in tokens) or min(tokens) < 0 or max(tokens) >= SPACE_64:
        bad = next(t for t in tokens if type(t) is not int or not 0 <= t < SPACE_64)
        raise ConfigError(
            f"member record {key} must have tokens that are integers in [0, 2**64), got {bad!r}"
        )
    if len(set(tokens)) != len(tokens):
        raise ConfigError(f"member record {key} must not hold a token twice")
    return tuple(sorted(tokens))


def decode_member_record(key: str, value: bytes, lease: int, members_prefix: str) -> MemberInfo:
    """Return the member the record at `key` describes, every field checked.

    The member's name is the rest of its key after `members_prefix`; a record whose JSON names
    another member is refused (it would compete with that member's own record).

    :raises ConfigError: naming `key` and the first thing wrong with the record
    """
    raw = strict_json(key, value)
    if not isinstance(raw, dict):
        raise ConfigError(f"member record {key} must be a JSON object, got {type(raw).__name__}")
    name = key[len(members_prefix) :]
    if raw.get("name") != name:
        raise ConfigError(
            f"member record {key} must name the member its key names ({name!r}), "
            f"got {raw.get('name')!r}"
        )
    state = raw.get("state")
    if state not in STATES:
        raise ConfigError(f"member record {key} must have a state in {STATES}, got {state!r}")
    zone = raw.get("zone")
    if zone is not None and (not isinstance(zone, str) or not zone):
        raise ConfigError(
            f"member record {key} must have a zone that is a name or null, got {zone!r}"
        )
    holder = raw.get("holder", "")
    if not isinstance(holder, str):
        raise ConfigError(
            f"member record {key} must have a holder that is a string, got {holder!r}"
        )
    return MemberInfo(
        name,
        state,
        zone,
        _number(key, raw, "weight", low=0),
        raw.get("data"),
        _tokens(key, raw),
        _number(key, raw, "ttl_s", low=0),
        lease,
        holder,
    )


def decode_table_record(key: str, value: bytes) -> Placement:
    """Return the placement a published table record describes.

    :raises ConfigError: naming `key` when the record is not a table ringkit wrote
    """
    raw = strict_json(key, value)
    if not isinstance(raw, dict):
        raise ConfigError(f"table record {key} must be a JSON object, got {type(raw).__name__}")
    try:
        return decode_table(value)
    except Exception as error:  # from_dict of foreign data may raise anything: all mean "bad"
        raise ConfigError(f"table record {key} must be a table ringkit wrote: {error!r}") from error
