"""The drill's messages and consumers, with the official pulsar-client.

- :func:`produce`: N messages on A, unbatched (one entry each, so every copy's
  properties show its origin position), each with a key from ``keys`` keys (seeded),
  a drill id ``m000042`` and its index in the payload and in the properties
  ``drill-id`` / ``drill-index``. The send receipts give each message's id on A: its
  origin MessageId.
- :class:`ConsumerGroup`: a scenario's consumers on one cluster, one thread each,
  receiving with a short timeout so that they stop promptly, recording every delivery
  in the :class:`~georep.drill.delivery_log.DeliveryLog` and doing what their
  :class:`~georep.drill.scenarios.AckPolicy` says. Once stopped they neither receive
  nor acknowledge: what they hold stays unacknowledged.
- :func:`read_origins`: every copy on B's topic, with a Reader (it does not touch the
  subscription).

The client's own log lines go to a file (:func:`log_client_to`; the drill's
``pulsar-client.log``), never to stdout, which ``--json`` keeps for the report. The
client's C++ logger writes it directly: routing its lines through a Python logger can
abort the process at exit (a known pulsar-client issue with Python loggers).
"""

from __future__ import annotations

import logging
import os
import random
import threading
import time
from collections.abc import Callable
from typing import Any

from georep import limits
from georep.domain.decimal_text import parse_decimal
from georep.domain.position import Position
from georep.drill import avro_records
from georep.drill.delivery_log import BEFORE, RETURN, Delivery, DeliveryLog
from georep.drill.errors import DrillError
from georep.drill.report import Produced
from georep.drill.scenarios import (
    ACK,
    ACK_CUMULATIVE,
    EXCLUSIVE,
    FAILOVER,
    KEY_SHARED,
    NACK,
    SHARED,
    AckPolicy,
    Received,
    Scenario,
)
from georep.pulsar_text.schema_version import version_number
from georep.replicator.origin import (
    ORIGIN_CLUSTER_PROPERTY,
    ORIGIN_POSITION_PROPERTY,
    PULSAR_SOURCE_POSITION_PROPERTY,
)

DRILL_ID_PROPERTY = "drill-id"
DRILL_INDEX_PROPERTY = "drill-index"

#: An object of the official client (a client, producer, consumer, message, id): the
#: pulsar-client package ships no types.
PulsarObject = Any

#: Where the clients' log goes (set by the command); None: errors only, to stderr.
_client_log_path: str | None = None
_RECEIVE_TIMEOUT_MS = 100


def pulsar_module() -> PulsarObject:
    try:
        import pulsar
    except ImportError:
        raise DrillError(
            "the drill needs pulsar-client: reinstall georep (pip install pulsar-client)"
        ) from None
    return pulsar


def log_client_to(path: str | os.PathLike[str] | None) -> None:
    """Send the log of every client :func:`connect` makes from now on to ``path``."""
    global _client_log_path
    _client_log_path = None if path is None else str(path)


def connect(service_url: str) -> PulsarObject:
    pulsar = pulsar_module()
    if _client_log_path is not None:
        logger = pulsar.FileLogger(pulsar.LoggerLevel.Info, _client_log_path)
    else:
        logger = pulsar.ConsoleLogger(pulsar.LoggerLevel.Error)
    return pulsar.Client(
        service_url,
        operation_timeout_seconds=limits.drill_client_operation_timeout_s,
        logger=logger,
    )


def origin_position_of_copy(properties: dict[str, str]) -> str:
    """A copy's position on its origin: georep's property, or real Pulsar's ("" if none)."""
    return properties.get(ORIGIN_POSITION_PROPERTY) or properties.get(
        PULSAR_SOURCE_POSITION_PROPERTY, ""
    )


def drill_id(index: int) -> str:
    return f"m{index:06d}"


def position_text(message_id: PulsarObject) -> str:
    return str(Position(message_id.ledger_id(), message_id.entry_id()))


