#!/usr/bin/env bash
# Regenerate pulsar_wire_pb2.py from pulsar_wire.proto with the protoc bundled in
# grpcio-tools (dev extra). The generated module is committed; its gencode version must
# stay within the `protobuf` runtime range pinned in pyproject.toml (protoc 35.x writes
# gencode 7.35.x, which needs protobuf >= 7.35 and < 8).
#
# Usage: georep/broker/protocol/regenerate.sh [python]   (default: .venv/bin/python)
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../../.." && pwd)"
python="${1:-$repo/.venv/bin/python}"

# Run from the repository root so the generated descriptor records the file's path
# inside the package (georep/broker/protocol/pulsar_wire.proto).
cd "$repo"
"$python" -m grpc_tools.protoc \
    --proto_path=. \
    --python_out=. \
    --pyi_out=. \
    georep/broker/protocol/pulsar_wire.proto
echo "regenerated $here/pulsar_wire_pb2.py and .pyi with $("$python" -m grpc_tools.protoc --version)"
