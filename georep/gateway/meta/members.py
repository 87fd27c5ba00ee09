"""Gateway instances of a cluster in the gateway's metadata store: each renews its row
every heartbeat and reads the others' in the same transaction (``gateway/ownership.py``
decides from them who runs which topic partition)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from sqlalchemy import case, select
from sqlalchemy.engine import Connection

from georep.gateway.meta.models import GatewayMemberRow
from georep.storage.meta.checks import check_duration, check_name, check_names
from georep.storage.meta.engine import MetadataEngine, table_of

_members = table_of(GatewayMemberRow)

#: A row expired this long ago is deleted by the next heartbeat of any instance.
_dead_row_kept_s = 3600.0


@dataclass(frozen=True)
class GatewayMember:
    """A live instance: ``view`` is the set of instances whose shares it has stopped
    down to; it runs only the partitions that view assigns to it."""

    instance: str
    view: frozenset[str]
    joined_at: float
    expires_at: float


class GatewayMemberRepository:
    """Heartbeats and departures of the gateway instances of a cluster."""

    def __init__(self, engine: MetadataEngine) -> None:
        self._engine = engine

    async def member_heartbeat(
        self, cluster: str, instance: str, lease_s: float, view: Iterable[str]
    ) -> list[GatewayMember]:
        """Renew ``instance``'s lease until ``clock() + lease_s`` with its applied
        ``view`` (a new row when it has none or it expired), then read every live
        instance of ``cluster``, this one included, sorted by name."""
        check_name("cluster", cluster)
        check_name("instance", instance)
        viewed = sorted(check_names("instance", view))
        return await self._engine.call(
            self._member_heartbeat,
            cluster,
            instance,
            check_duration(lease_s),
            viewed,
            self._engine.clock(),
        )

    async def member_leave(self, cluster: str, instance: str) -> None:
        """Delete ``instance``'s row: the others take its partitions at their next
        heartbeat instead of after its lease."""
        check_name("cluster", cluster)
        check_name("instance", instance)
        await self._engine.call(
            self._engine.delete_where,
            _members,
            (_members.c.cluster == cluster) & (_members.c.instance == instance),
        )

    async def live_members(self, cluster: str) -> list[GatewayMember]:
        """The live instances of ``cluster``, sorted by name."""
        check_name("cluster", cluster)
        return await self._engine.call(self._live_members, cluster, self._engine.clock())

    # --- in a worker thread -------------------------------------------------------------
    def _member_heartbeat(
        self, cluster: str, instance: str, lease_s: float, view: list[str], now: float
    ) -> list[GatewayMember]:
        members = _members.c
        insert = self._engine.insert(_members).values(
            cluster=cluster,
            instance=instance,
            view=view,
            joined_at=now,
            expires_at=now + lease_s,
            version=1,
        )
        proposed = insert.excluded
        renewed = insert.on_conflict_do_update(
            index_elements=[members.cluster, members.instance],
            set_={
                "view": proposed.view,
                "expires_at": proposed.expires_at,
                # An expired row is a departed instance: coming back is joining again.
                "joined_at": case(
                    (members.expires_at <= now, proposed.joined_at), else_=members.joined_at
                ),
                "version": members.version + 1,
            },
        )
        with self._engine.writing() as connection:
            connection.execute(renewed)
            connection.execute(
                _members.delete().where(
                    members.cluster == cluster, members.expires_at < now - _dead_row_kept_s
                )
            )
            return _read_live(connection, cluster, now)

    def _live_members(self, cluster: str, now: float) -> list[GatewayMember]:
        with self._engine.reading() as connection:
            return _read_live(connection, cluster, now)


def _read_live(connection: Connection, cluster: str, now: float) -> list[GatewayMember]:
    query = (
        select(_members)
        .where(_members.c.cluster == cluster, _members.c.expires_at > now)
        .order_by(_members.c.instance)
    )
    return [
        GatewayMember(
            instance=row.instance,
            view=frozenset(row.view),
            joined_at=row.joined_at,
            expires_at=row.expires_at,
        )
        for row in connection.execute(query)
    ]
