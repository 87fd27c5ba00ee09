"""One watch per synced namespace: tells the partitions' syncs which subscriptions moved.

Asking every topic partition for its subscriptions' states at a fixed interval makes
the cost grow with the topic count whatever happens: at 1,000 idle topics the clusters
answered 650 requests a second, all saying nothing changed. Instead, per namespace, the
gateway follows the local cluster's changes through its
:class:`~georep.subsync.ports.SyncPort` (``changes``: a long poll of the broker's change
feed on georep's clusters, one Prometheus read per interval beside real Pulsar) and
tells only the :class:`~georep.subsync.topic_sync.TopicSync` of a topic that changed to
read its states (``state_changed``). The cost follows the acknowledgements.

When changes may have been missed (the first call, a reset of the feed, a failure to
ask) every sync of the namespace reads its states once. A failing watch retries with a
growing delay and says so at WARNING once per new error; ``failing`` tells ``/health``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Mapping
from typing import Any, Generic, Protocol

from georep.client.errors import LinkError
from georep.runtime.retry import Backoff, sync_policy
from georep.subsync.ports import Mark, SyncPort

log = logging.getLogger(__name__)


class Watched(Protocol):
    def state_changed(self) -> None: ...


class ChangeWatch(Generic[Mark]):
    def __init__(
        self,
        namespace: str,
        *,
        port: SyncPort[Mark],
        syncs: Callable[[], Mapping[str, Watched]],
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.namespace = namespace
        self._port = port
        #: The syncs of this namespace now (topic partition -> its sync).
        self._syncs = syncs
        self._clock = clock
        self._task: asyncio.Task[None] | None = None
        self.last_error: str | None = None
        #: The cause the log last named; cleared only when the cluster answers again.
        self._logged_error: str | None = None
        self.failing_since: float | None = None
        self.stats = {"answers": 0, "topicsTold": 0, "everything": 0, "failures": 0}

    def __repr__(self) -> str:
        return f"ChangeWatch({self.namespace})"

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name=repr(self))

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    @property
    def failing(self) -> bool:
        return self.failing_since is not None

    async def _run(self) -> None:
        mark: Mark | None = None
        backoff = Backoff(sync_policy())
        while True:
            asked_the_cluster = mark is not None
            try:
                changed = await self._port.changes(self.namespace, mark)
            except LinkError as error:
                self.stats["failures"] += 1
                if self.failing_since is None:
                    self.failing_since = self._clock()
                if str(error) != self._logged_error:
                    log.warning("%s: %s; retrying", self, error)
                self._logged_error = self.last_error = str(error)
                mark = None  # changes may have been missed: everything once, after
                await backoff.wait()
                continue
            backoff.reset()
            self.failing_since = None
            self.last_error = None
            if asked_the_cluster:
                # Without a mark the port answers "everything" without asking the cluster
                # (after a failure): only a real answer ends the cause the log named, or
                # a cluster that stays down is one WARNING a retry.
                self._logged_error = None
            self.stats["answers"] += 1
            mark = changed.mark
            syncs = self._syncs()
            if changed.topics is None:
                self.stats["everything"] += 1
                told = list(syncs.values())
            else:
                told = [syncs[topic] for topic in changed.topics if topic in syncs]
            for sync in told:
                sync.state_changed()
            self.stats["topicsTold"] += len(told)

    def to_json(self) -> dict[str, Any]:
        return {
            "namespace": self.namespace,
            "failing": self.failing,
            "lastError": self.last_error,
            **self.stats,
        }
