"""How fast a live ring's change reaches every watching process, beside tooz's partitioner.

    python benchmarks/bench_live.py --watchers 10          # one etcd on loopback, 10 processes
    python benchmarks/bench_live.py --watchers 50 --changes 20

One etcd (Debian's etcd-server) on loopback. N watcher processes each follow the ring; a probe
member joins and leaves it over and over, and each change is timed from the moment before the
write to the moment the *last* watcher holds the new ring (each process prints the wall-clock
time it got there; one machine, one clock). Reported: median and p99 over the changes. Each
change starts from a ring at rest: every watcher back to the CPU it uses between changes.

- ringkit: ``ringkit.live`` stores (a watch, no polling); every watcher is also a member.
- ringkit exclusive: every watcher joins with ``handoff="exclusive"``, and so does the probe;
  each join is timed from the moment before the write to the probe *owning* every key of a
  2,000-key sample that the new ring gives it (every watcher has applied the change, returned
  from its callbacks and raised its release mark, and the probe has seen the marks).
- tooz: the same etcd through tooz's etcd3gw driver: ``join_partitioned_group`` in every
  watcher, ``run_watchers()`` every 50 ms (tooz learns of members by polling the group). The
  peer is not a ringkit dependency: ``.venv/bin/pip install tooz etcd3gw`` before running.

Crash: a probe member process is SIGKILLed; timed to the last watcher dropping it (ringkit
only: bounded by the probe's lease TTL). Heartbeat: the cost of one lease renewal, and whether
heartbeats write anything (the etcd revision before and after).
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import signal
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT))

WATCHER = r"""
import os, sys, time
kind, url, name = sys.argv[1], sys.argv[2], sys.argv[3]
def say(has):
    # One write per line: print() from two threads can interleave text and newline.
    os.write(1, f"{time.time()} {int(has)}\n".encode())
if kind in ("ringkit", "exclusive"):
    import ringkit.live
    store = ringkit.live.connect(url)
    store.subscribe(lambda change: say("probe" in change.new.ring))
    if kind == "exclusive":
        # release_timeout_s 60, not ttl_s: on two shared cores 50 starved members' confirming
        # reads miss their deadline for 10 s on end, and giving up cascades (see docs/live.md).
        member = store.join(name, ttl_s=10, handoff="exclusive", release_timeout_s=60)
    else:
        member = store.join(name, ttl_s=10)
    if kind == "exclusive" and os.environ.get("BENCH_PROFILE"):
        # Phase times for --profile: "P phase epoch time", one write per line.
        def note(phase, epoch):
            os.write(1, f"P {phase} {epoch} {time.time()}\n".encode())
        apply = store._apply
        def applied(events):
            before = store.snapshot().epoch
            apply(events)
            if store.snapshot().epoch != before:
                note("applied", store.snapshot().epoch)
        store._apply = applied
        store.dispatcher.after_delivery(lambda epoch: note("delivered", epoch))
        # A mark is sent by the thread that applied the change (start_swap) or, when that
        # cannot, by the release thread (swap); either way it is noted once written (_wrote).
        from ringkit.live.marks import decode_mark
        mark_key, backend, handoff = store.mark_key(name), store.backend, member._handoff
        def sending(call):
            def send(key, value, *args, **options):
                if key == mark_key:
                    note("mark_sent", decode_mark(value, name))
                return call(key, value, *args, **options)
            return send
        backend.start_swap = sending(backend.start_swap)
        backend.swap = sending(backend.swap)
        wrote = handoff._wrote
        def written(epoch, *args):
            wrote(epoch, *args)
            note("mark_acked", epoch)
        handoff._wrote = written
    os.write(1, b"ready\n")
    while True:
        time.sleep(3600)
else:
    from tooz import coordination
    coord = coordination.get_coordinator(url, name.encode())
    coord.start(start_heart=True)
    part = coord.join_partitioned_group(b"bench")
    os.write(1, b"ready\n")
    last = None
    while True:
        coord.run_watchers()
        has = b"probe" in part.ring.nodes
        if has != last:
            say(has)
            last = has
        time.sleep(0.05)
