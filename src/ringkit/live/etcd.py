"""``etcd://``: the live store's coordination service is an etcd v3 cluster, over gRPC.

The client is ``etcd-sdk-python`` (module ``pyetcd``, a maintained fork of python-etcd3, the
``etcd`` extra): it speaks etcd's gRPC API with current grpcio and protobuf, knows several
endpoints (``MultiEndpointEtcd3Client``) and authenticates with user and password. It does not
retry, so this module does: a call that fails on one endpoint is tried on the next, within a
bounded time, and then raises :class:`BackendError` naming the endpoints and the cause. A watch
that breaks (its endpoint died, the leader changed) is reported to the store, which resumes it
from the next revision on another endpoint; nothing is lost because etcd keeps the history.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeVar

from ringkit.errors import BackendError, ConfigError
from ringkit.live.backend import Event, Record, SwapAnswer, WatchHandle
from ringkit.live.urls import StoreURL

__all__ = ["EtcdBackend"]

T = TypeVar("T")

#: Seconds one RPC may take, and that every endpoint together may take, before a call fails.
RPC_TIMEOUT_S = 2.0
CALL_DEADLINE_S = 6.0
#: How soon an endpoint that failed is tried again (pyetcd's default is 300 s).
ENDPOINT_RETRY_S = 0.5
#: gRPC keepalive: etcd answers a client that pings more often than its
#: ``--grpc-keepalive-min-time`` (5 s by default) with GOAWAY, and refuses pings on a channel
#: without a call; a ping that is not answered within the timeout closes the channel, which
#: breaks its calls and the watch on it (a member that stopped answering is then left).
KEEPALIVE_TIME_S = 5.0
KEEPALIVE_TIMEOUT_S = 2.0
#: Metadata that asks etcd to cancel a watch when its member loses the leader, as etcd's own
#: ``clientv3.WithRequireLeader`` does (a member cut off from the quorum holds no news).
REQUIRE_LEADER = ("hasleader", "true")


def _channel_options() -> list[tuple[str, int]]:
    return [
        ("grpc.keepalive_time_ms", int(KEEPALIVE_TIME_S * 1000)),
        ("grpc.keepalive_timeout_ms", int(KEEPALIVE_TIMEOUT_S * 1000)),
        ("grpc.keepalive_permit_without_calls", 0),
        ("grpc.http2.max_pings_without_data", 0),
    ]


def _import_client() -> Any:
    try:
        import pyetcd
    except ImportError as error:  # pragma: no cover - depends on the environment
        raise ConfigError(
            f"etcd:// needs the etcd client, got ImportError: {error}; pip install 'ringkit[etcd]'"
        ) from error
    return pyetcd


#: A PEM file larger than this is not a certificate or key (``?ca=/dev/zero`` would never end).
_MAX_PEM_BYTES = 1 << 20
_PEM_MARKERS = {
    "ca": b"-----BEGIN CERTIFICATE-----",
    "cert": b"-----BEGIN CERTIFICATE-----",
    "key": b"PRIVATE KEY-----",
}


def _read_file(url: StoreURL, what: str, path: str | None) -> bytes | None:
    """Read the PEM file `path` of the URL's `what` (ca, cert, key), checked to be one."""
    if path is None:
        return None
    try:
        with open(path, "rb") as file:
            data = file.read(_MAX_PEM_BYTES + 1)
    except OSError as error:
        raise ConfigError(
            f"etcds:// {what} file must be readable, got {path!r}: {error.strerror or error}"
        ) from error
    kind = "private key" if what == "key" else "certificate"
    if len(data) > _MAX_PEM_BYTES or _PEM_MARKERS[what] not in data:
        raise ConfigError(
            f"etcds:// {what} file must be a PEM {kind}, got {path!r} "
            f"({'over 1 MiB' if len(data) > _MAX_PEM_BYTES else 'no PEM ' + kind + ' in it'})"
        )
    return data


def _tls_credentials(grpc: Any, url: StoreURL) -> Any:
    """gRPC channel credentials from the URL's CA and client certificate (system CAs if none)."""
    return grpc.ssl_channel_credentials(
        root_certificates=_read_file(url, "ca", url.ca_file),
        private_key=_read_file(url, "key", url.key_file),
        certificate_chain=_read_file(url, "cert", url.cert_file),
    )


