"""The few REST calls the drill makes (blocking, urllib): a cluster's internal stats,
a gateway's stats (and what the drill reads there: sync lag, replication backlog, what
its replicators hold in flight), whether a gateway has applied all its cluster stores
(``/sync/caught-up``), and a gateway's topic replication policy (for ``cut-link`` on
running clusters).

Tokens, when the REST requires them, come from the environment, never from a flag: the
first of ``GEOREP_ADMIN_TOKENS`` for the clusters' admin REST, the first of
``GEOREP_GATEWAY_TOKENS`` for the gateways' (the variables every georep process reads:
``rest/tokens.py``).
"""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from typing import Any

from georep import limits
from georep.drill.errors import DrillError
from georep.pulsar_text.cursor import parse_cursor
from georep.rest.tokens import ADMIN_TOKENS_ENV, GATEWAY_TOKENS_ENV, TokenError, client_token

ADMIN_TOKEN_ENV = ADMIN_TOKENS_ENV
GATEWAY_TOKEN_ENV = GATEWAY_TOKENS_ENV


def client_token_of(variable: str) -> str | None:
    """The token to send, from ``variable``; DrillError if it holds no usable token."""
    try:
        return client_token(os.environ, variable)
    except TokenError as error:
        raise DrillError(f"{variable}: {error}") from None


def request_json(
    method: str,
    url: str,
    *,
    token_env: str,
    body: Any = None,
    timeout_s: float = limits.drill_rest_timeout_s,
) -> Any:
    """The JSON answer (None for an empty one); DrillError on any failure."""
    headers = {"Accept": "application/json"}
    data = None
    if body is not None:
        data = json.dumps(body).encode()
    if body is not None or method == "POST":  # a POST says JSON even bodiless (rest/access.py)
        headers["Content-Type"] = "application/json"
    token = client_token_of(token_env)
    if token:
        headers["Authorization"] = f"Bearer {token}"
    request = urllib.request.Request(url, data=data, headers=headers, method=method)
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as answer:
            text = answer.read()
    except urllib.error.HTTPError as error:
        detail = error.read()[:300].decode(errors="replace")
        raise DrillError(f"{method} {url}: HTTP {error.code} {detail}") from None
    except (urllib.error.URLError, OSError, TimeoutError) as error:
        reason = getattr(error, "reason", error)
        raise DrillError(f"{method} {url}: {reason}") from None
    if not text.strip():
        return None
    try:
        return json.loads(text)
    except ValueError:
        raise DrillError(f"{method} {url}: the answer is not JSON") from None


def topic_path(topic: str) -> str:
    """``persistent://t/ns/x`` -> ``persistent/t/ns/x`` (URL-quoted)."""
    scheme, _, rest = topic.partition("://")
    return f"{scheme}/" + "/".join(urllib.parse.quote(part, safe="") for part in rest.split("/"))


def cursor_of(admin_url: str, topic: str, subscription: str) -> dict[str, Any] | None:
    """The subscription's cursor in the topic's internal stats; None if it has none."""
    stats = request_json(
        "GET", f"{admin_url}/admin/v2/{topic_path(topic)}/internalStats", token_env=ADMIN_TOKEN_ENV
    )
    cursor = (stats or {}).get("cursors", {}).get(subscription)
    return cursor if isinstance(cursor, dict) else None


def source_is_cursor(source: Any, cursor: Mapping[str, Any] | None) -> bool:
    """Whether a subscription's ``source`` block in a gateway's stats (the state it read
    last) is ``cursor`` (internal stats): the same mark-delete position and as many
    ranges. True when the cursor is not known (nothing to compare)."""
    if cursor is None:
        return True
    if not isinstance(source, dict):
        return False
    try:
        mark_delete, ranges = parse_cursor(cursor)
    except (KeyError, TypeError, ValueError):
        return True
    return source.get("lastMarkDelete") == str(mark_delete) and source.get("ranges") == len(ranges)


def gateway_stats(gateway_url: str, topic: str | None = None) -> dict[str, Any]:
    """A gateway's stats (only ``topic``'s parts when given)."""
    query = f"?topic={urllib.parse.quote(topic, safe='')}" if topic else ""
    stats = request_json(
        "GET", f"{gateway_url}/admin/georep/v1/stats{query}", token_env=GATEWAY_TOKEN_ENV
    )
    return stats if isinstance(stats, dict) else {}


