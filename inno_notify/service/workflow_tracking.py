"""Workflows and served models: the recorder that stores them, the summarizer that sums workflows up.

The recorder is a part of the one ingestion pipeline (service.ingest): Argo Workflows, KServe
InferenceServices and the pods of workflow steps (Argo step pods, Airflow KubernetesPodOperator
pods) come through the same queue and batches as every other kind, and each segment of a batch
is handed to the recorder, which parses them (domain.parsing.argo, .airflow, .kserve) and writes
them in one transaction: the workflows, their pods, and each workflow's end, recorded once. An
Airflow run is rebuilt from all its pods each time one of them changes. An InferenceService that
became Ready with a new revision is announced there and then (service.serving).

The summarizer closes Airflow runs that went quiet (`workflows.airflow_quiet_seconds` without a
running pod), then claims the ended workflows whose summary is due (leased, like usage collection)
and waits for their GPU steps to be measured by the usage collector: once every GPU step pod is
summarized (a step is its workflow's: `parent_uid`, set by the recorder, keeps it from a summary
of its own), or `prometheus.give_up_after_seconds`
went by, the workflow's summary is routed and enqueued with its figures, in one transaction.

Every object is hostile until parsed: one that cannot be parsed or stored is set aside with the
pipeline's one `Rejections` (counted in `inno_notify_rejected_objects_total{resource,reason}`,
logged once, stored in rejected_objects), and the rest of its batch is written.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Collection, Coroutine, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from functools import partial
from typing import Any

from inno_notify.adapters.db import failures
from inno_notify.adapters.db.jobs import ClaimLost
from inno_notify.adapters.db.leases import LostLeadership
from inno_notify.adapters.db.repository import (
    Store,
    SummaryState,
    TerminalWorkflow,
    WorkflowState,
    WorkflowTransaction,
)
from inno_notify.domain import routing
from inno_notify.domain.messages import MESSAGE_KEY, encode_workflow
from inno_notify.domain.model import (
    DirectoryUser,
    JobRecord,
    JobStatus,
    Notification,
    NotificationKind,
)
from inno_notify.domain.parsing import ParseConfig, SetAside, identity
from inno_notify.domain.parsing.airflow import parse_airflow_pod
from inno_notify.domain.parsing.argo import creator_matches, parse_argo_pod, parse_off_loop, parse_workflow
from inno_notify.domain.parsing.fields import mapping, timestamp
from inno_notify.domain.parsing.kserve import parse_inference_service
from inno_notify.domain.routing import Audience, plan_message
from inno_notify.domain.serving import ServingRecord
from inno_notify.domain.workflows import (
    AIRFLOW_KPO_LABEL,
    ARGO_WORKFLOW_LABEL,
    WorkflowKind,
    WorkflowPod,
    WorkflowRecord,
    airflow_quiet_since,
    airflow_run,
    summarize_workflow,
)
from inno_notify.options import from_setting
from inno_notify.service.batches import (
    Clock,
    JsonObj,
    Piece,
    PieceWriter,
    PipelineStats,
    Rejections,
    Unit,
    refusal,
    summary_due,
    why_no_uid,
)
from inno_notify.service.ingest import Ingestor
from inno_notify.service.pausing import rounds
from inno_notify.service.planner import shown
from inno_notify.service.serving import ServingAnnouncer

log = logging.getLogger(__name__)
# The directory (users by lower-case e-mail, teams by name, who turned e-mail off), refreshed by its owner.
Directory = Callable[[], Awaitable[routing.Directory]]
PlanNotifications = Callable[[JobRecord, datetime], Awaitable[list[Notification]]]

WORKFLOW, SERVICE, POD = "Workflow", "InferenceService", "Pod"
# Job summary states in which a step pod's figures are final (measured, or given up on).
_SETTLED = frozenset({SummaryState.SUMMARIZED.value, SummaryState.REMEASURE.value, SummaryState.SILENT.value})


@dataclass(frozen=True, slots=True)
class WorkflowOptions:
    catch_up_seconds: float = from_setting("kubernetes.catch_up_seconds", 3600.0)
    metrics_delay_seconds: float = from_setting("prometheus.metrics_delay_seconds", 60.0)
    # The cluster whose workflows this service summarizes (None: every cluster in the database).
    cluster: str | None = from_setting("cluster", None)
    give_up_after_seconds: float = from_setting("prometheus.give_up_after_seconds", 1800.0)
    airflow_quiet_seconds: float = from_setting("workflows.airflow_quiet_seconds", 300.0)
    poll_seconds: float = 5.0
    # A workflow whose GPU steps are not measured yet is looked at again after this long.
    retry_seconds: float = 30.0
    # Workflows claimed (and quiet Airflow runs closed) per summarizer round.
    batch_max: int = 500
    steps_shown: int = 30


@dataclass(slots=True)
class RecorderStats:
    events: int = 0
    workflows_ended: int = 0
    rejected: int = 0
    # Workflows parsed in a thread (domain.parsing.argo.parse_off_loop), and updates that changed
    # nothing the record keeps (not written).
    parsed_off_loop: int = 0
    unchanged: int = 0
    by_kind: dict[str, int] = field(default_factory=dict)


def is_workflow_pod(obj: object) -> bool:
    """A pod of an Argo step or an Airflow KPO task, told by its labels without parsing it."""
    metadata = obj.get("metadata") if isinstance(obj, dict) else None
    labels = metadata.get("labels") if isinstance(metadata, dict) else None
    if not isinstance(labels, dict):
        return False
    return ARGO_WORKFLOW_LABEL in labels or labels.get(AIRFLOW_KPO_LABEL) == "True"


@dataclass(slots=True)
class _Parsed(Unit):
    workflow: WorkflowRecord | None = None
    pod: WorkflowPod | None = None
    service: ServingRecord | None = None


# A segment's objects, then the Workflow relists (the uids listed) reconciled after them.
_Piece = Piece[_Parsed, frozenset[str]]


class WorkflowRecorder:
    """Records Workflows, step pods and InferenceServices for the one ingestion pipeline.

    It has no queue, loop or set-aside bookkeeping of its own: service.ingest's Ingestor queues
    these kinds with every other, and hands each segment of a batch (the events between two
    relists) to `record`, with its own `Rejections`; this class only parses its kinds and merges
    them into the tables they live in (workflows, workflow_pods), written with the same
    `PieceWriter`.
    """

    kinds = frozenset({WORKFLOW, SERVICE, POD})
    relisted = frozenset({WORKFLOW})

    def __init__(
        self,
        store: Store,
        parse_config: Callable[[], ParseConfig],
        options: WorkflowOptions,
        started_at: datetime,
        announcer: ServingAnnouncer,
        rejections: Rejections,
        stats: PipelineStats,
    ) -> None:
        self.store = store
        # The pipeline's configuration as it stands: the watch updates it (the workload kinds
        # served, the namespaces' owners), and a Workflow is parsed with what a Job would be.
        self._parse_config = parse_config
        self.options = options
        self.started_at = started_at
        self.announcer = announcer
        self.stats = RecorderStats()
        self._writer: PieceWriter[_Parsed, frozenset[str]] = PieceWriter(self._refused, stats)
        self._rejections = rejections

    @property
    def cfg(self) -> ParseConfig:
        return self._parse_config()

    def wants(self, kind: str, obj: JsonObj) -> bool:
        """Whether an event of the watch is this recorder's (told without parsing the object)."""
        return kind in (WORKFLOW, SERVICE) or (kind == POD and is_workflow_pod(obj))

    # --- one segment ----------------------------------------------------------------------------------

    async def record(
        self, items: Sequence[tuple[str, str, JsonObj]], relists: Sequence[frozenset[str]], now: datetime
    ) -> None:
        """Writes a segment's objects of these kinds, then reconciles the Workflow relists closing it."""
        parsed: dict[tuple[str, str], _Parsed] = {}
        for kind, event_type, obj in items:
            self.stats.events += 1
            self.stats.by_kind[kind] = self.stats.by_kind.get(kind, 0) + 1
            if kind == WORKFLOW and parse_off_loop(obj):
                # A Workflow of thousands of nodes takes long to parse: not on the loop that also
                # answers the liveness probe (the pipeline waits for it; nothing else is lost).
                self.stats.parsed_off_loop += 1
                unit = await asyncio.to_thread(self._parse, kind, event_type, obj, now)
            else:
                unit = self._parse(kind, event_type, obj, now)
            if unit is not None:
                parsed[(kind, unit.uid)] = unit  # the last state of an object in the segment wins
        units = list(parsed.values())
        writable = [u for u in units if u.service is None]
        if writable or relists:
            await self._writer.write(
                Piece(writable, list(relists)), lambda piece: self._transaction(piece, now)
            )
        for unit in units:
            if unit.service is not None:
                await self._announce(unit, now)

    def _parse(self, kind: str, event_type: str, obj: JsonObj, now: datetime) -> _Parsed | None:
        uid, _, _ = identity(obj)
        if uid is None:
            self._reject(kind, obj, "", *why_no_uid(obj))
            return None
        parse = partial(self._parse_known, kind, uid, event_type, obj, now)
        return self._rejections.parse(kind, uid, obj, parse, self._refusal)

    def _parse_known(
        self, kind: str, uid: str, event_type: str, obj: JsonObj, now: datetime, notes: list[SetAside]
    ) -> _Parsed | None:
        unit = _Parsed(kind, uid, obj)
        if kind == WORKFLOW:
            workflow = parse_workflow(obj, self.cfg, notes)
            unit.workflow = self._deleted(workflow, obj, now) if event_type == "DELETED" else workflow
        elif kind == SERVICE:
            if event_type == "DELETED":
                return None
            unit.service = parse_inference_service(obj, self.cfg, notes)
        else:
            pod = parse_argo_pod(obj, self.cfg, notes) or parse_airflow_pod(obj, self.cfg, notes)
            if pod is None:
                return None
            if event_type == "DELETED" and pod.deleted_at is None:
                pod = replace(pod, deleted_at=now)
            unit.pod = pod
        return unit

    @staticmethod
    def _deleted(record: WorkflowRecord, obj: JsonObj, now: datetime) -> WorkflowRecord:
        """A workflow deleted before it ended ended then."""
        if record.status.is_terminal:
            return record
        deleted_at = timestamp(mapping(obj, "metadata"), "deletionTimestamp") or now
        return replace(record, status=JobStatus.DELETED, finished_at=deleted_at)

    def _refusal(self) -> None:
        self.stats.rejected += 1

    def _reject(self, kind: str, obj: object, uid: str, reason: str, detail: str) -> None:
        self._refusal()
        self._rejections.object(kind, obj, uid, reason, detail)

    def _refused(self, piece: _Piece, exc: Exception) -> None:
        """The database refused this one object (or our merge failed on it): set it aside."""
        reason, detail = refusal(exc)
        for unit in piece.units:
            self._reject(unit.kind, unit.obj, unit.uid, reason, detail)
        if piece.closing:
            log.error("reconciling the Workflow relist failed (%s); the next relist tries again", detail)

    async def _transaction(self, piece: _Piece, now: datetime) -> None:
        async with self.store.workflows.workflow_transaction() as tx:
            self.stats.workflows_ended += await self._merge_and_write(tx, piece.units, piece.closing, now)

    async def _merge_and_write(
        self, tx: WorkflowTransaction, units: list[_Parsed], relists: list[frozenset[str]], now: datetime
    ) -> int:
        cluster = self.cfg.cluster
        workflows = [u.workflow for u in units if u.workflow is not None]
        pods = [u.pod for u in units if u.pod is not None]
        runs = sorted({p.workflow_uid for p in pods if p.kind is WorkflowKind.AIRFLOW})
        stored = await tx.get_workflows(cluster, [w.uid for w in workflows] + runs)
        records: list[tuple[WorkflowRecord, datetime | None]] = []
        ends: list[TerminalWorkflow] = []
        for workflow in workflows:
            old = stored.get(workflow.uid)
            if old is not None and old.status.is_terminal:
                continue  # what ended stays as it ended (a late, older state changes nothing)
            if old is not None and replace(old, resource_version=workflow.resource_version) == workflow:
                self.stats.unchanged += 1
                continue  # a status update that changed nothing the record keeps: no rewrite
            records.append((workflow, None))
            if workflow.status.is_terminal:
                ends.append(self._end(workflow, now))
        if runs:
            stored_pods = await tx.pods_of_workflows(cluster, runs)
            for run in runs:
                old = stored.get(run)
                if old is not None and old.status.is_terminal:
                    continue  # closed already: a late pod is recorded, the summary is not redone
                members = {p.uid: p for p in stored_pods.get(run, [])}
                members.update({p.uid: p for p in pods if p.workflow_uid == run})
                records.append(
                    (
                        airflow_run(cluster, list(members.values()), finished=False),
                        airflow_quiet_since(members.values()),
                    )
                )
        for present in relists:
            ends.extend(await self._deleted_in_gap(tx, present, {w.uid for w in workflows}, records, now))
        written = await tx.write(records, pods, ends, cluster)
        await tx.adopt_steps(cluster, await self._steps(tx, records, pods, stored))
        return written

    async def _steps(
        self,
        tx: WorkflowTransaction,
        records: Sequence[tuple[WorkflowRecord, datetime | None]],
        pods: Sequence[WorkflowPod],
        stored: Mapping[str, WorkflowRecord],
    ) -> dict[str, tuple[str, str | None]]:
        """The workflow (and its owner) each step pod belongs to (pod uid → both): this segment's
        pods, and the pods stored before their workflow was. An Argo step's Workflow must be
        recorded (with Argo not watched, or the Workflow never seen, the step stays a run of its
        own, with its own summary); an Airflow run is made of its pods."""
        cluster = self.cfg.cluster
        # What the segment read and wrote, the written state winning; only the rest is asked for.
        known = {**stored, **{record.uid: record for record, _ in records}}
        asked = sorted({p.workflow_uid for p in pods if p.gpus > 0} - set(known))
        if asked:
            known.update(await tx.get_workflows(cluster, asked))
        # Only a step pod that holds GPUs is a run of its own (domain.parsing.pod_workload).
        steps = {
            p.uid: (p.workflow_uid, known[p.workflow_uid].owner)
            for p in pods
            if p.gpus > 0 and p.workflow_uid in known
        }
        new = [record.uid for record, _ in records if record.uid not in stored]
        if new:
            for uid, group in (await tx.pods_of_workflows(cluster, new)).items():
                steps.update({p.uid: (uid, known[uid].owner) for p in group if p.gpus > 0})
        return steps

    async def _deleted_in_gap(
        self,
        tx: WorkflowTransaction,
        present: frozenset[str],
        seen: set[str],
        records: list[tuple[WorkflowRecord, datetime | None]],
        now: datetime,
    ) -> list[TerminalWorkflow]:
        """Open Argo workflows missing from a relist (`present`: the uids it listed) were deleted
        while the watch was away."""
        ends = []
        for workflow in await tx.open_workflows(self.cfg.cluster, WorkflowKind.ARGO):
            if workflow.uid in present or workflow.uid in seen:
                continue
            closed = replace(workflow, status=JobStatus.DELETED, finished_at=workflow.finished_at or now)
            records.append((closed, None))
            ends.append(self._end(closed, now))
        return ends

    def _end(self, workflow: WorkflowRecord, now: datetime) -> TerminalWorkflow:
        return _terminal(workflow, now, self.started_at, self.options)

    async def _announce(self, unit: _Parsed, now: datetime) -> None:
        assert unit.service is not None
        try:
            await self.announcer.observe(unit.service, now)
        except Exception as exc:
            if failures.is_transient(exc):
                # The database is away: the next event or relist of the service brings it back.
                log.warning(
                    "recording InferenceService %s failed: %s", shown(unit.uid), failures.describe(exc)
                )
                return
            self._refused(Piece([unit]), exc)


