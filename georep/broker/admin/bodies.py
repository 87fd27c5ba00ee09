"""Request bodies and numeric path parts: parsed, checked, and turned into plain values.

Every parser takes decoded JSON (or a path string) and returns typed values, or raises
``InvalidArgument`` saying what is wrong; none touches storage, so a refused request has
changed nothing. JSON field names are Pulsar's:

==============================  ==========================================================
body                            fields
==============================  ==========================================================
TenantInfo                      ``adminRoles: [str]``, ``allowedClusters: [str]``
RetentionPolicies               ``retentionTimeInMinutes: int``, ``retentionSizeInMB: int``
                                (-1 = unlimited)
message TTL                     a bare integer, seconds (0 = none)
partitions                      a bare integer, 1..``limits.partitions_count_max``
MessageId / ResetCursorData     ``ledgerId``, ``entryId`` (required); ``partitionIndex``,
                                ``batchIndex``, ``properties`` (accepted, unused) and
                                ``excluded`` (only false)
namespace Policies              ``retention_policies``, ``message_ttl_in_seconds``
georep acknowledge              ``positions: [{ledgerId, entryId}, ...]``
georep subscription sync        ``markDelete: {ledgerId, entryId}``, ``ranges: [{first,
                                last}, ...]``, ``batches: [{ledgerId, entryId,
                                ackedIndexes}, ...]``, ``replicated: bool``; all optional
==============================  ==========================================================

Unknown fields are refused, so that a misspelt field is an error rather than a no-op;
booleans are not integers. Decoding the JSON itself (media type, duplicate keys, ``NaN``)
is ``rest/json_io.py``'s.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from georep import limits
from georep.broker.admin import names
from georep.broker.admin.cluster_admin import InvalidArgument
from georep.domain.decimal_text import parse_decimal
from georep.domain.position import ID_MAX, Position

_I64_MAX = ID_MAX  # the wire protocol's int64 ids


# --- tenants and namespaces -----------------------------------------------------------
@dataclass(frozen=True)
class TenantInfo:
    admin_roles: tuple[str, ...]
    allowed_clusters: tuple[str, ...]

    def to_json(self) -> dict[str, list[str]]:
        return {
            "adminRoles": list(self.admin_roles),
            "allowedClusters": list(self.allowed_clusters),
        }


def tenant_info(document: Any) -> TenantInfo:
    fields = _object(
        "TenantInfo", document, required=(), optional=("adminRoles", "allowedClusters")
    )
    roles = _string_list(
        "adminRoles", fields.get("adminRoles", []), limits.tenant_admin_roles_count_max, names.role
    )
    clusters = _string_list(
        "allowedClusters",
        fields.get("allowedClusters", []),
        limits.tenant_allowed_clusters_count_max,
        names.cluster,
    )
    return TenantInfo(roles, clusters)


@dataclass(frozen=True)
class Retention:
    time_minutes: int
    size_mb: int

    def to_json(self) -> dict[str, int]:
        return {"retentionTimeInMinutes": self.time_minutes, "retentionSizeInMB": self.size_mb}


def retention(document: Any) -> Retention:
    fields = _object(
        "RetentionPolicies",
        document,
        required=("retentionTimeInMinutes", "retentionSizeInMB"),
        optional=(),
    )
    return Retention(
        _integer("retentionTimeInMinutes", fields["retentionTimeInMinutes"], -1,
                 limits.retention_minutes_max),
        _integer("retentionSizeInMB", fields["retentionSizeInMB"], -1,
                 limits.retention_size_mb_max),
    )  # fmt: skip


def message_ttl(document: Any) -> int:
    return _integer("message TTL (seconds)", document, 0, limits.message_ttl_s_max)


@dataclass(frozen=True)
class NamespacePolicies:
    retention: Retention | None = None
    message_ttl_s: int | None = None


def namespace_policies(document: Any) -> NamespacePolicies:
    if document is None:
        return NamespacePolicies()
    fields = _object(
        "Policies", document, required=(), optional=("retention_policies", "message_ttl_in_seconds")
    )
    kept = fields.get("retention_policies")
    ttl = fields.get("message_ttl_in_seconds")
    return NamespacePolicies(
        retention=None if kept is None else retention(kept),
        message_ttl_s=None if ttl is None else message_ttl(ttl),
    )


# --- topics and subscriptions ---------------------------------------------------------
def partitions(document: Any) -> int:
    return _integer("number of partitions", document, 1, limits.partitions_count_max)


_MESSAGE_ID_OPTIONAL = ("partitionIndex", "batchIndex", "excluded", "properties")


def message_position(document: Any) -> Position:
    """A MessageId (or Pulsar's ResetCursorData) as a position. ``(-1, -1)`` is the
    earliest position and ``(2**63-1, 2**63-1)`` the latest, as the client spells them."""
    fields = _object(
        "MessageId", document, required=("ledgerId", "entryId"), optional=_MESSAGE_ID_OPTIONAL
    )
    ledger_id = _integer("ledgerId", fields["ledgerId"], -1, _I64_MAX)
    entry_id = _integer("entryId", fields["entryId"], -1, _I64_MAX)
    if "partitionIndex" in fields:
        _integer("partitionIndex", fields["partitionIndex"], -1, limits.partitions_count_max - 1)
    if "batchIndex" in fields:
        _integer("batchIndex", fields["batchIndex"], -1, limits.pulsar_batch_messages_count_max)
    excluded = fields.get("excluded", False)
    if not isinstance(excluded, bool):
        raise InvalidArgument(f"excluded must be true or false, got {excluded!r}")
    if excluded:
        raise InvalidArgument("excluded=true is not supported; give the next position instead")
    properties = fields.get("properties")
    if properties is not None and not isinstance(properties, Mapping):
        raise InvalidArgument("properties must be an object")
    if (ledger_id == -1) != (entry_id == -1):
        raise InvalidArgument(
            f"position {ledger_id}:{entry_id}: only the earliest position (-1:-1) has a -1"
        )
    return Position(ledger_id, entry_id)


def acknowledged_positions(document: Any) -> list[Position]:
    """The distinct positions of a georep acknowledge body, sorted."""
    fields = _object("acknowledge", document, required=("positions",), optional=())
    items = fields["positions"]
    if not isinstance(items, list) or not items:
        raise InvalidArgument("positions must be a non-empty list of {ledgerId, entryId}")
    if len(items) > limits.acknowledge_positions_count_max:
        raise InvalidArgument(
            f"{len(items)} positions; at most {limits.acknowledge_positions_count_max} a request"
        )
    return sorted({_position(f"positions[{index}]", item) for index, item in enumerate(items)})


@dataclass(frozen=True)
class SubscriptionSync:
    """A georep subscription sync body, checked and normalised."""

    mark_delete: Position | None
    #: Closed ranges, sorted; overlapping ones (and ones touching inside a ledger) joined.
    ranges: tuple[tuple[Position, Position], ...]
    #: Entry -> indexes of its members acknowledged (a position named twice: the union).
    batches: Mapping[Position, frozenset[int]]
    replicated: bool


_SYNC_FIELDS = ("markDelete", "ranges", "batches", "replicated")


def subscription_sync(document: Any) -> SubscriptionSync:
    """A georep sync body. Ids are 0..2**63-1, but ``markDelete``'s entryId may be -1
    (before the first entry of its ledger, as a mark-delete position reads); a range's
    ``last`` may not be before its ``first``; a batch index is 0..
    ``limits.pulsar_batch_messages_count_max - 1`` (checked against the batch's own size
    by the cluster). A field that is null counts as absent.

    Example: ``{"ranges": [{"first": {"ledgerId": 3, "entryId": 5}, "last": {"ledgerId":
    4, "entryId": 0}}], "replicated": true}`` acknowledges 3:5 and everything after it up
    to 4:0, and marks the subscription replicated."""
    fields = _object("sync", document, required=(), optional=_SYNC_FIELDS)
    found = fields.get("markDelete")
    mark_delete = None if found is None else _position("markDelete", found, entry_min=-1)
    replicated = fields.get("replicated")
    if replicated is None:
        replicated = False
    if not isinstance(replicated, bool):
        raise InvalidArgument(f"replicated must be true or false, got {_json_type(replicated)}")
    return SubscriptionSync(
        mark_delete=mark_delete,
        ranges=_sync_ranges(fields.get("ranges")),
        batches=_sync_batches(fields.get("batches")),
        replicated=replicated,
    )


def _position(
    what: str, document: Any, *, entry_min: int = 0, also: tuple[str, ...] = ()
) -> Position:
    """A ``{ledgerId, entryId}`` object as a position (ids 0..2**63-1, the entryId from
    ``entry_min``); the fields ``also`` are required too and left to the caller."""
    fields = _object(what, document, required=("ledgerId", "entryId", *also), optional=())
    return Position(
        _integer(f"{what}.ledgerId", fields["ledgerId"], 0, _I64_MAX),
        _integer(f"{what}.entryId", fields["entryId"], entry_min, _I64_MAX),
    )


def _sync_list(what: str, value: Any, count_max: int) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise InvalidArgument(f"{what} must be a list, got {_json_type(value)}")
    if len(value) > count_max:
        raise InvalidArgument(f"{what} has {len(value)} items; at most {count_max} a request")
    return value


def _sync_ranges(value: Any) -> tuple[tuple[Position, Position], ...]:
    items = _sync_list("ranges", value, limits.subscription_sync_ranges_count_max)
    ranges = []
    for index, item in enumerate(items):
        what = f"ranges[{index}]"
        fields = _object(what, item, required=("first", "last"), optional=())
        first = _position(f"{what}.first", fields["first"])
        last = _position(f"{what}.last", fields["last"])
        if last < first:
            raise InvalidArgument(f"{what}: last {last} is before first {first}")
        ranges.append((first, last))
    merged: list[tuple[Position, Position]] = []
    for first, last in sorted(ranges):
        if merged:
            low, high = merged[-1]
            if first <= high or first == (high[0], high[1] + 1):
                merged[-1] = (low, max(high, last))
                continue
        merged.append((first, last))
    return tuple(merged)


def _sync_batches(value: Any) -> dict[Position, frozenset[int]]:
    items = _sync_list("batches", value, limits.subscription_sync_batches_count_max)
    index_max = limits.pulsar_batch_messages_count_max - 1
    batches: dict[Position, frozenset[int]] = {}
    for index, item in enumerate(items):
        what = f"batches[{index}]"
        position = _position(what, item, also=("ackedIndexes",))
        indexes = item["ackedIndexes"]
        if not isinstance(indexes, list):
            raise InvalidArgument(f"{what}.ackedIndexes must be a list, got {_json_type(indexes)}")
        if len(indexes) > limits.pulsar_batch_messages_count_max:
            raise InvalidArgument(
                f"{what}.ackedIndexes has {len(indexes)} items;"
                f" a batch holds at most {limits.pulsar_batch_messages_count_max}"
            )
        acked = frozenset(
            _integer(f"{what}.ackedIndexes[{n}]", member, 0, index_max)
            for n, member in enumerate(indexes)
        )
        batches[position] = batches.get(position, frozenset()) | acked
    return batches


def path_integer(what: str, text: str, minimum: int, maximum: int) -> int:
    """A decimal integer from a path segment (``/skip/{numMessages}``)."""
    value = parse_decimal(text, digits_max=19)
    if value is None:
        raise InvalidArgument(f"{what} must be a decimal integer, got {text!r}")
    return _integer(what, value, minimum, maximum)


# --- plumbing -------------------------------------------------------------------------
def _object(
    what: str, document: Any, *, required: tuple[str, ...], optional: tuple[str, ...]
) -> Mapping[str, Any]:
    if not isinstance(document, dict):
        raise InvalidArgument(f"{what} must be a JSON object, got {_json_type(document)}")
    missing = [key for key in required if key not in document]
    if missing:
        raise InvalidArgument(f"{what} is missing {', '.join(missing)}")
    unknown = sorted(set(document) - set(required) - set(optional))
    if unknown:
        known = ", ".join((*required, *optional))
        raise InvalidArgument(f"{what} has unknown fields {', '.join(unknown)}; known: {known}")
    return document


def _integer(what: str, value: Any, minimum: int, maximum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidArgument(f"{what} must be an integer, got {_json_type(value)}")
    if not minimum <= value <= maximum:
        raise InvalidArgument(f"{what} must be {minimum}..{maximum}, got {value}")
    return value


def _string_list(what: str, value: Any, count_max: int, check: Any) -> tuple[str, ...]:
    if not isinstance(value, list):
        raise InvalidArgument(f"{what} must be a list of strings, got {_json_type(value)}")
    if len(value) > count_max:
        raise InvalidArgument(f"{what} has {len(value)} entries; at most {count_max}")
    return tuple(dict.fromkeys(check(item) for item in value))


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return f"the number {value!r}"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    return "an object"
