"""Handlers for topics and subscriptions: each checks its names and body, makes sure the
namespace exists (404 otherwise), then asks the ``ClusterAdmin``; documents it returns are
checked against their promised shapes (``shapes.py``) before they are sent."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from georep import limits
from georep.broker.admin import bodies, names, shapes
from georep.broker.admin.cluster_admin import (
    InvalidArgument,
    MessageIdDocument,
    NotFound,
    PersistentTopicInternalStats,
    SubscriptionSyncResult,
    SyncChanges,
    SyncState,
    TopicStats,
)
from georep.broker.admin.state import CATALOG, CLUSTER
from georep.broker.entry import GEOREP_NAME_PREFIX, is_georep_name
from georep.domain.decimal_text import parse_decimal
from georep.domain.topic_name import TopicName
from georep.rest.json_io import NO_BODY, json_response, no_content, read_json

#: Milliseconds since the epoch up to the year 9999.
_TIMESTAMP_MS_MAX = 253_402_300_799_999


# --- topics -----------------------------------------------------------------------------
async def list_topics(request: web.Request) -> web.Response:
    namespace = await _existing_namespace(request)
    topics = await request.app[CLUSTER].list_topics(namespace)
    shapes.check(list[str], topics, "list_topics")
    return json_response(topics)


async def create_partitioned_topic(request: web.Request) -> web.Response:
    info = request.match_info
    topic = names.new_partitioned_topic(info["tenant"], info["namespace"], info["topic"])
    partitions = bodies.partitions(await read_json(request, required=True))
    await _require_namespace(request, topic.tenant, topic.namespace_local)
    await request.app[CLUSTER].create_partitioned_topic(topic, partitions)
    return no_content()


async def partitioned_metadata(request: web.Request) -> web.Response:
    topic = await _topic(request)
    partitions = await request.app[CLUSTER].partitioned_metadata(topic)
    shapes.check(int, partitions, "partitioned_metadata")
    return json_response({"partitions": partitions})


async def delete_topic(request: web.Request) -> web.Response:
    await request.app[CLUSTER].delete_topic(await _topic(request))
    return no_content()


async def delete_partitioned_topic(request: web.Request) -> web.Response:
    """Pulsar's path for deleting a partitioned topic; the cluster's ``delete_topic``
    deletes either kind."""
    return await delete_topic(request)


async def topic_stats(request: web.Request) -> web.Response:
    stats = await request.app[CLUSTER].topic_stats(await _topic(request))
    return _checked(TopicStats, stats)


async def internal_stats(request: web.Request) -> web.Response:
    stats = await request.app[CLUSTER].internal_stats(await _topic(request))
    return _checked(PersistentTopicInternalStats, stats)


async def last_message_id(request: web.Request) -> web.Response:
    message_id = await request.app[CLUSTER].last_message_id(await _topic(request))
    return _checked(MessageIdDocument, message_id)


# --- subscriptions ----------------------------------------------------------------------
async def create_subscription(request: web.Request) -> web.Response:
    topic, subscription = await _subscription(request)
    document = await read_json(request, required=False)
    position = None if document is NO_BODY else bodies.message_position(document)
    await request.app[CLUSTER].create_subscription(topic, subscription, position)
    return no_content()


async def delete_subscription(request: web.Request) -> web.Response:
    topic, subscription = await _subscription(request)
    await request.app[CLUSTER].delete_subscription(topic, subscription)
    return no_content()


async def reset_cursor(request: web.Request) -> web.Response:
    topic, subscription = await _subscription(request)
    position = bodies.message_position(await read_json(request, required=True))
    await request.app[CLUSTER].reset_cursor(topic, subscription, position)
    return no_content()


async def reset_cursor_by_time(request: web.Request) -> web.Response:
    topic, subscription = await _subscription(request)
    timestamp_ms = bodies.path_integer(
        "timestamp (ms)", request.match_info["timestamp"], 0, _TIMESTAMP_MS_MAX
    )
    await request.app[CLUSTER].reset_cursor_by_time(topic, subscription, timestamp_ms)
    return no_content()


async def skip(request: web.Request) -> web.Response:
    topic, subscription = await _subscription(request)
    messages = bodies.path_integer(
        "numMessages", request.match_info["numMessages"], 1, limits.skip_messages_count_max
    )
    await request.app[CLUSTER].skip(topic, subscription, messages)
    return no_content()


async def acknowledge(request: web.Request) -> web.Response:
    topic, subscription = await _subscription(request)
    positions = bodies.acknowledged_positions(await read_json(request, required=True))
    await request.app[CLUSTER].acknowledge(topic, subscription, positions)
    return no_content()


# --- subscription sync (the gateway's) --------------------------------------------------
async def sync_state(request: web.Request) -> web.Response:
    state = await request.app[CLUSTER].sync_state(await _topic(request))
    return _checked(SyncState, state)


async def sync_changes(request: web.Request) -> web.Response:
    """``?epoch=E&after=N&waitMs=M``: a long poll of the namespace's change feed."""
    namespace = await _existing_namespace(request)
    query = request.query
    after = _query_count(query.get("after", "0"), "after", limits.change_feed_sequence_max)
    wait_ms = _query_count(query.get("waitMs", "0"), "waitMs", limits.change_feed_wait_ms_max)
    changes = await request.app[CLUSTER].sync_changes(
        namespace, epoch=query.get("epoch") or None, after=after, wait_s=wait_ms / 1000
    )
    return _checked(SyncChanges, changes)


