#!/usr/bin/env bash
# Regenerate every committed *_pb2.py / *_pb2.pyi from its .proto with the protoc bundled
# in grpcio-tools (dev extra). The generated modules are committed; their gencode
# version must stay within the `protobuf` runtime range pinned in pyproject.toml
# (protoc 35.x writes gencode 7.35.x, which needs protobuf >= 7.35 and < 8).
# tests/unit/test_wire_schema.py and test_snapshots_markers.py fail when a module is stale.
#
# Usage: tools/regenerate_protos.sh [python]   (default: .venv/bin/python)
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
python="${1:-$repo/.venv/bin/python}"
protos=(
    georep/wire/pulsar_wire.proto
    georep/snapshots/markers.proto
)

# From the repository root, so each descriptor records its path inside the package.
cd "$repo"
"$python" -m grpc_tools.protoc --proto_path=. --python_out=. --pyi_out=. "${protos[@]}"
echo "regenerated ${protos[*]} with $("$python" -m grpc_tools.protoc --version)"