def caught_up(gateway_url: str, topic: str) -> dict[str, Any]:
    """A gateway's ``GET /sync/caught-up`` for the partitions of ``topic`` (a prefix):
    whether it has applied every state its cluster stores for them."""
    query = urllib.parse.quote(topic, safe="")
    answer = request_json(
        "GET",
        f"{gateway_url}/admin/georep/v1/sync/caught-up?topic={query}",
        token_env=GATEWAY_TOKEN_ENV,
    )
    return answer if isinstance(answer, dict) else {}


def in_flight_to(stats: dict[str, Any], remote: str) -> int:
    """Entries a gateway's replicators to ``remote`` (those its stats list) hold and
    ``remote`` has not confirmed: read but unsent, or sent and unanswered."""
    return sum(
        count_or_none(r.get("bufferedEntries")) or 0
        for r in stats.get("replicators") or []
        if isinstance(r, dict) and r.get("remoteCluster") == remote
    )


def _same_topic(name: Any, topic: str) -> bool:
    return isinstance(name, str) and (name == topic or name == topic.partition("://")[2])


def sync_topic(stats: dict[str, Any], topic: str) -> dict[str, Any] | None:
    """The topic's entry under ``subscriptionSync.topics`` of a gateway's stats."""
    sync = stats.get("subscriptionSync")
    if not isinstance(sync, dict):
        return None
    for entry in sync.get("topics") or []:
        if isinstance(entry, dict) and _same_topic(entry.get("topic"), topic):
            return entry
    return None


def sync_of(
    stats: dict[str, Any], topic: str, subscription: str
) -> tuple[str | None, dict[str, Any] | None]:
    """(the sync mode for the topic, the subscription's block) from a gateway's stats;
    None for what is absent."""
    sync = stats.get("subscriptionSync")
    if not isinstance(sync, dict):
        return None, None
    entry = sync_topic(stats, topic) or {}
    mode = entry.get("mode", sync.get("mode"))
    block = (entry.get("subscriptions") or {}).get(subscription)
    return (mode if isinstance(mode, str) else None), (block if isinstance(block, dict) else None)


def sync_lag_ms(block: dict[str, Any] | None, from_cluster: str) -> float | None:
    """``applied.<from_cluster>.syncLagMs`` of a subscription's sync block."""
    if not block:
        return None
    applied = (block.get("applied") or {}).get(from_cluster)
    if not isinstance(applied, dict):
        return None
    lag = applied.get("syncLagMs")
    return float(lag) if isinstance(lag, int | float) and not isinstance(lag, bool) else None


def exposure_of(block: dict[str, Any] | None, remote: str) -> dict[str, Any] | None:
    """``exposure.<remote>`` of a subscription's sync block on the source's gateway
    (``messages``, ``oldestAckAgeS``; docs/SUBSYNC.md, "Exposure"), None when absent."""
    figure = ((block or {}).get("exposure") or {}).get(remote)
    if not isinstance(figure, dict) or not isinstance(figure.get("messages"), int):
        return None
    return figure


def replicators_of(stats: dict[str, Any], topic: str) -> list[dict[str, Any]]:
    return [
        r
        for r in stats.get("replicators") or []
        if isinstance(r, dict) and _same_topic(r.get("topic"), topic)
    ]


def replication_backlog(stats: dict[str, Any] | None, topic: str, remote: str) -> int | None:
    """``replicationBacklog`` (entries) of a gateway's replicator of ``topic`` to ``remote``;
    None when the gateway lists no such replicator or has not sampled its backlog yet."""
    for replicator in replicators_of(stats or {}, topic):
        if replicator.get("remoteCluster") == remote:
            return count_or_none(replicator.get("replicationBacklog"))
    return None


def count_or_none(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def set_topic_policy(gateway_url: str, topic: str, clusters: list[str] | None) -> None:
    """Set a topic's replication clusters on a gateway; None removes the topic's policy."""
    url = f"{gateway_url}/admin/georep/v1/{topic_path(topic)}/replication"
    if clusters is None:
        request_json("DELETE", url, token_env=GATEWAY_TOKEN_ENV)
    else:
        request_json("PUT", url, token_env=GATEWAY_TOKEN_ENV, body={"clusters": clusters})
