"""The Python client against a real sessionstate server (started from this checkout's bin/ for each
test class, on a free port with a fresh SQLite file): the scenarios of the TypeScript client's tests.

    python3 -m unittest discover -s clients/python/tests -v

SESSIONSTATE_BIN overrides the server launcher; `sessionstate` is imported from wherever Python finds
it (the source tree, or an installed copy first on PYTHONPATH).
"""
import logging
import os
import queue
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest

import grpc

from sessionstate import SessionStateClient, types_pb2

HERE = os.path.dirname(os.path.abspath(__file__))
BIN = os.environ.get("SESSIONSTATE_BIN", os.path.join(HERE, "..", "..", "..", "bin", "sessionstate.js"))
WATCHER = "agent:main:main"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class Server:
    """A `sessionstate serve` process on a fixed port, restartable on the same database."""

    def __init__(self) -> None:
        self.dir = tempfile.mkdtemp(prefix="sessionstate-py-")
        self.port = free_port()
        self.address = f"127.0.0.1:{self.port}"
        self.process = None

    def start(self) -> None:
        self.process = subprocess.Popen(
            # The HTTP port (by default the next port, which nothing made free) on a free port of its own.
            ["node", BIN, "serve", "--listen", self.address, "--http-listen", "127.0.0.1:0", "--db", os.path.join(self.dir, "state.db")],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        line = self.process.stdout.readline()
        if not line.startswith("listening on"):
            raise RuntimeError(f"server did not start: {line!r}")

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=30)
        self.process.stdout.close()

    def remove(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)


class Subscriber:
    """Runs `client.subscribe` in a thread and hands its notices over a queue."""

    def __init__(self, client: SessionStateClient, **options) -> None:
        self.notices: "queue.Queue" = queue.Queue()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, args=(client, options), daemon=True)
        self.thread.start()

    def _run(self, client, options) -> None:
        for notice in client.subscribe(stop=self.stop, backoff_initial=0.05, backoff_max=0.5, **options):
            self.notices.put(notice)

    def next(self, timeout: float = 10.0):
        return self.notices.get(timeout=timeout)

    def close(self) -> None:
        self.stop.set()
        self.thread.join(timeout=5)


