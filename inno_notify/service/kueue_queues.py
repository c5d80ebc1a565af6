"""Keeps the store's copy of Kueue's queues: ClusterQueues (nominal GPU quotas) and LocalQueues.

A tap of the ingestor (like the workflow tracker): the cluster watcher watches ClusterQueues and
LocalQueues whenever it watches Kueue Workloads, and every event and relist reaches `on_event` /
`on_relist` here. Queues are few and change rarely, so each event is written at once (no batching);
a relist replaces the cluster's set, so a queue deleted while we were away goes too.

A queue a cluster user wrote badly (an unreadable quota, no name) is set aside like any other
object: counted in `inno_notify_rejected_objects_total{resource,reason}`, logged once and stored
in rejected_objects; the other queues are kept. A write that fails (the database away) is logged
and dropped: the next relist (after a reconnect, at most the watch's history later) restores the set.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any, TypeVar

from inno_notify.adapters.db import Store
from inno_notify.adapters.db.leases import LostLeadership
from inno_notify.domain.kueue_queues import (
    ClusterQueueQuota,
    LocalQueueRef,
    parse_cluster_queue,
    parse_local_queue,
)
from inno_notify.domain.model import RejectedObject
from inno_notify.domain.parsing import ParseError, identity
from inno_notify.telemetry import Telemetry

log = logging.getLogger(__name__)

CLUSTER_QUEUE, LOCAL_QUEUE = "ClusterQueue", "LocalQueue"
JsonObj = dict[str, Any]
Q = TypeVar("Q", ClusterQueueQuota, LocalQueueRef)


class QueueTracker:
    """Writes what the watch says about Kueue's queues into `store.queues` (see the module docstring)."""

    def __init__(
        self,
        store: Store,
        cluster: str,
        gpu_resources: Mapping[str, float],
        clock: Callable[[], datetime],
        *,
        namespaces: Sequence[str] = (),
        telemetry: Telemetry | None = None,
    ) -> None:
        self.store = store
        self.cluster = cluster
        self.gpu_resources = dict(gpu_resources)
        self.clock = clock
        self.namespaces = tuple(namespaces)
        self.telemetry = telemetry
        self.rejected = 0
        self._logged: set[tuple[str, str, str]] = set()
        self._listed: dict[str, dict[str, ClusterQueueQuota | LocalQueueRef]] = {
            CLUSTER_QUEUE: {},
            LOCAL_QUEUE: {},
        }

    async def on_event(self, kind: str, event_type: str, obj: JsonObj) -> None:
        if kind not in (CLUSTER_QUEUE, LOCAL_QUEUE):
            return
        try:
            if kind == CLUSTER_QUEUE:
                await self._cluster_queue(event_type, obj)
            else:
                await self._local_queue(event_type, obj)
        except LostLeadership:
            raise
        except ParseError as exc:
            await self._set_aside(kind, obj, exc)
        except Exception as exc:  # the store away: the next relist restores the set
            log.error("recording a %s failed: %r", kind, exc)

    async def on_relist(self, kind: str, uids: frozenset[str]) -> None:
        """A list ended: the queues it named are the set; any other stored queue is gone. The listed
        objects themselves came before as SYNC events (on_event), which remembered them by uid."""
        if kind not in (CLUSTER_QUEUE, LOCAL_QUEUE):
            return
        now = self.clock()
        listed = self._listed[kind]
        for uid in set(listed) - uids:
            del listed[uid]
        try:
            if kind == CLUSTER_QUEUE:
                cqs = [q for q in listed.values() if isinstance(q, ClusterQueueQuota)]
                await self.store.queues.replace_cluster_queues(self.cluster, cqs, now)
            else:
                lqs = [q for q in listed.values() if isinstance(q, LocalQueueRef)]
                await self.store.queues.replace_local_queues(self.cluster, lqs, now, self.namespaces)
        except LostLeadership:
            raise
        except Exception as exc:
            log.error("recording the %ss failed: %r", kind, exc)

    # --- one object ------------------------------------------------------------------------------

    def _parse_cq(self, obj: JsonObj) -> ClusterQueueQuota:
        return parse_cluster_queue(obj, self.gpu_resources)

    async def _cluster_queue(self, event_type: str, obj: JsonObj) -> None:
        queue = self._parse_cq(obj)
        self._remember(CLUSTER_QUEUE, event_type, obj, queue)
        if event_type == "DELETED":
            await self.store.queues.delete_cluster_queue(self.cluster, queue.name)
        else:
            await self.store.queues.save_cluster_queues(self.cluster, [queue], self.clock())

    async def _local_queue(self, event_type: str, obj: JsonObj) -> None:
        queue = parse_local_queue(obj)
        self._remember(LOCAL_QUEUE, event_type, obj, queue)
        if event_type == "DELETED":
            await self.store.queues.delete_local_queue(self.cluster, queue.namespace, queue.name)
        else:
            await self.store.queues.save_local_queues(self.cluster, [queue], self.clock())

    def _remember(
        self, kind: str, event_type: str, obj: JsonObj, queue: ClusterQueueQuota | LocalQueueRef
    ) -> None:
        """Queues are few (one per team or flavor): all of them are kept by uid for the next relist."""
        uid, _, _ = identity(obj)
        if uid is None:
            return
        if event_type == "DELETED":
            self._listed[kind].pop(uid, None)
        else:
            self._listed[kind][uid] = queue

    async def _set_aside(self, kind: str, obj: object, exc: ParseError) -> None:
        self.rejected += 1
        uid, namespace, name = identity(obj)
        if self.telemetry is not None:
            self.telemetry.rejected_objects.labels(kind, exc.reason).inc()
        key = (kind, uid or f"{namespace}/{name}", exc.reason)
        if key not in self._logged and len(self._logged) < 10_000:
            self._logged.add(key)
            log.warning("set aside %s %s/%s: %s (%s)", kind, namespace, name, exc.reason, str(exc)[:200])
        rejection = RejectedObject(self.cluster, kind, uid or "", exc.reason, namespace, name, str(exc)[:500])
        try:
            await self.store.jobs.record_rejected([rejection], self.clock())
        except Exception as error:  # bookkeeping must not stop tracking
            log.error("recording a set-aside %s failed: %r", kind, error)