def _swapped(response: Any, key: str, value: bytes, lease: int) -> tuple[bool, Record]:
    """The answer to a compare-and-swap transaction: (True, what it wrote) or (False, what is)."""
    if response.succeeded:
        return True, Record(key, value, int(response.header.revision), 0, lease)
    kvs = response.responses[0].response_range.kvs if response.responses else []
    if not kvs:
        return False, Record(key, b"", 0, 0, 0)
    kv = kvs[0]
    return False, Record(
        kv.key.decode(), kv.value, int(kv.mod_revision), int(kv.create_revision), int(kv.lease)
    )


def _details(error: BaseException) -> str:
    """The server's own words for a gRPC error, else the error's text."""
    details = getattr(error, "details", None)
    return str(details() if callable(details) else error) or type(error).__name__


#: What gRPC's TLS says, and what it means to the person who wrote the URL.
_TLS_CAUSES = (
    (
        "CERTIFICATE_VERIFY_FAILED",
        "etcd's certificate is not signed by a CA this client trusts "
        "(unknown CA); pass ?ca=PATH, the CA that signed it",
    ),
    (
        "Hostname Verification",
        "etcd's certificate does not name the host in the URL (name "
        "mismatch); use a host name or IP address its subjectAltName lists",
    ),
    (
        "Peer name",
        "etcd's certificate does not name the host in the URL (name mismatch); use "
        "a host name or IP address its subjectAltName lists",
    ),
    (
        "TSI_DATA_CORRUPTED",
        "etcd refused the client certificate (or its absence); pass "
        "cert=PATH&key=PATH signed by a CA in etcd's --trusted-ca-file",
    ),
    ("CERTIFICATE_REQUIRED", "etcd requires a client certificate; pass cert=PATH&key=PATH"),
    (
        "BAD_CERTIFICATE",
        "etcd refused the client certificate; pass cert=PATH&key=PATH "
        "signed by a CA in etcd's --trusted-ca-file",
    ),
)


def _tls_cause(error: BaseException | None) -> str | None:
    """The cause of a failed TLS handshake, read from gRPC's error (or the one it replaced)."""
    seen = 0
    while error is not None and seen < 5:
        text = _details(error)
        for marker, cause in _TLS_CAUSES:
            if marker in text:
                return cause
        error, seen = error.__cause__ or error.__context__, seen + 1
    return None


def _token_expired(error: BaseException) -> bool:
    """Whether etcd refused the call for an expired or unknown auth token."""
    return "invalid auth token" in _details(error)


class _Watch:
    """A watch on one endpoint's stream; once cancelled, its callbacks are dropped."""

    def __init__(self, client: Any) -> None:
        self._client = client
        self.watch_id: int | None = None
        self.watcher: Any = None
        self.endpoint = ""
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True
        # NOTE: only a stream still in use is told: pyetcd's request queue of a stream it let
        # go (after a failover) is read by no one, and a put there can block for good.
        watcher, watch_id = self.watcher, self.watch_id
        if watcher is None or watch_id is None or self._client._stubs.get("watcher") is not watcher:
            return
        with contextlib.suppress(Exception):  # the stream may be gone already
            watcher.cancel(watch_id)


