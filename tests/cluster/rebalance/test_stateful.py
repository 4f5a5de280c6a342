"""A state machine over membership changes on memory servers against a dict model.

Rules write keys, add and remove servers (some changes interrupted and then resumed or rolled
back), and a stale client writes after a change. Invariants: a fresh client over the current
view reads every key of the model with its latest value, and no server holds a key it does not
own once the cluster is stable.
"""

from __future__ import annotations

import itertools

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from ringkit import HashRing, Transfer
from ringkit.cluster import ShardedClient, memory_store
from ringkit.cluster.rebalance.coordinator import RebalanceOptions, Rebalancer
from ringkit.cluster.values.keys import route_key
from tests.cluster.helpers import new_client

_runs = itertools.count()
KEYS = st.sampled_from([f"k{i}" for i in range(40)])


class _Stop(Exception):
    pass


class Membership(RuleBasedStateMachine):
    flavor = "sync"  # the client under test; the invariants check with a sync client

    def __init__(self) -> None:
        super().__init__()
        run = next(_runs)
        self.urls = {f"n{i}": f"memory://sm-{run}-{i}" for i in range(6)}
        for url in self.urls.values():
            memory_store(url.removeprefix("memory://")).data.clear()
        start = {name: self.urls[name] for name in ("n0", "n1")}
        self.client = new_client(self.flavor, HashRing(list(start), vnodes=8), start)
        self.stale = new_client(self.flavor, HashRing(list(start), vnodes=8), start)
        self.client.refresh_view()  # both settle on the first view (epoch 1) before any rule
        self.stale.refresh_view()
        self.model: dict[str, int] = {}
        self.values = itertools.count()

    def _options(self, stop_after: int | None) -> RebalanceOptions:
        def hook(transfer: Transfer, done: int) -> None:
            if done == stop_after:
                raise _Stop

        return RebalanceOptions(batch=7, on_transfer=None if stop_after is None else hook)

    @rule(key=KEYS)
    def write(self, key: str) -> None:
        value = next(self.values)
        self.client.set(key, value)
        self.model[key] = value

    @rule(key=KEYS)
    def stale_write(self, key: str) -> None:
        value = next(self.values)
        self.stale.set(key, value)  # refused, refreshed and redirected when stale
        self.model[key] = value
        assert self.stale.epoch == self.client.epoch or self.client.view.transitional

    @precondition(lambda self: len(self.client.view.placement) < 5)
    @rule(stop=st.sampled_from([None, 1, 2]), finish=st.sampled_from(["resume", "rollback"]))
    def add(self, stop: int | None, finish: str) -> None:
        name = next(n for n in self.urls if n not in self.client.view.placement)
        self._change(lambda o: self.client.add_server(name, self.urls[name], options=o), stop,
                     finish)  # fmt: skip

    @precondition(lambda self: len(self.client.view.placement) > 1)
    @rule(data=st.data(), stop=st.sampled_from([None, 1]))
    def remove(self, data: st.DataObject, stop: int | None) -> None:
        name = data.draw(st.sampled_from(sorted(self.client.view.placement)))
        self._change(lambda o: self.client.remove_server(name, options=o), stop, "resume")

    def _change(self, run: object, stop: int | None, finish: str) -> None:
        assert callable(run)
        try:
            run(self._options(stop))
        except _Stop:
            self.write("k0")  # traffic while the change hangs
            rebalancer = Rebalancer(self.client.view, on_view=self.client.adopt_view)
            if finish == "resume":
                rebalancer.resume()
            else:
                rebalancer.rollback()
        assert self.client.view.state == "stable"

    @invariant()
    def every_key_readable_by_a_fresh_client(self) -> None:
        view = self.client.view
        fresh = ShardedClient(view.placement, {n: view.servers[n] for n in view.placement})
        assert fresh.get_many(list(self.model)) == self.model

    @invariant()
    def no_copy_left_on_a_non_owner(self) -> None:
        view = self.client.view
        for name, url in self.urls.items():
            data = memory_store(url.removeprefix("memory://")).data
            for key in data:
                if not key.startswith(b"ringkit:"):
                    assert view.placement.node_for(route_key(key)) == name

    def teardown(self) -> None:
        self.client.close()
        self.stale.close()


class AsyncMembership(Membership):
    flavor = "async"


TestMembership = Membership.TestCase
TestMembership.settings = settings(max_examples=15, stateful_step_count=10, deadline=None)
TestAsyncMembership = AsyncMembership.TestCase
TestAsyncMembership.settings = settings(max_examples=15, stateful_step_count=10, deadline=None)