def _query_count(text: str, what: str, count_max: int) -> int:
    """A query parameter that is a count (``domain/decimal_text.py``), at most ``count_max``."""
    value = parse_decimal(text)
    if value is None or value > count_max:
        raise InvalidArgument(f"{what} must be a whole number from 0 to {count_max}")
    return value


async def sync_subscription(request: web.Request) -> web.Response:
    topic, subscription = await _subscription(request)
    if is_georep_name(subscription):
        raise InvalidArgument(
            f"subscription {subscription!r} is the gateway's own ({GEOREP_NAME_PREFIX}*);"
            " it is not synced"
        )
    sync = bodies.subscription_sync(await read_json(request, required=True))
    result = await request.app[CLUSTER].sync_subscription(
        topic,
        subscription,
        mark_delete=sync.mark_delete,
        ranges=sync.ranges,
        batches=sync.batches,
        replicated=sync.replicated,
    )
    return _checked(SubscriptionSyncResult, result)


# --- plumbing ---------------------------------------------------------------------------
async def _existing_namespace(request: web.Request) -> str:
    tenant, namespace = request.match_info["tenant"], request.match_info["namespace"]
    full = names.namespace(tenant, namespace)
    await _require_namespace(request, tenant, namespace)
    return full


async def _require_namespace(request: web.Request, tenant: str, namespace: str) -> None:
    if await request.app[CATALOG].get_namespace(tenant, namespace) is None:
        raise NotFound(f"namespace {tenant}/{namespace} does not exist")


def _topic_name(request: web.Request) -> TopicName:
    info = request.match_info
    return names.topic(info["tenant"], info["namespace"], info["topic"])


async def _topic(request: web.Request) -> TopicName:
    topic = _topic_name(request)
    await _require_namespace(request, topic.tenant, topic.namespace_local)
    return topic


async def _subscription(request: web.Request) -> tuple[TopicName, str]:
    """Both names checked before the namespace is looked up: a bad name is 400 even in a
    namespace that does not exist."""
    topic = _topic_name(request)
    subscription = names.subscription(request.match_info["subscription"])
    await _require_namespace(request, topic.tenant, topic.namespace_local)
    return topic, subscription


def _checked(shape: Any, document: Any) -> web.Response:
    shapes.check(shape, document)
    return json_response(document)
