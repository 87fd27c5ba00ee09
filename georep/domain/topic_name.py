"""Topic names: ``persistent://tenant/namespace/topic`` and its ``-partition-N`` members.

Accepted spellings, as a Pulsar broker accepts them::

    persistent://public/default/orders            the full name
    public/default/orders                         domain defaults to persistent
    orders                                        also tenant ``public``, namespace ``default``
    persistent://public/default/orders-partition-3    partition 3 of ``orders``

A value type every layer shares (the broker, the client, replicators, subscription sync,
the gateway), so it lives below them all, beside ``georep/domain/position.py``, and imports
nothing of georep but the naming rules and the limits.

Rules (each failure is an :class:`InvalidTopicName`, a ``ValueError``, saying which rule):
the domain is ``persistent`` (``non-persistent`` topics are not served); tenant, namespace
and local name follow ``georep/domain/names.py``, the one place naming rules live. A local name
ending in ``-partition-N`` (N decimal, no sign, no leading zero) names partition N.

A topic's managed ledger is named ``tenant/namespace/persistent/local``, as in Pulsar;
the limits are chosen so that the name always fits the metadata store's 255 characters.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from georep import limits
from georep.domain import names

PERSISTENT = "persistent"
DEFAULT_TENANT = "public"
DEFAULT_NAMESPACE = "default"
PARTITION_SUFFIX = "-partition-"

_PARTITION_INDEX = re.compile(r"0|[1-9][0-9]*")


class InvalidTopicName(ValueError):
    """A topic, tenant or namespace name that breaks a rule (the message says which).

    The broker answers it as a Pulsar ``ServerError`` (``broker/errors.py``), both RESTs
    as 400."""


def check_tenant(tenant: str) -> str:
    _check_entity("tenant", tenant)
    return tenant


def check_namespace(namespace: str) -> str:
    """``namespace`` is ``tenant/name``."""
    tenant, slash, name = namespace.partition("/")
    if not slash:
        raise InvalidTopicName(f"namespace {namespace!r} is not of the form tenant/namespace")
    check_tenant(tenant)
    _check_entity("namespace", name)
    return namespace


def _check_entity(what: str, value: str) -> None:
    try:
        names.check(what, value)
    except names.InvalidName as error:
        raise InvalidTopicName(str(error)) from None


@dataclass(frozen=True, slots=True)
class TopicName:
    tenant: str
    namespace_local: str
    #: The name after ``tenant/namespace/``, with the partition suffix if any.
    local_name: str
    #: N for ``...-partition-N``, else -1.
    partition_index: int = -1

    @classmethod
    def parse(cls, text: str) -> TopicName:
        if not isinstance(text, str) or not text:
            raise InvalidTopicName("topic name is empty")
        rest = text
        if "://" in text:
            domain, _, rest = text.partition("://")
            if domain != PERSISTENT:
                raise InvalidTopicName(
                    f"topic {text!r}: domain {domain!r} is not served; use persistent://"
                )
        parts = rest.split("/")
        if len(parts) == 1 and "://" not in text:
            parts = [DEFAULT_TENANT, DEFAULT_NAMESPACE, parts[0]]
        if len(parts) != 3:
            raise InvalidTopicName(
                f"topic {text!r} is not of the form persistent://tenant/namespace/topic"
            )
        tenant, namespace, local = parts
        check_namespace(f"{tenant}/{namespace}")
        return cls(tenant, namespace, _check_local(text, local), _partition_index(local))

    @classmethod
    def of(cls, namespace: str, local_name: str) -> TopicName:
        return cls.parse(f"{PERSISTENT}://{namespace}/{local_name}")

    @property
    def namespace(self) -> str:
        return f"{self.tenant}/{self.namespace_local}"

    @property
    def is_partition(self) -> bool:
        return self.partition_index >= 0

    @property
    def base(self) -> TopicName:
        """The partitioned topic this partition belongs to (itself when not a partition)."""
        if not self.is_partition:
            return self
        local = self.local_name[: self.local_name.rindex(PARTITION_SUFFIX)]
        return TopicName(self.tenant, self.namespace_local, local)

    def partition(self, index: int) -> TopicName:
        if self.is_partition:
            raise InvalidTopicName(f"{self} is already a partition")
        return TopicName.of(self.namespace, f"{self.local_name}{PARTITION_SUFFIX}{index}")

    @property
    def managed_ledger_name(self) -> str:
        return f"{self.namespace}/{PERSISTENT}/{self.local_name}"

    @classmethod
    def from_managed_ledger_name(cls, name: str) -> TopicName | None:
        """The topic whose managed ledger is ``name``; None for a ledger that is not a
        topic (the broker's own, for instance)."""
        parts = name.split("/")
        if len(parts) != 4 or parts[2] != PERSISTENT:
            return None
        try:
            return cls.parse(f"{PERSISTENT}://{parts[0]}/{parts[1]}/{parts[3]}")
        except InvalidTopicName:
            return None

    def __str__(self) -> str:
        return f"{PERSISTENT}://{self.namespace}/{self.local_name}"


def _check_local(text: str, local: str) -> str:
    if not local:
        raise InvalidTopicName(f"topic {text!r} has an empty local name")
    _check_entity("topic", local)
    return local


def _partition_index(local: str) -> int:
    head, suffix, index = local.rpartition(PARTITION_SUFFIX)
    if not suffix or not head or not _PARTITION_INDEX.fullmatch(index):
        return -1
    value = int(index)
    return value if value < limits.partitions_count_max else -1
