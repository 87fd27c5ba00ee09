"""Every committed *_pb2 module matches its .proto (regenerate: tools/regenerate_protos.sh)."""

from __future__ import annotations

from pathlib import Path

import pytest
from google.protobuf import descriptor_pb2

from georep.snapshots import markers_pb2
from georep.wire import pulsar_wire_pb2

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("proto", "module"),
    [
        ("georep/wire/pulsar_wire.proto", pulsar_wire_pb2),
        ("georep/snapshots/markers.proto", markers_pb2),
    ],
)
def test_generated_module_is_up_to_date(tmp_path: Path, proto: str, module) -> None:
    protoc = pytest.importorskip("grpc_tools.protoc", reason="grpcio-tools is in the dev extra")
    out = tmp_path / "set.pb"
    status = protoc.main(["protoc", f"--proto_path={REPO}", f"--descriptor_set_out={out}", proto])
    assert status == 0
    fresh = descriptor_pb2.FileDescriptorSet.FromString(out.read_bytes()).file[0]
    _drop_json_names(fresh.message_type)  # a descriptor set has them, generated code not
    committed = descriptor_pb2.FileDescriptorProto()
    module.DESCRIPTOR.CopyToProto(committed)
    assert committed == fresh, "run tools/regenerate_protos.sh"


def _drop_json_names(message_types) -> None:
    for message_type in message_types:
        for field in message_type.field:
            field.ClearField("json_name")
        _drop_json_names(message_type.nested_type)
