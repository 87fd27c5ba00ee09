"""Two instances of A's gateway beside two real Pulsar standalones (replicate deployment):
they share A's partitions, and after kill -9 of the one running more, the other takes
its partitions over; every message Pulsar acknowledged on A is on B exactly once.
(The same on georep's own clusters, with a clean stop and a joining instance:
tests/integration/test_gateway_instances.py.)"""

from __future__ import annotations

import collections
import threading
import time

import pulsar
import pytest

from pulsar_tools.admin import PulsarAdmin
from tests.harness.gateway import GatewayProcess, ownership_agreed
from tests.harness.waiting import wait_for

pytestmark = [pytest.mark.timeout(600), pytest.mark.slow]

NAMESPACE = "georep/ginst"
TOPIC = f"persistent://{NAMESPACE}/orders"
PARTITIONS = [f"{TOPIC}-partition-{i}" for i in range(6)]


def quiet_client(url: str) -> pulsar.Client:
    return pulsar.Client(
        url,
        operation_timeout_seconds=30,
        logger=pulsar.FileLogger(pulsar.LoggerLevel.Error, "/dev/null"),
    )


def running(instance: GatewayProcess) -> set[str]:
    stats = instance.get("/admin/georep/v1/stats?limit=10000")
    return {r["topic"] for r in stats["replicators"] if r["connected"]} & set(PARTITIONS)


def settled(instances: list[GatewayProcess]) -> dict[str, set[str]] | None:
    alive = [i for i in instances if i.process is not None and i.process.poll() is None]
    shares: dict[str, set[str]] = {}
    for i in alive:
        assert i.instance is not None, "each gateway here is one named instance of several"
        shares[i.instance] = running(i)
    counted = collections.Counter(t for topics in shares.values() for t in topics)
    if sorted(counted) != sorted(PARTITIONS) or max(counted.values()) > 1:
        return None
    if not ownership_agreed(alive):
        return None
    return shares


def where_they_stand(instances: list[GatewayProcess]) -> str:
    """What each instance runs, the membership it sees, its discovery passes and the end
    of its log: what a red run needs to be read."""
    out = []
    for instance in instances:
        try:
            stats = instance.get("/admin/georep/v1/stats?limit=10000")
            members = instance.get("/admin/georep/v1/ownership")["members"]
            state = f"running {sorted(running(instance))}, members {members}, " + (
                f"discovery {stats['discovery']}"
            )
        except Exception as error:  # a dead or hung instance is news too
            state = f"unreadable: {error!r}"
        tail = instance.log_path.read_text(errors="replace").splitlines()[-15:]
        out.append(f"\n{instance.instance}: {state}\n  " + "\n  ".join(tail))
    return "".join(out)


def test_an_instance_killed_beside_pulsar_is_taken_over_without_loss_or_duplicates(
    pulsar_pair, tmp_path
) -> None:
    a, b = pulsar_pair["A"], pulsar_pair["B"]
    for cluster in (a, b):
        admin = PulsarAdmin(cluster.admin_url)
        admin.ensure_namespace(*NAMESPACE.split("/"))
        admin.request("POST", f"/admin/v2/namespaces/{NAMESPACE}/deduplication", True)
    PulsarAdmin(a.admin_url).request("PUT", f"/admin/v2/persistent/{TOPIC[13:]}/partitions", 6)
    instances = [
        GatewayProcess(
            tmp_path / name,
            local=a,
            remotes=[b],
            policies={NAMESPACE: [b.name]},
            kind="pulsar",
            metadata=tmp_path / "gateway-A-shared.db",
            instance=name,
        )
        for name in ("p1", "p2")
    ]
    acked: list[bytes] = []
    halt = threading.Event()

    def done(result, payload: bytes) -> None:
        if result == pulsar.Result.Ok:
            acked.append(payload)

    def produce() -> None:
        client = quiet_client(a.service_url)
        producer = client.create_producer(TOPIC, batching_enabled=False)
        sequence = 0
        while not halt.is_set():
            payload = f"m-{sequence:06d}".encode()
            producer.send_async(payload, lambda result, _id, p=payload: done(result, p))
            sequence += 1
            time.sleep(0.01)
        producer.flush()
        client.close()

    producer = threading.Thread(target=produce, daemon=True)
    try:
        for instance in instances:
            instance.start()
        producer.start()
        try:
            shares = wait_for(lambda: settled(instances), timeout_s=180)
        except TimeoutError:
            raise AssertionError(f"not settled: {where_they_stand(instances)}") from None
        assert all(shares.values()), f"an instance runs nothing: {shares}"
        wait_for(lambda: len(acked) >= 300, timeout_s=60)
        victim = max(instances, key=lambda i: len(shares[i.instance]))
        victim.kill()
        survivor = next(i for i in instances if i is not victim)
        wait_for(lambda: running(survivor) == set(PARTITIONS), timeout_s=120)
        wait_for(lambda: len(acked) >= 800, timeout_s=60)
        halt.set()
        producer.join(60)

        def caught_up() -> bool:
            stats = survivor.get("/admin/georep/v1/stats?limit=10000")
            return all(r["replicationBacklog"] == 0 for r in stats["replicators"])

        wait_for(caught_up, timeout_s=120)
        on_b: collections.Counter = collections.Counter()
        client = quiet_client(b.service_url)
        try:
            for partition in PARTITIONS:
                reader = client.create_reader(partition, pulsar.MessageId.earliest)
                while True:
                    try:
                        on_b[reader.read_next(3000).data()] += 1
                    except pulsar.Timeout:
                        break
        finally:
            client.close()
        assert {p: n for p, n in on_b.items() if n > 1} == {}, "stored twice on B"
        assert set(acked) <= set(on_b), f"{len(set(acked) - set(on_b))} lost"
    finally:
        halt.set()
        for instance in instances:
            instance.kill()
