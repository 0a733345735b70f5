"""sessionstate for Python: a client of the sessionstate gRPC service.

``SessionStateClient`` wraps the generated stubs (``sessionstate.v1``) with the calls a gateway or an
agent runtime makes; the generated message modules are importable as ``sessionstate.v1.types_pb2`` and
so on.
"""
from sessionstate.client import SessionStateClient
from sessionstate.v1 import reconcile_pb2, signal_log_pb2, types_pb2, upstream_pb2, watch_pb2

__all__ = ["SessionStateClient", "reconcile_pb2", "signal_log_pb2", "types_pb2", "upstream_pb2", "watch_pb2"]
__version__ = "0.1.0"
