"""``ringkit.compat.envoy_maglev`` is the Envoy-compatible maglev, and agrees with ``Maglev``."""

from __future__ import annotations

from ringkit import Maglev, compat

HOSTS = [f"127.0.0.1:{port}" for port in range(90, 96)]


def test_compat_envoy_maglev_reproduces_envoys_basic_table() -> None:
    # envoy test/common/upstream/maglev_lb_test.cc, Basic: table size 7.
    table = compat.envoy_maglev(HOSTS, table_size=7).table
    assert [name.rsplit(":", 1)[1] for name in table] == ["92", "94", "90", "91", "95", "90", "93"]


def test_maglev_and_compat_envoy_maglev_build_the_same_table() -> None:
    assert compat.envoy_maglev(HOSTS, table_size=65537).table == Maglev(HOSTS).table
