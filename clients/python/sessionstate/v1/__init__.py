"""Generated from proto/sessionstate/v1 by Debian's protoc and grpc_python_plugin (see clients/python/generate.sh). Do not edit."""