class ClientTest(unittest.TestCase):
    def setUp(self) -> None:
        self.server = Server()
        self.server.start()
        self.client = SessionStateClient(self.server.address)
        self.target = f"agent:main:worker-{self._testMethodName}"

    def tearDown(self) -> None:
        self.client.close()
        self.server.remove()

    def test_append_returns_the_event_and_takes_enum_names(self) -> None:
        response = self.client.append(self.target, "GOAL_CHANGED", types_pb2.ACTOR_TYPE_AGENT, "goal set")
        self.assertTrue(response.recorded)
        self.assertEqual(response.state_version, 1)
        self.assertEqual(response.event.kind, types_pb2.EVENT_KIND_GOAL_CHANGED)
        self.assertEqual(response.event.session.agent_id, "main")
        status = self.client.session_status(self.target, changes_since=0)
        self.assertEqual(status.state_version, 1)
        self.assertEqual([e.summary for e in status.state_changes.events], ["goal set"])
        self.assertFalse(status.state_changes.history_gap)

    def test_the_same_dedupe_key_records_once(self) -> None:
        first = self.client.append(self.target, "GOAL_CHANGED", "AGENT", "once", dedupe_key="py-1")
        again = self.client.append(self.target, "GOAL_CHANGED", "AGENT", "once", dedupe_key="py-1")
        self.assertEqual((first.deduplicated, again.deduplicated), (False, True))
        self.assertEqual(again.event.sequence, first.event.sequence)
        self.assertEqual(self.client.session_status(self.target).state_version, 1)

    def test_a_namespace_keeps_the_same_key_apart(self) -> None:
        other = SessionStateClient(self.server.address, namespace="team-b")
        try:
            here = self.client.append(self.target, "GOAL_CHANGED", "AGENT", "default", dedupe_key="ns-1")
            there = other.append(self.target, "GOAL_CHANGED", "AGENT", "team-b", dedupe_key="ns-1")
            self.assertFalse(there.deduplicated)
            self.assertNotEqual(there.event.sequence, here.event.sequence)
            self.assertEqual(other.session_status(self.target).state_version, there.event.sequence)
            self.assertEqual(self.client.session_status(self.target).state_version, here.event.sequence)
        finally:
            other.close()
        bad = SessionStateClient(self.server.address, namespace="Team B")
        try:
            with self.assertRaises(grpc.RpcError) as raised:
                bad.session_status(self.target)
            self.assertEqual(raised.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)
            self.assertIn("sessionstate-namespace", raised.exception.details())
        finally:
            bad.close()

    def test_refusals_raise_invalid_argument_naming_the_field(self) -> None:
        with self.assertRaises(grpc.RpcError) as raised:
            self.client.append("", "GOAL_CHANGED", "AGENT", "x")
        self.assertEqual(raised.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)
        self.assertEqual(raised.exception.details(), "session.key: must not be empty")
        with self.assertRaises(ValueError):
            self.client.append(self.target, "NOT_A_KIND", "AGENT", "x")
        with self.assertRaises(ValueError) as bad_payload:
            self.client.append(self.target, "RUN_FAILED", "SYSTEM", "x", payload={"outcome": "LATE"})
        self.assertEqual(str(bad_payload.exception), "payload.outcome: unknown value 'LATE'")
        with self.assertRaises(ValueError) as unknown_field:
            self.client.append(self.target, "RUN_FAILED", "SYSTEM", "x", payload={"colour": "red"})
        self.assertTrue(str(unknown_field.exception).startswith("payload: "), str(unknown_field.exception))

    def test_best_effort_append_never_raises_and_logs(self) -> None:
        self.assertIsNone(self.client.append_best_effort("", "GOAL_CHANGED", "AGENT", "refused"))
        self.server.stop()
        started = time.monotonic()
        with self.assertLogs("sessionstate", level=logging.WARNING) as logged:
            self.assertIsNone(self.client.append_best_effort(self.target, "GOAL_CHANGED", "AGENT", "lost", timeout=1.0))
        self.assertLess(time.monotonic() - started, 5.0)
        self.assertIn("code=UNAVAILABLE", logged.output[0])

    def test_a_notice_once_per_pair_and_an_ack_with_reopen(self) -> None:
        self.assertTrue(self.client.watch(WATCHER, self.target).watched)
        subscriber = Subscriber(self.client, watchers=[WATCHER])
        try:
            self.client.append(self.target, "GOAL_CHANGED", "AGENT", "first")
            first = subscriber.next()
            self.assertEqual((first.watcher_session_key, first.target.key, first.changes_since, first.notified_version), (WATCHER, self.target, 0, 1))
            self.assertEqual(
                first.text,
                f'Session "{self.target}" changed (other actor). Reconcile before acting: session_status sessionKey "{self.target}" changesSince 0.',
            )
            # A change after the notice, but reconciled before the ack: no second notice.
            self.client.append(self.target, "GOAL_CHANGED", "AGENT", "second")
            status = self.client.session_status(self.target, changes_since=0)
            self.assertEqual([e.summary for e in status.state_changes.events], ["first", "second"])
            result = self.client.ack(first, reconciled_through=status.state_version)
            self.assertEqual((result.acknowledged, result.reopened), (True, False))
            with self.assertRaises(queue.Empty):
                subscriber.next(timeout=0.5)
            # A change after the notice, not reconciled: the ack reopens it.
            self.client.append(self.target, "GOAL_CHANGED", "AGENT", "third")
            third = subscriber.next()
            self.assertEqual((third.changes_since, third.notified_version), (2, 3))
            self.client.append(self.target, "GOAL_CHANGED", "AGENT", "fourth")
            result = self.client.ack(third, reconciled_through=3)
            self.assertEqual((result.acknowledged, result.reopened), (True, True))
            reopened = subscriber.next()
            self.assertEqual((reopened.changes_since, reopened.notified_version), (3, 4))
            self.assertEqual(self.client.ack(reopened, reconciled_through=4).reopened, False)
            self.assertTrue(self.client.unwatch(WATCHER, self.target).removed)
        finally:
            subscriber.close()

    def test_two_members_of_a_group_get_a_notice_once_and_a_release_hands_it_on(self) -> None:
        self.assertTrue(self.client.watch(WATCHER, self.target).watched)
        first = Subscriber(self.client, watchers=[WATCHER], group="gateway", max_in_flight=1)
        second = None
        try:
            self.client.append(self.target, "GOAL_CHANGED", "AGENT", "first")
            held = first.next()
            self.assertEqual((held.target.key, held.delivery_count), (self.target, 1))
            self.assertNotEqual(held.claim_id, "")
            second = Subscriber(self.client, watchers=[WATCHER], group="gateway")
            with self.assertRaises(queue.Empty):
                second.next(timeout=0.5)
            self.assertEqual(self.client.release([held]), [True])
            handed = second.next()
            self.assertEqual((handed.target.key, handed.delivery_count, handed.text), (self.target, 2, held.text))
            self.assertEqual(self.client.release([held]), [False])
        finally:
            first.close()
            if second is not None:
                second.close()

    def test_an_ambient_watch_queues_without_waking_and_extra_kinds_notify_an_explicit_one(self) -> None:
        watched = self.client.watch(WATCHER, self.target, ambient=True)
        self.assertEqual((watched.watched, watched.cursor.provenance), (True, types_pb2.WATCH_PROVENANCE_AMBIENT))
        with self.assertRaises(grpc.RpcError) as raised:
            self.client.watch(WATCHER, self.target, ambient=True, extra_material_kinds=["RUN_FAILED"])
        self.assertEqual(raised.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)
        self.assertIn("extra_material_kinds", raised.exception.details())
        subscriber = Subscriber(self.client, watchers=[WATCHER])
        try:
            self.client.append(self.target, "GOAL_CHANGED", "AGENT", "first")
            ambient = subscriber.next()
            self.assertEqual((ambient.wake, ambient.queue_only, ambient.notified_version), (False, True, 1))
            self.client.ack(ambient, reconciled_through=1)
            # An explicit watch upgrades the pair; run_failed now notifies it, and wakes.
            upgraded = self.client.watch(WATCHER, self.target, extra_material_kinds=["RUN_FAILED"])
            self.assertEqual(upgraded.cursor.provenance, types_pb2.WATCH_PROVENANCE_EXPLICIT)
            # A payload as a dict of its fields, the outcome by its name.
            self.client.append(self.target, "RUN_FAILED", "SYSTEM", "run failed", payload={"outcome": "TIMEOUT", "reason": "model timeout"})
            failed = subscriber.next()
            self.assertEqual((failed.wake, failed.queue_only, failed.changes_since, failed.notified_version), (True, False, 1, 2))
        finally:
            subscriber.close()

    def test_the_subscription_survives_a_server_restart_and_gets_the_pending_notice_again(self) -> None:
        self.client.watch(WATCHER, self.target)
        subscriber = Subscriber(self.client, prefixes=["agent:main:"])
        try:
            self.client.append(self.target, "GOAL_CHANGED", "AGENT", "before the restart")
            first = subscriber.next()
            self.server.stop()
            self.server.start()
            again = subscriber.next(timeout=20)
            self.assertEqual((again.target.key, again.notified_version, again.text), (first.target.key, first.notified_version, first.text))
            self.assertTrue(self.client.ack(again).acknowledged)
        finally:
            subscriber.close()


if __name__ == "__main__":
    sys.exit(unittest.main())
