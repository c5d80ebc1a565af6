"""KServe: "your model is serving", once per new ready revision, to its owner and the team's channel.

The tracker hands every InferenceService it sees to `ServingAnnouncer.observe`, which reads what
was last recorded for it, decides (domain.serving.announce), and records the revision together with
the announcement's outbox rows in one transaction: a restart, a relist or a flapping Ready condition
finds the revision recorded and says nothing again (and the rows' keys hold the revision, so even a
lost record could not send twice). The message names the job or workflow that trained the model
when the service's `inno-notify/trained-by` annotation points at one we recorded.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Collection
from datetime import datetime, timedelta

from inno_notify.adapters.db.repository import Store
from inno_notify.domain import routing
from inno_notify.domain.messages import MESSAGE_KEY, encode_serving
from inno_notify.domain.model import Notification, NotificationKind
from inno_notify.domain.routing import Audience, plan_message
from inno_notify.domain.serving import ServingNotice, ServingRecord, TrainedBy, announce, trained_by_ref

log = logging.getLogger(__name__)

Directory = Callable[[], Awaitable[routing.Directory]]


class ServingAnnouncer:
    """Decides, plans and records "model is serving" messages (see the module docstring)."""

    def __init__(
        self,
        store: Store,
        directory: Directory,
        enabled_channels: frozenset[str],
        started_at: datetime,
        catch_up_seconds: float,
        *,
        allowed_email_domains: Collection[str] = (),
    ) -> None:
        self.store = store
        self.directory = directory
        self.enabled_channels = enabled_channels
        self.horizon = started_at - timedelta(seconds=catch_up_seconds)
        self.allowed_email_domains = tuple(allowed_email_domains)
        self.announced = 0

    async def observe(self, record: ServingRecord, now: datetime) -> bool:
        """Records what the service shows; True when it was announced."""
        async with self.store.workflows.workflow_transaction() as tx:
            known, recorded = await tx.served_model(record.cluster, record.uid)
        decision = announce(record, recorded, known, self.horizon)
        if decision is None:
            if not known:
                await self._record(record, None, False, now, [])
            return False
        rows = await self._plan(record, now) if decision else []
        added = await self._record(record, record.revision, decision, now, rows)
        if decision:
            self.announced += 1
            log.info(
                "InferenceService %s/%s is serving revision %s: %d message(s)",
                record.namespace,
                record.name,
                record.revision,
                added,
            )
        return decision

    async def _record(
        self,
        record: ServingRecord,
        revision: str | None,
        announced: bool,
        now: datetime,
        rows: list[Notification],
    ) -> int:
        async with self.store.workflows.workflow_transaction() as tx:
            return await tx.record_served_model(
                record.cluster, record.uid, record.namespace, record.name, revision, announced, now, rows
            )

    async def _trained_by(self, record: ServingRecord) -> tuple[TrainedBy | None, str | None]:
        """What trained the model, and that job's owner (the fallback when the service names none)."""
        ref = trained_by_ref(record.trained_by)
        if ref is None:
            return None, None
        kind, name = ref
        if kind in (None, "job"):
            job = await self.store.jobs.find_job(record.namespace, name, cluster=record.cluster)
            if job is not None:
                usage = await self.store.usage.get_usage(job.cluster, job.uid)
                held = usage.gpu_minutes if usage is not None else None
                found = TrainedBy("job", job.namespace, job.name, job.status.value, job.finished_at, held)
                return found, job.owner
        if kind in (None, "workflow"):
            workflow = await self.store.workflows.find_workflow(record.cluster, record.namespace, name)
            if workflow is not None:
                status = workflow.status.value
                found = TrainedBy("workflow", workflow.namespace, workflow.name, status, workflow.finished_at)
                return found, workflow.owner
        return None, None

    async def _plan(self, record: ServingRecord, now: datetime) -> list[Notification]:
        trained_by, trainer = await self._trained_by(record)
        notice = ServingNotice.of(record, trained_by)
        plan = plan_message(
            Audience(
                namespace=record.namespace,
                owner=record.owner or trainer,
                team=record.team,
                notify=record.notify,
                channels=record.channels,
                team_channel=True,
            ),
            NotificationKind.MODEL_SERVING,
            f"{record.cluster}/{record.uid}/{record.revision}",
            {MESSAGE_KEY: encode_serving(notice)},
            await self.directory(),
            self.enabled_channels,
            now,
            cluster=record.cluster,
            allowed_email_domains=self.allowed_email_domains,
        )
        if plan.silent_reason:
            log.info(
                "InferenceService %s/%s: no message (%s)", record.namespace, record.name, plan.silent_reason
            )
        return list(plan.notifications)
