"""The workflow recorder (in the one ingestion pipeline) and the summarizer on both databases, fed
events directly: hostile objects are set
aside without stopping anyone else's workflow, a workflow deleted while the watch was away is closed
at the relist, a summary waits for its GPU steps' figures but not forever, an Argo step whose
Workflow is not tracked keeps its own summary, and an unowned GPU pod reaches the team's leads only
where the team asks for it."""

from __future__ import annotations

import asyncio
import copy
import itertools
from dataclasses import replace
from datetime import timedelta
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry

from inno_notify.adapters.db import Store
from inno_notify.adapters.db.repository import SummaryState, WorkflowState
from inno_notify.adapters.db.workflow_rows import record_to_json
from inno_notify.domain.messages import decode_workflow
from inno_notify.domain.model import JobStatus, NotificationKind, Team
from inno_notify.domain.parsing import ParseConfig
from inno_notify.domain.parsing.argo import parse_workflow
from inno_notify.domain.routing import Directory
from inno_notify.domain.workflows import ATTEMPTS_KEPT_EACH_END
from inno_notify.runtime import Pipeline, build_pipeline
from inno_notify.runtime.configuration import seed_directory
from inno_notify.service import workflow_tracking as workflows_service
from inno_notify.service.ingest import IngestOptions, Ingestor
from inno_notify.service.serving import ServingAnnouncer
from inno_notify.service.workflow_tracking import WorkflowOptions, WorkflowRecorder, join_recorder
from inno_notify.sim.kube_store import ARGO_WORKFLOWS, PODS
from inno_notify.sim.objects import JobSpec, job_object, pod_object, pod_running, pod_terminated
from inno_notify.sim.pipelines import (
    Change,
    SimArgoWorkflow,
    SimAttempt,
    SimStep,
    argo_changes,
    retry_storm_workflow,
)
from inno_notify.telemetry import Telemetry
from tests import stored
from tests.domain.parsing.hostile import KIND_OF, hostile_object

from .workflow_support import T0, Clock, RecordingSender, StepMeter
from .workflow_support import settings as make_settings

_serial = itertools.count()


def attempt(start: float, minutes: float, exit_code: int = 0) -> SimAttempt:
    return SimAttempt(T0 + timedelta(minutes=start), minutes * 60, exit_code)


def simple_workflow(gpus: int = 1, name: str | None = None) -> SimArgoWorkflow:
    return SimArgoWorkflow(
        name=name or f"wf-{next(_serial)}",
        namespace="face-research",
        created=T0,
        owner="alice@example.com",
        steps=(SimStep("prepare", (attempt(1, 5),)), SimStep("train", (attempt(7, 30),), gpus=gpus)),
    )


def events(changes: list[Change]) -> list[tuple[str, str, dict[str, Any]]]:
    kinds = {ARGO_WORKFLOWS: "Workflow", PODS: "Pod"}
    out = []
    for change in sorted(changes, key=lambda c: c.at):
        kind = kinds[change.rt]
        op = {"create": "ADDED", "update": "MODIFIED", "delete": "DELETED"}[change.op]
        out.append((kind, op, change.obj))
    return out


async def pipeline_on(
    store: Store,
    database_url: str,
    meter: StepMeter | None = None,
    telemetry: Telemetry | None = None,
    **teams: Any,
) -> tuple[Pipeline, Clock, RecordingSender]:
    config = make_settings(database_url)
    await seed_directory(store, config)
    if teams:
        await store.directory.replace_teams([Team(name, **spec) for name, spec in teams.items()])
    clock = Clock(T0)
    sender = RecordingSender()
    pipeline = build_pipeline(
        config, store, meter or StepMeter({}), {"email": sender}, clock, started_at=T0, telemetry=telemetry
    )
    return pipeline, clock, sender


async def feed(pipeline: Pipeline, items: list[tuple[str, str, dict[str, Any]]]) -> None:
    """What the watch would hand over, as one batch of the one pipeline."""
    await pipeline.ingestor.apply(items)


async def rounds(pipeline: Pipeline, clock: Clock, minutes: float) -> None:
    clock.now = T0 + timedelta(minutes=minutes)
    assert pipeline.workflows is not None
    await pipeline.collector.run_once(clock.now)
    await pipeline.workflows.summarizer.run_once(clock.now)
    await pipeline.dispatcher.run_once(clock.now)


hostile_items = st.lists(
    st.sampled_from(["Workflow", "InferenceService", "ArgoPod", "AirflowPod"]).flatmap(
        lambda template: st.tuples(
            st.just(KIND_OF[template]),
            st.sampled_from(["ADDED", "MODIFIED", "DELETED"]),
            hostile_object(template),
        )
    ),
    min_size=1,
    max_size=4,
)