def produce(
    client: PulsarObject,
    topic: str,
    count: int,
    keys: int,
    seed: int,
    rate_per_s: float,
    *,
    abort: threading.Event,
    avro: bool = False,
) -> dict[str, Produced]:
    """Produce ``count`` messages, at most ``rate_per_s`` a second (0: no limit); by
    origin position (their ids on A). ``abort`` set: give up (DrillError). ``avro``:
    each message is its Avro record (avro_records.py), the first half under v1 and the
    rest under v2, each half by its own producer (the first flushed and closed before
    the second opens, so the topic holds them in production order)."""
    pulsar = pulsar_module()
    rng = random.Random(seed)
    #: The one open producer, with its schema (None: bytes).
    opened: list[tuple[dict[str, Any] | None, PulsarObject]] = []

    def producer_for(index: int) -> PulsarObject:
        schema = avro_records.schema_of(index, count) if avro else None
        if opened and opened[-1][0] is schema:
            return opened[-1][1]
        if opened:
            _, previous = opened.pop()
            previous.flush()
            previous.close()
        options = {}
        if schema is not None:
            options["schema"] = pulsar.schema.AvroSchema(None, schema_definition=schema)
        producer = client.create_producer(
            topic,
            producer_name=None,
            batching_enabled=False,
            block_if_queue_full=True,
            max_pending_messages=1_000,
            send_timeout_millis=30_000,
            **options,
        )
        opened.append((schema, producer))
        return producer

    answered = threading.Condition()
    receipts: dict[int, object] = {}
    failures: list[str] = []
    messages = []
    for index in range(count):
        key = f"key-{rng.randrange(keys)}"
        messages.append((index, drill_id(index), key))

    def receipt(index: int) -> Callable[[PulsarObject, PulsarObject], None]:
        def callback(result: PulsarObject, message_id: PulsarObject) -> None:
            with answered:
                if result == pulsar.Result.Ok:
                    receipts[index] = message_id
                else:
                    failures.append(f"{drill_id(index)}: {result}")
                answered.notify_all()

        return callback

    interval_s = 1.0 / rate_per_s if rate_per_s > 0 else 0.0
    started = time.monotonic()
    try:
        for index, identity, key in messages:
            if interval_s:
                wait_s = started + index * interval_s - time.monotonic()
                if wait_s > 0 and abort.wait(wait_s):
                    raise DrillError(f"production on A stopped after {index} messages")
            producer = producer_for(index)
            content: object = f"{identity} key={key}".encode()
            if avro:
                content = avro_records.record_of(index, identity, key, count)
            producer.send_async(
                content,
                receipt(index),
                properties={DRILL_ID_PROPERTY: identity, DRILL_INDEX_PROPERTY: str(index)},
                partition_key=key,
            )
        for _, producer in opened:
            producer.flush()
        with answered:
            answered.wait_for(lambda: len(receipts) + len(failures) >= count, timeout=30.0)
    finally:
        for _, producer in opened:
            producer.close()
    if failures or len(receipts) < count:
        sample = ", ".join(failures[:3]) or "no receipt"
        raise DrillError(f"{count - len(receipts)} of {count} sends on A failed ({sample})")
    return {
        position_text(receipts[index]): Produced(
            identity, index, key, position_text(receipts[index])
        )
        for index, identity, key in messages
    }


class DeliveryCounter:
    """Distinct drill ids delivered, the first delivery's time and when the last one
    came; ``reached`` is set once ``target`` distinct ids were delivered. After
    :meth:`want`, ``wanted_delivered`` counts the distinct wanted origin positions
    delivered (the drain on B wants what A had not acknowledged: duplicates do not
    count towards it), ``unwanted_delivered`` the distinct others (on B: messages A had
    acknowledged, delivered again) and ``deliveries`` every delivery, repeats included."""

    def __init__(self, target: int | None = None) -> None:
        self._lock = threading.Lock()
        self.ids: set[str] = set()
        self.origins: set[str] = set()
        self.target = target
        self.reached = threading.Event()
        self.first_at_ms: int | None = None
        self.last_at_monotonic: float | None = None
        self._wanted: frozenset[str] = frozenset()
        self._wanted_delivered = 0
        self._deliveries = 0

    def want(self, origin_positions: frozenset[str]) -> None:
        with self._lock:
            self._wanted = origin_positions
            self._wanted_delivered = len(self.origins & origin_positions)

    @property
    def wanted_delivered(self) -> int:
        with self._lock:
            return self._wanted_delivered

    @property
    def unwanted_delivered(self) -> int:
        with self._lock:
            return len(self.origins) - self._wanted_delivered

    @property
    def deliveries(self) -> int:
        with self._lock:
            return self._deliveries

    def add(self, delivery: Delivery) -> bool:
        """Count a delivery; False when the target had been reached before it (the
        delivery is past the failure point: it is to stay unacknowledged)."""
        with self._lock:
            before_target = not self.reached.is_set()
            self._deliveries += 1
            self.ids.add(delivery.drill_id)
            origin = delivery.origin_position
            if origin not in self.origins:
                self.origins.add(origin)
                self._wanted_delivered += origin in self._wanted
            if self.first_at_ms is None:
                self.first_at_ms = delivery.delivered_at
            self.last_at_monotonic = time.monotonic()
            if self.target is not None and len(self.ids) >= self.target:
                self.reached.set()
            return before_target

    @property
    def distinct(self) -> int:
        with self._lock:
            return len(self.ids)


