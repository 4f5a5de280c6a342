"""memcached's epoch gate: between two epoch reads it lets through only what the fence would."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ringkit.cluster.wire.fence import MEMCACHED_FENCE_CHECK_S, EpochGate
from ringkit.cluster.wire.memcached.ops import MemcachedServer
from ringkit.cluster.wire.urls import parse_url
from ringkit.errors import EpochLostError, StaleViewError

URL = parse_url("memcached://127.0.0.1:11211")
EPOCHS = st.integers(min_value=0, max_value=5)


@given(
    known=EPOCHS, sent=EPOCHS, write=st.booleans(), age_s=st.floats(0, 2 * MEMCACHED_FENCE_CHECK_S)
)
def test_a_call_the_gate_does_not_read_for_is_one_the_epoch_last_read_admits(
    known: int, sent: int, write: bool, age_s: float
) -> None:
    # The fenced call skips the check whenever no read is due: that is safe only if a call the
    # epoch last read would refuse (a server ahead of it, or one without an epoch) makes the
    # read due.
    gate = EpochGate()
    gate.learn(str(known).encode() if known else None, now=100.0)
    if not gate.due(sent, 100.0 + age_s):
        gate.check(sent, URL, write=write)  # raises if the gate let a refused call through


@pytest.mark.parametrize(
    ("known", "sent", "write", "refusal"),
    [(3, 2, False, StaleViewError), (3, 2, True, StaleViewError), (0, 1, True, EpochLostError)],
)
def test_a_call_routed_by_an_older_view_or_to_a_server_without_epoch_reads_it_first(
    known: int, sent: int, write: bool, refusal: type[Exception]
) -> None:
    server = MemcachedServer(URL)
    server.gate.learn(str(known).encode() if known else None, now=float("inf"))  # just read

    def operation() -> object:
        raise AssertionError("the call went out before the epoch was read")
        yield

    fenced = server.fenced(sent, operation(), write=write)
    request = next(fenced)  # the epoch's read comes first, however recent the last one
    assert request.data == b"get ringkit:epoch\r\n"
    reply = (b"END", [(b"ringkit:epoch", str(known).encode(), b"")] if known else [])
    with pytest.raises(refusal):
        fenced.send([reply])
