"""Kueue queues as the watch saw them, and the GPU quotas they give teams: `Store.queues`.

The Kueue watch (service/kueue_queues.py) keeps one row per ClusterQueue (its nominal GPU quota)
and per LocalQueue (its ClusterQueue); a relist replaces a cluster's set, so a deleted queue goes.
A team reaches a quota by namespace: its namespaces' LocalQueues point at ClusterQueues, whose
nominal GPU quotas are summed (domain/trends.team_quota_gpus). Few rows: a cluster has tens of
queues, so the quota lookups read them whole.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from inno_notify.adapters.db.sql import upsert_rows
from inno_notify.adapters.db.tables import cluster_queues, local_queues, teams
from inno_notify.adapters.db.transactions import Repository, reads
from inno_notify.domain.kueue_queues import ClusterQueueQuota, LocalQueueRef
from inno_notify.domain.trends import QueueKey, team_quota_gpus


def queue_reach(*conditions: sa.ColumnElement[bool]) -> sa.Select[Any]:
    """(namespace, ClusterQueue's cluster, its name, its nominal GPUs) of each LocalQueue matching
    `conditions` (on local_queues): the statement `reach_of` folds, also a part of the digest's
    (digest_queries.py)."""
    lq, cq = local_queues.c, cluster_queues.c
    return (
        sa.select(lq.namespace, cq.cluster, cq.name, cq.nominal_gpus)
        .select_from(
            local_queues.join(cluster_queues, sa.and_(cq.cluster == lq.cluster, cq.name == lq.cluster_queue))
        )
        .where(*conditions)
    )


Reach = tuple[dict[str, list[QueueKey]], dict[QueueKey, float | None]]


def reach_of(rows: Iterable[tuple[str, str, str, float | None]]) -> Reach:
    """(namespace → its LocalQueues' ClusterQueues, ClusterQueue → nominal GPUs) from queue_reach's
    rows. ClusterQueues are keyed by (cluster, name): several clusters may share a database."""
    by_namespace: dict[str, list[QueueKey]] = {}
    nominal: dict[QueueKey, float | None] = {}
    for namespace, queue_cluster, name, gpus in rows:
        by_namespace.setdefault(namespace, []).append((queue_cluster, name))
        nominal[queue_cluster, name] = gpus
    return by_namespace, nominal


async def _namespace_queues(conn: AsyncConnection, cluster: str | None) -> Reach:
    conditions = [] if cluster is None else [local_queues.c.cluster == cluster]
    return reach_of(await conn.execute(queue_reach(*conditions)))


async def team_quotas(conn: AsyncConnection, cluster: str | None = None) -> dict[str, float]:
    """Every configured team's nominal GPU quota, reached through its namespaces; teams without
    one are left out."""
    by_namespace, nominal = await _namespace_queues(conn, cluster)
    if not any(gpus is not None for gpus in nominal.values()):
        return {}
    quotas: dict[str, float] = {}
    for name, namespaces in await conn.execute(sa.select(teams.c.name, teams.c.namespaces)):
        quota = team_quota_gpus(tuple(namespaces or ()), by_namespace, nominal)
        if quota is not None:
            quotas[name] = quota
    return quotas


async def team_quota(conn: AsyncConnection, team: str, cluster: str | None = None) -> float | None:
    """The nominal GPU quota of one team's ClusterQueues (None: none known)."""
    return (await team_quotas(conn, cluster)).get(team)


async def cluster_quotas(conn: AsyncConnection) -> dict[str, float]:
    """Per cluster, the nominal GPU quota of all its ClusterQueues (clusters without one left out)."""
    query = (
        sa.select(cluster_queues.c.cluster, sa.func.sum(cluster_queues.c.nominal_gpus))
        .where(cluster_queues.c.nominal_gpus.is_not(None))
        .group_by(cluster_queues.c.cluster)
    )
    return {cluster: float(total) for cluster, total in await conn.execute(query) if total is not None}


class QueueRepository(Repository):
    """The Kueue queues the watch saw (`Store.queues`): written by the leader's watch, read by
    digests and the API."""

    async def save_cluster_queues(
        self, cluster: str, queues: Sequence[ClusterQueueQuota], at: datetime
    ) -> None:
        rows = _cluster_queue_rows(cluster, queues, at)

        async with self._leader_write() as conn:
            await upsert_rows(conn, cluster_queues, ["cluster", "name"], rows)

    async def save_local_queues(self, cluster: str, queues: Sequence[LocalQueueRef], at: datetime) -> None:
        rows = _local_queue_rows(cluster, queues, at)

        async with self._leader_write() as conn:
            await upsert_rows(conn, local_queues, ["cluster", "namespace", "name"], rows)

    async def delete_cluster_queue(self, cluster: str, name: str) -> None:
        async with self._leader_write() as conn:
            await conn.execute(
                sa.delete(cluster_queues).where(
                    cluster_queues.c.cluster == cluster, cluster_queues.c.name == name
                )
            )

    async def delete_local_queue(self, cluster: str, namespace: str, name: str) -> None:
        async with self._leader_write() as conn:
            t = local_queues.c
            await conn.execute(
                sa.delete(local_queues).where(t.cluster == cluster, t.namespace == namespace, t.name == name)
            )

    async def replace_cluster_queues(
        self, cluster: str, queues: Sequence[ClusterQueueQuota], at: datetime
    ) -> None:
        """A relist: the cluster's ClusterQueues are exactly these (the others were deleted)."""
        rows = _cluster_queue_rows(cluster, queues, at)

        async with self._leader_write() as conn:
            await conn.execute(sa.delete(cluster_queues).where(cluster_queues.c.cluster == cluster))
            if rows:
                await conn.execute(sa.insert(cluster_queues), rows)

    async def replace_local_queues(
        self, cluster: str, queues: Sequence[LocalQueueRef], at: datetime, namespaces: Sequence[str] = ()
    ) -> None:
        """A relist: the cluster's LocalQueues (in `namespaces`, [] = all) are exactly these."""
        rows = _local_queue_rows(cluster, queues, at)

        async with self._leader_write() as conn:
            delete = sa.delete(local_queues).where(local_queues.c.cluster == cluster)
            if namespaces:
                delete = delete.where(local_queues.c.namespace.in_(list(namespaces)))
            await conn.execute(delete)
            if rows:
                await conn.execute(sa.insert(local_queues), rows)

    async def list_cluster_queues(self, cluster: str | None = None) -> list[ClusterQueueQuota]:
        query = sa.select(cluster_queues.c.name, cluster_queues.c.nominal_gpus).order_by(
            cluster_queues.c.name
        )
        if cluster is not None:
            query = query.where(cluster_queues.c.cluster == cluster)
        async with self.read() as conn:
            return [ClusterQueueQuota(name, gpus) for name, gpus in await conn.execute(query)]

    async def list_local_queues(self, cluster: str | None = None) -> list[LocalQueueRef]:
        t = local_queues.c
        query = sa.select(t.namespace, t.name, t.cluster_queue).order_by(t.namespace, t.name)
        if cluster is not None:
            query = query.where(t.cluster == cluster)
        async with self.read() as conn:
            return [LocalQueueRef(ns, name, cq) for ns, name, cq in await conn.execute(query)]

    # The nominal GPU quota of the team's ClusterQueues, reached by its namespaces.
    team_quota = reads(team_quota)


def _cluster_queue_rows(
    cluster: str, queues: Sequence[ClusterQueueQuota], at: datetime
) -> list[dict[str, object]]:
    return [
        {"cluster": cluster, "name": q.name, "nominal_gpus": q.nominal_gpus, "updated_at": at} for q in queues
    ]


def _local_queue_rows(cluster: str, queues: Sequence[LocalQueueRef], at: datetime) -> list[dict[str, object]]:
    return [
        {
            "cluster": cluster,
            "namespace": q.namespace,
            "name": q.name,
            "cluster_queue": q.cluster_queue,
            "updated_at": at,
        }
        for q in queues
    ]