"""

PROBE = r"""
import sys, time, ringkit.live
store = ringkit.live.connect(sys.argv[1])
store.join("probe", ttl_s=float(sys.argv[2]))
print("ready", flush=True)
time.sleep(3600)
"""


class Process:
    """A child process whose stdout lines are collected."""

    def __init__(self, script: str, *args: str) -> None:
        env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
        self.popen = subprocess.Popen(
            [sys.executable, "-c", script, *args], stdout=subprocess.PIPE, text=True, env=env
        )
        self.lines: list[str] = []
        self.ready = threading.Event()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.popen.stdout is not None
        for line in self.popen.stdout:
            if line.startswith("ready"):
                self.ready.set()
            else:
                self.lines.append(line.strip())

    def reached(self, has: bool, since: float) -> float | None:
        for line in list(self.lines):
            parts = line.split()
            if len(parts) != 2:
                continue  # not a report (a library's log line)
            t, flag = parts
            if float(t) >= since and flag == str(int(has)):
                return float(t)
        return None

    def stop(self) -> None:
        self.popen.kill()
        self.popen.wait()


def wait_all(watchers: list[Process], has: bool, since: float, timeout_s: float) -> float:
    """Return the seconds from `since` to the last watcher reporting `has`."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        times = [w.reached(has, since) for w in watchers]
        if all(t is not None for t in times):
            return max(t for t in times if t is not None) - since
        time.sleep(0.005)
    raise TimeoutError(f"watchers did not all see has_probe={has} within {timeout_s} s")


def cpu_seconds(processes: list[Process]) -> float:
    """The CPU time (user and system) the processes have used so far."""
    total = 0
    for process in processes:
        with open(f"/proc/{process.popen.pid}/stat") as stat:
            fields = stat.read().rpartition(")")[2].split()
        total += int(fields[11]) + int(fields[12])  # utime, stime (after the name)
    return total / os.sysconf("SC_CLK_TCK")


class Rest:
    """Waits until the watchers are back at rest after a change, before the next is timed.

    At rest the watchers use the CPU of their heartbeats and confirming reads only, measured
    once over a second before the first change. A change is timed from the moment every
    process has finished with the one before: at N = 50, once every watcher had marked an
    exclusive leave, the watchers still used up to 0.28 s of CPU in the next 0.1 s (0.02-0.06
    s at rest), and a join timed then was timed with the end of the leave.
    """

    WINDOW_S = 0.1

    def __init__(self, watchers: list[Process]) -> None:
        self.watchers = watchers
        before = cpu_seconds(watchers)
        time.sleep(1.0)
        # Per window, with room for one clock tick in a few processes (10 ms each).
        self.idle_s = (cpu_seconds(watchers) - before) * self.WINDOW_S + 0.03

    def wait(self, timeout_s: float = 5.0) -> None:
        """Return once a window's CPU is what it was at rest, or after `timeout_s` (busy host)."""
        deadline = time.monotonic() + timeout_s
        before = cpu_seconds(self.watchers)
        while time.monotonic() < deadline:
            time.sleep(self.WINDOW_S)
            now = cpu_seconds(self.watchers)
            if now - before <= self.idle_s:
                return
            before = now


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def graceful(kind: str, url: str, watchers: list[Process], changes: int) -> list[float]:
    """Join and leave the probe `changes` times; return the latency of each change."""
    latencies = []
    if kind == "ringkit":
        import ringkit.live

        store = ringkit.live.connect(url)
        rest = Rest(watchers)
        for i in range(changes):
            started = time.time()
            if i % 2 == 0:
                member = store.join("probe", ttl_s=10)
            else:
                member.leave()
            latencies.append(wait_all(watchers, i % 2 == 0, started, 10))
            rest.wait()
        store.close()
        return latencies
    from tooz import coordination

    coord = coordination.get_coordinator(url, b"probe")
    coord.start(start_heart=True)
    rest = Rest(watchers)
    for i in range(changes):
        started = time.time()
        if i % 2 == 0:
            coord.join_group(b"bench").get()
        else:
            coord.leave_group(b"bench").get()
        latencies.append(wait_all(watchers, i % 2 == 0, started, 10))
        rest.wait()
    coord.stop()
    return latencies


