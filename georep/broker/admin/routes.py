"""Every route of the admin REST, in one table.

A ``Route`` (``rest/routes.py``) says what the app needs to serve it (method, path,
handler, the role it needs) and what the OpenAPI document says of it (summary, body and
answer schemas). ``create_app`` registers exactly these; ``openapi.py`` documents exactly
these; a test checks the two agree.

Paths follow Pulsar's admin v2 wherever Pulsar has the operation, so that ``pulsar-admin``
habits (and scripts using ``curl``) carry over. Acknowledging given positions and the
gateway's subscription sync (reading every subscription's acknowledgement state, setting
one's) have no Pulsar equivalent, so they live under georep's own prefix,
``/admin/georep/v1``.
"""

from __future__ import annotations

from georep.broker.admin import schema_admin, service, tenants, topics
from georep.rest.auth import Role
from georep.rest.routes import Handler, Route

V2 = "/admin/v2"
GEOREP_V1 = "/admin/georep/v1"
OPENAPI_PATH = f"{V2}/openapi.json"

_NAMESPACE = f"{V2}/namespaces/{{tenant}}/{{namespace}}"
_TOPICS = f"{V2}/persistent/{{tenant}}/{{namespace}}"
_TOPIC = f"{_TOPICS}/{{topic}}"
_SUBSCRIPTION = f"{_TOPIC}/subscription/{{subscription}}"
_SCHEMAS = f"{V2}/schemas/{{tenant}}/{{namespace}}/{{topic}}"
_GEOREP_TOPIC = f"{GEOREP_V1}/persistent/{{tenant}}/{{namespace}}/{{topic}}"


def _get(path: str, handler: Handler, summary: str, tag: str, response: str) -> Route:
    return Route("GET", path, handler, Role.READ, summary, tag, response=response)


def _change(
    method: str,
    path: str,
    handler: Handler,
    summary: str,
    tag: str,
    request: str | None = None,
    *,
    request_required: bool = True,
) -> Route:
    return Route(
        method,
        path,
        handler,
        Role.ADMIN,
        summary,
        tag,
        request=request,
        request_required=request_required,
    )


