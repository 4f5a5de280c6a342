"""Moves page by bytes as well as keys: large values under one hash tag move, and reads go on.

Before, a page was `batch` keys whatever their size: 520 values near 1 MB under one hash tag
made every page one script over ~500 MB, which timed out (``--resume`` too) and stalled the
reads of other keys on that server. Sized for CI here: values of 60 kB with pages of 100 kB
show the same bound (one large value per page, a value larger than a page alone).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from ringkit import HashRing
from ringkit.cluster import ShardedClient
from ringkit.cluster.rebalance.coordinator import RebalanceOptions, Rebalancer
from ringkit.errors import ConfigError
from tests.cluster.helpers import Load, flushed_redis_urls, redis_servers
from tests.servers import Server

pytestmark = pytest.mark.timeout(120)
NAMES = ("s1", "s2", "s3")
PAGE_BYTES = 100_000
SMALL = [f"small:{i}" for i in range(300)]


class Interrupted(Exception):
    pass


@pytest.fixture(scope="module")
def trio() -> Iterator[list[Server]]:
    with redis_servers(len(NAMES)) as servers:
        yield servers


def _bulk() -> dict[str, bytes]:
    values = {f"{{bulk}}:{i}": bytes([i]) * 60_000 for i in range(24)}
    values["{bulk}:huge"] = b"h" * 250_000  # larger than a page: it moves alone
    return values


def test_large_values_move_a_page_at_a_time_and_reads_go_on(trio: list[Server]) -> None:
    urls = flushed_redis_urls(NAMES, trio)
    client = ShardedClient(HashRing(list(urls)), urls)
    bulk = _bulk()
    client.set_many(bulk)
    client.set_many({key: 0 for key in SMALL})
    owner = client.replicas_for("{bulk}:0")[0]
    pages: list[tuple[int, int]] = []  # (keys, bytes) of each page copied
    totals: dict[str, tuple[int, int]] = {}  # per run of the copy (its title): counts so far

    def seen(title: str, keys: int, planned: int, size: int) -> None:
        before = totals.get(title, (0, 0))
        if (keys, size) != before:
            pages.append((keys - before[0], size - before[1]))
        totals[title] = (keys, size)

    def interrupt(transfer: object, finished: int) -> None:
        raise Interrupted  # after the first transfer: the move is resumed below

    cut = RebalanceOptions(
        page_bytes=PAGE_BYTES, max_streams_per_source=1, progress=seen, on_transfer=interrupt
    )
    with Load(client, SMALL, steps=3_000) as load:
        with pytest.raises(Interrupted):
            client.remove_server(owner, options=cut)
        assert client.view.state == "moving"
        options = RebalanceOptions(page_bytes=PAGE_BYTES, max_streams_per_source=1, progress=seen)
        report = Rebalancer(client.refresh_view(), options=options).resume()
    assert report.outcome == "done"
    assert load.errors == [] and load.failed_reads == []  # reads of other keys went on
    assert pages and all(keys == 1 or size <= PAGE_BYTES for keys, size in pages)
    assert any(keys == 1 and size > 250_000 for keys, size in pages)  # larger than a page: alone
    big = [page for page in pages if page[1] >= 60_000]
    assert len(big) >= len(bulk)  # never two large values in one page
    rest = {name: url for name, url in urls.items() if name != owner}
    fresh = ShardedClient(HashRing(list(rest)), rest)
    assert fresh.get_many(list(bulk)) == bulk
    assert fresh.get_many(SMALL).keys() == set(SMALL)
    fresh.close()
    client.close()


def test_page_bytes_must_be_a_positive_int_or_none() -> None:
    assert RebalanceOptions(page_bytes=None).page_bytes is None
    for bad in (0, -1, 1.5, True, "1"):
        with pytest.raises(ConfigError, match=r"page_bytes must be an int >= 1 or None, got"):
            RebalanceOptions(page_bytes=bad)  # type: ignore[arg-type]