def exclusive(url: str, watchers: list[Process], changes: int, profile: bool) -> list[float]:
    """Join (and leave) an exclusive probe; return the time from each join to owning it all."""
    import ringkit.live
    from ringkit.live import choose_tokens
    from ringkit.nodes import Node
    from ringkit.ring import HashRing

    keys = [f"key-{i}" for i in range(2000)]
    probe = Node("probe")
    probe_tokens = choose_tokens(probe, vnodes=160)  # what store.join("probe") registers
    store = ringkit.live.connect(url)
    settled: list[tuple[float, int]] = []  # (time, the probe's settled epoch) after each event
    calls: dict[str, float] = {}  # the probe's first grant, swap, create of the change: acked
    if profile:
        marks_changed = store.marks._changed

        def seen() -> None:  # the probe's store follows the marks while the probe waits
            marks_changed()
            settled.append((time.time(), store.settled_epoch("probe")))

        store.marks._changed = seen
        backend = store.backend
        for call in ("grant", "swap", "create"):
            setattr(backend, call, _timed(getattr(backend, call), f"probe {call} acked", calls))
    latencies, phases = [], []
    rest = Rest(watchers)
    for _ in range(changes):
        # The keys the probe gains, from the ring its join will make: computed before the
        # clock starts, so that the time is the library's, not this loop's (a ring and 2,000
        # lookups after the join returned: 1-5 ms before the first look at `owns` on a busy
        # core). That the join made this ring is checked once the time is taken.
        before = store.snapshot().ring
        assert isinstance(before, HashRing)
        ring = before.add(probe, tokens=probe_tokens)
        gained = [
            key for key, node in zip(keys, ring.node_for_many(keys), strict=True) if node == "probe"
        ]
        calls.clear()
        started = time.time()
        member = store.join("probe", ttl_s=10, handoff="exclusive")
        joined = time.time()
        deadline = time.monotonic() + 10
        # A member comes to own everything it gained at an epoch at one instant (its floor
        # moves in one step), so one key is polled and then every key checked: polling all
        # 2,000 every millisecond took a core from the processes being timed.
        while not (member.owns(gained[0]) and all(member.owns_many(gained))):
            if time.monotonic() > deadline:
                raise TimeoutError("the exclusive probe did not own its arcs within 10 s")
            time.sleep(0.001)
        owned = time.time()
        latencies.append(owned - started)
        joined_ring = store.snapshot().ring
        if joined_ring.node_for_many(keys) != ring.node_for_many(keys):
            raise RuntimeError("the probe's join made another ring than the one predicted")
        epoch = store.snapshot().epoch
        seen = min((t for t, e in settled if e >= epoch), default=math.nan)
        phases.append((started, epoch, {"join returned": joined, "probe saw last mark": seen,
                                        "probe owns all": owned, **calls}))  # fmt: skip
        left = time.time()
        member.leave()
        wait_all(watchers, False, left, 10)
        # The next join is timed from a ring at rest, as the graceful changes are: every
        # watcher has marked the leave, and has done with it.
        gone = store.wait_for(lambda s: "probe" not in s.members)  # the lease revoked too
        settle(url, len(watchers), gone.epoch)
        rest.wait()
    store.close()
    if profile:
        show_phases(watchers, phases)
    return latencies


def _timed(call: Any, phase: str, calls: dict[str, float]) -> Any:
    """`call`, noting in `calls` when it first returned."""

    def timed(*args: object, **options: object) -> Any:
        result = call(*args, **options)
        calls.setdefault(phase, time.time())
        return result

    return timed


def show_phases(watchers: list[Process], phases: list[tuple[float, int, dict[str, float]]]) -> None:
    """Print where each exclusive join's time went: ms after the write, median and p99."""
    firsts: dict[tuple[int, str, int], float] = {}  # (watcher, phase, epoch) -> first time
    for index, watcher in enumerate(watchers):
        for line in list(watcher.lines):
            parts = line.split()
            if len(parts) == 4 and parts[0] == "P":
                firsts.setdefault((index, parts[1], int(parts[2])), float(parts[3]))
    table: dict[str, list[float]] = {}
    for started, epoch, probe in phases:
        for phase in ("applied", "delivered", "mark_sent", "mark_acked"):
            last = []
            for index in range(len(watchers)):
                times = [
                    t for (i, p, e), t in firsts.items() if i == index and p == phase and e >= epoch
                ]
                last.append(min(times, default=math.nan))
            table.setdefault(f"last watcher {phase}", []).append(max(last) - started)
        for name, t in probe.items():
            table.setdefault(name, []).append(t - started)
    print(f"  {'exclusive join phase (ms after the write)':<42} {'median':>10} {'p99':>10}")
    for name, values in sorted(table.items(), key=lambda item: statistics.median(item[1])):
        ms = [v * 1000 for v in values]
        print(f"  {name:<42} {statistics.median(ms):>10.1f} {percentile(ms, 0.99):>10.1f}")


