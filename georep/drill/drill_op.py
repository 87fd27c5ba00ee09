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
   the origin of ``time_to_resume_on_B_s``. A's gateway's exposure towards B is read
   there, once its replicators to B hold nothing B has not confirmed.
6. **B caught up** (``kill`` with gateways; ``cut-link`` kills B's gateway too): wait
   until B's gateway has applied every state B stores for the topic (``GET
   /sync/caught-up``, at most ``limits.drill_caught_up_wait_s_max``), as a failover
   does before its consumers move.
7. **move to B**: the same subscription name, type and number of consumers, from the
   earliest position should the subscription not exist on B (duplicates rather than
   loss); each acknowledges what it receives and, for a scenario on Avro records
   (``avro-evolving``), decodes it by its schema version on B first (avro_records.py).
   Meanwhile a Reader lists the copies on B (nothing crosses after the failure, so that
   is what was replicated before it).
8. **drain** until nothing arrived for ``limits.drill_drain_quiet_s_default`` seconds
   once as many messages arrived as B should deliver (replicated, not acked on A), or
   for ``..._quiet_incomplete_s`` without; at most ``..._drain_timeout_s_max``.

With ``--failback`` (failback.py), the consumers on B acknowledge only part of what they
drain (scenarios.PartialAcks) and the drill goes on:

9. **restore** A (``Topology.restore``): A's cluster and gateway start again on their
   data (``kill``), or the link is restored (``cut-link``; A's abandoned consumers are
   closed first). B's consumers stay subscribed, receiving nothing.