def _terminal(
    workflow: WorkflowRecord, now: datetime, started_at: datetime, opts: WorkflowOptions
) -> TerminalWorkflow:
    """A workflow's end, recorded once: its summary due once its steps are measured, or silent if
    it ended before the catch-up horizon."""
    due = summary_due(workflow.finished_at, now, started_at, opts)
    if due is None:
        return TerminalWorkflow(workflow.uid, now, WorkflowState.SILENT, None)
    return TerminalWorkflow(workflow.uid, now, WorkflowState.AWAITING, due)


# --- the summarizer -------------------------------------------------------------------------------------


def resolve_owner(
    workflow: WorkflowRecord, users: Iterable[DirectoryUser], step_owners: Iterable[str | None]
) -> str | None:
    """Whose workflow it is: its own owner annotation; else the directory user who submitted it
    (Argo's creator labels, matched by Argo's own reduction, only when exactly one matches); else
    the owner written on its GPU steps' pods."""
    if workflow.owner is not None:
        return workflow.owner
    if workflow.creator is not None:
        matched = [u.email for u in users if creator_matches(workflow.creator, u.email)]
        if len(matched) == 1:
            return matched[0]
    return next((owner for owner in step_owners if owner), None)


class WorkflowSummarizer:
    """Closes quiet Airflow runs and enqueues the summaries of ended workflows, once each."""

    def __init__(
        self,
        store: Store,
        directory: Directory,
        enabled_channels: frozenset[str],
        options: WorkflowOptions,
        clock: Clock,
        started_at: datetime,
        *,
        allowed_email_domains: Collection[str] = (),
        lease_seconds: float = 300.0,
    ) -> None:
        self.store = store
        self.directory = directory
        self.enabled_channels = enabled_channels
        self.options = options
        self.clock = clock
        self.started_at = started_at
        self.allowed_email_domains = tuple(allowed_email_domains)
        self.lease_seconds = lease_seconds
        self.summarized = 0

    async def run(self, stop: asyncio.Event) -> None:
        """Rounds until `stop`: at once after one that closed or summarized workflows, else after
        `poll_seconds`."""
        await rounds(
            self._next_round, stop, log=log, what="workflow round", retry_seconds=self.options.poll_seconds
        )

    async def _next_round(self) -> float:
        """One round; the seconds until the next (none after one that did something)."""
        return 0.0 if await self.run_once(self.clock()) else self.options.poll_seconds

    async def run_once(self, now: datetime) -> int:
        """One round at `now`; returns how many workflows it closed or summarized."""
        closed = await self._close_quiet_runs(now)
        claim = await self.store.workflows.claim_workflows(
            now, self.options.batch_max, self.lease_seconds, cluster=self.options.cluster
        )
        summarized = 0
        for workflow in claim.workflows:
            try:
                summarized += await self._summarize(workflow, now, claim.token)
            except LostLeadership:
                raise  # the leader work ends with it (service.leadership)
            except ClaimLost:
                # A newer leader took this claim over (this one's term ended): it summarizes it.
                log.info("workflow %s: claim taken over", shown(f"{workflow.namespace}/{workflow.name}"))
            except Exception:
                # Left leased: it comes back after the lease, and one bad workflow stops no other.
                log.exception(
                    "summarizing workflow %s failed", shown(f"{workflow.namespace}/{workflow.name}")
                )
        return closed + summarized

    async def _close_quiet_runs(self, now: datetime) -> int:
        quiet_before = now - timedelta(seconds=self.options.airflow_quiet_seconds)
        closed = 0
        for record, pods in await self.store.workflows.quiet_airflow_runs(
            quiet_before, self.options.batch_max, cluster=self.options.cluster
        ):
            if not pods:
                continue
            finished = airflow_run(record.cluster, pods, finished=True)
            end = _terminal(finished, now, self.started_at, self.options)
            if end.due_at is not None:  # a run found quiet late is summed up now, not in the past
                end = replace(end, due_at=max(now, end.due_at))
            if await self.store.workflows.close_airflow_run(finished, end):
                closed += 1
                log.info(
                    "Airflow run %s %s ended (%s)",
                    shown(record.name),
                    shown(record.run_id),
                    finished.status.value,
                )
        return closed

    async def _summarize(self, workflow: WorkflowRecord, now: datetime, claim: str | None = None) -> int:
        cluster = workflow.cluster
        pods = await self.store.workflows.workflow_pods(cluster, workflow.uid)
        keys = {attempt.key for step in workflow.steps for attempt in step.attempts}
        by_step = workflow.kind is WorkflowKind.ARGO
        gpu_pods = [p for p in pods if p.gpus > 0 and (p.step_key if by_step else p.uid) in keys]
        figures, states = await self.store.workflows.step_figures(cluster, [p.uid for p in gpu_pods])
        waiting = [p.uid for p in gpu_pods if states.get(p.uid) not in _SETTLED]
        ended = workflow.finished_at or now
        give_up_at = ended + timedelta(
            seconds=self.options.metrics_delay_seconds + self.options.give_up_after_seconds
        )
        if waiting and now < give_up_at:
            later = min(give_up_at, now + timedelta(seconds=self.options.retry_seconds))
            await self.store.workflows.reschedule_workflow(cluster, workflow.uid, later, claim=claim)
            return 0
        summary = summarize_workflow(workflow, pods, figures, steps_shown=self.options.steps_shown)
        directory = await self.directory()
        owner = resolve_owner(
            workflow,
            directory.users.values(),
            (figures[p.uid][0].owner for p in gpu_pods if p.uid in figures),
        )
        plan = plan_message(
            Audience(
                namespace=workflow.namespace,
                owner=owner,
                team=workflow.team,
                notify=workflow.notify,
                channels=workflow.channels,
                failed=workflow.status is JobStatus.FAILED,
            ),
            NotificationKind.WORKFLOW_SUMMARY,
            f"{cluster}/{workflow.uid}",
            {MESSAGE_KEY: encode_workflow(summary)},
            directory,
            self.enabled_channels,
            now,
            cluster=cluster,
            allowed_email_domains=self.allowed_email_domains,
        )
        if plan.silent_reason:
            log.info(
                "workflow %s gets no summary: %s",
                shown(f"{workflow.namespace}/{workflow.name}"),
                plan.silent_reason,
            )
        await self.store.workflows.complete_workflow(cluster, workflow.uid, plan.notifications, claim=claim)
        self.summarized += 1
        return 1


# --- composition -----------------------------------------------------------------------------------------

Component = Callable[[asyncio.Event], Coroutine[Any, Any, None]]


@dataclass(slots=True)
class WorkflowParts:
    """What the runtime composes: the recorder (a part of the ingestion pipeline) and the summarizer."""

    recorder: WorkflowRecorder
    summarizer: WorkflowSummarizer
    announcer: ServingAnnouncer

    @property
    def components(self) -> list[tuple[str, Component]]:
        return [("workflow-summaries", self.summarizer.run)]


def join_recorder(
    ingestor: Ingestor, options: WorkflowOptions, announcer: ServingAnnouncer
) -> WorkflowRecorder:
    """A workflow recorder made a part of `ingestor`'s pipeline (its set-aside bookkeeping and
    write statistics the pipeline's)."""
    recorder = WorkflowRecorder(
        ingestor.store,
        lambda: ingestor.cfg,
        options,
        ingestor.started_at,
        announcer,
        ingestor.rejections,
        ingestor.stats,
    )
    ingestor.recorders.append(recorder)
    return recorder
