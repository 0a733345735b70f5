#!/usr/bin/env bash
# Regenerates sessionstate/v1/ from ../../proto with Debian's protoc and grpc_python_plugin
# (apt: protobuf-compiler protobuf-compiler-grpc libprotobuf-dev). .ci/run checks that the committed
# files are what this makes.
set -euo pipefail
cd "$(dirname "$0")"
find sessionstate/v1 -name '*_pb2*.py*' -delete
/usr/bin/protoc -I ../../proto -I /usr/include \
  --python_out=. --pyi_out=. --grpc_python_out=. \
  --plugin=protoc-gen-grpc_python=/usr/bin/grpc_python_plugin \
  sessionstate/v1/types.proto sessionstate/v1/signal_log.proto sessionstate/v1/reconcile.proto \
  sessionstate/v1/watch.proto sessionstate/v1/upstream.proto
