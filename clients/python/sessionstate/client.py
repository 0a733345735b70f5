"""A small, typed wrapper over the generated sessionstate stubs: one channel, the calls a gateway or an
agent runtime makes, a best-effort append that never raises, and a notice subscription that reconnects
by itself."""
from __future__ import annotations

import logging
import random
import threading
import uuid
from typing import Iterable, Iterator, Mapping, Optional, Sequence, Union

import grpc
from google.protobuf.timestamp_pb2 import Timestamp

from sessionstate.v1 import (
    reconcile_pb2,
    reconcile_pb2_grpc,
    signal_log_pb2,
    signal_log_pb2_grpc,
    types_pb2,
    upstream_pb2_grpc,
    watch_pb2,
    watch_pb2_grpc,
)

log = logging.getLogger("sessionstate")

#: An enum value as the generated code gives it, or its name with or without the prefix
#: (``types_pb2.EVENT_KIND_GOAL_CHANGED``, ``"EVENT_KIND_GOAL_CHANGED"`` or ``"GOAL_CHANGED"``).
EnumValue = Union[int, str]

#: Codes after which reconnecting a subscription cannot help.
_FINAL_CODES = frozenset(
    {
        grpc.StatusCode.INVALID_ARGUMENT,
        grpc.StatusCode.UNAUTHENTICATED,
        grpc.StatusCode.PERMISSION_DENIED,
        grpc.StatusCode.UNIMPLEMENTED,
        # A consumer group on a server that does not serve them (a PostgreSQL replica, in this version).
        grpc.StatusCode.FAILED_PRECONDITION,
    }
)


def _enum(enum_type, prefix: str, value: EnumValue, field: str) -> int:
    if isinstance(value, int):
        return value
    name = value if value.startswith(prefix) else prefix + value
    try:
        return enum_type.Value(name)
    except ValueError:
        raise ValueError(f"{field}: unknown value {value!r}") from None


PayloadValue = Union[types_pb2.EventPayload, Mapping[str, object]]


def _payload(payload: PayloadValue) -> types_pb2.EventPayload:
    """An EventPayload, or a dict of its fields (``{"outcome": "TIMEOUT", "reason": "model timeout"}``;
    ``outcome`` as a constant or its name, with or without ``RUN_OUTCOME_``)."""
    if isinstance(payload, types_pb2.EventPayload):
        return payload
    if not isinstance(payload, Mapping):
        raise TypeError("payload: expected an EventPayload or a dict of its fields (outcome, channel, turns, catalog_id, host_id, reason)")
    fields = dict(payload)
    if "outcome" in fields:
        fields["outcome"] = _enum(types_pb2.RunOutcome, "RUN_OUTCOME_", fields["outcome"], "payload.outcome")  # type: ignore[arg-type]
    try:
        return types_pb2.EventPayload(**fields)  # type: ignore[arg-type]
    except (TypeError, ValueError) as error:
        raise ValueError(f"payload: {error}") from None


def _session(key: str, agent_id: Optional[str] = None) -> types_pb2.SessionRef:
    return types_pb2.SessionRef(key=key, agent_id=agent_id or "")