10. **sync back**: wait until B→A has settled: B's replicator to A connected with no
    backlog; with gateways in ``full`` mode, A's gateway has applied B's last state for
    the subscription (``applied.B.lastSequence`` at B's ``source.lastSequence``); and
    A's cursor unchanged for ``limits.drill_failback_quiet_s``. At most
    ``limits.drill_failback_sync_s_max`` (a warning past it).
11. **move home**: B's consumers close; the same subscription on A, the same number of
    consumers, each acknowledging on receipt, drain as in 8, wanting every message
    acknowledged neither on A nor on B.

The consumers' threads and the client calls are blocking; they run in worker threads
while this coroutine keeps time and drives the processes.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import random
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from georep import limits
from georep.drill import admin_client
from georep.drill.delivery_log import AFTER, BEFORE, RETURN, Delivery, DeliveryLog
from georep.drill.errors import DrillError
from georep.drill.failback import FailbackFacts, classify_failback, failback_report
from georep.drill.progress import Progress
from georep.drill.report import ModeFacts, Produced, classify, mode_report, schemas_on_b
from georep.drill.scenarios import SCENARIOS, AckEach, AckPolicy, PartialAcks
from georep.drill.settings import FULL, KILL, DrillSettings
from georep.drill.topology import A, B, Topology
from georep.drill.traffic import (
    ConsumerGroup,
    DeliveryCounter,
    PulsarObject,
    connect,
    produce,
    read_origins,
)
from georep.runtime.awaiting import within

log = logging.getLogger(__name__)

#: Receiver queues: small on A so that Shared consumers share and little is prefetched
#: beyond the failure point; larger on B for the drain.
_RECEIVER_QUEUE_A = 10
_RECEIVER_QUEUE_B = 100
_CURSOR_STILL = "A's cursor to stay still"


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
        group_a = group_b = group_home = None
        client_home = None
        shutting_down_a = None
        failback = FailbackFacts() if s.failback else None
        try:
            group_a, produced = await self._consume_on_a(client_a)
            await self._settle_and_measure()
            await self._stop_sampling()
            self._check_processes()
            self.progress.phase(f"{self.mode}: fail A ({s.fail})")
            self.facts.failed_at_ms = int(time.time() * 1000)
            await self.topology.fail(s.fail, self.topic, self._read_exposure)
            self._lap("fail")
            if self.topology.has_gateways and s.fail == KILL:
                await self._await_caught_up_on_b()
            if s.fail == KILL:  # in the background: it may wait on the dead connection
                shutting_down_a = asyncio.ensure_future(asyncio.to_thread(client_a.shutdown))
            group_b, origins = await self._drain_on_b(client_b, produced)
            if failback is not None:
                if shutting_down_a is not None:  # the old client must not reconnect to A
                    await shutting_down_a
                    shutting_down_a = None
                    client_a = None
                else:  # cut-link: A's abandoned consumers go before the link returns
                    await asyncio.to_thread(_close_quietly, client_a, group_a)
                    client_a = None
                await self._restore_a(failback)
                await self._await_sync_back(failback)
                await asyncio.to_thread(group_b.close)
                client_home = await asyncio.to_thread(connect, urls[A].service_url)
                group_home = await self._drain_home(client_home, produced, failback)
        finally:
            await self._stop_sampling()
            for group in (group_a, group_b, group_home):
                if group is not None:
                    group.stopping.set()
            await asyncio.to_thread(_close_quietly, client_b, group_b)
            if shutting_down_a is not None:
                await shutting_down_a
            elif client_a is not None:  # A is up: cut-link, or stopped before the failure
                await asyncio.to_thread(_close_quietly, client_a, group_a)
            if client_home is not None:
                await asyncio.to_thread(_close_quietly, client_home, group_home)
        for group in (group_a, group_b, group_home):
            if group is not None:
                self.facts.warnings += [f"consumer error: {e}" for e in group.errors[:5]]
        records = self.log.records()
        classification = classify(produced, origins, records)
        schemas = schemas_on_b(produced, records) if self.scenario.avro else None
        report = mode_report(classification, produced, self.facts, schemas)
        report["failback"] = (
            None
            if failback is None
            else failback_report(classify_failback(produced, records), produced, failback)
        )
        return ModeRun(report, records)

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
        at one time per sample. The last sample is taken once told to stop, after the
        sync state at the failure was read: the series always reaches the failure."""
        interval = limits.drill_sync_sample_interval_s
        lags = self.facts.sync_lag_samples
        backlogs = self.facts.replication_backlog_samples
        while True:
            last = self._sampling_stop.is_set()
            lag = None
            if self.topology.has_gateways:
                stats = await asyncio.to_thread(self.topology.gateway_stats, B, self.topic)
                if stats is not None:
                    _, block = admin_client.sync_of(stats, self.topic, self.subscription)
                    lag = admin_client.sync_lag_ms(block, A)
            backlog = await asyncio.to_thread(self.topology.replication_backlog, self.topic)
            at_ms = int(time.time() * 1000)
            if self.topology.has_gateways:
                lags.append((at_ms, lag))
            backlogs.append((at_ms, backlog))
            if last:
                return
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
        if not any(r.get("connected") for r in admin_client.replicators_of(stats, self.topic)):
            missing.append(f"connected replicator on {cluster}'s gateway")
        if isinstance(stats.get("subscriptionSync"), dict):
            entry = admin_client.sync_topic(stats, self.topic)
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
            mode, blocks[cluster] = admin_client.sync_of(stats, self.topic, self.subscription)
            if mode is None:
                self.facts.warnings.append(f"{cluster}'s gateway reports no subscriptionSync")
            elif mode != self.mode:
                self.facts.warnings.append(
                    f"{cluster}'s gateway syncs the topic in mode {mode!r}, not {self.mode!r}"
                )
            if cluster == A or self.facts.gateway_sync_mode is None:
                self.facts.gateway_sync_mode = mode
        self.facts.sync_stats = blocks or None
        self.facts.sync_lag_ms = admin_client.sync_lag_ms(blocks.get(B), A)
        try:
            self.facts.a_cursor = await self._read_quiet_cursor_on_a()
        except DrillError as error:
            self.facts.warnings.append(f"A's cursor at the failure unknown: {error}")
        if self.topology.has_gateways:
            await self._await_source_read()

    async def _read_quiet_cursor_on_a(self) -> dict[str, Any] | None:
        """A's cursor once two reads ``limits.drill_cursor_quiet_s`` apart agree: the
        consumers have stopped, but the client sends what it grouped of their last
        acknowledgements a little later, and a cursor read before those land would count
        them as never on A's cursor. Within ``limits.drill_cursor_quiet_wait_s_max``;
        past it, the last read and a warning."""
        admin_url = self.topology.urls[A].admin_url
        deadline = time.monotonic() + limits.drill_cursor_quiet_wait_s_max
        cursor = await asyncio.to_thread(
            admin_client.cursor_of, admin_url, self.topic, self.subscription
        )
        while True:
            await asyncio.sleep(limits.drill_cursor_quiet_s)
            again = await asyncio.to_thread(
                admin_client.cursor_of, admin_url, self.topic, self.subscription
            )
            if _acknowledged_state(again) == _acknowledged_state(cursor):
                return again
            cursor = again
            if time.monotonic() >= deadline:
                self.facts.warnings.append(
                    f"A's cursor still moved {limits.drill_cursor_quiet_wait_s_max:g} s after"
                    " the consumers stopped; read as it was then"
                )
                return cursor

    async def _await_source_read(self) -> None:
        """Until A's gateway has read the subscription's state since the broker last
        told it of a change (``statesReadAt`` >= ``toldAt``; one poll interval at most
        once the consumers stopped) and that state is A's cursor as the drill read it
        (beside real Pulsar a change is seen at the next read of Pulsar's metrics, so
        "told" may not have come yet), bounded by ``limits.drill_source_read_wait_s_max``:
        its exposure counts what it has read. Markers are still on their way to B."""
        deadline = time.monotonic() + limits.drill_source_read_wait_s_max
        while time.monotonic() < deadline:
            stats = await asyncio.to_thread(self.topology.gateway_stats, A, self.topic)
            entry = admin_client.sync_topic(stats or {}, self.topic) or {}
            told, read = entry.get("toldAt"), entry.get("statesReadAt")
            _, block = admin_client.sync_of(stats or {}, self.topic, self.subscription)
            if (
                isinstance(told, int | float)
                and isinstance(read, int | float)
                and read >= told
                and admin_client.source_is_cursor((block or {}).get("source"), self.facts.a_cursor)
            ):
                return
            await asyncio.sleep(0.02)
        self.facts.warnings.append(
            "A's gateway had not read the subscription's last state at the failure"
        )

    async def _read_exposure(self) -> None:
        """A's gateway's exposure towards B, at the failure (``Topology.fail``), once its
        replicators to B (the topic's, and beside Pulsar the side topic's) hold nothing
        B has not confirmed and the figure stopped moving: with ``kill`` A's cluster is
        dead by then, but what A's gateway already read it still sends, and what lands
        on B is not exposed. Within ``limits.drill_quiet_wait_s_max``."""
        if not self.topology.has_gateways:
            return
        namespace = self.topic.rpartition("/")[0] + "/"
        deadline = time.monotonic() + limits.drill_quiet_wait_s_max
        last: object = object()  # no read yet
        while True:
            stats = await asyncio.to_thread(self.topology.gateway_stats, A, namespace) or {}
            _, block = admin_client.sync_of(stats, self.topic, self.subscription)
            exposure = admin_client.exposure_of(block, B)
            messages = None if exposure is None else exposure["messages"]
            quiet = admin_client.in_flight_to(stats, B) == 0 and messages == last
            if quiet or time.monotonic() >= deadline:
                break
            last = messages
            await asyncio.sleep(limits.drill_poll_interval_s)
        if not quiet:
            self.facts.warnings.append(
                "A's gateway still had entries in flight to B when its exposure was read"
            )
        self.facts.exposure = exposure

    async def _await_caught_up_on_b(self) -> None:
        """Until B's gateway has applied every state B stores for the topic
        (``GET /sync/caught-up``), as a failover waits before its consumers move: what
        B stores unapplied would be delivered again. Within
        ``limits.drill_caught_up_wait_s_max``; past it a warning, and the consumers move."""
        url = self.topology.urls[B].gateway_url
        if not url:
            return
        self.progress.phase(f"{self.mode}: wait for B's gateway to apply what B stores")
        deadline = time.monotonic() + limits.drill_caught_up_wait_s_max
        said: object = None
        while time.monotonic() < deadline:
            try:
                said = await asyncio.to_thread(admin_client.caught_up, url, self.topic)
            except DrillError as error:
                said = str(error)
            else:
                if isinstance(said, dict) and said.get("caughtUp") is True:
                    self._lap("caught_up_on_B")
                    return
            await asyncio.sleep(limits.drill_poll_interval_s)
        self.facts.warnings.append(
            f"B's gateway had not applied all B stores after"
            f" {limits.drill_caught_up_wait_s_max:g} s: {json.dumps(said)[:300]}"
        )
        self._lap("caught_up_on_B")

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
            policies=self._policies_on_b(),
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
        await self._drain(group, counter, expected, "on B", "acked on A")
        self.facts.first_delivery_on_b_ms = counter.first_at_ms
        self._lap("drain_on_B")
        self.progress.close()
        return group, origins

    def _policies_on_b(self) -> list[AckPolicy]:
        """Every message acknowledged on receipt; before a failback about half of them
        (scenarios.PartialAcks), so that B's subscription has ranges to sync back."""
        count = self.scenario.consumers
        if not self.settings.failback:
            return [AckEach() for _ in range(count)]
        seed = self.settings.seed
        return [PartialAcks(random.Random(seed * 1_000 + 500 + n)) for n in range(count)]

    async def _restore_a(self, failback: FailbackFacts) -> None:
        self.progress.phase(f"{self.mode}: bring A back ({self.settings.fail})")
        await self.topology.restore(self.settings.fail, self.topic)
        failback.restored_at_ms = int(time.time() * 1000)
        self._lap("restore_A")

    async def _await_sync_back(self, failback: FailbackFacts) -> None:
        """Until B's state has reached A: B's replicator to A connected without backlog,
        A's gateway at B's last state (with gateways, ``full`` mode: the mode whose every
        acknowledgement B sends), and A's cursor still for ``drill_failback_quiet_s``."""
        quiet_s = limits.drill_failback_quiet_s
        wait_s = limits.drill_failback_sync_s_max
        self.progress.phase(f"{self.mode}: sync B's acknowledgements back to A", int(wait_s))
        started = time.monotonic()
        cursor: dict[str, Any] | None = None
        still_since = started
        waiting_for = ""
        while True:
            now = time.monotonic()
            unreadable = ""
            try:
                seen = await asyncio.to_thread(
                    admin_client.cursor_of,
                    self.topology.urls[A].admin_url,
                    self.topic,
                    self.subscription,
                )
            except DrillError as error:  # A still opening the topic: not settled
                seen, unreadable = None, f"A's cursor ({error})"
            if seen != cursor:
                cursor, still_since = seen, now
            waiting_for = unreadable or await self._sync_back_missing()
            if not waiting_for and now - still_since >= quiet_s:
                failback.settled = True
                break
            if now - started >= wait_s:
                self.facts.warnings.append(
                    f"sync back to A not settled after {wait_s:.0f} s (waiting for"
                    f" {waiting_for or _CURSOR_STILL}); moved home all the same"
                )
                break
            self.progress.update(int(now - started), waiting_for or _CURSOR_STILL)
            await asyncio.sleep(0.2)
        failback.settle_s = time.monotonic() - started
        failback.a_cursor = cursor
        if self.topology.has_gateways:
            stats = await asyncio.to_thread(self.topology.gateway_stats, A, self.topic)
            if stats is not None:
                _, failback.sync_stats = admin_client.sync_of(stats, self.topic, self.subscription)
        self._lap("sync_back")
        self.progress.close()

    async def _sync_back_missing(self) -> str:
        """What the sync back to A still waits for ("" when nothing)."""
        backlog = await asyncio.to_thread(self.topology.return_backlog, self.topic)
        if backlog is None:
            return "B's replicator to A"
        if backlog:
            return f"B's replication backlog to A ({backlog})"
        if not self.topology.has_gateways or self.mode != FULL:
            return ""
        stats_b = await asyncio.to_thread(self.topology.gateway_stats, B, self.topic)
        stats_a = await asyncio.to_thread(self.topology.gateway_stats, A, self.topic)
        if stats_a is None or stats_b is None:
            return "both gateways' stats"
        _, on_b = admin_client.sync_of(stats_b, self.topic, self.subscription)
        _, on_a = admin_client.sync_of(stats_a, self.topic, self.subscription)
        sent = ((on_b or {}).get("source") or {}).get("lastSequence")
        applied = ((on_a or {}).get("applied") or {}).get(B) or {}
        if sent is None:
            return "B's gateway's state of the subscription"
        if (applied.get("lastSequence") or -1) < sent:
            return "A's gateway applying B's state"
        return ""

    async def _drain_home(
        self, client_a: PulsarObject, produced: dict[str, Produced], failback: FailbackFacts
    ) -> ConsumerGroup:
        """The consumers back on A, acknowledging on receipt, until every message
        acknowledged nowhere came (and quiet), or quiet without them, or the timeout."""
        counter = DeliveryCounter()
        group = ConsumerGroup(
            client_a,
            cluster=A,
            phase=RETURN,
            mode=self.mode,
            scenario=self.scenario,
            topic=self.topic,
            subscription=self.subscription,
            policies=[AckEach() for _ in range(self.scenario.consumers)],
            log=self.log,
            counter=counter,
            receiver_queue_size=_RECEIVER_QUEUE_B,
        )
        self.progress.phase(f"{self.mode}: move consumers home to A")
        acked = {
            r.origin_position for r in self.log.records() if r.phase in (BEFORE, AFTER) and r.acked
        }
        wanted = frozenset(produced.keys() - acked)
        counter.want(wanted)
        await asyncio.to_thread(group.subscribe)
        group.start()
        await self._drain(group, counter, len(wanted), "home on A", "acked on A or B")
        failback.first_delivery_on_return_ms = counter.first_at_ms
        self._lap("drain_home_on_A")
        self.progress.close()
        return group

    async def _drain(
        self,
        group: ConsumerGroup,
        counter: DeliveryCounter,
        expected: int,
        where: str,
        acked_before: str,
    ) -> None:
        """Until ``expected`` wanted messages came and nothing for the quiet time, nothing
        for the incomplete quiet time, or the timeout (a warning for the last two); the
        consumers are stopped then. ``acked_before``: where the unwanted deliveries had
        been acknowledged, for the bar."""
        self.progress.phase(f"{self.mode}: drain {where}", expected)
        started = time.monotonic()
        while True:
            await asyncio.sleep(0.1)
            now = time.monotonic()
            self.progress.update(
                counter.wanted_delivered,
                f"{counter.deliveries} delivered, {counter.unwanted_delivered} {acked_before}"
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
                    f"drain {where} ended after {quiet_s:.0f} s without a message, having"
                    f" {counter.wanted_delivered} of the {expected} messages it should deliver"
                )
                break
            if now - started >= limits.drill_drain_timeout_s_max:
                self.facts.warnings.append(
                    f"drain {where} timed out after {limits.drill_drain_timeout_s_max:.0f} s"
                )
                break
        await asyncio.to_thread(group.stop)


def _acknowledged_state(cursor: Mapping[str, Any] | None) -> tuple[Any, Any]:
    """What a cursor in internal stats says was acknowledged (its read position and
    counters move while the stopped consumers' queues fill)."""
    if cursor is None:
        return None, None
    return cursor.get("markDeletePosition"), cursor.get("individuallyDeletedMessages")


def _close_quietly(client: PulsarObject, group: ConsumerGroup | None) -> None:
    try:
        if group is not None:
            group.stop()
            group.close()
        client.close()
    except Exception as error:  # a client of a cluster that is gone
        log.debug("closing a client: %s", error)
