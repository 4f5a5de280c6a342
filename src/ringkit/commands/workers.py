"""``ringkit demo workers``: a pool of workers shares tenants by a live ring and survives a crash.

Each worker joins the live ring (``store.join``) and works on the tenants it owns
(``member.owns(tenant)``), reporting them at every epoch it sees. Once the whole pool agrees
(every worker at one epoch, every tenant owned by exactly one worker), one worker is killed
with SIGKILL: it cannot leave gracefully, so its lease runs out after its TTL, etcd deletes
its record, and the survivors take over exactly its tenants (consistent hashing: nobody else's
move). The command prints the pool before and after, which tenants moved from whom to whom,
and the time from the kill until every survivor worked on the new ring.

With ``--store etcd://…`` (or, without ``--store``, a throwaway etcd it starts on loopback when
the ``etcd`` binary is installed) the workers are processes (``python -m
ringkit.commands.workers URL NAME TTL_S TENANTS``, one JSON line per epoch); with
``memory://NAME`` they are threads of this process, and the "kill" stops one's heartbeat
without a word (``Member.abandon``). Everything is bounded by ``--timeout-s``: workers start a
few at a time (300 Python processes started at once on two cores would each take tens of
seconds to import; a new one starts as one of them joins), none starts after the deadline, and
a worker process that exits on its own ends the run at once with its last error line. Every
process, and the temporary etcd, is stopped on the way out, and on Linux they also die with
this one when it is killed (``kill -9``; :mod:`ringkit.demos.lifeline`). Without the ``etcd``
extra the command fails before starting anything, naming it.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import ringkit
import ringkit.live
from ringkit.commands.common import print_json, shown_url
from ringkit.commands.output import console
from ringkit.demos.lifeline import die_with_parent, tied_to_parent
from ringkit.errors import BackendError, ConfigError
from ringkit.live import parse_store_url

__all__ = ["ETCD_CLIENT_HINT", "ETCD_HINT", "run", "tenant_names"]

ETCD_HINT = (
    "ringkit demo workers needs etcd to run without --store; install it (Debian: "
    "apt-get install etcd-server) or pass --store memory://NAME"
)
ETCD_CLIENT_HINT = (
    "ringkit demo workers runs its workers on etcd, which needs the etcd client (module "
    "pyetcd); pip install 'ringkit[etcd]', or pass --store memory://NAME"
)
Report = dict[str, Any]
_STORE_ENV = "RINGKIT_WORKER_STORE"  # how a worker process is told its store URL
_PARENT_ENV = "RINGKIT_WORKER_PARENT"  # the demo's pid: the worker dies with it
# Workers starting at once (started, not yet joined): enough to keep the cores busy importing,
# few enough that each joins within seconds on a loaded machine, so the deadline is kept.
_STARTING = max(2, 2 * (os.cpu_count() or 1))
_STOP_S = 5.0  # how long the stopped workers get, all together, to revoke their leases
_DATA_PREFIX = "ringkit-demo-etcd-"  # then the demo's pid: whose data folder it is


def tenant_names(count: int) -> list[str]:
    """Return the tenants' names.

    >>> tenant_names(3)
    ['tenant-01', 'tenant-02', 'tenant-03']
    """
    return [f"tenant-{i:0{max(2, len(str(count)))}d}" for i in range(1, count + 1)]


# -- one worker (a thread here, or the main of a process) ------------------------------------


def work(
    url: str, name: str, tenants: list[str], ttl_s: float, tell: Callable[[Report], None]
) -> tuple[ringkit.live.Store, ringkit.live.Member]:
    """Join `url` as `name` and call `tell` with the tenants it owns at every epoch it sees."""
    store = ringkit.live.connect(url)
    member = store.join(name, ttl_s=ttl_s)

    def report(_change: object = None) -> None:
        # owns() is False while the store is not confirmed current (a read slowed by load):
        # wait for the confirmation rather than report a worker that owns nothing.
        store.wait_current(timeout_s=ttl_s)
        while True:  # the tenants of one snapshot, even if a newer one lands meanwhile
            snapshot = store.snapshot()
            owned = [tenant for tenant in tenants if member.owns(tenant)]
            if store.snapshot() is snapshot:
                break
        tell({"worker": name, "epoch": snapshot.epoch, "ring": list(snapshot.ring), "owned": owned})

    store.subscribe(report)
    report()
    return store, member


def _process_main(name: str, ttl_s: str, tenants: str) -> None:
    # SIGTERM when the demo dies, even by SIGKILL: handled below like a stop (the lease is
    # revoked), and SIGALRM's default action ends a close that a dead etcd would stall.
    die_with_parent(int(os.environ[_PARENT_ENV]), signal.SIGTERM)
    url = os.environ[_STORE_ENV]
    lock = threading.Lock()
    stopping = {signal.SIGTERM, signal.SIGINT}
    signal.pthread_sigmask(signal.SIG_BLOCK, stopping)  # for sigwait; the threads inherit it

    def tell(report: Report) -> None:
        with lock:
            print(json.dumps(report), flush=True)

    store, _ = work(url, name, tenant_names(int(tenants)), float(ttl_s), tell)
    signal.sigwait(stopping)  # until stopped (the lease is revoked) or killed (it runs out)
    signal.alarm(int(_STOP_S))
    store.close()


# -- the pool ----------------------------------------------------------------------------------


@dataclass
class _Pool:
    """The latest report of each worker, and a way to kill one."""

    tenants: list[str]
    reports: dict[str, Report]
    kill: Callable[[str], None]
    changed: threading.Condition
    # Raises when a worker ended on its own: the pool can then never agree, so say why now.
    check: Callable[[], None] = lambda: None

    def tell(self, report: Report) -> None:
        with self.changed:
            report["at"] = time.monotonic()
            seen = self.reports.get(report["worker"])
            if seen is not None and seen["epoch"] > report["epoch"]:
                return  # a worker's first report can race its dispatcher's
            self.reports[report["worker"]] = report
            self.changed.notify_all()

    def agreed(self, alive: list[str]) -> dict[str, Report] | None:
        """The reports if every alive worker works on the ring of exactly `alive`, else None."""
        found = {name: self.reports.get(name) for name in alive}
        if any(r is None or r["ring"] != alive for r in found.values()):
            return None
        reports = {name: r for name, r in found.items() if r is not None}
        if len({r["epoch"] for r in reports.values()}) != 1:
            return None
        owned = sorted(t for r in reports.values() for t in r["owned"])
        return reports if owned == sorted(self.tenants) else None

    def wait_agreed(self, alive: list[str], deadline: float, what: str) -> dict[str, Report]:
        with self.changed:
            while (found := self.agreed(alive)) is None:
                self.check()
                left = deadline - time.monotonic()
                if left <= 0:
                    raise BackendError(
                        f"workers {', '.join(alive)} must agree on one ring {what} within "
                        f"--timeout-s, got {self._latest()}"
                    )
                self.changed.wait(min(left, 0.25))  # a worker's exit notifies nobody
            return dict(found)

    def wait_starting(self, started: list[str], most: int, deadline: float) -> bool:
        """Wait until fewer than `most` of `started` have yet to report; False at the deadline."""
        with self.changed:
            while sum(name not in self.reports for name in started) >= most:
                self.check()
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self.changed.wait(min(left, 0.25))
            return True

    def _latest(self) -> str:
        latest = "; ".join(
            f"{n} at epoch {r['epoch']} ring {r['ring']}" for n, r in sorted(self.reports.items())
        )
        return latest or "no report from any worker"


@contextmanager
def _threads(
    url: str, names: list[str], args: argparse.Namespace, deadline: float
) -> Iterator[_Pool]:
    pool = _Pool(tenant_names(args.tenants), {}, lambda name: None, threading.Condition())
    members: dict[str, tuple[ringkit.live.Store, ringkit.live.Member]] = {}

    def kill(name: str) -> None:
        store, member = members[name]
        member.abandon()  # a crash: no leave, no revoke; the lease runs out
        store.close()

    pool.kill = kill
    try:
        for name in names:
            if time.monotonic() >= deadline:
                raise BackendError(
                    f"only {len(members)} of {len(names)} workers joined within "
                    f"--timeout-s {args.timeout_s}"
                )
            members[name] = work(url, name, pool.tenants, args.ttl_s, pool.tell)
        yield pool
    finally:
        for store, _ in members.values():
            store.close()


@contextmanager
def _processes(
    url: str, names: list[str], args: argparse.Namespace, deadline: float
) -> Iterator[_Pool]:
    pool = _Pool(tenant_names(args.tenants), {}, lambda name: None, threading.Condition())
    source = str(Path(ringkit.__file__).resolve().parents[1])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([source, os.environ.get("PYTHONPATH", "")])}
    # The store URL may hold a password: in the child's environment, not its argv (which every
    # user of the machine can read in /proc/PID/cmdline).
    env[_STORE_ENV] = url
    env[_PARENT_ENV] = str(os.getpid())
    children: dict[str, subprocess.Popen[str]] = {}
    errors: dict[str, IO[str]] = {}
    killed: set[str] = set()

    def read(process: subprocess.Popen[str]) -> None:
        assert process.stdout is not None
        for line in process.stdout:
            pool.tell(json.loads(line))

    def kill(name: str) -> None:
        killed.add(name)
        children[name].send_signal(signal.SIGKILL)

    def check() -> None:
        for name, process in children.items():
            if name not in killed and process.poll() is not None:
                errors[name].seek(0)
                last = [line.strip() for line in errors[name] if line.strip()]
                raise BackendError(
                    f"worker {name} exited with status {process.returncode}: "
                    f"{last[-1] if last else 'no error output'}"
                )

    pool.kill, pool.check = kill, check
    with ExitStack() as files:  # each worker's stderr, read when it exits
        try:
            for name in names:
                ready = pool.wait_starting(list(children), _STARTING, deadline)
                if not ready or time.monotonic() >= deadline:
                    raise BackendError(
                        f"only {len(pool.reports)} of {len(names)} workers joined within "
                        f"--timeout-s {args.timeout_s}"
                    )
                errors[name] = files.enter_context(tempfile.TemporaryFile("w+"))
                command = [sys.executable, "-m", "ringkit.commands.workers", name]
                children[name] = subprocess.Popen(
                    [*command, str(args.ttl_s), str(args.tenants)],
                    stdout=subprocess.PIPE,
                    stderr=errors[name],
                    env=env,
                    text=True,
                )
                threading.Thread(target=read, args=(children[name],), daemon=True).start()
            yield pool
        finally:
            _stop(list(children.values()))


def _stop(processes: list[subprocess.Popen[str]]) -> None:
    """Stop every worker: SIGTERM (survivors revoke their leases), then SIGKILL after a while.

    The while is one for all of them, not one each: 300 workers stop in seconds, not minutes.
    """
    for process in processes:
        process.terminate()
    deadline = time.monotonic() + _STOP_S
    for process in processes:
        try:
            process.wait(timeout=max(deadline - time.monotonic(), 0.01))
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


# -- a throwaway etcd --------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@contextmanager
def local_etcd(timeout_s: float = 20.0) -> Iterator[str]:
    """Run a one-member etcd on free loopback ports in a temporary folder; yield its URL.

    :raises ConfigError: when the ``etcd`` binary is not installed (the message says how)
    :raises BackendError: when it does not become healthy within `timeout_s`
    """
    binary = shutil.which("etcd")
    if binary is None:
        raise ConfigError(ETCD_HINT)
    client, peer = _free_port(), _free_port()
    _remove_stale_data(Path(tempfile.gettempdir()))
    with tempfile.TemporaryDirectory(prefix=f"{_DATA_PREFIX}{os.getpid()}-") as data:
        flags = {
            "--name": "demo",
            "--data-dir": data,
            "--listen-client-urls": f"http://127.0.0.1:{client}",
            "--advertise-client-urls": f"http://127.0.0.1:{client}",
            "--listen-peer-urls": f"http://127.0.0.1:{peer}",
            "--initial-advertise-peer-urls": f"http://127.0.0.1:{peer}",
            "--initial-cluster": f"demo=http://127.0.0.1:{peer}",
        }
        command = [binary, *(part for flag in flags.items() for part in flag)]
        process = subprocess.Popen(
            tied_to_parent(command), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        try:
            _wait_healthy(client, process, timeout_s)
            yield f"etcd://127.0.0.1:{client}/ringkit-demo"
        finally:
            process.terminate()
            try:
                process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def _remove_stale_data(folder: Path) -> None:
    """Delete the data folders that etcds of demos no longer running left in `folder`.

    A demo killed with SIGKILL takes its etcd with it but cannot delete the etcd's data folder;
    the folder's name holds the demo's pid, so the next demo deletes those of dead demos.
    """
    for path in folder.glob(f"{_DATA_PREFIX}*-*"):
        pid = path.name.removeprefix(_DATA_PREFIX).split("-", 1)[0]
        if not pid.isdigit():
            continue
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            shutil.rmtree(path, ignore_errors=True)
        except PermissionError:
            pass  # another user's demo, still running


def _wait_healthy(port: int, process: subprocess.Popen[bytes], timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and process.poll() is None:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1) as reply:
                if b'"true"' in reply.read():
                    return
        except OSError:
            time.sleep(0.1)
    raise BackendError(f"the local etcd on port {port} must be healthy within {timeout_s} s")


# -- the scenario ------------------------------------------------------------------------------


def _owners(reports: dict[str, Report]) -> dict[str, str]:
    return {tenant: name for name, r in reports.items() for tenant in r["owned"]}


def _scenario(pool: _Pool, names: list[str], deadline: float, how: str) -> Report:
    before = pool.wait_agreed(names, deadline, "before the kill")
    victim = max(names, key=lambda name: (len(before[name]["owned"]), name))
    killed_at = time.monotonic()
    pool.kill(victim)
    alive = [name for name in names if name != victim]
    after = pool.wait_agreed(alive, deadline, f"after {victim} was killed")
    owners_before, owners_after = _owners(before), _owners(after)
    return {
        "workers": names,
        "killed": victim,
        "kill": how,
        "epoch_before": before[names[0]]["epoch"],
        "epoch_after": after[alive[0]]["epoch"],
        "owned_before": {name: r["owned"] for name, r in before.items()},
        "owned_after": {name: r["owned"] for name, r in after.items()},
        "moved": {
            t: [owners_before[t], owners_after[t]]
            for t in pool.tenants
            if owners_before[t] != owners_after[t]
        },
        "converge_s": round(max(r["at"] for r in after.values()) - killed_at, 3),
    }


def render(report: Report, ttl_s: float) -> None:
    """Print the pool before and after, the moved tenants and the time to converge."""
    from rich.table import Table

    table = Table(
        title=f"{len(report['workers'])} workers, {report['killed']} killed ({report['kill']})"
    )
    for header in ("worker", "tenants before", "tenants after", "gained"):
        table.add_column(header, justify="left" if header == "worker" else "right")
    for name in report["workers"]:
        before = report["owned_before"][name]
        after = report["owned_after"].get(name)
        gained = [t for t, (_, new) in report["moved"].items() if new == name]
        table.add_row(
            name, str(len(before)), "killed" if after is None else str(len(after)), str(len(gained))
        )
    out = console()
    out.print(table)
    for tenant, (old, new) in report["moved"].items():
        out.print(f"  {tenant}: {old} → {new}")
    out.print(
        f"{len(report['moved'])} tenants moved, all from {report['killed']}; epoch "
        f"{report['epoch_before']} → {report['epoch_after']}; every tenant owned by exactly one "
        f"live worker {report['converge_s']:.2f} s after the kill (lease TTL {ttl_s:g} s)."
    )


def run(args: argparse.Namespace) -> int:
    """Run the scenario on ``args.store`` (or a throwaway etcd) and print what happened."""
    deadline = time.monotonic() + args.timeout_s
    names = [f"worker-{i}" for i in range(1, args.workers + 1)]
    memory = args.store is not None and parse_store_url(args.store).scheme == "memory"
    if not memory and importlib.util.find_spec("pyetcd") is None:
        raise ConfigError(ETCD_CLIENT_HINT)  # before an etcd or a worker is started
    with _store_url(args.store, deadline) as url:
        start = _threads if memory else _processes
        kind = "threads" if memory else "processes"
        print(f"starting {args.workers} worker {kind} on {shown_url(url)} ...", file=sys.stderr)
        with start(url, names, args, deadline) as pool:
            how = "heartbeat stopped" if memory else "SIGKILL"
            report = _scenario(pool, names, deadline, how)
    if args.json:
        print_json(report)
    else:
        render(report, args.ttl_s)
    return 0


@contextmanager
def _store_url(url: str | None, deadline: float) -> Iterator[str]:
    if url is not None:
        yield url
        return
    if shutil.which("etcd") is None:
        raise ConfigError(ETCD_HINT)
    print("starting a throwaway etcd on loopback ...", file=sys.stderr)
    with local_etcd(timeout_s=max(deadline - time.monotonic(), 1.0)) as started:
        yield started


if __name__ == "__main__":
    _process_main(*sys.argv[1:4])
