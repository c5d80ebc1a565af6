"""The ingestion pipeline on a real store (SQLite and Postgres): merging, terminal-once, catch-up, relists."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from prometheus_client import CollectorRegistry
from sqlalchemy.ext.asyncio import AsyncEngine

from inno_notify.adapters.db.job_repository import JobRepository
from inno_notify.adapters.db.repository import IngestTransaction, Store, SummaryState, TerminalMark
from inno_notify.domain.model import JobRecord, JobStatus, PodRecord, WorkloadKind
from inno_notify.domain.parsing import ParseConfig
from inno_notify.service.ingest import IngestOptions, Ingestor
from inno_notify.sim.objects import (
    JobSpec,
    job_failed,
    job_object,
    job_started,
    job_succeeded,
    pod_object,
    pod_running,
    pod_terminated,
)
from inno_notify.telemetry import Telemetry
from tests import stored

T0 = datetime(2026, 11, 30, 10, 0, tzinfo=UTC)
CFG = ParseConfig(cluster="test", namespace_teams={"face-research": "face"})


class Clock:
    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


def ingestor(store: Store, clock: Clock, started_at: datetime = T0, **options: float) -> Ingestor:
    opts = IngestOptions(catch_up_seconds=options.get("catch_up", 3600), metrics_delay_seconds=60)
    return Ingestor(store, CFG, opts, clock, started_at)


def lifecycle(
    name: str, *, exit_code: int = 0, gpus: int = 4, start: datetime = T0
) -> list[tuple[str, str, dict[str, Any]]]:
    """The watch events of one job from creation to its end, with the times a real cluster sets."""
    spec = JobSpec(name=name, namespace="face-research", owner="alice@example.com", gpus=gpus)
    job = job_object(spec, start)
    pod = pod_object(job, "x7k2p", start + timedelta(seconds=5))
    running = pod_running(pod, "gpu-node-1", start + timedelta(seconds=30), start + timedelta(seconds=90))
    done = pod_terminated(
        running, start + timedelta(hours=1), exit_code, "OOMKilled" if exit_code == 137 else None
    )
    end = start + timedelta(hours=1, seconds=2)
    final = (
        job_succeeded(job_started(job, start + timedelta(seconds=1)), end)
        if exit_code == 0
        else job_failed(job_started(job, start + timedelta(seconds=1)), end)
    )
    return [
        ("Job", "ADDED", job),
        ("Pod", "ADDED", pod),
        ("Job", "MODIFIED", job_started(job, start + timedelta(seconds=1))),
        ("Pod", "MODIFIED", running),
        ("Pod", "MODIFIED", done),
        ("Job", "MODIFIED", final),
    ]


async def test_a_job_lifecycle_is_recorded_with_its_figures(store: Store) -> None:
    clock = Clock(T0 + timedelta(hours=1, minutes=1))
    events = lifecycle("train-resnet-7", exit_code=137)
    ing = ingestor(store, clock)
    await ing.apply(events)

    uid = events[0][2]["metadata"]["uid"]
    job = await stored.get_job(store, "test", uid)
    assert job is not None
    assert job.status is JobStatus.FAILED
    assert job.reason == "BackoffLimitExceeded"
    assert (job.exit_code, job.exit_reason) == (137, "OOMKilled")
    assert job.owner == "alice@example.com" and job.team == "face"
    assert job.requested.gpus == 4
    assert job.first_scheduled_at == T0 + timedelta(seconds=30)
    assert job.queue_seconds == 30
    assert job.finished_at == T0 + timedelta(hours=1, seconds=2)
    pods = await stored.pods_of(store, "test", uid)
    assert [p.name for p in pods] == ["train-resnet-7-x7k2p"]
    assert await stored.summary_state(store, "test", uid) is SummaryState.AWAITING_USAGE
    assert ing.stats.terminal_marked == 1


async def test_events_one_by_one_equal_one_batch(store: Store) -> None:
    clock = Clock(T0 + timedelta(hours=2))
    events = lifecycle("one-by-one")
    ing = ingestor(store, clock)
    for event in events:
        await ing.apply([event])
    uid = events[0][2]["metadata"]["uid"]
    job = await stored.get_job(store, "test", uid)
    assert job is not None and job.status is JobStatus.SUCCEEDED and job.exit_code == 0
    assert ing.stats.terminal_marked == 1


async def test_replays_and_relists_never_mark_a_job_ended_twice(store: Store) -> None:
    clock = Clock(T0 + timedelta(hours=2))
    events = lifecycle("replayed")
    first = ingestor(store, clock)
    await first.apply(events)
    # The same history again (a restart replays the list), then an older state arriving late.
    second = ingestor(store, clock)
    await second.apply(events)
    await second.apply([events[2]])
    uid = events[0][2]["metadata"]["uid"]
    job = await stored.get_job(store, "test", uid)
    assert job is not None and job.status is JobStatus.SUCCEEDED
    assert (first.stats.terminal_marked, second.stats.terminal_marked) == (1, 0)


async def test_jobs_that_ended_before_the_catch_up_window_stay_silent(store: Store) -> None:
    long_ago = T0 - timedelta(days=2)
    recent = T0 - timedelta(minutes=30)
    old_events = lifecycle("old-job", start=long_ago)
    new_events = lifecycle("recent-job", start=recent - timedelta(hours=1))
    ing = ingestor(store, Clock(T0), started_at=T0)
    await ing.apply(old_events + new_events)
    old_uid = old_events[0][2]["metadata"]["uid"]
    new_uid = new_events[0][2]["metadata"]["uid"]
    assert await stored.summary_state(store, "test", old_uid) is SummaryState.SILENT
    assert await stored.summary_state(store, "test", new_uid) is SummaryState.AWAITING_USAGE


async def test_a_job_deleted_during_a_gap_is_closed_out_at_the_relist(store: Store) -> None:
    clock = Clock(T0 + timedelta(minutes=20))
    events = lifecycle("gone-in-gap")
    ing = ingestor(store, clock)
    # We saw it start and its pod run, then lost the watch; the job and pods were deleted meanwhile.
    await ing.apply(events[:4])
    uid = events[0][2]["metadata"]["uid"]
    job = await stored.get_job(store, "test", uid)
    assert job is not None and job.status is JobStatus.RUNNING
    await ing.on_relist("Job", frozenset())
    await ing.apply([("relist", "Job", frozenset())])
    job = await stored.get_job(store, "test", uid)
    assert job is not None
    assert job.status is JobStatus.DELETED
    assert job.finished_at == clock.now
    assert ing.stats.closed_in_gap == 1
    assert await stored.summary_state(store, "test", uid) is SummaryState.AWAITING_USAGE


async def test_deleted_event_keeps_the_last_known_state(store: Store) -> None:
    clock = Clock(T0 + timedelta(hours=3))
    events = lifecycle("ttl-deleted")
    ing = ingestor(store, clock)
    await ing.apply(events)
    # TTL controller deletes the finished job and its pods: DELETED events carry the last state.
    await ing.apply([("Job", "DELETED", events[-1][2]), ("Pod", "DELETED", events[-2][2])])
    uid = events[0][2]["metadata"]["uid"]
    job = await stored.get_job(store, "test", uid)
    assert job is not None and job.status is JobStatus.SUCCEEDED
    pods = await stored.pods_of(store, "test", uid)
    assert pods[0].deleted_at == clock.now


async def test_running_job_deleted_by_the_user(store: Store) -> None:
    clock = Clock(T0 + timedelta(minutes=10))
    events = lifecycle("cancelled")
    ing = ingestor(store, clock)
    await ing.apply(events[:4])
    await ing.apply([("Job", "DELETED", events[2][2])])
    uid = events[0][2]["metadata"]["uid"]
    job = await stored.get_job(store, "test", uid)
    assert job is not None and job.status is JobStatus.DELETED
    assert ing.stats.terminal_marked == 1


async def test_pods_of_other_workloads_are_not_stored(store: Store) -> None:
    job = job_object(JobSpec(name="x", namespace="ns"), T0)
    stray = pod_object(job, "abcde", T0)
    stray["metadata"]["ownerReferences"] = [
        {"kind": "ReplicaSet", "name": "web-1", "uid": "rs-1", "controller": True}
    ]
    stray["metadata"]["labels"] = {"app": "web"}
    ing = ingestor(store, Clock(T0))
    await ing.apply([("Pod", "ADDED", stray)])
    assert await stored.job_uids_of_pods(store, "test", [stray["metadata"]["uid"]]) == {}


async def test_bare_gpu_pod_with_an_owner_is_a_one_pod_workload(store: Store) -> None:
    job = job_object(JobSpec(name="dag-train", namespace="face-research", gpus=2), T0)
    pod = pod_object(job, "airflow", T0)
    pod["metadata"]["ownerReferences"] = []
    pod["metadata"]["labels"] = {"dag_id": "nightly", "task_id": "train", "kubernetes_pod_operator": "True"}
    pod["metadata"]["annotations"] = {"inno-notify/owner": "bob@example.com"}
    running = pod_running(pod, "gpu-node-2", T0 + timedelta(seconds=3), T0 + timedelta(seconds=10))
    done = pod_terminated(running, T0 + timedelta(minutes=30), 1)
    ing = ingestor(store, Clock(T0 + timedelta(minutes=31)))
    await ing.apply([("Pod", "ADDED", pod), ("Pod", "MODIFIED", running), ("Pod", "MODIFIED", done)])
    record = await stored.get_job(store, "test", pod["metadata"]["uid"])
    assert record is not None
    assert record.kind is WorkloadKind.POD
    assert record.owner == "bob@example.com"
    assert record.status is JobStatus.FAILED and record.exit_code == 1
    assert ing.stats.terminal_marked == 1


async def test_kueue_workload_before_its_job_and_events_are_kept(store: Store) -> None:
    events = lifecycle("queued", start=T0)
    uid = events[0][2]["metadata"]["uid"]
    workload = {
        "apiVersion": "kueue.x-k8s.io/v1beta1",
        "kind": "Workload",
        "metadata": {
            "name": "job-queued-1a2b3",
            "namespace": "face-research",
            "uid": "wl-1",
            "labels": {"kueue.x-k8s.io/job-uid": uid},
        },
        "spec": {"queueName": "team-face"},
        "status": {
            "admission": {"clusterQueue": "gpu-cq", "podSetAssignments": []},
            "conditions": [
                {
                    "type": "QuotaReserved",
                    "status": "True",
                    "reason": "QuotaReserved",
                    "lastTransitionTime": "2026-11-30T10:00:20Z",
                    "message": "",
                },
                {
                    "type": "Admitted",
                    "status": "True",
                    "reason": "Admitted",
                    "lastTransitionTime": "2026-11-30T10:00:20Z",
                    "message": "",
                },
            ],
        },
    }
    event = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": "queued.1", "namespace": "face-research", "uid": "ev-1"},
        "involvedObject": {"kind": "Job", "name": "queued", "namespace": "face-research", "uid": uid},
        "reason": "BackoffLimitExceeded",
        "type": "Warning",
        "count": 1,
    }
    ing = ingestor(store, Clock(T0 + timedelta(hours=2)))
    await ing.apply([("Workload", "ADDED", workload)])
    await ing.apply([*events, ("Event", "ADDED", event)])
    job = await stored.get_job(store, "test", uid)
    assert job is not None and job.kueue is not None
    assert job.kueue.cluster_queue == "gpu-cq"
    assert job.kueue.admitted_at == T0 + timedelta(seconds=20)
    assert job.event_counts == {"BackoffLimitExceeded": 1}
    # The same event replayed after a relist does not count twice.
    await ing.apply([("Event", "MODIFIED", event)])
    job = await stored.get_job(store, "test", uid)
    assert job is not None and job.event_counts == {"BackoffLimitExceeded": 1}


@pytest.mark.parametrize("gpus", [0, 1, 8])
async def test_requested_gpus(store: Store, gpus: int) -> None:
    events = lifecycle(f"gpus-{gpus}", gpus=gpus)
    await ingestor(store, Clock(T0 + timedelta(hours=2))).apply(events)
    job = await stored.get_job(store, "test", events[0][2]["metadata"]["uid"])
    assert job is not None and job.requested.gpus == gpus


async def test_a_job_whose_pods_succeeded_before_the_gap_is_closed_out_as_succeeded(store: Store) -> None:
    clock = Clock(T0 + timedelta(hours=2))
    events = lifecycle("pods-done-then-gone")
    ing = ingestor(store, clock)
    await ing.apply(events[:5])  # the pod's success was seen, the Job's Complete condition was not
    await ing.apply([("relist", "Job", frozenset())])
    job = await stored.get_job(store, "test", events[0][2]["metadata"]["uid"])
    assert job is not None
    assert (job.status, job.reason, job.exit_code) == (JobStatus.SUCCEEDED, "SucceededPerPods", 0)
    assert job.finished_at == T0 + timedelta(hours=1)  # the pod's end, not when we noticed


async def test_a_job_whose_pod_failed_before_the_gap_is_not_guessed(store: Store) -> None:
    events = lifecycle("pod-failed-then-gone", exit_code=1)
    ing = ingestor(store, Clock(T0 + timedelta(hours=2)))
    await ing.apply(events[:5])
    await ing.apply([("relist", "Job", frozenset())])
    job = await stored.get_job(store, "test", events[0][2]["metadata"]["uid"])
    assert job is not None
    assert (job.status, job.exit_code) == (JobStatus.DELETED, 1)


class CountingJobs(JobRepository):
    """The real job repository, counting the job and pod records each ingest transaction writes."""

    def __init__(self, engine: AsyncEngine) -> None:
        super().__init__(engine)
        self.written: list[tuple[int, int]] = []

    @contextlib.asynccontextmanager
    async def ingest_transaction(self) -> AsyncIterator[IngestTransaction]:
        async with super().ingest_transaction() as tx:
            write = tx.write

            async def counted(
                cluster: str,
                job_records: Sequence[JobRecord],
                pod_records: Sequence[PodRecord],
                marks: Sequence[TerminalMark],
            ) -> int:
                self.written.append((len(job_records), len(pod_records)))
                return await write(cluster, job_records, pod_records, marks)

            tx.write = counted  # type: ignore[method-assign]
            yield tx


class WriteCounting(Store):
    """The real store, counting the records its ingest transactions write (`written`)."""

    def __init__(self, store: Store) -> None:
        super().__init__(store.engine)
        self.jobs = self.counting = CountingJobs(store.engine)

    @property
    def written(self) -> list[tuple[int, int]]:
        return self.counting.written


async def test_a_relist_of_objects_as_they_are_stored_writes_nothing(store: Store) -> None:
    clock = Clock(T0 + timedelta(hours=2))
    counting = WriteCounting(store)
    ing = ingestor(counting, clock)
    events = lifecycle("unchanged")
    await ing.apply(events)
    before = await stored.get_job(store, "test", events[0][2]["metadata"]["uid"])
    # A restart: the list hands over the last state of the job and its pod again.
    again = [("Job", "SYNC", events[5][2]), ("Pod", "SYNC", events[4][2])]
    await ing.apply([*again, ("relist", "Job", frozenset({events[0][2]["metadata"]["uid"]}))])
    assert counting.written[-1] == (0, 0)
    assert await stored.get_job(store, "test", events[0][2]["metadata"]["uid"]) == before
    assert ing.stats.terminal_marked == 1
    # A changed object is written, and only it.
    relabelled = {**events[4][2], "metadata": {**events[4][2]["metadata"], "resourceVersion": "99"}}
    await ing.apply([("Pod", "MODIFIED", relabelled)])
    assert counting.written[-1] == (0, 1)


async def test_a_restart_skips_through_what_is_stored_as_it_is(store: Store) -> None:
    """Issue 32: after a start the first relist hands over every object again; those stored from the
    same resourceVersion are neither parsed nor written, a changed one is, and once the relists of
    Jobs and pods are in, nothing is skipped any more."""
    clock = Clock(T0 + timedelta(hours=2))
    first, second = lifecycle("kept"), lifecycle("changed", start=T0 + timedelta(minutes=5))
    for n, (_, _, obj) in enumerate([*first, *second], 1):
        obj["metadata"] = {**obj["metadata"], "resourceVersion": str(n)}  # as the API server sets it
    await ingestor(store, clock).apply([*first, *second])

    counting = WriteCounting(store)
    restarted = ingestor(counting, clock)
    restarted.telemetry = Telemetry.create(CollectorRegistry())
    await restarted.load_stored_versions()
    pod = second[4][2]
    relabelled = {**pod, "metadata": {**pod["metadata"], "resourceVersion": "99", "labels": {"x": "y"}}}
    listed = [("Job", "ADDED", first[5][2]), ("Pod", "ADDED", first[4][2])]
    listed += [("Job", "ADDED", second[5][2]), ("Pod", "ADDED", relabelled)]
    uids = frozenset(e[2]["metadata"]["uid"] for e in (first[0], second[0]))
    await restarted.apply([*listed, ("relist", "Job", uids)])
    assert restarted.stats.unchanged == 3
    registry = restarted.telemetry.registry
    assert registry.get_sample_value("inno_notify_ingest_objects_total", {"outcome": "unchanged"}) == 3
    assert registry.get_sample_value("inno_notify_ingest_objects_total", {"outcome": "parsed"}) == 1
    assert counting.written == [(0, 1)]
    changed = await stored.get_job(store, "test", second[0][2]["metadata"]["uid"])
    assert changed is not None and changed.status is JobStatus.SUCCEEDED
    pod_uids = frozenset(e[2]["metadata"]["uid"] for e in (first[1], second[1]))
    await restarted.apply([("relist", "Pod", pod_uids), ("Pod", "MODIFIED", first[4][2])])
    assert restarted.stats.unchanged == 3  # the first relists are in: the same state is merged again


class Wanting:
    """A recorder of pods that wants one pod (by uid) and keeps what it is handed."""

    kinds = frozenset({"Pod"})
    relisted: frozenset[str] = frozenset()

    def __init__(self, uid: str) -> None:
        self.uid = uid
        self.recorded: list[str] = []

    def wants(self, kind: str, obj: dict[str, Any]) -> bool:
        return bool(obj["metadata"]["uid"] == self.uid)

    async def record(
        self,
        items: Sequence[tuple[str, str, dict[str, Any]]],
        relists: Sequence[frozenset[str]],
        now: datetime,
    ) -> None:
        self.recorded += [obj["metadata"]["uid"] for _, _, obj in items]


async def test_a_restarts_list_pages_pass_over_what_is_stored_before_the_queue(store: Store) -> None:
    """Issue 32: a start's first LIST pages come whole (`on_listed`), and what the store holds as it
    is is counted and dropped there, before the queue. A changed object, one a recorder wants (its
    recorder sees it, the pipeline passes it over after) and objects whose metadata cannot be read
    (set aside by the consumer, as before) go on as SYNC events."""
    clock = Clock(T0 + timedelta(hours=2))
    first, second = lifecycle("kept"), lifecycle("changed", start=T0 + timedelta(minutes=5))
    for n, (_, _, obj) in enumerate([*first, *second], 1):
        obj["metadata"] = {**obj["metadata"], "resourceVersion": str(n)}
    await ingestor(store, clock).apply([*first, *second])

    counting = WriteCounting(store)
    restarted = ingestor(counting, clock)
    restarted.telemetry = Telemetry.create(CollectorRegistry())
    recorder = Wanting(first[4][2]["metadata"]["uid"])
    restarted.recorders.append(recorder)
    pod = second[4][2]
    relabelled = {**pod, "metadata": {**pod["metadata"], "resourceVersion": "99", "labels": {"x": "y"}}}
    hostile: list[dict[str, Any]] = [
        {"metadata": {"uid": ["not", "a", "key"], "resourceVersion": "1"}},
        {"metadata": "not an object"},
        {},
    ]
    consumer = asyncio.create_task(restarted.run())
    try:
        await restarted.on_listed("Job", [first[5][2], second[5][2], *hostile])
        # Both jobs are passed over before the queue has taken anything.
        assert restarted.stats.unchanged == 2
        await restarted.on_listed("Pod", [first[4][2], relabelled])
        await restarted.on_relist("Job", frozenset(e[2]["metadata"]["uid"] for e in (first[0], second[0])))
        await restarted.on_relist("Pod", frozenset(e[2]["metadata"]["uid"] for e in (first[1], second[1])))
        await restarted.drained()
    finally:
        consumer.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await consumer
    assert recorder.recorded == [first[4][2]["metadata"]["uid"]]
    assert (restarted.stats.unchanged, restarted.stats.parse_errors) == (3, 3)
    registry = restarted.telemetry.registry
    assert registry.get_sample_value("inno_notify_ingest_objects_total", {"outcome": "unchanged"}) == 3
    assert registry.get_sample_value("inno_notify_ingest_objects_total", {"outcome": "parsed"}) == 1
    listed = {"resource": "Job", "type": "SYNC"}
    assert registry.get_sample_value("inno_notify_watch_events_total", listed) == 5
    # Jobs and pods written over every transaction (the relists may be batches of their own).
    assert tuple(map(sum, zip(*counting.written, strict=False))) == (0, 1)
    assert restarted.stats.relists == 2


def metadata_only(obj: dict[str, Any]) -> dict[str, Any]:
    """An object as a metadata-only LIST shows it (PartialObjectMetadata)."""
    return {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": obj["metadata"]}


async def test_a_restarts_first_lists_ask_only_for_what_is_not_stored_as_it_is(store: Store) -> None:
    """The watcher's KnownObjects: while a start's first relists of runs and pods are to come over
    stored versions, their LISTs ask for metadata first; `unknown` passes over what is stored as it
    is and names the rest for the watcher to fetch whole."""
    clock = Clock(T0 + timedelta(hours=2))
    events = lifecycle("kept")
    for n, (_, _, obj) in enumerate(events, 1):
        obj["metadata"] = {**obj["metadata"], "resourceVersion": str(n)}
    await ingestor(store, clock).apply(events)

    restarted = ingestor(store, clock)
    restarted.telemetry = Telemetry.create(CollectorRegistry())
    assert [await restarted.holds(kind) for kind in ("Job", "Pod", "Event", "Workload")] == [
        True,
        True,
        False,
        False,
    ]
    job, pod = events[5][2], events[4][2]
    moved = {**pod, "metadata": {**pod["metadata"], "resourceVersion": "99"}}
    assert restarted.unknown("Job", [metadata_only(job)]) == []
    assert restarted.unknown("Pod", [metadata_only(moved)]) == [metadata_only(moved)]
    assert restarted.stats.unchanged == 0  # nothing is taken until the list is done
    restarted.passed_over("Job", 1)
    registry = restarted.telemetry.registry
    assert restarted.stats.unchanged == 1
    assert registry.get_sample_value("inno_notify_ingest_objects_total", {"outcome": "unchanged"}) == 1
    # Were the LIST taken whole after all, the same job is passed over again as it comes.
    await restarted.on_listed("Job", [job])
    assert restarted.stats.unchanged == 2 and restarted.stats.parse_errors == 0
    uids = (frozenset({job["metadata"]["uid"]}), frozenset({pod["metadata"]["uid"]}))
    await restarted.apply([("relist", "Job", uids[0]), ("relist", "Pod", uids[1])])
    assert not await restarted.holds("Pod")  # the first relists are in: later lists are whole


async def test_a_run_naming_no_owner_is_its_namespaces_owners(store: Store) -> None:
    """A Kubeflow profile's namespace names its owner (annotation `owner`): the owner of a run that
    names none itself; a run's own owner wins, and a namespace's value that is not one address is
    not an owner."""
    ing = ingestor(store, Clock(T0 + timedelta(hours=2)))
    ing.watch_namespace_owners({"face-research": "bob@example.com", "other": "a@example.com, b@example.com"})
    assert ing.cfg.namespace_owners == {"face-research": "bob@example.com"}
    unowned = lifecycle("unowned")
    for _, _, obj in unowned:
        for layer in (obj["metadata"], obj.get("spec", {}).get("template", {}).get("metadata", {})):
            layer.get("annotations", {}).pop("inno-notify/owner", None)
            layer.get("labels", {}).pop("inno-notify/owner", None)
    owned = lifecycle("owned")
    await ing.apply([*unowned, *owned])
    first = await stored.get_job(store, "test", unowned[0][2]["metadata"]["uid"])
    second = await stored.get_job(store, "test", owned[0][2]["metadata"]["uid"])
    assert first is not None and second is not None
    assert (first.owner, second.owner) == ("bob@example.com", "alice@example.com")
