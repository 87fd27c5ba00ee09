"""Names taken from admin paths and bodies, checked once here.

Tenant, namespace and topic names follow the broker's rules in ``broker/topic_name.py``
(the one place those rules live); this module only turns their ``InvalidTopicName`` into the
admin's ``InvalidArgument`` (400) and adds the names only the admin sees:

- a partitioned topic may not be *created* with ``-partition-`` in its name: that suffix
  is reserved for its partitions (``orders-partition-0`` names partition 0 of ``orders``);
- subscription names: printable, no ``/``, at most ``limits.subscription_name_chars_max``;
- cluster names: ``[-=:.\\w]+`` like a tenant, at most ``limits.cluster_name_chars_max``;
- roles (a tenant's ``adminRoles``): printable, at most ``limits.role_name_chars_max``.
"""

from __future__ import annotations

from georep import limits
from georep.broker.admin.cluster_admin import InvalidArgument
from georep.broker.errors import InvalidTopicName
from georep.broker.topic_name import PARTITION_SUFFIX, TopicName, check_namespace, check_tenant


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
    _printable("subscription", name, limits.subscription_name_chars_max)
    if "/" in name:
        raise InvalidArgument(f"subscription name {name!r} may not contain '/'")
    return name


def cluster(name: object) -> str:
    if not isinstance(name, str):
        raise InvalidArgument(f"a cluster name must be a string, got {name!r}")
    try:
        check_tenant(name)  # the same character rule as a tenant's
    except InvalidTopicName:
        raise InvalidArgument(
            f"cluster name {name!r} must be 1..{limits.cluster_name_chars_max} letters,"
            " digits and -=:._"
        ) from None
    if len(name) > limits.cluster_name_chars_max:
        raise InvalidArgument(
            f"cluster name has {len(name)} characters; at most {limits.cluster_name_chars_max}"
        )
    return name


def role(name: object) -> str:
    return _printable("role", name, limits.role_name_chars_max)


def _printable(what: str, name: object, chars_max: int) -> str:
    if not isinstance(name, str):
        raise InvalidArgument(f"a {what} name must be a string, got {name!r}")
    if not name:
        raise InvalidArgument(f"{what} name is empty")
    if len(name) > chars_max:
        raise InvalidArgument(f"{what} name has {len(name)} characters; at most {chars_max}")
    if not name.isprintable():
        raise InvalidArgument(f"{what} name {name!r} has unprintable characters")
    return name
