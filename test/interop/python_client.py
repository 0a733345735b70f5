"""A client in another language: appends an event through Python's grpcio and reads it back.

Usage: python3 python_client.py HOST:PORT   (generated stubs on PYTHONPATH). Prints one JSON object.
"""
import json
import sys

import grpc
from sessionstate.v1 import reconcile_pb2, reconcile_pb2_grpc, signal_log_pb2, signal_log_pb2_grpc, types_pb2


def main(address: str) -> None:
    with grpc.insecure_channel(address) as channel:
        log = signal_log_pb2_grpc.SignalLogStub(channel)
        reconcile = reconcile_pb2_grpc.ReconcileStub(channel)
        appended = log.Append(
            signal_log_pb2.AppendRequest(
                session=types_pb2.SessionRef(key="agent:py:worker"),
                kind=types_pb2.EVENT_KIND_RUN_FAILED,
                actor_type=types_pb2.ACTOR_TYPE_SYSTEM,
                summary="worker run timed out (from Python)",
                payload=types_pb2.EventPayload(outcome=types_pb2.RUN_OUTCOME_TIMEOUT),
                dedupe_key="py-1",
            ),
            timeout=10,
        )
        status = reconcile.SessionStatus(
            reconcile_pb2.SessionStatusRequest(session=types_pb2.SessionRef(key="agent:py:worker"), changes_since=0),
            timeout=10,
        )
        try:
            log.Append(signal_log_pb2.AppendRequest(session=types_pb2.SessionRef(key="agent:py:worker")), timeout=10)
            refused = None
        except grpc.RpcError as err:
            refused = {"code": err.code().name, "details": err.details()}
        event = status.state_changes.events[0]
        print(
            json.dumps(
                {
                    "sequence": appended.event.sequence,
                    "agent_id": appended.event.session.agent_id,
                    "state_version": status.state_version,
                    "has_state_changes": status.HasField("state_changes"),
                    "events": len(status.state_changes.events),
                    "kind": types_pb2.EventKind.Name(event.kind),
                    "outcome": types_pb2.RunOutcome.Name(event.payload.outcome),
                    "summary": event.summary,
                    "refused": refused,
                }
            )
        )


if __name__ == "__main__":
    main(sys.argv[1])
