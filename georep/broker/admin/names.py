"""Names taken from admin paths and bodies, checked once here.

Every name follows ``georep/domain/names.py`` (the one place naming rules live); this module
only turns their failures into the admin's ``InvalidArgument`` (400), and adds one rule
of creation: a partitioned topic may not be *created* with ``-partition-`` in its name,
a suffix reserved for its partitions (``orders-partition-0`` names partition 0 of
``orders``).
"""

from __future__ import annotations

from georep.broker.admin.cluster_admin import InvalidArgument
from georep.domain import names as names_rules
from georep.domain.topic_name import (
    PARTITION_SUFFIX,
    InvalidTopicName,
    TopicName,
    check_namespace,
    check_tenant,
)


def tenant(name: str) -> str:
    try:
        return check_tenant(name)
    except InvalidTopicName as error:
        raise InvalidArgument(str(error)) from None


def namespace(tenant_name: str, name: str) -> str:
    """``tenant/name``."""
    try:
        return check_namespace(f"{tenant_name}/{name}")
    except InvalidTopicName as error:
        raise InvalidArgument(str(error)) from None


def topic(tenant_name: str, namespace_name: str, local_name: str) -> TopicName:
    try:
        return TopicName.of(namespace(tenant_name, namespace_name), local_name)
    except InvalidTopicName as error:
        raise InvalidArgument(str(error)) from None


def new_partitioned_topic(tenant_name: str, namespace_name: str, local_name: str) -> TopicName:
    """A name for a partitioned topic to create: ``-partition-`` is reserved."""
    name = topic(tenant_name, namespace_name, local_name)
    if PARTITION_SUFFIX in name.local_name:
        raise InvalidArgument(
            f"topic name {local_name!r} contains {PARTITION_SUFFIX!r}, which is reserved for"
            " the partitions of a partitioned topic"
        )
    return name


def subscription(name: str) -> str:
    return _checked("subscription", name)


def cluster(name: object) -> str:
    return _checked("cluster", name)


def role(name: object) -> str:
    return _checked("role", name)


def _checked(kind: str, name: object) -> str:
    try:
        return names_rules.check(kind, name)
    except names_rules.InvalidName as error:
        raise InvalidArgument(str(error)) from None