class EtcdBackend:
    """The :class:`~ringkit.live.backend.Backend` surface over an etcd v3 cluster.

    Keys: ``get_prefix``, ``create``, ``swap``, ``delete``. Leases: ``grant``, ``keepalive``,
    ``time_to_live``, ``revoke``. Watching: ``watch``. ``describe`` names the endpoints.
    """

    def __init__(self, url: StoreURL) -> None:
        pyetcd = _import_client()
        import grpc

        self._url = url
        self._cluster_id = 0
        self._state = threading.Condition()
        self._in_flight = 0
        self._closed = False
        self._errors: tuple[type[BaseException], ...] = (pyetcd.Etcd3Exception, grpc.RpcError)
        credentials = _tls_credentials(grpc, url) if url.tls else None
        endpoints = [
            pyetcd.Endpoint(
                host,
                port,
                secure=url.tls,
                creds=credentials,
                time_retry=ENDPOINT_RETRY_S,
                opts=_channel_options(),
            )
            for host, port in url.endpoints
        ]
        try:
            self._client = pyetcd.MultiEndpointEtcd3Client(
                endpoints=endpoints,
                timeout=RPC_TIMEOUT_S,
                user=url.user,
                password=url.password,
                failover=True,
            )
            # The URL's first endpoint first (pyetcd picks one at random), as etcdctl does.
            self._client._current_endpoint_label = endpoints[0].netloc
        except self._errors as error:
            if self._transient(error):
                raise self._unreachable(error) from error
            raise BackendError(
                f"{self.describe()} must accept user {url.user!r}, got: {_details(error)}; "
                "check the user and password in the URL"
            ) from error
        if not url.tls:
            # NOTE: gRPC refuses call credentials on a plaintext channel; the auth token also
            # travels as "token" metadata on every call, which is what etcd reads.
            self._client.call_credentials = None
        self._tx = self._client.transactions
        self._client.get_watcher = self._leader_watcher
        self._call(lambda: self._client.status())  # fail now, not at the first join

    def _leader_watcher(self) -> Any:
        """pyetcd's watcher for the current endpoint, its stream asking for a leader."""
        from pyetcd import etcdrpc, watch

        client = self._client
        return watch.Watcher(
            etcdrpc.WatchStub(client.channel),
            timeout=client.timeout,
            call_credentials=client.call_credentials,
            metadata=(*(client.metadata or ()), REQUIRE_LEADER),
        )

    def describe(self) -> str:
        hosts = ", ".join(f"{host}:{port}" for host, port in self._url.endpoints)
        return f"etcd at {hosts}"

    def _unreachable(self, error: BaseException) -> BackendError:
        cause = _details(error)
        return BackendError(
            f"{self.describe()} is unreachable within {CALL_DEADLINE_S:g} s: {cause}; "
            "check that etcd runs there and the URL's hosts and ports"
        )

    @contextlib.contextmanager
    def _open_client(self) -> Iterator[None]:
        """Hold the client open for one call: ``close`` waits for calls under way.

        gRPC crashes the process (SIGSEGV) when a stub is made on a channel that another thread
        closed, so no call may start once closing began, and closing waits for the calls.
        """
        with self._state:
            if self._closed:
                raise BackendError(f"{self.describe()}: the client was closed")
            self._in_flight += 1
        try:
            yield
        finally:
            with self._state:
                self._in_flight -= 1
                self._state.notify_all()

    def _call(self, function: Callable[[], T]) -> T:
        """Run `function`, moving to the next endpoint on failure, until the deadline.

        Only failures of reach (unavailable, timed out, no leader) are retried; an answer such
        as "lease not found" or "revision compacted" raises at once.
        """
        with self._open_client():
            return self._call_open(function)

    def _call_open(self, function: Callable[[], T]) -> T:
        deadline = time.monotonic() + CALL_DEADLINE_S
        renewed = False
        tls_failures = 0
        while True:
            try:
                return function()
            except self._errors as error:
                if self._url.user and not renewed and _token_expired(error):
                    self._renew_token()
                    renewed = True
                    continue
                if not self._transient(error):
                    raise BackendError(
                        f"{self.describe()} refused the call: {_details(error)}"
                    ) from error
                cause = _tls_cause(error) if self._url.tls else None
                tls_failures += cause is not None
                # Every endpoint refused the handshake: retrying will not change a certificate.
                if cause is not None and tls_failures >= len(self._url.endpoints):
                    raise BackendError(
                        f"{self.describe()} is unreachable over TLS: {cause}"
                    ) from error
                if time.monotonic() >= deadline:
                    raise self._unreachable(error) from error
                time.sleep(0.05)

    def _renew_token(self) -> None:
        """Authenticate again: etcd drops a simple token after ``--auth-token-ttl`` idle."""
        from pyetcd import etcdrpc

        request = etcdrpc.AuthenticateRequest(name=self._url.user, password=self._url.password)
        response = self._client.authstub.Authenticate(request, RPC_TIMEOUT_S)
        self._client.metadata = (("token", response.token),)
        self._client._clear_old_stubs()  # a watch stream takes the token when it is opened

    def _transient(self, error: BaseException) -> bool:
        import grpc

        if isinstance(error, grpc.RpcError):
            code = error.code() if hasattr(error, "code") else None
            # NOTE: an overloaded etcd times out a linearizable read itself and answers
            # UNKNOWN "context deadline exceeded": a failure of reach, as DEADLINE_EXCEEDED is.
            server_timeout = code == grpc.StatusCode.UNKNOWN and "deadline" in _details(error)
            return server_timeout or code in (
                grpc.StatusCode.UNAVAILABLE,
                grpc.StatusCode.DEADLINE_EXCEEDED,
            )
        return type(error).__name__ in (
            "ConnectionFailedError",
            "ConnectionTimeoutError",
            "NoServerAvailableError",
            "InternalServerError",
            "WatchTimedOut",
        )

    # -- keys ------------------------------------------------------------------------------------

    @staticmethod
    def _record(value: bytes, meta: Any) -> Record:
        return Record(
            meta.key.decode(), value, meta.mod_revision, meta.create_revision, meta.lease_id
        )

    def get_prefix(self, prefix: str, revision: int = 0) -> tuple[int, list[Record]]:
        options = {"revision": revision} if revision else {}
        response = self._call(lambda: self._client.get_prefix_response(prefix, **options))
        self._cluster_id = int(response.header.cluster_id)
        records = [
            Record(kv.key.decode(), kv.value, kv.mod_revision, kv.create_revision, kv.lease)
            for kv in response.kvs
        ]
        return int(response.header.revision), records

    def read_revisions(self, prefix: str, *, timeout_s: float) -> tuple[int, dict[str, int]]:
        from pyetcd import etcdrpc, utils

        client = self._client
        request = etcdrpc.RangeRequest(
            key=prefix.encode(),
            range_end=utils.prefix_range_end(prefix.encode()),
            keys_only=True,
            serializable=False,  # linearizable: answered only with the leader's agreement
        )
        for renewed in (False, True):
            try:
                with self._open_client():
                    response = client.kvstub.Range(
                        request,
                        timeout_s,
                        credentials=client.call_credentials,
                        metadata=client.metadata,
                    )
                break
            except self._errors as error:
                if self._url.user and not renewed and _token_expired(error):
                    self._renew_token()
                    continue
                if self._transient(error) and len(client.endpoints) > 1:
                    # The next read goes to the next endpoint that has not failed lately.
                    client.endpoint_in_use.fail()
                    client._clear_old_stubs()
                raise BackendError(
                    f"{self.describe()} did not confirm the ring within {timeout_s:g} s: "
                    f"{_details(error)}"
                ) from error
        self._cluster_id = int(response.header.cluster_id)
        found = {kv.key.decode(): int(kv.mod_revision) for kv in response.kvs}
        return int(response.header.revision), found

    def cluster_id(self) -> int:
        return self._cluster_id

    def _txn(
        self,
        compare: Any,
        key: str,
        value: bytes,
        lease: int,
        also: tuple[str, bytes] | None = None,
    ) -> tuple[bool, Record]:
        puts = [self._tx.put(key, value, lease=lease or None)]
        if also is not None:
            puts.append(self._tx.put(also[0], also[1], lease=lease or None))
        compares = compare if isinstance(compare, list) else [compare]
        ok, responses = self._call(
            lambda: self._client.transaction(
                compare=compares, success=puts, failure=[self._tx.get(key)]
            )
        )
        if ok:
            revision = int(responses[0].response_put.header.revision)
            return True, Record(key, value, revision, 0, lease)
        found = responses[0] if responses else []
        if not found:
            return False, Record(key, b"", 0, 0, 0)
        value_found, meta = found[0]
        return False, self._record(value_found, meta)

    def create(
        self, key: str, value: bytes, lease: int, *, also: tuple[str, bytes] | None = None
    ) -> tuple[bool, Record]:
        return self._txn(self._tx.create(key) == 0, key, value, lease, also)

    def create_unless_changed(
        self,
        key: str,
        value: bytes,
        lease: int,
        *,
        prefix: str,
        revision: int,
        also: tuple[str, bytes] | None = None,
    ) -> tuple[bool, Record]:
        from pyetcd import utils

        # A compare over a key range holds when it holds for every key in it (etcd's Txn).
        end = utils.prefix_range_end(prefix.encode())
        unchanged = self._tx.mod(prefix.encode(), range_end=end) < revision + 1
        return self._txn([self._tx.create(key) == 0, unchanged], key, value, lease, also)

    def swap(self, key: str, value: bytes, lease: int, mod_revision: int) -> tuple[bool, Record]:
        return self._txn(self._tx.mod(key) == mod_revision, key, value, lease)

    def start_swap(
        self,
        key: str,
        value: bytes,
        lease: int,
        mod_revision: int,
        done: Callable[[SwapAnswer], None],
    ) -> None:
        from pyetcd import etcdrpc

        client = self._client
        request = etcdrpc.TxnRequest(
            compare=[(self._tx.mod(key) == mod_revision).build_message()],
            success=client._ops_to_requests([self._tx.put(key, value, lease=lease or None)]),
            failure=client._ops_to_requests([self._tx.get(key)]),
        )
        with self._state:
            if self._closed:
                raise BackendError(f"{self.describe()}: the client was closed")
            self._in_flight += 1  # ``close`` waits for the answer, as for a call

        def answered(future: Any) -> None:
            result: SwapAnswer
            try:
                result = _swapped(future.result(), key, value, lease)
            except Exception as error:  # grpc.RpcError, or the future cancelled at close
                result = BackendError(f"{self.describe()} did not write {key!r}: {error!r}")
            finally:
                with self._state:
                    self._in_flight -= 1
                    self._state.notify_all()
            done(result)

        try:
            future = client.kvstub.Txn.future(
                request,
                client.timeout,
                credentials=client.call_credentials,
                metadata=client.metadata,
            )
        except self._errors as error:
            with self._state:
                self._in_flight -= 1
                self._state.notify_all()
            raise BackendError(
                f"{self.describe()} did not take {key!r}: {_details(error)}"
            ) from error
        future.add_done_callback(answered)

    def put_unless_newer(self, key: str, value: bytes, revision: int) -> tuple[bool, Record]:
        return self._txn(self._tx.mod(key) < revision + 1, key, value, 0)

    def delete(self, key: str) -> None:
        self._call(lambda: self._client.delete(key))

    # -- leases ----------------------------------------------------------------------------------

    def grant(self, ttl_s: float) -> tuple[int, float]:
        # etcd counts TTLs in whole seconds and raises short ones to its minimum (about 2 s).
        lease = self._call(lambda: self._client.lease(max(1, round(ttl_s))))
        return int(lease.id), float(lease.ttl)

    def keepalive(self, lease: int) -> float:
        def renew() -> float:
            for response in self._client.refresh_lease(lease):
                return max(0.0, float(response.TTL))
            return 0.0

        return self._call(renew)

    def time_to_live(self, lease: int) -> float:
        response = self._call(lambda: self._client.get_lease_info(lease))
        return max(0.0, float(response.TTL))

    def revoke(self, lease: int) -> None:
        self._call(lambda: self._client.revoke_lease(lease))

    # -- watching --------------------------------------------------------------------------------

    def watch(
        self,
        prefix: str,
        start_revision: int,
        on_events: Callable[[Sequence[Event]], None],
        on_error: Callable[[Exception], None],
        *,
        replacing: WatchHandle | None = None,
        range_end: str | None = None,
    ) -> _Watch:
        handle = _Watch(self._client)
        if isinstance(replacing, _Watch):
            replacing.cancel()
            self._leave_endpoint(replacing.endpoint)

        def callback(response: Any) -> None:
            if handle.cancelled:
                return
            if isinstance(response, Exception) or not hasattr(response, "events"):
                handle.cancelled = True
                on_error(response if isinstance(response, Exception) else RuntimeError("closed"))
                return
            batch: list[Event] = []
            for raw in response.events:
                kind = "delete" if type(raw).__name__ == "DeleteEvent" else "put"
                event = Event(
                    kind, raw.key.decode(), raw.value, int(raw.mod_revision), int(raw.lease)
                )
                if batch and batch[-1].revision != event.revision:
                    on_events(batch)
                    batch = []
                batch.append(event)
            if batch:
                on_events(batch)

        def create() -> int:
            # 0: from now (no start revision: etcd syncs the watcher at once).
            first = max(1, start_revision) if start_revision > 0 else None
            try:
                watcher = self._client.watcher
                handle.endpoint = self._client._current_endpoint_label
                if range_end is None:
                    watch_id: int = self._client.add_watch_prefix_callback(
                        prefix, callback, start_revision=first
                    )
                else:
                    watch_id = self._client.add_watch_callback(
                        prefix, callback, range_end=range_end, start_revision=first
                    )
            except self._errors:
                # NOTE: pyetcd keeps one watch stream per client and reuses it; after a failed
                # create that stream may be wedged, so the retry must open a fresh one.
                self._client._clear_old_stubs()
                raise
            handle.watcher = watcher
            return watch_id

        handle.watch_id = self._call(create)
        return handle

    def _leave_endpoint(self, endpoint: str) -> None:
        """Move the client off `endpoint` (a silent watch was there) when there is another."""
        client = self._client
        if len(client.endpoints) > 1 and client._current_endpoint_label == endpoint:
            client.endpoint_in_use.fail()
            client._clear_old_stubs()

    def close(self) -> None:
        with self._state:
            self._closed = True
            # Calls under way end within their deadline; then the channels can go.
            self._state.wait_for(lambda: self._in_flight == 0, timeout=CALL_DEADLINE_S + 1)
        with contextlib.suppress(*self._errors):  # closing a channel that already failed
            self._client.close()
