"""One replicator: a topic partition of the local cluster, copied to one remote cluster.

Mechanism (names and ids in ``origin.py``)::

    local topic T ──(subscription georep.repl.B, Exclusive, durable)──▶ read in order
        │  each entry: skip (not local / marker / not addressed) or
        │              re-publish with origin metadata, sequence id = f(origin position)
        ▼
    remote topic T on B ──(producer georep.repl.A, pipelined SENDs)──▶ SEND_RECEIPT
        │
        └─▶ cumulative ACK on the local subscription, only past entries whose
            receipt came back (or that were skipped), in order

The replication cursor is the durable subscription ``georep.repl.<remote>`` on the local
topic. It is created at the EARLIEST position still retained on the topic: a cluster
added to a policy receives the topic's whole retained backlog, older messages that
retention already removed are not replicated. Because the subscription is Exclusive,
two gateways beside the same cluster cannot replicate the same topic at once: the second
waits (CONSUMER_BUSY, retried) and takes over when the first goes away.

Exactly once on the remote: the local acknowledgement follows the remote receipt, so a
crash (kill -9) at any point leaves the local cursor at or behind what the remote holds;
after a restart the entries from the cursor on are read again and sent again under the
same sequence ids, and the remote's producer deduplication stores none of them twice.
Entries at or below PRODUCER_SUCCESS's ``last_sequence_id`` are not even sent again.

Buffer: entries taken from the local consumer wait in ``_unsent`` until sent, then in
``_in_flight`` until their receipt; both together hold at most
``limits.replicator_buffered_entries_max`` entries and ``..._bytes_max`` bytes, and the
producer itself at most ``limits.replicator_pending_sends_*`` unanswered sends
(backpressure: a slow remote slows the reading, the backlog stays on the local topic).

Faults: the local side (consumer) and the remote side (producer) reconnect separately,
each with exponential backoff and jitter (``georep/runtime/retry.py``, tenacity), capped at
``limits.replicator_retry_backoff_s_max``, never giving up while the replicator runs.
When the remote fails, what was in flight goes back to the front of ``_unsent`` and is
sent again to the next producer (deduplication keeps it once); the local consumer keeps
its place, so the backlog grows on the local topic and is caught up when the remote
returns. When the local side fails, both restart from the local cursor. An entry that
cannot be sent as it is (its id does not fit a sequence id, it exceeds the remote's
largest message) stops the replicator at that entry with ``last_error`` saying why; it
retries at the longest backoff, and never skips the entry.

Rate limits (``rate_limiter.py``): messages and bytes per second, taken before each send.

Schemas: an entry's ``schema_version`` names a schema in the local cluster's registry,
which the remote numbers its own way (Pulsar's replicator carries the schema too). Before
the first entry carrying a local version it has not mapped, the replicator reads that
version's schema over the local admin REST and asks the remote's producer for it
(GET_OR_CREATE_SCHEMA: the remote registers it if new and compatible there), and stamps
the remote's version on the copy; the copy is otherwise verbatim. Example: A holds v0
and v1 of a topic's schema; B, where an operator registered A's v1 first, answers 0 for
A's v1 and, asked for A's v0 next, registers it as its v1: entries carrying A's v0 reach
B carrying 1, those carrying A's v1 carry 0, and every one decodes. The map lives as
long as the replicator (at most ``limits.schema_versions_per_topic_max`` versions). A
remote that refuses the schema (incompatible under its strategy) stops this topic's
replication at that entry, as a stalled entry does: ``schema_refused`` says why
(``/health``, a metric), nothing is dropped or sent under another version, and it tries
again at the longest backoff.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import enum
import functools
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from georep import limits
from georep.client.admin import ClusterAdminClient
from georep.client.consumer import LinkConsumer, ReceivedEntry
from georep.client.errors import LinkError, ServerError, moved, said_once_per_cluster
from georep.client.link import PulsarLink
from georep.client.producer import LinkProducer, SendReceipt
from georep.domain.position import Position
from georep.domain.topic_name import TopicName
from georep.invariant import InvariantViolation, invariant
from georep.replicator.counters import Counters, Rates
from georep.replicator.errors import ReplicationStalled
from georep.replicator.origin import (
    Verdict,
    position_of_sequence_id,
    replicated_metadata,
    replication_name,
    sequence_id_of,
    verdict,
)
from georep.replicator.rate_limiter import RateLimiter
from georep.replicator.settings import ReplicatorSettings
from georep.runtime.awaiting import stopped_within, within
from georep.runtime.retry import RetryPolicy
from georep.wire import pulsar_wire_pb2 as pb

log = logging.getLogger(__name__)

_T = TypeVar("_T")


class State(enum.Enum):
    STARTING = "starting"
    CONNECTING = "connecting"
    REPLICATING = "replicating"
    BACKOFF = "backoff"
    STOPPED = "stopped"


@dataclass(slots=True, eq=False)
class _Item:
    """One local entry on its way."""

    entry: ReceivedEntry
    verdict: Verdict
    sequence_id: int = -1
    done: bool = False
    metadata_out: pb.MessageMetadata | None = None

    @property
    def position(self) -> Position:
        return self.entry.position


class Replicator:
    def __init__(
        self,
        *,
        topic: str,
        local_cluster: str,
        remote_cluster: str,
        local_link: PulsarLink,
        remote_link: PulsarLink,
        remote_admin: ClusterAdminClient | None = None,
        partitions: int = 0,
        settings: ReplicatorSettings | None = None,
        local_admin: ClusterAdminClient | None = None,
        opening: asyncio.Semaphore | None = None,
        remote_opening: asyncio.Semaphore | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.topic = topic
        self.topic_name = TopicName.parse(topic)
        self.local_cluster = local_cluster
        self.remote_cluster = remote_cluster
        self.subscription = replication_name(remote_cluster)
        self.producer_name = replication_name(local_cluster)
        self._local_link = local_link
        self._remote_link = remote_link
        self._remote_admin = remote_admin
        self._local_admin = local_admin
        #: Partition count of the topic's base name (0: not partitioned).
        self.partitions = partitions
        self.settings = settings or ReplicatorSettings()
        #: How the local and remote sides wait between attempts (``georep/runtime/retry.py``).
        self.retry_policy = RetryPolicy(
            self.settings.backoff_s_initial, self.settings.backoff_s_max
        )
        self._clock = clock
        self._limiter = RateLimiter(self.settings.messages_per_s, self.settings.bytes_per_s)
        #: Shared by the gateway's replicators and syncs: at most so many open at once on
        #: the local cluster, and (``remote_opening``) producers on the remote. Apart, the
        #: two clusters work at once when thousands of partitions start.
        self._opening = opening or asyncio.Semaphore(limits.gateway_opening_count_max)
        self._remote_opening = remote_opening or asyncio.Semaphore(limits.gateway_opening_count_max)
        #: Waiting for a turn to open (either semaphore): thousands of partitions starting
        #: together queue there, and a partition in that queue is not stalled.
        self._awaiting_turn = False
        #: Set when an entry is read: the stats sampler sleeps while nothing happens.
        self._activity = asyncio.Event()
        self._logged_error: str | None = None
        self.state = State.STARTING
        self._task: asyncio.Task[None] | None = None
        self._stopping = False
        self._consumer: LinkConsumer | None = None
        self._producer: LinkProducer | None = None
        self._unsent: collections.deque[_Item] = collections.deque()
        self._in_flight: collections.deque[_Item] = collections.deque()
        self._buffered_bytes = 0
        self._wakeup = asyncio.Event()
        self._room = asyncio.Event()
        self._room.set()
        self._generation = 0
        self._ack_to: Position | None = None
        self._acked: Position | None = None
        #: The last entry the remote confirmed (a receipt stands for every entry its
        #: producer sent before it), kept through reconnections: ``stored_to``.
        self._stored: Position | None = None
        #: The last local entry read (replicated or skipped): how far the local topic
        #: holds entries, for the subscription sync's stall check.
        self.read_to: Position | None = None
        self._ack_scheduled = False
        self.counters = Counters()
        self._rates = Rates(self.counters)
        self.backlog_entries: int | None = None
        self.remote_last_sequence_id: int | None = None
        self.last_error: str | None = None
        self.last_error_at: float | None = None
        #: Local schema version (as the entries carry it) -> the remote's version of the
        #: same schema, learnt before the first entry carrying it is sent.
        self._schema_versions: dict[bytes, bytes] = {}
        #: Why the remote refused a schema (this topic's replication stopped), or None.
        self.schema_refused: str | None = None
        self._oldest_publish_ms: int | None = None
        #: When an entry last moved on (its remote receipt, or a verdict not to send it)
        #: or the replicator was last seen with nothing to do: what the manager's watchdog
        #: measures a stall from (:meth:`stalled_s`).
        self.progressed_at = clock()
        #: Restarts by the watchdog since the replicator last made progress.
        self.restarts = 0

    def __repr__(self) -> str:
        return f"Replicator({self.topic} {self.local_cluster}->{self.remote_cluster})"

    @property
    def key(self) -> tuple[str, str]:
        return self.topic, self.remote_cluster

    # -- life cycle --

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name=repr(self))

    async def restart(self) -> bool:
        """Close the local consumer and the remote producer, and start again: a fresh
        lookup of the topic on both clusters, new connections where the old ones closed,
        and replication resumed from the subscription (the watchdog's heal, as an
        operator unloads a topic whose replicator is stuck in Pulsar). False, and
        nothing started, when the running task did not end within
        ``limits.replicator_restart_wait_s`` of its cancellation: a bug, said at ERROR
        with where it waits."""
        self.restarts += 1
        if not await stopped_within(
            self.stop(), self._task, self, limits.replicator_restart_wait_s
        ):
            return False
        self._stopping = False
        self._task = None
        self.progressed_at = self._clock()
        self.state = State.STARTING
        self.start()
        return True

    def stalled_s(self, now: float) -> float:
        """Seconds without progress while entries wait (on the local topic, in the
        buffer, or sent without a receipt); 0 with nothing to do, or while waiting for a
        turn to open behind other partitions (the watchdog would only send it to the
        back of the queue)."""
        waiting = self._unsent or self._in_flight or (self.backlog_entries or 0) > 0
        if not waiting or self.state is State.STOPPED or self._awaiting_turn:
            self.progressed_at = max(self.progressed_at, now)
            return 0.0
        return max(0.0, now - self.progressed_at)

    async def stop(self, *, delete_subscription: bool = False) -> None:
        """Stop replicating. Acknowledgements made so far are persisted (the consumer is
        closed, which returns once they are). With ``delete_subscription`` the
        replication cursor is deleted too (the policy no longer names the remote);
        raises LinkError if that could not be done."""
        self._stopping = True
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        consumer, self._consumer = self._consumer, None
        producer, self._producer = self._producer, None
        if producer is not None:
            with contextlib.suppress(LinkError):
                await producer.close()
        self._flush_ack(consumer)
        deleted = False
        if consumer is not None and consumer.failure is None:
            try:
                if delete_subscription:
                    await consumer.unsubscribe()
                    deleted = True
                else:
                    await consumer.close()
            except LinkError as error:
                log.info("%s: closing the local consumer: %s", self, error)
        if delete_subscription and not deleted:
            if self._local_admin is None:
                raise LinkError(f"{self}: cannot delete {self.subscription}: no admin client")
            await self._local_admin.delete_subscription(self.topic_name, self.subscription)
        self.state = State.STOPPED
        if delete_subscription:
            log.info("%s: stopped; subscription %s deleted", self, self.subscription)

    # -- the local side --

    async def _run(self) -> None:
        while not self._stopping:
            consumer = None
            try:
                self.state = State.CONNECTING
                consumer = await self._retrying("local", self._subscribe)
                self._consumer = consumer
                await self._replicate(consumer)
            except asyncio.CancelledError:
                raise
            except (LinkError, ReplicationStalled) as error:
                self._record_error("local", error)
            except InvariantViolation:
                raise
            except Exception as error:  # a bug: say so loudly, and do not spin on it
                log.exception("%s: replication failed", self)
                self._record_error("local", error)
                self.state = State.BACKOFF
                await asyncio.sleep(self.retry_policy.max_s)
            finally:
                self._flush_ack(consumer)
                self._reset_buffer()
                if consumer is not None and not self._stopping:
                    self._consumer = None
                    with contextlib.suppress(LinkError):
                        await consumer.close()

    @contextlib.asynccontextmanager
    async def _turn(self, semaphore: asyncio.Semaphore) -> AsyncIterator[None]:
        """Hold one of ``semaphore``'s places, marked as waiting for one until then."""
        self._awaiting_turn = True
        try:
            await semaphore.acquire()
        finally:
            self._awaiting_turn = False
            self.progressed_at = max(self.progressed_at, self._clock())
        try:
            yield
        finally:
            semaphore.release()

    async def _subscribe(self) -> LinkConsumer:
        async with self._turn(self._opening):
            return await self._local_link.subscribe(
                self.topic,
                self.subscription,
                consumer_name=f"georep-gateway-{self.local_cluster}",
                receiver_queue=self.settings.receiver_queue_messages,
            )

    async def _replicate(self, consumer: LinkConsumer) -> None:
        loop = asyncio.get_running_loop()
        tasks = [
            loop.create_task(self._read(consumer), name=f"{self} read"),
            loop.create_task(self._send(), name=f"{self} send"),
            loop.create_task(self._sample(consumer), name=f"{self} stats"),
        ]
        try:
            done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
            for task in done:
                task.result()  # raises the local failure
        finally:
            for task in tasks:
                task.cancel()
            for task in tasks:
                with contextlib.suppress(asyncio.CancelledError, LinkError, ReplicationStalled):
                    await task
            producer, self._producer = self._producer, None
            if producer is not None and not producer.failed:
                with contextlib.suppress(LinkError):
                    await producer.close()

    async def _read(self, consumer: LinkConsumer) -> None:
        settings = self.settings
        while True:
            while (
                len(self._unsent) + len(self._in_flight) >= settings.buffered_entries_max
                or self._buffered_bytes >= settings.buffered_bytes_max
            ):
                self._room.clear()
                await self._room.wait()
            entry = await consumer.receive()
            self.read_to = entry.position
            outcome = verdict(
                entry.metadata, local_cluster=self.local_cluster, remote_cluster=self.remote_cluster
            )
            item = _Item(entry, outcome)
            if outcome is Verdict.REPLICATE:
                item.sequence_id = sequence_id_of(*entry.position)  # may stall here
                self.counters.messages_in += entry.messages
                self.counters.bytes_in += entry.size_bytes
            else:
                item.done = True
                self.counters.skipped[outcome.value] += entry.messages
            self._unsent.append(item)
            self._activity.set()
            self._buffered_bytes += entry.size_bytes
            if self._oldest_publish_ms is None:
                self._oldest_publish_ms = entry.publish_time_ms
            self._wakeup.set()

    # -- the remote side --

    async def _send(self) -> None:
        while True:
            producer = await self._retrying("remote", self._open_producer)
            self._producer = producer
            self.state = State.REPLICATING
            producer.on_failure(lambda _error: self._wakeup.set())
            stalled = False
            try:
                await self._send_with(producer)
            except (LinkError, ReplicationStalled) as error:
                self._record_error("remote", error)
                stalled = not error.retriable
            finally:
                self._producer = None
                self._requeue_in_flight()
                if not producer.failed:
                    with contextlib.suppress(LinkError):
                        await producer.close()
            if stalled:  # trying again at once cannot help
                self.state = State.BACKOFF
                await asyncio.sleep(self.retry_policy.max_s)

    async def _open_producer(self) -> LinkProducer:
        async with self._turn(self._remote_opening):
            if self._remote_admin is not None:
                await self._remote_admin.ensure_topic(self.topic_name.base, self.partitions)
            producer = await self._remote_link.create_producer(
                self.topic,
                self.producer_name,
                pending_count_max=self.settings.pending_sends_count_max,
                pending_bytes_max=self.settings.pending_sends_bytes_max,
            )
        self.remote_last_sequence_id = producer.last_sequence_id
        return producer

    async def _send_with(self, producer: LinkProducer) -> None:
        generation = self._generation
        while True:
            if producer.failure is not None:
                raise producer.failure
            if not self._unsent:
                self._wakeup.clear()
                await self._wakeup.wait()
                continue
            item = self._unsent[0]
            if not item.done:
                if item.sequence_id <= producer.last_sequence_id:
                    item.done = True
                    self.counters.already_replicated += item.entry.messages
                else:
                    if item.metadata_out is None:
                        schema_version = await self._remote_schema_version(producer, item)
                        item.metadata_out = replicated_metadata(
                            item.entry.metadata,
                            local_cluster=self.local_cluster,
                            position=item.position,
                            producer_name=self.producer_name,
                        )
                        if schema_version is not None:
                            item.metadata_out.schema_version = schema_version
                    await self._limiter.acquire(item.entry.messages, item.entry.size_bytes)
                    future = await producer.send(
                        item.metadata_out, item.entry.payload, num_messages=item.entry.messages
                    )
                    future.add_done_callback(functools.partial(self._on_receipt, item, generation))
            self._unsent.popleft()
            self._in_flight.append(item)
            if item.done:
                self._complete_head()

    async def _remote_schema_version(self, producer: LinkProducer, item: _Item) -> bytes | None:
        """The remote's version of the schema the entry's ``schema_version`` names here
        (None: the entry carries none). ReplicationStalled when it cannot be had."""
        metadata = item.entry.metadata
        if not metadata.schema_version:
            return None
        local = metadata.schema_version
        known = self._schema_versions.get(local)
        if known is not None:
            return known
        version = int.from_bytes(local, "big", signed=True) if len(local) == 8 else -1
        if version < 0:
            raise ReplicationStalled(f"{item.position}: {local.hex()} is no schema version")
        if self._local_admin is None:
            raise ReplicationStalled(
                f"schema version {version}: no admin client of the local cluster"
            )
        schema = await self._local_admin.schema(self.topic_name, version)
        if schema is None:
            raise ReplicationStalled(
                f"{item.position}: schema version {version} is not in the local registry"
            )
        try:
            remote = await producer.get_or_create_schema(schema)
        except ServerError as error:
            if error.code != pb.INCOMPATIBLE_SCHEMA:
                raise
            self.schema_refused = f"schema version {version}: IncompatibleSchema: {error}"
            raise ReplicationStalled(self.schema_refused) from None
        self.schema_refused = None
        invariant(
            len(self._schema_versions) < limits.schema_versions_per_topic_max,
            "a topic has no more schema versions than its registry allows",
        )
        self._schema_versions[local] = remote
        return remote

    def _on_receipt(
        self, item: _Item, generation: int, future: asyncio.Future[SendReceipt]
    ) -> None:
        if not future.cancelled() and future.exception() is None:
            # Stored on the remote, even if the buffer was reset since (the local side
            # failed): how far the remote stores the topic (``stored_to``) counts it.
            self._note_stored(item.position)
        if generation != self._generation or future.cancelled() or future.exception():
            self._wakeup.set()
            return
        receipt: SendReceipt = future.result()
        item.done = True
        if receipt.duplicate:
            self.counters.duplicates += item.entry.messages
        else:
            self.counters.messages_out += item.entry.messages
            self.counters.bytes_out += item.entry.size_bytes
            self.counters.entries_out += 1
        if self.remote_last_sequence_id is None or item.sequence_id > self.remote_last_sequence_id:
            self.remote_last_sequence_id = item.sequence_id
        self._complete_head()

    def _complete_head(self) -> None:
        last = None
        while self._in_flight and self._in_flight[0].done:
            item = self._in_flight.popleft()
            self._buffered_bytes -= item.entry.size_bytes
            last = item.position
        if last is None:
            return
        self.progressed_at = self._clock()
        self.restarts = 0
        head = next(iter(self._in_flight or self._unsent), None)
        self._oldest_publish_ms = head.entry.publish_time_ms if head is not None else None
        self._ack_to = last
        if not self._ack_scheduled:
            self._ack_scheduled = True
            asyncio.get_running_loop().call_soon(self._flush_ack_soon)
        self._room.set()

    def _flush_ack_soon(self) -> None:
        self._ack_scheduled = False
        self._flush_ack(self._consumer)

    def _flush_ack(self, consumer: LinkConsumer | None) -> None:
        """One cumulative ACK for everything completed since the last one."""
        if consumer is None or consumer.failure is not None or self._ack_to is None:
            return
        if self._acked is not None and self._ack_to <= self._acked:
            return
        with contextlib.suppress(LinkError):
            consumer.ack_cumulative(self._ack_to)
            self._acked = self._ack_to

    def _requeue_in_flight(self) -> None:
        """After a remote failure: what was in flight is sent again, in order."""
        self._generation += 1
        self._unsent.extendleft(reversed(self._in_flight))
        self._in_flight.clear()

    def _reset_buffer(self) -> None:
        """After a local failure: the next consumer is redelivered everything unacked."""
        self._generation += 1
        self._unsent.clear()
        self._in_flight.clear()
        self._buffered_bytes = 0
        self._ack_to = self._acked = None
        self._room.set()

    # -- retries and errors --

    async def _retrying(self, side: str, operation: Callable[[], Awaitable[_T]]) -> _T:
        """``operation`` until it succeeds (runtime/retry.py: exponential with jitter, capped; at
        once the cap for what retrying soon cannot fix, a stalled entry or a refusal)."""

        def failed(error: BaseException | None) -> None:
            self.state = State.BACKOFF
            self._record_error(side, error)

        retrying = self.retry_policy.retrying((LinkError, ReplicationStalled), before_sleep=failed)
        return await retrying(operation)

    def _record_error(self, side: str, error: BaseException | None) -> None:
        if error is None:
            return
        self.counters.errors += 1
        self.last_error = f"{side}: {type(error).__name__}: {error}"
        self.last_error_at = self._clock()
        # A retry storm is not a log storm; a cluster that cannot be reached is said once
        # by its link (client/link.py), and a topic moving between brokers is routine:
        # neither is a line per replicator (at 10,000 topics, 10,000 lines for one cause).
        if self.last_error == self._logged_error or said_once_per_cluster(error):
            return
        self._logged_error = self.last_error
        log.log(logging.DEBUG if moved(error) else logging.WARNING, "%s: %s", self, self.last_error)

    # -- stats --

    async def _sample(self, consumer: LinkConsumer) -> None:
        """Rates and the backlog every ``stats_interval_s`` while entries are read. With
        nothing read since: idle once a sample showed no backlog (asked again when an
        entry arrives), else asked again less and less often, up to
        ``limits.replicator_stats_idle_interval_s`` (a remote that is down). At 10,000
        topics a CONSUMER_STATS each every 2 s would be 5,000 requests a second to the
        local broker, nearly all of them idle."""
        interval_s = self.settings.stats_interval_s
        idle_s = interval_s
        while True:
            self._activity.clear()
            self._rates.sample()
            with contextlib.suppress(LinkError):
                self.backlog_entries = await consumer.backlog()
            await asyncio.sleep(interval_s)
            if self._activity.is_set():
                idle_s = interval_s
                continue
            self._rates.sample()  # the rates fall to 0 now, not a sample later
            if self.backlog_entries == 0:
                await self._activity.wait()
                idle_s = interval_s
                continue
            with contextlib.suppress(TimeoutError):
                await within(self._activity.wait(), idle_s)
            idle_s = min(idle_s * 2, limits.replicator_stats_idle_interval_s)

    @property
    def local_connected(self) -> bool:
        return self._consumer is not None and self._consumer.failure is None

    @property
    def remote_connected(self) -> bool:
        return self._producer is not None and not self._producer.failed

    @property
    def connected(self) -> bool:
        return self.local_connected and self.remote_connected

    @property
    def rates(self) -> Mapping[str, float]:
        """``msgRateIn``, ``msgThroughputIn``, ``msgRateOut``, ``msgThroughputOut`` at the
        last sample (Pulsar's names)."""
        return self._rates.current

    @property
    def delay_s(self) -> float | None:
        """Seconds since the oldest entry not yet replicated was published: 0 with nothing
        left to replicate, None when unknown (entries wait on the local topic while the
        local side is not connected)."""
        if self._oldest_publish_ms is not None:
            return max(0.0, self._clock() - self._oldest_publish_ms / 1000.0)
        if self.backlog_entries == 0 or (self.local_connected and not self._unsent):
            return 0.0
        return None

    def _note_stored(self, position: Position) -> None:
        """One producer's sends are stored in order, so a receipt stands for every
        entry sent before it too."""
        if self._stored is None or position > self._stored:
            self._stored = position

    @property
    def stored_to(self) -> Position | None:
        """How far the remote stores this topic partition: the last entry it confirmed
        with every entry before it (since this replicator started); before any,
        ``Position.LATEST`` while connected here with nothing left to send; otherwise
        None, not known (subscription sync's exposure)."""
        if self._stored is not None:
            return self._stored
        idle = self.backlog_entries == 0 and not self._unsent and not self._in_flight
        return Position.LATEST if idle and self.local_connected else None

    def stats(self) -> dict[str, Any]:
        """Pulsar's replication stats names (``replicationBacklog`` counts entries, as
        Pulsar's does), and georep's own counters."""
        c = self.counters
        last = self.remote_last_sequence_id
        return {
            "topic": self.topic,
            "localCluster": self.local_cluster,
            "remoteCluster": self.remote_cluster,
            "subscription": self.subscription,
            "producerName": self.producer_name,
            "state": self.state.value,
            "connected": self.connected,
            "localConnected": self.local_connected,
            "remoteConnected": self.remote_connected,
            "replicationBacklog": self.backlog_entries,
            "replicationDelayInSeconds": self.delay_s,
            **self._rates.current,
            "msgInCounter": c.messages_in,
            "bytesInCounter": c.bytes_in,
            "msgOutCounter": c.messages_out,
            "entriesOutCounter": c.entries_out,
            "bytesOutCounter": c.bytes_out,
            "duplicatesCounter": c.duplicates,
            "alreadyReplicatedCounter": c.already_replicated,
            "skippedCounter": dict(c.skipped),
            "bufferedEntries": len(self._unsent) + len(self._in_flight),
            "inFlightEntries": len(self._in_flight),
            "remoteLastOriginPosition": (
                str(position_of_sequence_id(last)) if last is not None and last >= 0 else None
            ),
            "errorsCounter": c.errors,
            "stalledSeconds": round(self.stalled_s(self._clock()), 1),
            "restarts": self.restarts,
            "schemaRefused": self.schema_refused,
            "lastError": self.last_error,
            "lastErrorTimestamp": self.last_error_at,
            "rateLimit": {
                "messagesPerSecond": self.settings.messages_per_s,
                "bytesPerSecond": self.settings.bytes_per_s,
            },
        }
