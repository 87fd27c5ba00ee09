"""Namespace policies as they apply to a topic: retention and message TTL.

The admin REST keeps them in the metadata store's namespace rows
(``/admin/v2/namespaces/{tenant}/{namespace}/retention`` and ``.../messageTTL``); the
broker reads them when it loads a topic, and again for every loaded topic at each trim
pass (``trim_interval_s``) and each expiry pass (``message_expiry_interval_s``). A change
therefore takes effect on loaded topics within one such interval; nothing is pushed.

Retention, with Pulsar's meaning: ``retentionTimeInMinutes`` and ``retentionSizeInMB``,
-1 meaning unbounded and 0 nothing. Acknowledged ledgers (below every cursor's MDP; with
no subscription, all of them) are trimmed once either bound is exceeded, i.e. kept while
both hold, which is the managed ledger's ``retention_s``/``retention_bytes`` (see
``storage/managed_ledger/config.py``). A namespace without a retention policy keeps the
broker's default: the managed-ledger config the broker was started with.

Examples: (60, 1024) keeps acknowledged ledgers up to an hour after they closed and while
the newest sum to at most 1 GiB; (-1, 100) keeps the newest 100 MiB however old; (-1, -1)
keeps everything; (0, 0) trims acknowledged ledgers at the next pass.

Message TTL: seconds; None or 0 means messages never expire (``message_expiry.py``).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from georep.broker.meta.catalog import NamespaceRecord
from georep.storage.managed_ledger import ManagedLedgerConfig

_MIB = 1024 * 1024


@dataclass(frozen=True)
class TopicPolicies:
    #: (minutes, MB), -1 unbounded; None: the broker's default
    retention: tuple[int, int] | None = None
    #: seconds; None or 0: no expiry
    message_ttl_s: int | None = None

    @classmethod
    def of(cls, record: NamespaceRecord | None) -> TopicPolicies:
        """The policies of a namespace row; the defaults when there is no row."""
        if record is None:
            return cls()
        return cls(record.retention, record.message_ttl_s)

    @property
    def expires_messages(self) -> bool:
        return bool(self.message_ttl_s)

    def ledger_config(self, base: ManagedLedgerConfig) -> ManagedLedgerConfig:
        """``base`` with this retention (``base``'s own when there is none)."""
        if self.retention is None:
            return base
        minutes, size_mb = self.retention
        retention_s = math.inf if minutes < 0 else minutes * 60.0
        retention_bytes = math.inf if size_mb < 0 else size_mb * _MIB
        if (base.retention_s, base.retention_bytes) == (retention_s, retention_bytes):
            return base
        return dataclasses.replace(base, retention_s=retention_s, retention_bytes=retention_bytes)