@settings(
    max_examples=20,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(hostile=hostile_items, position=st.integers(0, 4))
async def test_hostile_objects_never_stop_anyone_elses_workflow(
    store: Store, database_url: str, hostile: list[tuple[str, str, Any]], position: int
) -> None:
    registry = CollectorRegistry()
    ingestor, recorder = bare_pipeline(store, Telemetry.create(registry))
    normal = simple_workflow()
    items = events(argo_changes(normal))
    await ingestor.apply([*items[:position], *hostile, *items[position:]])
    assert ingestor.stats.dropped_batches == 0
    record = await stored.get_workflow(store, "test", normal.uid)
    assert record is not None and record.status is JobStatus.SUCCEEDED
    rejected = await stored.rejected_objects(store, "test")
    counted = sum(
        value
        for metric in registry.collect()
        if metric.name == "inno_notify_rejected_objects"
        for sample in metric.samples
        if sample.name.endswith("_total")
        for value in [sample.value]
    )
    # One count per refusal: a hostile step pod is a pod to the job side and a step to the recorder.
    assert counted == ingestor.stats.rejected + recorder.stats.rejected
    assert bool(rejected) or not counted


async def no_directory() -> Directory:
    return Directory({}, {})


def bare_pipeline(
    store: Store, telemetry: Telemetry, started_at: Any = T0
) -> tuple[Ingestor, WorkflowRecorder]:
    """The pipeline with its workflow recorder (no directory, no channels): what parsing and writing
    do with any object."""
    cfg = ParseConfig(cluster="test")
    ingestor = Ingestor(store, cfg, IngestOptions(), Clock(T0), started_at, telemetry)
    announcer = ServingAnnouncer(store, no_directory, frozenset(), started_at, 3600)
    return ingestor, join_recorder(ingestor, WorkflowOptions(), announcer)


async def test_a_workflow_deleted_while_the_watch_was_away_is_closed_at_the_relist(
    store: Store, database_url: str
) -> None:
    pipeline, clock, _ = await pipeline_on(store, database_url)
    assert pipeline.workflows is not None
    wf = simple_workflow(gpus=0)
    running = [e for e in events(argo_changes(wf)) if e[0] == "Workflow"][:3]
    await feed(pipeline, running)
    assert await store.workflows.workflow_state("test", wf.uid) is WorkflowState.OPEN
    clock.now = T0 + timedelta(minutes=20)
    await pipeline.ingestor.apply([("relist", "Workflow", frozenset())])
    record = await stored.get_workflow(store, "test", wf.uid)
    assert record is not None and (record.status, record.finished_at) == (JobStatus.DELETED, clock.now)
    await rounds(pipeline, clock, 22)
    [row] = (await store.outbox.list_notifications())[0]
    assert (
        row.kind is NotificationKind.WORKFLOW_SUMMARY
        and decode_workflow(row.payload).status is JobStatus.DELETED
    )


async def test_a_summary_waits_for_its_gpu_steps_figures_then_gives_up(
    store: Store, database_url: str
) -> None:
    pipeline, clock, _ = await pipeline_on(store, database_url)
    assert pipeline.workflows is not None
    wf = simple_workflow(gpus=1)
    await feed(pipeline, events(argo_changes(wf)))
    end_minutes = (wf.end - T0).total_seconds() / 60
    # No usage round ran: the GPU step is not measured, so the summary waits ...
    clock.now = wf.end + timedelta(minutes=5)
    await pipeline.workflows.summarizer.run_once(clock.now)
    assert await store.workflows.workflow_state("test", wf.uid) is WorkflowState.AWAITING
    assert (await store.outbox.list_notifications())[0] == []
    # ... until prometheus.give_up_after_seconds after it was due, then goes out saying so.
    clock.now = wf.end + timedelta(seconds=60 + 1800 + 1)
    await pipeline.workflows.summarizer.run_once(clock.now)
    [row] = (await store.outbox.list_notifications())[0]
    train = decode_workflow(row.payload).steps[1]
    assert (train.name, train.gpus, train.gpu_minutes, train.missing) == ("train", 1.0, None, "not measured")
    assert end_minutes > 30


async def test_an_argo_step_whose_workflow_is_not_tracked_keeps_its_own_summary(
    store: Store, database_url: str
) -> None:
    pipeline, clock, _ = await pipeline_on(store, database_url)
    wf = simple_workflow(gpus=1)
    pods = [e for e in events(argo_changes(wf)) if e[0] == "Pod"]
    for _, _, pod in pods:
        pod["metadata"]["annotations"]["inno-notify/owner"] = "alice@example.com"
    await pipeline.ingestor.apply(pods)  # no Workflow seen: Argo is not watched here
    await rounds(pipeline, clock, (wf.end - T0).total_seconds() / 60 + 2)
    rows = (await store.outbox.list_notifications())[0]
    assert [(r.kind, r.recipient) for r in rows] == [(NotificationKind.JOB_SUMMARY, "alice@example.com")]


def bare_gpu_pod(namespace: str) -> list[tuple[str, str, dict[str, Any]]]:
    job = job_object(JobSpec(name="notebook-gpu", namespace=namespace, gpus=1), T0)
    pod = pod_object(job, "q7x2p", T0)
    pod["metadata"]["ownerReferences"] = []
    pod["metadata"]["labels"] = {"app": "scratch"}
    running = pod_running(pod, "gpu-node-3", T0 + timedelta(seconds=2), T0 + timedelta(seconds=5))
    done = pod_terminated(running, T0 + timedelta(minutes=30), 0)
    return [("Pod", "ADDED", pod), ("Pod", "MODIFIED", running), ("Pod", "MODIFIED", done)]


async def test_an_unowned_gpu_pod_is_recorded_and_reaches_the_leads_only_if_asked(
    store: Store, database_url: str
) -> None:
    pipeline, clock, _ = await pipeline_on(
        store,
        database_url,
        face={"namespaces": ("face-research",), "leads": ("lead@example.com",), "notify_unowned": True},
        data={"namespaces": ("quiet-ns",), "leads": ("lead@example.com",), "notify_unowned": False},
    )
    loud, quiet = bare_gpu_pod("face-research"), bare_gpu_pod("quiet-ns")
    await pipeline.ingestor.apply([*loud, *quiet])
    for items in (loud, quiet):
        record = await stored.get_job(store, "test", items[0][2]["metadata"]["uid"])
        assert record is not None and (record.owner, record.status) == (None, JobStatus.SUCCEEDED)
    await rounds(pipeline, clock, 35)
    for items in (loud, quiet):
        assert (
            await stored.summary_state(store, "test", items[0][2]["metadata"]["uid"])
            is SummaryState.SUMMARIZED
        )
    rows = (await store.outbox.list_notifications())[0]
    assert [(r.kind, r.recipient, r.job_uid) for r in rows] == [
        (NotificationKind.JOB_SUMMARY, "lead@example.com", loud[0][2]["metadata"]["uid"])
    ]


async def test_a_retry_storm_is_parsed_off_the_loop_kept_small_and_rewritten_only_when_changed(
    store: Store, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 29: a Workflow with 20,000 retry attempts and 10,000-character node names. Its record
    keeps the first and last attempts and counts the rest; it is parsed in a thread, so the event
    loop (which answers /healthz) keeps turning while it is; the same state again (a new resourceVersion and
    nothing else) is not written again."""
    ingestor, recorder = bare_pipeline(store, Telemetry.create(CollectorRegistry()))
    obj = retry_storm_workflow("storm", "face-research", T0, attempts=20_000, name_chars=10_000)
    loop = asyncio.get_running_loop()
    turned: list[bool] = []

    async def on_the_loop() -> None:
        return None

    def parse_and_check_the_loop(*args: Any, **kwargs: Any) -> Any:
        # While this parse runs, a coroutine scheduled on the event loop must complete: it cannot
        # if the parse holds the loop (then this wait runs out and the test fails).
        try:
            asyncio.run_coroutine_threadsafe(on_the_loop(), loop).result(timeout=60)
            turned.append(True)
        except TimeoutError:
            turned.append(False)
        return parse_workflow(*args, **kwargs)

    monkeypatch.setattr(workflows_service, "parse_workflow", parse_and_check_the_loop)
    await ingestor.apply([("Workflow", "ADDED", obj)])
    assert recorder.stats.parsed_off_loop == 1 and recorder.stats.rejected == 0
    assert turned == [True]

    record = await stored.get_workflow(store, "test", obj["metadata"]["uid"])
    assert record is not None
    [step] = record.steps
    assert (len(step.attempts), step.attempts_dropped) == (2 * ATTEMPTS_KEPT_EACH_END, 20_000 - 10)
    assert len(orjson.dumps(record_to_json(record))) < 20_000

    again = copy.deepcopy(obj)
    again["metadata"]["resourceVersion"] = "2"
    await ingestor.apply([("Workflow", "MODIFIED", again)])
    assert recorder.stats.unchanged == 1
    changed = copy.deepcopy(again)
    changed["status"]["phase"] = "Failed"
    await ingestor.apply([("Workflow", "MODIFIED", changed)])
    assert recorder.stats.unchanged == 1
    record = await stored.get_workflow(store, "test", obj["metadata"]["uid"])
    assert record is not None and record.status is JobStatus.FAILED


async def test_a_workflow_naming_no_owner_is_its_namespaces_owners(store: Store, database_url: str) -> None:
    """The recorder parses with the pipeline's configuration as the watch keeps it: the namespace
    owners read after it was made reach the Workflows as they reach the Jobs."""
    ingestor, _ = bare_pipeline(store, Telemetry.create(CollectorRegistry()))
    ingestor.watch_namespace_owners({"face-research": "bob@example.com"})
    unowned = replace(simple_workflow(), owner=None)
    await ingestor.apply(events(argo_changes(unowned)))
    record = await stored.get_workflow(store, "test", unowned.uid)
    assert record is not None and record.owner == "bob@example.com"