_TYPES = {SHARED: "Shared", KEY_SHARED: "KeyShared", EXCLUSIVE: "Exclusive", FAILOVER: "Failover"}


class ConsumerGroup:
    """A scenario's consumers on one cluster, each on its own thread."""

    def __init__(
        self,
        client: PulsarObject,
        *,
        cluster: str,
        phase: str,
        mode: str,
        scenario: Scenario,
        topic: str,
        subscription: str,
        policies: list[AckPolicy],
        log: DeliveryLog,
        counter: DeliveryCounter,
        receiver_queue_size: int,
        rate_per_s: float = 0.0,
        decode_by_version: bool = False,
    ) -> None:
        self.client = client
        self.cluster = cluster
        self.phase = phase
        self.mode = mode
        self.scenario = scenario
        self.topic = topic
        self.subscription = subscription
        self.policies = policies
        self.log = log
        self.counter = counter
        self.receiver_queue_size = receiver_queue_size
        #: Each delivery decoded by its schema version, as AUTO_CONSUME decodes
        #: (avro_records.py); None: not tried.
        self.schemas = (
            avro_records.SchemaLookup(self._schema_version_of) if decode_by_version else None
        )
        #: Each consumer handles at most rate / consumers messages a second (0: no limit).
        self.interval_s = len(policies) / rate_per_s if rate_per_s > 0 else 0.0
        self.stopping = threading.Event()
        self.errors: list[str] = []
        self._consumers: list[Any] = []
        self._threads: list[threading.Thread] = []

    def subscribe(self) -> None:
        pulsar = pulsar_module()
        options = {}
        if self.scenario.negative_ack_redelivery_delay_ms is not None:
            options["negative_ack_redelivery_delay_ms"] = (
                self.scenario.negative_ack_redelivery_delay_ms
            )
        for number, _ in enumerate(self.policies):
            self._consumers.append(
                self.client.subscribe(
                    self.topic,
                    self.subscription,
                    consumer_type=getattr(
                        pulsar.ConsumerType, _TYPES[self.scenario.subscription_type]
                    ),
                    consumer_name=self._consumer_name(number),
                    initial_position=pulsar.InitialPosition.Earliest,
                    replicate_subscription_state_enabled=True,
                    receiver_queue_size=self.receiver_queue_size,
                    **options,
                )
            )

    def _consumer_name(self, number: int) -> str:
        """``drill-A-0``; on the return home ``drill-A-return-0``, apart from the consumers
        A had before the failure."""
        if self.phase == RETURN:
            return f"drill-{self.cluster}-{RETURN}-{number}"
        return f"drill-{self.cluster}-{number}"

    def start(self) -> None:
        for consumer, policy in zip(self._consumers, self.policies, strict=True):
            thread = threading.Thread(
                target=self._consume,
                args=(consumer, policy),
                name=f"drill-{self.cluster}-{consumer.consumer_name()}",
                daemon=True,
            )
            thread.start()
            self._threads.append(thread)

    def stop(self) -> None:
        """Stop receiving and acknowledging; returns once every thread is done."""
        self.stopping.set()
        for thread in self._threads:
            thread.join(timeout=limits.drill_read_timeout_s_max)

    def close(self) -> None:
        for consumer in self._consumers:
            try:
                consumer.close()
            except Exception as error:  # a consumer of a dead cluster: nothing to do
                logging.getLogger(__name__).debug("closing a consumer: %s", error)

    def _schema_version_of(self, version: int) -> avro_records.WriterSchema:
        """The topic's schema under ``version``, asked of the consumers' cluster as
        AUTO_CONSUME asks it (GET_SCHEMA). The official client offers the request only on
        its native client, ``Client._client``, which its own AvroSchema uses the same way."""
        info = self.client._client.get_schema_info(self.topic, version)
        return avro_records.WriterSchema(info.schema_type().name, info.schema())

    def _delivery(self, message: PulsarObject, consumer_name: str) -> Delivery:
        message_id = message.message_id()
        properties = message.properties()
        own = position_text(message_id)
        if self.phase in (BEFORE, RETURN):  # on A: the message itself
            origin_cluster, origin_position = self.cluster, own
        else:
            origin_position = origin_position_of_copy(properties)
            # Pulsar's copies name no origin cluster to the client: A, the only source.
            origin_cluster = properties.get(ORIGIN_CLUSTER_PROPERTY) or (
                "A" if origin_position else ""
            )
        index_text = properties.get(DRILL_INDEX_PROPERTY, "")
        delivery = Delivery(
            mode=self.mode,
            cluster=self.cluster,
            phase=self.phase,
            consumer=consumer_name,
            topic=self.topic,
            subscription=self.subscription,
            drill_id=properties.get(DRILL_ID_PROPERTY, ""),
            index=_index(index_text),
            key=message.partition_key(),
            message_id=own,
            origin_cluster=origin_cluster,
            origin_position=origin_position,
            batch_index=message_id.batch_index(),
            delivered_at=int(time.time() * 1000),
            redelivery_count=message.redelivery_count(),
        )
        if self.schemas is not None:
            delivery.payload_schema_version = version_number(message.schema_version())
            expected = avro_records.expected_fields(delivery.index, delivery.drill_id, delivery.key)
            delivery.undecodable = avro_records.decode_problem(
                message.data(), delivery.payload_schema_version, self.schemas, expected
            )
        return delivery

    def _consume(self, consumer: PulsarObject, policy: AckPolicy) -> None:
        pulsar = pulsar_module()
        name = consumer.consumer_name()
        next_slot = 0.0  # monotonic time of the next message this consumer may take
        while not self.stopping.is_set():
            wait_s = next_slot - time.monotonic()
            if wait_s > 0 and self.stopping.wait(wait_s):
                return
            try:
                message = consumer.receive(timeout_millis=_RECEIVE_TIMEOUT_MS)
            except pulsar.Timeout:
                continue
            except Exception as error:  # closed or disconnected for good
                if not self.stopping.is_set():
                    self.errors.append(f"{name}: receive: {error}")
                return
            if self.interval_s:
                next_slot = max(next_slot, time.monotonic() - self.interval_s) + self.interval_s
            delivery = self.log.append(self._delivery(message, name))
            if not self.counter.add(delivery) or self.stopping.is_set():
                self.stopping.set()
                return  # past the failure point: stays unacknowledged
            received = Received(delivery.index, delivery.redelivery_count, (message, delivery))
            for action in policy.on_message(received):
                held_message, held_delivery = action.message.handle
                try:
                    if action.kind == ACK:
                        consumer.acknowledge(held_message)
                        self.log.mark(held_delivery, acked=True)
                    elif action.kind == ACK_CUMULATIVE:
                        consumer.acknowledge_cumulative(held_message)
                        self.log.mark_cumulative(held_delivery)
                    elif action.kind == NACK:
                        consumer.negative_acknowledge(held_message)
                        self.log.mark(held_delivery, nacked=True)
                except Exception as error:
                    self.errors.append(f"{name}: {action.kind} {held_delivery.drill_id}: {error}")
            if self.counter.reached.is_set():
                self.stopping.set()  # this delivery was the last one before the failure


def read_origins(client: PulsarObject, topic: str) -> dict[str, str]:
    """Every copy on ``topic`` (read from the earliest message to the last one there
    now): origin position -> drill id."""
    pulsar = pulsar_module()
    reader = client.create_reader(topic, pulsar.MessageId.earliest)
    found: dict[str, str] = {}
    try:
        while reader.has_message_available():
            message = reader.read_next(timeout_millis=int(limits.drill_read_timeout_s_max * 1000))
            properties = message.properties()
            origin = origin_position_of_copy(properties)
            if origin:
                found[origin] = properties.get(DRILL_ID_PROPERTY, "")
    finally:
        reader.close()
    return found


def _index(text: str) -> int:
    """A message's drill index property; -1 when it is not a decimal."""
    index = parse_decimal(text)
    return -1 if index is None else index