class SessionStateClient:
    """The sessionstate client. ``target`` is any gRPC target (``host:port``, ``dns:///name:port``, or
    several replicas as ``ipv4:10.0.0.5:50051,10.0.0.6:50051``, used round-robin). ``token`` is sent as a
    bearer token on every call; ``namespace`` (default: the server's ``default``) as ``sessionstate-namespace``
    metadata, so gateways sharing one service keep their sessions apart. ``tls``: ``None`` for plaintext, ``True`` for the system roots, or a
    mapping with ``ca_pem`` (and ``cert_pem``/``key_pem`` for mutual TLS) as bytes. ``timeout`` is the
    deadline of each call, in seconds. Use it as a context manager, or call :meth:`close`."""

    def __init__(
        self,
        target: str,
        *,
        token: Optional[str] = None,
        namespace: Optional[str] = None,
        tls: Union[None, bool, Mapping[str, bytes]] = None,
        timeout: float = 10.0,
    ) -> None:
        options = [
            ("grpc.keepalive_time_ms", 60_000),
            ("grpc.lb_policy_name", "round_robin"),
            # Back within a second of a server serving again, as the TypeScript client.
            ("grpc.initial_reconnect_backoff_ms", 100),
            ("grpc.max_reconnect_backoff_ms", 1_000),
        ]
        if tls is None or tls is False:
            self._channel = grpc.insecure_channel(target, options=options)
        else:
            pems = {} if tls is True else dict(tls)
            credentials = grpc.ssl_channel_credentials(
                root_certificates=pems.get("ca_pem"), private_key=pems.get("key_pem"), certificate_chain=pems.get("cert_pem")
            )
            self._channel = grpc.secure_channel(target, credentials, options=options)
        metadata = []
        if token is not None:
            metadata.append(("authorization", f"Bearer {token}"))
        if namespace is not None:
            metadata.append(("sessionstate-namespace", namespace))
        self._metadata = tuple(metadata)
        self._timeout = timeout
        #: The generated stubs, for every call the helpers below do not cover.
        self.signal_log = signal_log_pb2_grpc.SignalLogStub(self._channel)
        self.watch_service = watch_pb2_grpc.WatchStub(self._channel)
        self.reconcile = reconcile_pb2_grpc.ReconcileStub(self._channel)
        self.upstream = upstream_pb2_grpc.UpstreamStub(self._channel)

    def __enter__(self) -> "SessionStateClient":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Closes the channel; open subscriptions end."""
        self._channel.close()

    def append(
        self,
        session: str,
        kind: EnumValue,
        actor_type: EnumValue,
        summary: str,
        *,
        agent_id: Optional[str] = None,
        actor_id: str = "",
        run_id: str = "",
        occurred_at_ms: Optional[int] = None,
        payload: Optional[PayloadValue] = None,
        dedupe_key: Optional[str] = None,
        notify_session_keys: Sequence[str] = (),
        only_if_watched: bool = False,
        timeout: Optional[float] = None,
    ) -> signal_log_pb2.AppendResponse:
        """Appends an event and returns the AppendResponse. Without a ``dedupe_key`` it gets a random
        one, so that a retry after UNAVAILABLE can never record it twice. Raises ``grpc.RpcError``."""
        request = signal_log_pb2.AppendRequest(
            session=_session(session, agent_id),
            kind=_enum(types_pb2.EventKind, "EVENT_KIND_", kind, "kind"),
            actor_type=_enum(types_pb2.ActorType, "ACTOR_TYPE_", actor_type, "actor_type"),
            actor_id=actor_id,
            run_id=run_id,
            summary=summary,
            dedupe_key=dedupe_key or f"client:{uuid.uuid4()}",
            notify_session_keys=list(notify_session_keys),
            only_if_watched=only_if_watched,
        )
        if payload is not None:
            request.payload.CopyFrom(_payload(payload))
        if occurred_at_ms is not None:
            request.occurred_at.CopyFrom(Timestamp(seconds=occurred_at_ms // 1000, nanos=(occurred_at_ms % 1000) * 1_000_000))
        return self.signal_log.Append(request, timeout=timeout or self._timeout, metadata=self._metadata)

    def append_best_effort(self, session: str, kind: EnumValue, actor_type: EnumValue, summary: str, *, timeout: float = 2.0, **fields) -> Optional[signal_log_pb2.AppendResponse]:
        """Like :meth:`append`, but never raises: on any failure (server down, deadline, refusal) it logs
        a warning on the ``sessionstate`` logger and returns ``None`` within ``timeout`` seconds.
        Recording a signal must never break the turn that caused it."""
        try:
            return self.append(session, kind, actor_type, summary, timeout=timeout, **fields)
        except Exception as err:  # noqa: BLE001 - the point is to never raise
            code = err.code().name if isinstance(err, grpc.RpcError) else type(err).__name__
            details = err.details() if isinstance(err, grpc.RpcError) else str(err)
            log.warning("sessionstate append failed; the turn goes on (session=%s code=%s details=%s)", session, code, details)
            return None

    def session_status(
        self, session: str, *, changes_since: Optional[int] = None, limit: int = 0, agent_id: Optional[str] = None, timeout: Optional[float] = None
    ) -> reconcile_pb2.SessionStatusResponse:
        """A session's state version and, with ``changes_since``, the events after it (``state_changes``,
        with ``history_gap`` and ``truncated``)."""
        request = reconcile_pb2.SessionStatusRequest(session=_session(session, agent_id), limit=limit)
        if changes_since is not None:
            request.changes_since = changes_since
        return self.reconcile.SessionStatus(request, timeout=timeout or self._timeout, metadata=self._metadata)

    def watch(
        self,
        watcher: str,
        target: str,
        *,
        target_agent_id: Optional[str] = None,
        ambient: bool = False,
        extra_material_kinds: Sequence[EnumValue] = (),
    ) -> watch_pb2.WatchResponse:
        """Makes ``watcher`` watch ``target`` (the cursor starts at the target's current version).
        ``ambient=True`` makes an ambient watch: its notices never wake and are ``queue_only`` (replace the
        queued entry for that target); it never downgrades an explicit watch. ``extra_material_kinds``
        (explicit watches only: ``"RUN_COMPLETED"``, ``"RUN_FAILED"``, ``"COMPACTED"``) notify this
        watcher too; watching again replaces the set."""
        request = watch_pb2.WatchRequest(
            watcher_session_key=watcher,
            target=_session(target, target_agent_id),
            provenance=types_pb2.WATCH_PROVENANCE_AMBIENT if ambient else types_pb2.WATCH_PROVENANCE_EXPLICIT,
            extra_material_kinds=[_enum(types_pb2.EventKind, "EVENT_KIND_", kind, "extra_material_kinds") for kind in extra_material_kinds],
        )
        return self.watch_service.Watch(request, timeout=self._timeout, metadata=self._metadata)

    def unwatch(self, watcher: str, target: str, *, target_agent_id: Optional[str] = None) -> watch_pb2.UnwatchResponse:
        """Stops ``watcher`` watching ``target``."""
        request = watch_pb2.UnwatchRequest(watcher_session_key=watcher, target=_session(target, target_agent_id))
        return self.watch_service.Unwatch(request, timeout=self._timeout, metadata=self._metadata)

    def subscribe(
        self,
        watchers: Iterable[str] = (),
        prefixes: Iterable[str] = (),
        *,
        group: str = "",
        max_in_flight: int = 0,
        stop: Optional[threading.Event] = None,
        backoff_initial: float = 0.1,
        backoff_max: float = 10.0,
    ) -> Iterator[watch_pb2.StaleNotice]:
        """Yields stale notices for the given watchers (exact keys, or key prefixes such as
        ``agent:main:``). A broken stream is reopened with jittered exponential backoff and resumes:
        notices still pending come again, so act on a notice and then :meth:`ack` it. Refusals a retry
        cannot fix (INVALID_ARGUMENT, UNAUTHENTICATED, PERMISSION_DENIED) raise. Setting ``stop`` (a
        ``threading.Event``) ends the iteration; so does closing the generator.

        With ``group`` (a consumer group), the processes that subscribe with the same group get each notice
        once between them, one holder at a time: the notice's ``claim_id`` says this process holds it,
        ``delivery_count`` how often it was handed out; :meth:`release` gives it back to the group.
        ``max_in_flight`` (1-1000, default 16) bounds what this process holds at once."""
        request = watch_pb2.SubscribeStaleNoticesRequest(
            watcher_session_keys=list(watchers), watcher_key_prefixes=list(prefixes), consumer_group=group, max_in_flight=max_in_flight
        )
        stopped = stop or threading.Event()
        ended = threading.Event()
        current: dict = {}
        if stop is not None:
            # Setting `stop` cancels the open stream from another thread, so a quiet stream ends too.
            def cancel_when_stopped() -> None:
                while not ended.wait(0.2):
                    if stopped.is_set():
                        call = current.get("call")
                        if call is not None:
                            call.cancel()
                        return

            threading.Thread(target=cancel_when_stopped, name="sessionstate-subscribe-stop", daemon=True).start()
        attempt = 0
        try:
            while not stopped.is_set():
                call = self.watch_service.SubscribeStaleNotices(request, metadata=self._metadata)
                current["call"] = call
                try:
                    for message in call:
                        if message.HasField("synced"):
                            attempt = 0
                        elif message.HasField("notice"):
                            yield message.notice
                except grpc.RpcError as err:
                    if stopped.is_set():
                        return
                    if err.code() in _FINAL_CODES:
                        raise
                    log.info("sessionstate subscription broke (%s); reconnecting", err.code().name)
                finally:
                    call.cancel()
                delay = random.uniform(0, min(backoff_max, backoff_initial * 2**attempt))
                attempt += 1
                stopped.wait(delay)
        finally:
            ended.set()

    def release(self, notices: Iterable[watch_pb2.StaleNotice]) -> list:
        """Gives consumer-group notices back to the group (those this process cannot take): each goes to
        another member at once. One bool per notice: False when it was not held any more."""
        request = watch_pb2.ReleaseNoticesRequest(claim_ids=[notice.claim_id for notice in notices])
        return list(self.watch_service.ReleaseNotices(request, timeout=self._timeout, metadata=self._metadata).released)

    def ack(self, notice: watch_pb2.StaleNotice, *, reconciled_through: Optional[int] = None) -> watch_pb2.AckResult:
        """Acknowledges a consumed notice. Pass ``reconciled_through`` (the state version you caught up to
        with :meth:`session_status`) to avoid a second notice for changes you already saw; changes after
        it reopen the notice (``reopened``)."""
        ack = watch_pb2.NoticeAck(watcher_session_key=notice.watcher_session_key, notified_version=notice.notified_version)
        ack.target.CopyFrom(notice.target)
        if reconciled_through is not None:
            ack.reconciled_through = reconciled_through
        response = self.watch_service.AckNotices(watch_pb2.AckNoticesRequest(acks=[ack]), timeout=self._timeout, metadata=self._metadata)
        return response.results[0]
