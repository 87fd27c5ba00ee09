"""The embedded cluster's admin REST (aiohttp), following Pulsar's admin v2.

Modules, one noun each: ``app`` (``create_app``, ``AdminServer``), ``routes`` (the route
table), ``tenants`` and ``topics`` (handlers), ``service`` (health, metrics, OpenAPI),
``cluster_admin`` (the ``ClusterAdmin`` protocol the broker implements, and the errors it
raises), ``settings`` (flags, environment, tokens), ``auth`` (roles), ``names`` and
``bodies`` (checks on the way in), ``shapes`` (checks on the way out), ``middleware``
(errors to JSON, metrics), ``openapi`` and ``schemas`` (the document), ``metrics``.
"""

from georep.broker.admin.app import AdminServer, create_app
from georep.broker.admin.cluster_admin import (
    AdminError,
    ClusterAdmin,
    Conflict,
    InvalidArgument,
    NotFound,
    Unavailable,
)
from georep.broker.admin.settings import AdminSettings, AdminSettingsError

__all__ = [
    "AdminError",
    "AdminServer",
    "AdminSettings",
    "AdminSettingsError",
    "ClusterAdmin",
    "Conflict",
    "InvalidArgument",
    "NotFound",
    "Unavailable",
    "create_app",
]
