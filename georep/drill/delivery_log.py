"""The delivery log: one record per message a consumer received, on A or on B.

A record says what the consumer did with that delivery (``acked``: an acknowledgement,
individual or cumulative, covering this delivery was sent; ``nacked``: it was
negatively acknowledged). It is written as ``deliveries.jsonl``, one JSON object a line::

    {"mode": "full", "cluster": "B", "phase": "after", "consumer": "drill-1",
     "topic": "persistent://public/default/drill-...", "subscription": "drill-...",
     "drill_id": "m000042", "index": 42, "key": "key-3", "message_id": "5:40",
     "origin_cluster": "A", "origin_position": "3:42", "origin_ledger_id": 3,
     "origin_entry_id": 42, "batch_index": -1, "delivered_at": 1764000000123,
     "redelivery_count": 0, "acked": true, "nacked": false, "payload_schema_version": null,
     "undecodable": null}

``payload_schema_version`` is the message's schema version on the delivering cluster (null when
it names none) and ``undecodable`` why it could not be decoded by that version there
(null when it could, or was not tried): only the ``avro-evolving`` scenario's consumers
on B try (avro_records.py).

``delivered_at`` is epoch milliseconds and ``phase`` is ``before`` (on A) or ``after``
(on B) the failure, or ``return`` (on A again, after a failback: in
``deliveries-failback.jsonl``, not here), so the file is also a delivery log for ``georep reconcile
--deliveries`` (spark_reconcile/schema.py's DELIVERY_COLUMNS).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path

from georep.pulsar_text.cursor import parse_position

BEFORE = "before"
AFTER = "after"
#: On A again, after a failback (``--failback``): written apart, to
#: ``deliveries-failback.jsonl``, since ``georep reconcile`` knows before and after only.
RETURN = "return"


@dataclass(slots=True)
class Delivery:
    mode: str
    cluster: str
    phase: str
    consumer: str
    topic: str
    subscription: str
    drill_id: str
    index: int
    key: str
    #: The message's id on the cluster that delivered it, ``"L:E"``.
    message_id: str
    #: The message's identity: on A its own id, on B the origin its copy carries ("" if
    #: the copy carries none).
    origin_cluster: str
    origin_position: str
    batch_index: int
    delivered_at: int
    redelivery_count: int = 0
    acked: bool = False
    nacked: bool = False
    #: Not ``schema_version``: in a delivery log that names the log's own format version
    #: (spark_reconcile/schema.py, DELIVERY_SCHEMA_VERSION).
    payload_schema_version: int | None = None
    undecodable: str | None = None

    def to_json(self) -> dict[str, object]:
        row = asdict(self)
        if self.origin_position:
            row["origin_ledger_id"], row["origin_entry_id"] = parse_position(self.origin_position)
        else:
            row["origin_ledger_id"] = row["origin_entry_id"] = None
        return row


class DeliveryLog:
    """Records appended by consumer threads; acknowledgements marked as they are sent."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._records: list[Delivery] = []
        #: (mode, cluster, consumer) -> its deliveries not known to be acknowledged, for
        #: cumulative acknowledgements (pruned at each one).
        self._unacked: dict[tuple[str, str, str], list[Delivery]] = {}

    def append(self, delivery: Delivery) -> Delivery:
        with self._lock:
            self._records.append(delivery)
            key = (delivery.mode, delivery.cluster, delivery.consumer)
            self._unacked.setdefault(key, []).append(delivery)
        return delivery

    def mark(self, delivery: Delivery, *, acked: bool = False, nacked: bool = False) -> None:
        with self._lock:
            delivery.acked = delivery.acked or acked
            delivery.nacked = delivery.nacked or nacked

    def mark_cumulative(self, delivery: Delivery) -> None:
        """A cumulative acknowledgement of ``delivery``: every delivery of the same
        consumer, cluster and mode at or below its position is acknowledged too."""
        upto = parse_position(delivery.message_id)
        key = (delivery.mode, delivery.cluster, delivery.consumer)
        with self._lock:
            kept = []
            for record in self._unacked.get(key, []):
                if parse_position(record.message_id) <= upto:
                    record.acked = True
                elif not record.acked:
                    kept.append(record)
            self._unacked[key] = kept

    def records(self) -> list[Delivery]:
        with self._lock:
            return list(self._records)


def write_jsonl(path: Path, records: Iterable[Delivery]) -> int:
    count = 0
    with path.open("w", encoding="utf-8") as out:
        for record in records:
            out.write(json.dumps(record.to_json(), sort_keys=True) + "\n")
            count += 1
    return count


def read_jsonl(path: Path) -> list[Delivery]:
    fields = set(Delivery.__slots__)
    with path.open(encoding="utf-8") as lines:
        return [
            Delivery(**{k: v for k, v in json.loads(line).items() if k in fields})
            for line in lines
            if line.strip()
        ]
