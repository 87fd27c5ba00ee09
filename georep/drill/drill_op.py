"""One drill in one sync mode, from the first subscription to the last delivery on B.

Steps (each timed in the report's ``timings_s``):

1. **subscribe** on A: the scenario's consumers, ``replicate_subscription_state_enabled``
   on, from the earliest position; they consume from now on, at most
   ``--consume-rate`` messages a second together.
2. **gateways ready**: wait until both gateways replicate the new topic and sync it, and
   A's gateway syncs the subscription (at most ``limits.drill_ready_s_max``; a warning
   past it): a drill measures a running sync, not topic discovery. From then until the
   failure, B's gateway's ``applied.A.syncLagMs`` (``sync_lag_samples_ms``, the page's
   lag timeline) and A's replication backlog to B (``replication_backlog_samples``: A's
   gateway's replicator, or Pulsar's own) are sampled every
   ``limits.drill_sync_sample_interval_s``.
3. **produce and consume on A**: N messages produced at ``--produce-rate`` (traffic.py;
   their receipts are their origin MessageIds) while the consumers consume, until
   ``target = ceil(at * N)`` distinct messages were delivered; then the consumers stop
   receiving and acknowledging — what they hold unacknowledged stays so. Production
   goes on to N (``produce_rest``): every message is produced, with a receipt, before
   the failure. Producing at a pace, not all at once, matters for the
   Pulsar-compatible mode: its snapshots land only where new messages keep arriving,
   and the mark-delete position can only be synced to a snapshot.
4. **settle** for ``--settle`` seconds, then read the sync state at the failure: B's
   gateway's ``applied.A.syncLagMs`` for the subscription (null when the gateway has no
   subscription sync stats) and A's cursor (``internalStats``).
5. **fail** A (topology.py): ``kill`` or ``cut-link``. The failure's wall-clock time is
   the origin of ``time_to_resume_on_B_s``.
6. **move to B**: the same subscription name, type and number of consumers, from the
   earliest position should the subscription not exist on B (duplicates rather than
   loss); each acknowledges what it receives and, for a scenario on Avro records
   (``avro-evolving``), decodes it by its schema version on B first (avro_records.py).
   Meanwhile a Reader lists the copies on B (nothing crosses after the failure, so that
   is what was replicated before it).
7. **drain** until nothing arrived for ``limits.drill_drain_quiet_s_default`` seconds
   once as many messages arrived as B should deliver (replicated, not acked on A), or
   for ``..._quiet_incomplete_s`` without; at most ``..._drain_timeout_s_max``.

The consumers' threads and the client calls are blocking; they run in worker threads
while this coroutine keeps time and drives the processes.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from dataclasses import dataclass
from typing import Any

from georep import limits
from georep.awaiting import within
from georep.drill import rest
from georep.drill.delivery_log import AFTER, BEFORE, Delivery, DeliveryLog
from georep.drill.errors import DrillError
from georep.drill.progress import Progress
from georep.drill.report import ModeFacts, Produced, classify, mode_report, schemas_on_b
from georep.drill.scenarios import SCENARIOS, AckEach
from georep.drill.settings import KILL, DrillSettings
from georep.drill.topology import A, B, Topology
from georep.drill.traffic import (
    ConsumerGroup,
    DeliveryCounter,
    PulsarObject,
    connect,
    produce,
    read_origins,
)

log = logging.getLogger(__name__)

#: Receiver queues: small on A so that Shared consumers share and little is prefetched
#: beyond the failure point; larger on B for the drain.
_RECEIVER_QUEUE_A = 10
_RECEIVER_QUEUE_B = 100


@dataclass
class ModeRun:
    report: dict[str, Any]
    deliveries: list[Delivery]


class DrillOp:
    def __init__(
        self,
        settings: DrillSettings,
        mode: str,
        topology: Topology,
        progress: Progress,
        stamp: str,
    ) -> None:
        self.settings = settings
        self.mode = mode
        self.topology = topology
        self.progress = progress
        self.scenario = SCENARIOS[settings.scenario]
        self.topic = f"persistent://{settings.namespace}/drill-{settings.scenario}-{mode}-{stamp}"
        self.subscription = f"drill-{settings.scenario}"
        self.log = DeliveryLog()
        self.facts = ModeFacts(mode, self.topic, self.subscription, settings.fail)
        self._timer = time.monotonic()
        self._sampling: asyncio.Future[None] | None = None
        self._sampling_stop = asyncio.Event()

    def _lap(self, name: str) -> None:
        now = time.monotonic()
        self.facts.timings_s[name] = now - self._timer
        self._timer = now

    async def run(self) -> ModeRun:
        s = self.settings
        urls = self.topology.urls
        client_a = await asyncio.to_thread(connect, urls[A].service_url)
        client_b = await asyncio.to_thread(connect, urls[B].service_url)
        group_a = group_b = None
        shutting_down_a = None
        try:
            group_a, produced = await self._consume_on_a(client_a)
            await self._settle_and_measure()
            await self._stop_sampling()
            self._check_processes()
            self.progress.phase(f"{self.mode}: fail A ({s.fail})")
            self.facts.failed_at_ms = int(time.time() * 1000)
            await self.topology.fail(s.fail, self.topic)
            self._lap("fail")
            if s.fail == KILL:  # in the background: it may wait on the dead connection
                shutting_down_a = asyncio.ensure_future(asyncio.to_thread(client_a.shutdown))
            group_b, origins = await self._drain_on_b(client_b, produced)
        finally:
            await self._stop_sampling()
            for group in (group_a, group_b):
                if group is not None:
                    group.stopping.set()
            await asyncio.to_thread(_close_quietly, client_b, group_b)
            if shutting_down_a is not None:
                await shutting_down_a
            else:  # A is up: cut-link, or the drill stopped before the failure
                await asyncio.to_thread(_close_quietly, client_a, group_a)
        for group in (group_a, group_b):
            self.facts.warnings += [f"consumer error: {e}" for e in group.errors[:5]]
        records = self.log.records()
        classification = classify(produced, origins, records)
        schemas = schemas_on_b(produced, records) if self.scenario.avro else None
        return ModeRun(mode_report(classification, produced, self.facts, schemas), records)

    async def _consume_on_a(
        self, client_a: PulsarObject
    ) -> tuple[ConsumerGroup, dict[str, Produced]]:
        s = self.settings
        target = s.target_on_a
        counter = DeliveryCounter(target)
        group = ConsumerGroup(
            client_a,
            cluster=A,
            phase=BEFORE,
            mode=self.mode,
            scenario=self.scenario,
            topic=self.topic,
            subscription=self.subscription,
            policies=[
                self.scenario.policy_on_a(i, s.seed, target) for i in range(self.scenario.consumers)
            ],
            log=self.log,
            counter=counter,
            receiver_queue_size=_RECEIVER_QUEUE_A,
            rate_per_s=s.consume_rate_per_s,
        )
        self.progress.phase(f"{self.mode}: subscribe on A")
        await asyncio.to_thread(group.subscribe)
        group.start()
        self._lap("subscribe")
        await self._await_gateways()
        self._sampling = asyncio.ensure_future(self._sample())
        self.progress.phase(f"{self.mode}: produce and consume on A", target)
        abort = threading.Event()
        producing = asyncio.ensure_future(
            asyncio.to_thread(
                produce,
                client_a,
                self.topic,
                s.messages,
                s.keys,
                s.seed,
                s.produce_rate_per_s,
                abort=abort,
                avro=self.scenario.avro,
            )
        )
        deadline = time.monotonic() + limits.drill_consume_timeout_s_max
        try:
            while not counter.reached.is_set():
                self.progress.update(counter.distinct)
                if producing.done() and (failure := producing.exception()) is not None:
                    raise failure
                if time.monotonic() > deadline or group.errors:
                    problem = "; ".join(group.errors[:3]) or (
                        f"{limits.drill_consume_timeout_s_max:.0f} s passed"
                    )
                    raise DrillError(
                        f"consumers on A received {counter.distinct} of {target} messages:"
                        f" {problem}"
                    )
                await asyncio.sleep(0.05)
        except BaseException:
            abort.set()
            await asyncio.to_thread(group.stop)
            with contextlib.suppress(Exception):
                await producing
            raise
        await asyncio.to_thread(group.stop)
        self.progress.update(counter.distinct)
        self._lap("consume_on_A")
        self.progress.phase(f"{self.mode}: finish producing on A")
        produced = await producing  # the failure comes after the last receipt
        self._lap("produce_rest")
        return group, produced

    async def _sample(self) -> None:
        """From the gateways' readiness until :meth:`_stop_sampling` (before the failure):
        B's gateway's sync lag for the subscription (``applied.A.syncLagMs``; with
        gateways only) and A's replication backlog to B (``Topology.replication_backlog``),
        at one time per sample."""
        interval = limits.drill_sync_sample_interval_s
        lags = self.facts.sync_lag_samples
        backlogs = self.facts.replication_backlog_samples
        while not self._sampling_stop.is_set():
            lag = None
            if self.topology.has_gateways:
                stats = await asyncio.to_thread(self.topology.gateway_stats, B, self.topic)
                if stats is not None:
                    _, block = rest.sync_of(stats, self.topic, self.subscription)
                    lag = rest.sync_lag_ms(block, A)
            backlog = await asyncio.to_thread(self.topology.replication_backlog, self.topic)
            at_ms = int(time.time() * 1000)
            if self.topology.has_gateways:
                lags.append((at_ms, lag))
            backlogs.append((at_ms, backlog))
            if len(backlogs) >= limits.drill_sync_samples_count_max:
                lags[:] = lags[::2]
                backlogs[:] = backlogs[::2]
                interval *= 2
            with contextlib.suppress(TimeoutError):
                await within(self._sampling_stop.wait(), interval)

    async def _stop_sampling(self) -> None:
        self._sampling_stop.set()
        if self._sampling is not None:
            with contextlib.suppress(Exception):
                await self._sampling
            self._sampling = None

    async def _await_gateways(self) -> None:
        """Wait until both gateways replicate the new topic and sync it, and A's gateway
        syncs the subscription: a drill measures a running sync, not topic discovery."""
        self.progress.phase(f"{self.mode}: wait for replication")
        deadline = time.monotonic() + limits.drill_ready_s_max
        while True:
            missing = []
            if not self.topology.has_gateways:
                missing = await asyncio.to_thread(self.topology.replication_missing, self.topic)
            for cluster in (A, B) if self.topology.has_gateways else ():
                stats = await asyncio.to_thread(self.topology.gateway_stats, cluster, self.topic)
                missing += self._not_ready(cluster, stats)
            if not missing:
                break
            if time.monotonic() > deadline:
                self.facts.warnings.append(
                    f"after {limits.drill_ready_s_max:.0f} s still no {', '.join(missing)}; went on"
                )
                break
            await asyncio.sleep(0.2)
        self._lap("gateways_ready")

    def _not_ready(self, cluster: str, stats: dict[str, Any] | None) -> list[str]:
        if stats is None:
            return [f"stats from {cluster}'s gateway"]
        missing = []
        if not any(r.get("connected") for r in rest.replicators_of(stats, self.topic)):
            missing.append(f"connected replicator on {cluster}'s gateway")
        if isinstance(stats.get("subscriptionSync"), dict):
            entry = rest.sync_topic(stats, self.topic)
            if entry is None:
                missing.append(f"sync of the topic on {cluster}'s gateway")
            elif cluster == A:
                block = (entry.get("subscriptions") or {}).get(self.subscription) or {}
                if "source" not in block:
                    missing.append("sync of the subscription on A's gateway")
        return missing

    async def _settle_and_measure(self) -> None:
        self.progress.phase(f"{self.mode}: settle {self.settings.settle_s:g} s")
        await asyncio.sleep(self.settings.settle_s)
        self._lap("settle")
        blocks: dict[str, dict[str, Any] | None] = {}
        for cluster in (A, B) if self.topology.has_gateways else ():
            stats = await asyncio.to_thread(self.topology.gateway_stats, cluster, self.topic)
            if stats is None:
                self.facts.warnings.append(f"no stats from {cluster}'s gateway")
                continue
            mode, blocks[cluster] = rest.sync_of(stats, self.topic, self.subscription)
            if mode is None:
                self.facts.warnings.append(f"{cluster}'s gateway reports no subscriptionSync")
            elif mode != self.mode:
                self.facts.warnings.append(
                    f"{cluster}'s gateway syncs the topic in mode {mode!r}, not {self.mode!r}"
                )
            if cluster == A or self.facts.gateway_sync_mode is None:
                self.facts.gateway_sync_mode = mode
        self.facts.sync_stats = blocks or None
        self.facts.sync_lag_ms = rest.sync_lag_ms(blocks.get(B), A)
        try:
            self.facts.a_cursor = await asyncio.to_thread(
                rest.cursor_of, self.topology.urls[A].admin_url, self.topic, self.subscription
            )
        except DrillError as error:
            self.facts.warnings.append(f"A's cursor at the failure unknown: {error}")

    def _check_processes(self) -> None:
        exits = self.topology.unexpected_exits()
        if exits:
            raise DrillError("before the failure: " + "; ".join(exits))

    async def _drain_on_b(
        self, client_b: PulsarObject, produced: dict[str, Produced]
    ) -> tuple[ConsumerGroup, dict[str, str]]:
        counter = DeliveryCounter()
        group = ConsumerGroup(
            client_b,
            cluster=B,
            phase=AFTER,
            mode=self.mode,
            scenario=self.scenario,
            topic=self.topic,
            subscription=self.subscription,
            policies=[AckEach() for _ in range(self.scenario.consumers)],
            log=self.log,
            counter=counter,
            receiver_queue_size=_RECEIVER_QUEUE_B,
            decode_by_version=self.scenario.avro,
        )
        self.progress.phase(f"{self.mode}: move consumers to B")
        reading = asyncio.ensure_future(asyncio.to_thread(read_origins, client_b, self.topic))
        await asyncio.to_thread(group.subscribe)
        group.start()
        try:
            origins = await reading
        except Exception as error:
            await asyncio.to_thread(group.stop)
            raise DrillError(f"reading B's topic after the failure: {error}") from None
        acked_on_a = {
            r.origin_position for r in self.log.records() if r.phase == BEFORE and r.acked
        }
        wanted = frozenset((origins.keys() & produced.keys()) - acked_on_a)
        counter.want(wanted)
        expected = len(wanted)
        # The bar counts what B should deliver; what A had acknowledged and B delivered
        # again is counted beside it.
        self.progress.phase(f"{self.mode}: drain on B", expected)
        started = time.monotonic()
        while True:
            await asyncio.sleep(0.1)
            now = time.monotonic()
            self.progress.update(
                counter.wanted_delivered,
                f"{counter.deliveries} delivered, {counter.unwanted_delivered} acked on A"
                " came again",
            )
            quiet_s = now - (counter.last_at_monotonic or started)
            if (
                counter.wanted_delivered >= expected
                and quiet_s >= limits.drill_drain_quiet_s_default
            ):
                break
            if quiet_s >= limits.drill_drain_quiet_incomplete_s:
                self.facts.warnings.append(
                    f"drain on B ended after {quiet_s:.0f} s without a message, having"
                    f" {counter.wanted_delivered} of the {expected} messages B should deliver"
                )
                break
            if now - started >= limits.drill_drain_timeout_s_max:
                self.facts.warnings.append(
                    f"drain on B timed out after {limits.drill_drain_timeout_s_max:.0f} s"
                )
                break
        await asyncio.to_thread(group.stop)
        self.facts.first_delivery_on_b_ms = counter.first_at_ms
        self._lap("drain_on_B")
        self.progress.close()
        return group, origins


def _close_quietly(client: PulsarObject, group: ConsumerGroup | None) -> None:
    try:
        if group is not None:
            group.stop()
            group.close()
        client.close()
    except Exception as error:  # a client of a cluster that is gone
        log.debug("closing a client: %s", error)