def crash(url: str, watchers: list[Process], ttl_s: float, repeats: int) -> list[float]:
    latencies = []
    for _ in range(repeats):
        probe = Process(PROBE, url, str(ttl_s))
        probe.ready.wait(30)
        wait_all(watchers, True, time.time() - 30, 10)
        killed = time.time()
        probe.popen.send_signal(signal.SIGKILL)
        latencies.append(wait_all(watchers, False, killed, ttl_s + 10))
        probe.stop()
    return latencies


def heartbeat(url: str, tooz_url: str | None) -> list[tuple[str, float, int]]:
    """Median seconds per lease renewal, and etcd revisions written by 50 heartbeats."""
    import ringkit.live

    store = ringkit.live.connect(url)
    member = store.join("heartbeat-probe", ttl_s=10)
    backend = store.backend

    def revision() -> int:
        return backend.get_prefix("/none/")[0]

    before = revision()
    times = []
    for _ in range(50):
        started = time.perf_counter()
        backend.keepalive(member.info.lease)
        times.append(time.perf_counter() - started)
    rows = [("ringkit (gRPC LeaseKeepAlive)", statistics.median(times), revision() - before)]
    member.close()
    if tooz_url is not None:
        from tooz import coordination

        coord = coordination.get_coordinator(tooz_url, b"hb")
        coord.start()
        before, times = revision(), []
        for _ in range(50):
            started = time.perf_counter()
            coord.heartbeat()
            times.append(time.perf_counter() - started)
        rows.append(
            ("tooz etcd3gw (HTTP lease refresh)", statistics.median(times), revision() - before)
        )
        coord.stop()
    store.close()
    return rows


def settle(url: str, count: int, epoch: int = 0, timeout_s: float = 120) -> None:
    """Wait until the ring holds `count` members and each has marked the last change.

    The last change: `epoch`, or the last member record written (a leave is a deletion, which
    a read does not show). Read from etcd itself: a store that connects now labels the ring
    with the revision of its read, which the marks need not reach.
    """
    from ringkit.errors import BackendError
    from ringkit.live.marks import decode_mark
    from ringkit.live.store import open_store_backend

    backend, prefix = open_store_backend(url)
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                _, records = backend.get_prefix(prefix)
            except BackendError:  # etcd starved of CPU for a moment: ask again until the deadline
                if time.monotonic() > deadline:
                    raise
                continue
            members = {r.key.rpartition("/")[2]: r for r in records if "/members/" in r.key}
            marks = {r.key.rpartition("/")[2]: r for r in records if "/_released/" in r.key}
            last = max([epoch, *(r.mod_revision for r in members.values())])
            behind = [
                name
                for name, record in members.items()
                if name not in marks
                or marks[name].lease != record.lease
                or decode_mark(marks[name].value, name) < last
            ]
            if len(members) == count and not behind:
                return
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"the ring must settle with {count} members within {timeout_s:g} s, got "
                    f"{len(members)} members, {len(behind)} not marked the last change"
                )
            time.sleep(0.25)  # each read returns every record (160 tokens a member)
    finally:
        backend.close()


def start(kind: str, url: str, count: int) -> list[Process]:
    """Start `count` watchers a batch at a time (50 interpreters at once swamp two cores).

    Exclusive members start five at a time, each batch once every member has released the
    latest epoch: a rolling start, as a pool of exclusive workers is deployed. Each join costs
    a release mark from every member, so 50 joins at once on two cores keep the marks and the
    stores' confirming reads waiting for seconds (members then give up their leases after
    ``release_timeout_s``, as documented), and nothing is timed until the ring has settled.
    """
    watchers: list[Process] = []
    size = 5 if kind == "exclusive" else 10
    for first in range(0, count, size):
        batch = [
            Process(WATCHER, kind, url, f"w{i}") for i in range(first, min(count, first + size))
        ]
        watchers += batch
        try:
            for watcher in batch:
                if not watcher.ready.wait(120):
                    raise TimeoutError(f"watcher {watcher.popen.pid} did not start within 120 s")
            if kind == "exclusive":
                settle(url, len(watchers))
        except BaseException:
            for started in watchers:
                started.stop()
            raise
    return watchers


