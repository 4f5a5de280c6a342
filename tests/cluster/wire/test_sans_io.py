"""The wire is sans I/O: replies cut anywhere frame alike; NOSCRIPT re-sends only that script."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from ringkit.cluster.wire.drive import drive_sync
from ringkit.cluster.wire.memcached.protocol import ReplyFramer
from ringkit.cluster.wire.redis.ops import run_scripts
from ringkit.cluster.wire.redis.scripts import Script
from ringkit.cluster.wire.redis.transports import Commands
from ringkit.cluster.wire.urls import parse_url

_VALUES = st.dictionaries(
    st.binary(min_size=1, max_size=8).map(lambda raw: raw.hex().encode()),
    st.binary(max_size=40),  # values may hold b"\r\n" and b"END": framed by their length
    max_size=5,
)


@settings(max_examples=60, deadline=None)
@given(_VALUES, st.lists(st.integers(min_value=1, max_value=200), max_size=6))
def test_a_get_reply_cut_at_any_points_frames_the_same(
    values: dict[bytes, bytes], cuts: list[int]
) -> None:
    wire = b"STORED\r\n"
    wire += b"".join(
        b"VALUE %s 0 %d 9\r\n%s\r\n" % (key, len(data), data) for key, data in values.items()
    )
    wire += b"END\r\n"
    framer, at, done = ReplyFramer(2), 0, False
    for cut in sorted({min(cut, len(wire)) for cut in cuts} | {len(wire)}):
        assert not done  # never complete before its last byte
        done = framer.feed(wire[at:cut])
        at = cut
    assert done
    stored, found = framer.replies
    assert stored == (b"STORED", [])
    assert found == (b"END", [(key, data, b"9") for key, data in values.items()])


class NoScriptError(Exception):
    """As redis-py names the error reply of a script the server has not loaded."""


class _Restarted:
    """A Redis that lost its scripts: EVALSHA answers NOSCRIPT, EVAL runs."""

    def __init__(self) -> None:
        self.sent: list[Commands] = []

    def exchange(self, request: Commands) -> list[Any]:
        self.sent.append(request)
        return [
            NoScriptError("NOSCRIPT") if command[0] == "EVALSHA" else b"ran"
            for command in request.commands
        ]


def test_a_script_the_server_lost_is_sent_again_alone_with_its_source_and_reads_after_it() -> None:
    server = _Restarted()
    touch = Script("touch", (b"ringkit:epoch", b"k"), (3, "1000"))
    read = Script("MGET", (b"ringkit:epoch", b"j"), ())
    replies = drive_sync(
        run_scripts(parse_url("redis://127.0.0.1:1/0"), [read, touch], [("MGET", b"m")]),
        server,
    )
    assert replies == [b"ran", b"ran", b"ran"]
    first, again = server.sent
    assert [command[0] for command in first.commands] == ["MGET", "EVALSHA", "MGET"]
    # Only the lost script goes again, as EVAL (which also loads it), and the read behind it
    # follows it again, so the markers it reads are read after the write.
    assert [command[0] for command in again.commands] == ["EVAL", "MGET"]
    assert again.commands[0][2:] == (2, b"ringkit:epoch", b"k", 3, "1000")


def test_a_server_reply_raised_while_handling_another_is_reported_as_itself() -> None:
    """redis-py's Script retries a NOSCRIPT inside its handler: the retry's reply is the cause."""
    import redis

    from ringkit.cluster.wire.failures import server_failed
    from ringkit.cluster.wire.urls import parse_url

    try:
        try:
            raise redis.exceptions.NoScriptError("No matching script. Please use EVAL.")
        except redis.exceptions.NoScriptError:
            raise redis.exceptions.ResponseError("ERR DUMP payload version or checksum are wrong")  # noqa: B904 (an implicit context, as in redis-py)
    except redis.exceptions.ResponseError as reply:
        message = str(server_failed(parse_url("redis://127.0.0.1:1/0"), reply))
    assert "payload" in message
    assert "NoScript" not in message
