"""The committed schema module: generated from pulsar_wire.proto, wire facts pinned."""

from __future__ import annotations

import hashlib
import re
import tomllib
from pathlib import Path

from georep.wire import pulsar_wire_pb2 as pb

REPO = Path(__file__).resolve().parents[2]
PROTO = "georep/wire/pulsar_wire.proto"
GENERATED = REPO / "georep/wire/pulsar_wire_pb2.py"

#: SHA-256 of every wire fact of the schema (see _wire_facts). It changes only when a
#: number, type, label, default or enum number changes, or a message is renamed. If this
#: test fails, check the edit against the Pulsar wire format, then update the value.
WIRE_FACTS_SHA256 = "7d720926e241c10ec1d1e76efcf26db719d5204ca46806cbf452825c83e4cdfe"


def test_runtime_pin_covers_the_gencode() -> None:
    gencode = re.search(r"Protobuf Python Version: (\d+)\.(\d+)\.(\d+)", GENERATED.read_text())
    assert gencode is not None
    dependencies = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    (pin,) = [d for d in dependencies if re.match(r"protobuf\b", d)]
    lowest = re.search(r">=(\d+)\.(\d+)\.(\d+)", pin)
    assert lowest is not None, pin
    major = int(gencode.group(1))
    assert f"<{major + 1}" in pin, "the runtime must stay on the gencode's major version"
    assert tuple(map(int, lowest.groups())) >= tuple(map(int, gencode.groups())), pin


def _wire_facts() -> str:
    lines = []

    def enum(descriptor) -> None:
        numbers = sorted(value.number for value in descriptor.values)
        lines.append(f"enum {descriptor.full_name} {numbers}")

    def message(descriptor) -> None:
        for field in sorted(descriptor.fields, key=lambda field: field.number):
            kind = (
                "required" if field.is_required else "repeated" if field.is_repeated else "optional"
            )
            default = field.default_value if field.has_default_value else None
            target = field.message_type or field.enum_type or None
            lines.append(
                f"{descriptor.full_name} {field.number} {field.type} {kind} {default!r} "
                f"{target.full_name if target else ''}"
            )
        for nested in descriptor.enum_types:
            enum(nested)

    for name in sorted(pb.DESCRIPTOR.message_types_by_name):
        message(pb.DESCRIPTOR.message_types_by_name[name])
    for name in sorted(pb.DESCRIPTOR.enum_types_by_name):
        enum(pb.DESCRIPTOR.enum_types_by_name[name])
    return "\n".join(lines)


def test_wire_facts_are_unchanged() -> None:
    digest = hashlib.sha256(_wire_facts().encode()).hexdigest()
    assert digest == WIRE_FACTS_SHA256, (
        "a wire fact of pulsar_wire.proto changed: check it against the Pulsar wire format"
    )


def test_field_numbers_that_matter_most() -> None:
    """A few facts spelled out, so a reader sees what the digest protects."""
    fields = pb.MessageMetadata.DESCRIPTOR.fields_by_name
    assert fields["num_messages_in_batch"].number == 11
    assert fields["replicated_from"].number == 5
    assert fields["marker_type"].number == 20
    assert fields["null_value"].number == 25
    assert pb.MessageIdData.DESCRIPTOR.fields_by_name["ack_set"].number == 5
    assert pb.Ack.DESCRIPTOR.fields_by_name["message_id"].is_repeated
    assert pb.BaseCommand.Type.Value("TC_CLIENT_CONNECT_REQUEST") == 62
    assert pb.ServerError.Value("CHECKSUM_ERROR") == 9
