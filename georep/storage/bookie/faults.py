"""Fault injection: one hook per bookie, set over the wire with a FAULT request.

Only a bookie started with ``fault_injection=True`` (``--fault-injection``) accepts
FAULT requests; others answer ``FAULT_DISABLED``. A FAULT request carries a JSON object
that *replaces* the current faults; ``{}`` clears them all. Fields:

    delay_ms               delay every reply (except the FAULT reply itself) this long
    drop_adds              store nothing and never answer adds
    fail_adds              answer adds with ERROR (nothing stored)
    drop_adds_from_entry   never answer (nor store) normal adds with entry id >= this;
                           recovery adds pass (the writer's adds are lost, those of a
                           recovering reader or re-replication are not)
    ignore_fence           answer fencing reads normally but do NOT set the fence:
                           a lost fence
    drop_reads             never answer READ or READ_LAC (no fence is set either)
    fail_reads             answer READ and READ_LAC with ERROR (no fence is set)
    disk_write             "enospc", "eio" or "short": make disk writes fail the way a
                           full or failing disk does (see storage/bookie/disk_io.py)
    disk_write_site        only at this write site: "journal", "entry_log", "index" or
                           "mark" (default: every site)

Example: ``{"drop_adds_from_entry": 40, "delay_ms": 5}`` makes a bookie look alive but
stop confirming from entry 40 on, as a client doing an ensemble change would see it.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from typing import Any

from georep import limits
from georep.storage.bookie import disk_io


class FaultSpecError(ValueError):
    """A FAULT request's JSON is not a valid fault spec."""


@dataclass(frozen=True, slots=True)
class Faults:
    delay_ms: float = 0.0
    drop_adds: bool = False
    fail_adds: bool = False
    drop_adds_from_entry: int | None = None
    ignore_fence: bool = False
    drop_reads: bool = False
    fail_reads: bool = False
    disk_write: str | None = None
    disk_write_site: str | None = None

    @property
    def any(self) -> bool:
        return self != NO_FAULTS

    @classmethod
    def from_json(cls, text: bytes | str) -> Faults:
        try:
            spec = json.loads(text)
        except (ValueError, UnicodeDecodeError) as exc:
            raise FaultSpecError(f"fault spec is not JSON: {exc}") from None
        if not isinstance(spec, dict):
            raise FaultSpecError("fault spec must be a JSON object")
        known = {field.name: field for field in dataclasses.fields(cls)}
        unknown = sorted(set(spec) - set(known))
        if unknown:
            raise FaultSpecError(f"unknown fault fields: {', '.join(unknown)}")
        values: dict[str, Any] = {}
        for name, value in spec.items():
            if name == "delay_ms":
                if (
                    isinstance(value, bool)
                    or not isinstance(value, int | float)
                    or not (0 <= value <= limits.fault_delay_ms_max)
                ):
                    raise FaultSpecError(
                        f"delay_ms must be a number in 0..{limits.fault_delay_ms_max}"
                    )
            elif name == "drop_adds_from_entry":
                if value is not None and (
                    isinstance(value, bool) or not isinstance(value, int) or value < 0
                ):
                    raise FaultSpecError("drop_adds_from_entry must be an entry id >= 0")
            elif name == "disk_write":
                if value is not None and value not in disk_io.KINDS:
                    raise FaultSpecError(f"disk_write must be one of {', '.join(disk_io.KINDS)}")
            elif name == "disk_write_site":
                if value is not None and value not in disk_io.SITES:
                    raise FaultSpecError(
                        f"disk_write_site must be one of {', '.join(disk_io.SITES)}"
                    )
            elif not isinstance(value, bool):
                raise FaultSpecError(f"{name} must be true or false")
            values[name] = value
        return cls(**values)

    def to_json(self) -> dict[str, object]:
        return {
            name: value
            for name, value in dataclasses.asdict(self).items()
            if value != getattr(NO_FAULTS, name)
        }

    @property
    def disk_fault(self) -> disk_io.DiskFault | None:
        if self.disk_write is None:
            return None
        return disk_io.DiskFault(self.disk_write, self.disk_write_site)

    def drops_add(self, entry_id: int, recovery: bool = False) -> bool:
        return self.drop_adds or (
            not recovery
            and self.drop_adds_from_entry is not None
            and entry_id >= self.drop_adds_from_entry
        )


NO_FAULTS = Faults()