def run(kind: str, url: str, count: int, changes: int, profile: bool = False) -> list[float]:
    watchers = start(kind, url, count)
    try:
        time.sleep(1.0)  # let every watcher settle on the full group
        if kind == "exclusive":
            settle(url, count)
            return exclusive(url, watchers, changes, profile)
        return graceful(kind, url, watchers, changes)
    finally:
        for watcher in watchers:
            watcher.stop()


def put_first(pid: int, realtime: bool) -> str:
    """Run every thread of process `pid` (the benchmark's etcd) ahead of its clients.

    Linux keeps a nice value per thread, so each of etcd's threads is set (a thread it starts
    later inherits from the one that starts it). Under ``--realtime`` etcd keeps the clients'
    SCHED_FIFO priority: above them, the Go runtime's idle threads spin at real-time priority
    and took the clients' CPU (the exclusive join's median went from 27 to 42 ms at N = 10).
    Returns what was set.
    """
    if realtime:
        return f"SCHED_FIFO {os.sched_getparam(pid).sched_priority}, as its clients"
    for task in os.listdir(f"/proc/{pid}/task"):
        with contextlib.suppress(PermissionError, ProcessLookupError):
            os.setpriority(os.PRIO_PROCESS, int(task), -10)
    return f"nice {os.getpriority(os.PRIO_PROCESS, pid)}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--watchers", type=int, default=10)
    parser.add_argument("--changes", type=int, default=30)
    parser.add_argument("--crashes", type=int, default=3)
    parser.add_argument("--ttl", type=float, default=2.0)
    parser.add_argument("--no-tooz", action="store_true")
    parser.add_argument(
        "--profile", action="store_true", help="print where the exclusive joins' time goes"
    )
    parser.add_argument(
        "--only",
        choices=("ringkit", "exclusive", "tooz"),
        help="run one system (no crash, heartbeat)",
    )
    parser.add_argument(
        "--realtime",
        action="store_true",
        help="run under SCHED_FIFO (root): the benchmark's own processes, etcd among them, "
        "ahead of the machine's other work",
    )
    args = parser.parse_args()
    if args.realtime:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(10))  # the children inherit it
    if args.profile:
        os.environ["BENCH_PROFILE"] = "1"
    from tests.servers import etcd_server

    try:
        import tooz  # noqa: F401

        have_tooz = not args.no_tooz
    except ImportError:
        have_tooz = False
    with etcd_server() as etcd:
        # etcd runs on machines of its own in production; here it shares two cores with N
        # member processes that all wake at each change, so it goes first (as root).
        priority = put_first(etcd.processes[0].pid, args.realtime)
        port = etcd.client_ports[0]
        url = etcd.url("bench")
        tooz_url = f"etcd3+http://127.0.0.1:{port}" if have_tooz else None
        print(f"etcd 1 member on loopback ({priority}); N={args.watchers} watching processes; "
              f"{args.changes} changes (join/leave of one member)")  # fmt: skip
        print(f"{'system':<44} {'median ms':>10} {'p99 ms':>10} {'max ms':>10}")

        def show(label: str, values: list[float]) -> None:
            ms = [v * 1000 for v in values]
            print(f"{label:<44} {statistics.median(ms):>10.1f} {percentile(ms, 0.99):>10.1f} "
                  f"{max(ms):>10.1f}", flush=True)  # fmt: skip

        def wanted(kind: str) -> bool:
            return args.only in (None, kind)

        if wanted("ringkit"):
            show("ringkit graceful", run("ringkit", url, args.watchers, args.changes))
        if wanted("exclusive"):
            show(
                "ringkit exclusive join (write -> owns all)",
                run("exclusive", etcd.url("exclusive"), args.watchers, args.changes, args.profile),
            )
        if tooz_url is not None and wanted("tooz"):
            show(
                "tooz partitioner graceful (run_watchers 50 ms)",
                run("tooz", tooz_url, args.watchers, args.changes),
            )
        if args.only is not None:
            return
        watchers = start("ringkit", etcd.url("crash"), args.watchers)
        try:
            show(
                f"ringkit crash (SIGKILL, ttl_s={args.ttl:g})",
                crash(etcd.url("crash"), watchers, args.ttl, args.crashes),
            )
        finally:
            for watcher in watchers:
                watcher.stop()
        print(f"\n{'heartbeat':<44} {'median ms':>10} {'revisions written':>18}")
        for label, seconds, written in heartbeat(url, tooz_url):
            print(f"{label:<44} {seconds * 1000:>10.2f} {written:>18}")


if __name__ == "__main__":
    main()
