"""Whether this cluster's syncs have applied every state it stores: the question to ask
before consumers move here in a failover.

The other cluster's gateway counts an acknowledgement as safe once its marker is stored
here (its exposure, exposure.py). Stored is not applied: this gateway reads the marker,
maps it to its copies and acknowledges them on the local cluster, which takes from
milliseconds to seconds under load. Consumers that attach in between receive what was
already acknowledged. So a failover waits, after the source fell and before the
consumers move, until every synced partition here is caught up
(``GET /admin/georep/v1/sync/caught-up``): its reader has read all the local cluster
stores of the partition (markers and copies), its side topic's reader has too (beside
real Pulsar), and no apply waits. Nothing arrives from the fallen cluster any more, so
this is reached in a sync lag.

One admin request per partition and per side topic asks how far the local cluster
stores it, at most ``limits.sync_caught_up_requests_concurrent`` at a time.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from georep import limits
from georep.client.admin import ClusterAdminClient
from georep.client.errors import LinkError
from georep.domain.position import Position
from georep.domain.topic_name import TopicName
from georep.subsync.topic_sync import TopicSync


class TooManyTopics(ValueError):
    """More synced partitions match than one request looks at."""


async def caught_up(
    syncs: Mapping[str, TopicSync], admin: ClusterAdminClient, prefix: str = ""
) -> dict[str, Any]:
    """Per synced partition whose name starts with ``prefix``, what it has not applied
    yet; ``caughtUp`` when none has anything and at least one matched."""
    chosen = sorted(topic for topic in syncs if topic.startswith(prefix))
    if len(chosen) > limits.sync_caught_up_topics_max:
        raise TooManyTopics(
            f"{len(chosen)} synced topic partitions start with {prefix!r}, at most"
            f" {limits.sync_caught_up_topics_max} per request: narrow ?topic="
        )
    requests = asyncio.Semaphore(limits.sync_caught_up_requests_concurrent)
    asked: dict[str, asyncio.Task[Position | None]] = {}

    async def ask(topic: str) -> Position | None:
        async with requests:
            return await admin.last_entry(TopicName.parse(topic))

    async def last_entry(topic: str) -> Position | None:
        # Every partition of a namespace asks about its one side topic: asked once.
        if topic not in asked:
            asked[topic] = asyncio.ensure_future(ask(topic))
        return await asyncio.shield(asked[topic])

    async def reasons(topic: str) -> list[str]:
        try:
            return await syncs[topic].behind(last_entry)
        except (LinkError, ValueError) as error:
            return [f"how far the local cluster stores it is unknown: {error}"]

    answers = await asyncio.gather(*(reasons(topic) for topic in chosen))
    behind = {topic: said for topic, said in zip(chosen, answers, strict=True) if said}
    return {
        "caughtUp": bool(chosen) and not behind,
        "topics": len(chosen),
        "behind": behind,
    }
