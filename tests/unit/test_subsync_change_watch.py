"""A namespace's change watch (subsync/change_watch.py) when the cluster stays down: one
WARNING for the cause, however many retries, though each retry without a mark is
answered "everything" at once without asking the cluster."""

from __future__ import annotations

import asyncio
import logging
from typing import Any, cast

from georep import limits
from georep.client.errors import AdminRequestFailed
from georep.subsync.change_watch import ChangeWatch
from georep.subsync.ports import Changed, SyncPort


class DownCluster:
    """``changes``: with a mark, the cluster is asked (and is down); without one, the
    port answers "read everything" on its own, as PulsarPort does."""

    def __init__(self) -> None:
        self.asked = 0

    async def changes(self, namespace: str, mark: object | None) -> Changed:
        if mark is None:
            return Changed(mark=1, topics=None)
        self.asked += 1
        raise AdminRequestFailed("A: GET /metrics/: cannot connect: refused", unreachable=False)


async def test_a_cluster_that_stays_down_is_one_warning(monkeypatch, caplog) -> None:
    monkeypatch.setattr(limits, "sync_retry_s_initial", 0.001)
    monkeypatch.setattr(limits, "sync_retry_s_max", 0.001)
    port = DownCluster()
    watch = ChangeWatch("t/ns", port=cast(SyncPort, port), syncs=lambda: cast(Any, {}))
    with caplog.at_level(logging.WARNING, "georep.subsync.change_watch"):
        watch.start()
        try:
            for _ in range(200):
                await asyncio.sleep(0.01)
                if port.asked >= 5:
                    break
        finally:
            await watch.stop()
    assert port.asked >= 5
    lines = [r for r in caplog.records if r.name == "georep.subsync.change_watch"]
    assert len(lines) == 1, [r.getMessage() for r in lines]
    assert watch.stats["failures"] == port.asked


async def test_a_real_answer_ends_the_cause(monkeypatch, caplog) -> None:
    """After the cluster answers with a mark, the same failure is news again."""
    monkeypatch.setattr(limits, "sync_retry_s_initial", 0.001)
    monkeypatch.setattr(limits, "sync_retry_s_max", 0.001)
    answers = iter(["fail", "ok", "fail", "stop"])

    class Flaky:
        async def changes(self, namespace: str, mark: object | None) -> Changed:
            if mark is None:
                return Changed(mark=1, topics=None)
            step = next(answers, "stop")
            if step == "ok":
                return Changed(mark=2, topics=frozenset())
            if step == "stop":
                await asyncio.sleep(3600)
            raise AdminRequestFailed("A: refused")

    watch = ChangeWatch("t/ns", port=cast(SyncPort, Flaky()), syncs=lambda: cast(Any, {}))
    with caplog.at_level(logging.WARNING, "georep.subsync.change_watch"):
        watch.start()
        try:
            for _ in range(200):
                await asyncio.sleep(0.01)
                if watch.stats["failures"] >= 2:
                    break
        finally:
            await watch.stop()
    lines = [r for r in caplog.records if r.name == "georep.subsync.change_watch"]
    assert len(lines) == 2, [r.getMessage() for r in lines]