ROUTES: tuple[Route, ...] = (
    # --- service ------------------------------------------------------------------------
    Route(
        "GET", "/health", service.health, Role.PUBLIC, "Liveness and metadata store check",
        "service", response="Health",
    ),
    Route(
        "GET", "/metrics", service.metrics, Role.PUBLIC, "Prometheus metrics", "service",
        response="PrometheusText", response_media_type="text/plain",
    ),
    Route(
        "GET", OPENAPI_PATH, service.openapi, Role.PUBLIC, "This OpenAPI document", "service",
        response="OpenAPIDocument",
    ),
    # --- clusters and tenants -----------------------------------------------------------
    _get(f"{V2}/clusters", tenants.list_clusters, "List clusters (this one)", "clusters", "Names"),
    _get(f"{V2}/tenants", tenants.list_tenants, "List tenants", "tenants", "Names"),
    _get(f"{V2}/tenants/{{tenant}}", tenants.get_tenant, "Get a tenant's TenantInfo", "tenants",
         "TenantInfo"),
    _change("PUT", f"{V2}/tenants/{{tenant}}", tenants.create_tenant, "Create a tenant",
            "tenants", "TenantInfo"),
    _change("POST", f"{V2}/tenants/{{tenant}}", tenants.update_tenant,
            "Replace a tenant's TenantInfo", "tenants", "TenantInfo"),
    _change("DELETE", f"{V2}/tenants/{{tenant}}", tenants.delete_tenant,
            "Delete a tenant without namespaces", "tenants"),
    # --- namespaces ---------------------------------------------------------------------
    _get(f"{V2}/namespaces/{{tenant}}", tenants.list_namespaces, "List a tenant's namespaces",
         "namespaces", "Names"),
    _get(_NAMESPACE, tenants.get_policies, "Get a namespace's policies", "namespaces",
         "NamespacePolicies"),
    _change("PUT", _NAMESPACE, tenants.create_namespace, "Create a namespace", "namespaces",
            "Policies", request_required=False),
    _change("DELETE", _NAMESPACE, tenants.delete_namespace, "Delete a namespace without topics",
            "namespaces"),
    _get(f"{_NAMESPACE}/retention", tenants.get_retention, "Get retention", "namespaces",
         "RetentionPoliciesOrNull"),
    _change("POST", f"{_NAMESPACE}/retention", tenants.set_retention, "Set retention",
            "namespaces", "RetentionPolicies"),
    _change("DELETE", f"{_NAMESPACE}/retention", tenants.remove_retention, "Remove retention",
            "namespaces"),
    _get(f"{_NAMESPACE}/messageTTL", tenants.get_message_ttl, "Get the message TTL (seconds)",
         "namespaces", "MessageTTLOrNull"),
    _change("POST", f"{_NAMESPACE}/messageTTL", tenants.set_message_ttl,
            "Set the message TTL (seconds)", "namespaces", "MessageTTL"),
    _change("DELETE", f"{_NAMESPACE}/messageTTL", tenants.remove_message_ttl,
            "Remove the message TTL", "namespaces"),
    _get(f"{_NAMESPACE}/schemaCompatibilityStrategy", schema_admin.get_strategy,
         "Get the schema compatibility strategy", "schemas", "SchemaCompatibilityStrategy"),
    _change("PUT", f"{_NAMESPACE}/schemaCompatibilityStrategy", schema_admin.set_strategy,
            "Set the schema compatibility strategy", "schemas", "SchemaCompatibilityStrategy"),
    _change("POST", f"{_NAMESPACE}/schemaCompatibilityStrategy", schema_admin.post_strategy,
            "Set the schema compatibility strategy", "schemas", "SchemaCompatibilityStrategy"),
    # --- schemas ------------------------------------------------------------------------
    _get(f"{_SCHEMAS}/schema", schema_admin.get_schema, "Get a topic's latest schema",
         "schemas", "GetSchemaResponse"),
    _get(f"{_SCHEMAS}/schema/{{version}}", schema_admin.get_schema_version,
         "Get a version of a topic's schema", "schemas", "GetSchemaResponse"),
    _get(f"{_SCHEMAS}/schemas", schema_admin.get_all_schemas,
         "Get every version of a topic's schema", "schemas", "GetAllVersionsSchemaResponse"),
    Route("POST", f"{_SCHEMAS}/schema", schema_admin.post_schema, Role.ADMIN,
          "Register a schema (checked by the namespace's strategy)", "schemas",
          request="PostSchemaPayload", response="PostSchemaResponse"),
    Route("DELETE", f"{_SCHEMAS}/schema", schema_admin.delete_schema, Role.ADMIN,
          "Delete a topic's schema (a deletion is a version)", "schemas",
          response="DeleteSchemaResponse"),
    Route("POST", f"{_SCHEMAS}/compatibility", schema_admin.test_compatibility, Role.READ,
          "Test a schema against the topic's schemas", "schemas",
          request="PostSchemaPayload", response="IsCompatibilityResponse"),
    Route("POST", f"{_SCHEMAS}/version", schema_admin.get_version_by_schema, Role.READ,
          "The version of a schema in the topic's history", "schemas",
          request="PostSchemaPayload", response="LongSchemaVersion"),
    # --- topics -------------------------------------------------------------------------
    _get(_TOPICS, topics.list_topics, "List a namespace's topics (partitions included)",
         "topics", "Names"),
    _change("PUT", f"{_TOPIC}/partitions", topics.create_partitioned_topic,
            "Create a partitioned topic", "topics", "Partitions"),
    _get(f"{_TOPIC}/partitions", topics.partitioned_metadata,
         "Get a topic's partition count (0: not partitioned)", "topics",
         "PartitionedTopicMetadata"),
    _change("DELETE", f"{_TOPIC}/partitions", topics.delete_partitioned_topic,
            "Delete a partitioned topic", "topics"),
    _change("DELETE", _TOPIC, topics.delete_topic, "Delete a topic", "topics"),
    _get(f"{_TOPIC}/stats", topics.topic_stats, "Get a topic's stats", "topics", "TopicStats"),
    _get(f"{_TOPIC}/internalStats", topics.internal_stats,
         "Get a topic's managed ledger and cursors", "topics", "PersistentTopicInternalStats"),
    _get(f"{_TOPIC}/lastMessageId", topics.last_message_id, "Get the last message id",
         "topics", "MessageIdDocument"),
    # --- subscriptions ------------------------------------------------------------------
    _change("PUT", _SUBSCRIPTION, topics.create_subscription,
            "Create a subscription at a position (none: latest)", "subscriptions",
            "ResetCursorData", request_required=False),
    _change("DELETE", _SUBSCRIPTION, topics.delete_subscription, "Delete a subscription",
            "subscriptions"),
    _change("POST", f"{_SUBSCRIPTION}/resetcursor", topics.reset_cursor,
            "Reset the cursor to a message id", "subscriptions", "ResetCursorData"),
    _change("POST", f"{_SUBSCRIPTION}/resetcursor/{{timestamp}}", topics.reset_cursor_by_time,
            "Reset the cursor to a publish time (ms)", "subscriptions"),
    _change("POST", f"{_SUBSCRIPTION}/skip/{{numMessages}}", topics.skip,
            "Skip messages", "subscriptions"),
    _change("POST",
            f"{GEOREP_V1}/persistent/{{tenant}}/{{namespace}}/{{topic}}/subscription"
            "/{subscription}/acknowledge",
            topics.acknowledge, "Acknowledge positions individually (georep only)",
            "subscriptions", "AcknowledgeRequest"),
    _get(f"{GEOREP_V1}/namespaces/{{tenant}}/{{namespace}}/sync-changes", topics.sync_changes,
         "Topics whose subscriptions changed: a long poll (georep only)", "subscriptions",
         "SyncChanges"),
    _get(f"{_GEOREP_TOPIC}/sync-state", topics.sync_state,
         "Every subscription's acknowledgement state, for subscription sync (georep only)",
         "subscriptions", "SyncState"),
    Route("POST", f"{_GEOREP_TOPIC}/subscription/{{subscription}}/sync",
          topics.sync_subscription, Role.ADMIN,
          "Create or move a subscription to a synced state (georep only)", "subscriptions",
          request="SubscriptionSyncRequest", response="SubscriptionSyncResult"),
)  # fmt: skip
