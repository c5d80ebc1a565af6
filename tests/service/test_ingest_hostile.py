"""Hostile objects through the ingestion pipeline into a real store (SQLite and Postgres).

One test per defect that stopped ingestion for everyone (issue 12): each fails on the code before
the hardening (an exception out of `apply`, or a batch retried forever, bounded here by a timeout)
and passes after it. Postgres refuses what SQLite swallows, so every test runs on both.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import sqlalchemy as sa
from prometheus_client import CollectorRegistry
from sqlalchemy import exc as sa_exc
from sqlalchemy.ext.asyncio import AsyncEngine

from inno_notify.adapters.db.job_repository import JobRepository
from inno_notify.adapters.db.repository import IngestTransaction, Store, SummaryState
from inno_notify.domain.model import JobStatus
from inno_notify.domain.parsing import ParseConfig
from inno_notify.domain.parsing.storable import INDEXED_MAX_BYTES, TRUNCATION_MARK
from inno_notify.service.ingest import IngestOptions, Ingestor
from inno_notify.sim.objects import (
    JobSpec,
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
CFG = ParseConfig(cluster="test")
INDEX = "batch.kubernetes.io/job-completion-index"
# Stands for "forever": the code before the hardening retried a refused batch without end.
WITHIN = 30.0
Events = list[tuple[str, str, Any]]


class Sleeps:
    """The ingestor's sleep: records the delays and returns at once."""

    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.delays.append(seconds)
        await asyncio.sleep(0)


def make_ingestor(store: Store, **options: Any) -> tuple[Ingestor, CollectorRegistry, Sleeps]:
    registry = CollectorRegistry()
    sleeps = Sleeps()
    ingestor = Ingestor(
        store,
        CFG,
        IngestOptions(catch_up_seconds=86400, **options),
        lambda: T0 + timedelta(hours=2),
        T0,
        Telemetry.create(registry),
        sleep=sleeps,
    )
    return ingestor, registry, sleeps


async def apply(ingestor: Ingestor, events: Events) -> None:
    await asyncio.wait_for(ingestor.apply(events), WITHIN)


def rejected_total(registry: CollectorRegistry, resource: str, reason: str) -> float:
    return (
        registry.get_sample_value(
            "inno_notify_rejected_objects_total", {"resource": resource, "reason": reason}
        )
        or 0.0
    )


def values_total(registry: CollectorRegistry, resource: str, field: str, reason: str) -> float:
    labels = {"resource": resource, "field": field, "reason": reason}
    return registry.get_sample_value("inno_notify_rejected_values_total", labels) or 0.0


def lifecycle(
    name: str,
    *,
    annotations: dict[str, str] | None = None,
    pod_annotations: dict[str, str] | None = None,
    message: str | None = None,
    exit_code: int = 0,
) -> tuple[str, Events]:
    """A job from creation to its end; (its uid, the watch events)."""
    spec = JobSpec(name=name, namespace="ns", owner="alice@example.com", annotations=annotations or {})
    job = job_object(spec, T0)
    pod = pod_object(job, "x7k2p", T0 + timedelta(seconds=5))
    pod["metadata"].setdefault("annotations", {}).update(pod_annotations or {})
    running = pod_running(pod, "node-1", T0 + timedelta(seconds=30), T0 + timedelta(seconds=40))
    done = pod_terminated(running, T0 + timedelta(hours=1), exit_code)
    if message is not None:
        done["status"]["containerStatuses"][0]["state"]["terminated"]["message"] = message
    final = job_succeeded(job_started(job, T0 + timedelta(seconds=1)), T0 + timedelta(hours=1, seconds=2))
    return spec.uid, [
        ("Job", "ADDED", job),
        ("Pod", "ADDED", pod),
        ("Pod", "MODIFIED", running),
        ("Pod", "MODIFIED", done),
        ("Job", "MODIFIED", final),
    ]


def random_text(chars: int) -> str:
    """Text that does not compress: Postgres compresses index entries, so a repeated character
    would fit where a real 3 KB value does not."""
    rng = random.Random(chars)
    return "".join(chr(rng.randrange(0x4E00, 0x9FFF)) for _ in range(chars))


# --- one test per defect ------------------------------------------------------------------------


@pytest.mark.parametrize("index", ["²", "1" * 5000])
async def test_a_completion_index_that_is_no_number_costs_only_the_index(store: Store, index: str) -> None:
    ingestor, registry, _ = make_ingestor(store)
    hostile_uid, hostile = lifecycle("indexed", pod_annotations={INDEX: index})
    normal_uid, normal = lifecycle("normal")
    await apply(ingestor, hostile + normal)
    jobs = await stored.get_jobs(store, "test", [hostile_uid, normal_uid])
    assert {uid: job.status for uid, job in jobs.items()} == {
        hostile_uid: JobStatus.SUCCEEDED,
        normal_uid: JobStatus.SUCCEEDED,
    }
    [pod] = await stored.pods_of(store, "test", hostile_uid)
    assert pod.completion_index is None
    assert values_total(registry, "Pod", "completion_index", "out_of_range") >= 1


@pytest.mark.parametrize("key", ["inno-notify/owner", "inno-notify/team", "inno-notify/family"])
async def test_an_indexed_annotation_over_2_7_kb_is_capped_or_refused(store: Store, key: str) -> None:
    ingestor, _, _ = make_ingestor(store)
    uid, events = lifecycle("long", annotations={key: random_text(3000)})
    normal_uid, normal = lifecycle("normal")
    await apply(ingestor, events + normal)
    jobs = await stored.get_jobs(store, "test", [uid, normal_uid])
    assert len(jobs) == 2 and ingestor.stats.rejected == 0
    job = jobs[uid]
    if key == "inno-notify/owner":
        assert job.owner is None  # 3,000 characters are no e-mail address
    else:
        value = job.team if key == "inno-notify/team" else job.family
        assert value is not None and value.endswith(TRUNCATION_MARK)
        assert len(value.encode()) <= INDEXED_MAX_BYTES
    assert await stored.summary_state(store, "test", uid) is SummaryState.AWAITING_USAGE


async def test_nul_in_annotations_is_removed(store: Store) -> None:
    ingestor, _, _ = make_ingestor(store)
    uid, events = lifecycle(
        "nul", annotations={"inno-notify/group": "sweep\x00-7", "inno-notify/team": "\x00face", "x": "a\x00"}
    )
    await apply(ingestor, events)
    job = await stored.get_job(store, "test", uid)
    assert job is not None
    assert (job.group_key, job.team) == ("sweep-7", "face")


async def test_nul_in_a_termination_message_is_removed(store: Store) -> None:
    ingestor, _, _ = make_ingestor(store)
    uid, events = lifecycle("nul-message", message="Traceback\x00 (most recent call last)", exit_code=1)
    await apply(ingestor, events)
    [pod] = await stored.pods_of(store, "test", uid)
    terminated = pod.containers[0].terminated
    assert terminated is not None and terminated.message == "Traceback (most recent call last)"


async def test_an_owner_of_two_addresses_is_no_owner(store: Store) -> None:
    ingestor, registry, _ = make_ingestor(store)
    uid, events = lifecycle(
        "two", annotations={"inno-notify/owner": "attacker@evil.example,victim@corp.example"}
    )
    events[0][2]["metadata"]["annotations"]["inno-notify/owner"] = "attacker@evil.example,victim@corp.example"
    await apply(ingestor, events)
    job = await stored.get_job(store, "test", uid)
    assert job is not None and job.owner is None
    assert values_total(registry, "Job", "owner", "not_one_address") >= 1


# --- objects set aside: counted, logged once, stored ---------------------------------------------


@asynccontextmanager
async def refusing_jobs_named(store: Store, name: str) -> AsyncIterator[None]:
    """Makes the real database refuse one job row (a check constraint, a trigger on SQLite), as it
    refuses a value it cannot hold: the write fails with an integrity error."""
    async with store.engine.begin() as conn:
        if conn.dialect.name == "postgresql":
            await conn.exec_driver_sql(
                f"ALTER TABLE jobs ADD CONSTRAINT test_refused CHECK (name <> '{name}')"
            )
        else:
            for op in ("INSERT", "UPDATE"):
                await conn.exec_driver_sql(
                    f"CREATE TRIGGER test_refused_{op.lower()} BEFORE {op} ON jobs "
                    f"WHEN NEW.name = '{name}' BEGIN SELECT RAISE(ABORT, 'refused'); END"
                )
    try:
        yield
    finally:
        async with store.engine.begin() as conn:
            if conn.dialect.name == "postgresql":
                await conn.exec_driver_sql("ALTER TABLE jobs DROP CONSTRAINT test_refused")
            else:
                for op in ("insert", "update"):
                    await conn.exec_driver_sql(f"DROP TRIGGER test_refused_{op}")


async def test_a_batch_the_database_refuses_is_split_until_the_object_is_found(
    store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="inno_notify.service.ingest")
    ingestor, registry, sleeps = make_ingestor(store)
    lifecycles = [lifecycle(f"job-{i:02d}") for i in range(20)]
    refused_uid, refused = lifecycle("refused")
    # One object's events on both sides of the refused one: they must still apply in order.
    first_uid, first = lifecycle("first")
    events = [*first[:2], *refused, *first[2:]] + [e for _, evs in lifecycles for e in evs]
    async with refusing_jobs_named(store, "refused"):
        await apply(ingestor, events)
        await apply(ingestor, refused)  # seen again: counted again, logged once
    found = await stored.get_jobs(store, "test", [first_uid, refused_uid, *(uid for uid, _ in lifecycles)])
    assert refused_uid not in found
    assert len(found) == 21 and all(job.status is JobStatus.SUCCEEDED for job in found.values())
    assert ingestor.stats.terminal_marked == 21  # every end recorded once, none twice
    assert (ingestor.stats.write_errors, sleeps.delays) == (0, [])  # refused data is never retried
    [record] = await stored.rejected_objects(store, "test")
    assert (record.kind, record.uid, record.name, record.reason, record.count) == (
        "Job",
        refused_uid,
        "refused",
        "unstorable",
        2,
    )
    assert record.detail and "INSERT" not in record.detail  # the driver's message, not the statement
    assert rejected_total(registry, "Job", "unstorable") == 2
    logged = [r for r in caplog.records if "set aside" in r.getMessage() and refused_uid in r.getMessage()]
    assert len(logged) == 1


MALFORMED: list[tuple[str, Any, str]] = [
    ("Job", {"metadata": {"name": "no-uid", "namespace": "ns"}}, "missing_field"),
    ("Job", {"metadata": ["not", "an", "object"]}, "missing_field"),
    ("Job", {"metadata": {"uid": "u" * 500, "name": "long-uid"}}, "bad_key"),
    (
        "Job",
        {"metadata": {"uid": "j1", "name": "j", "namespace": "ns"}, "spec": {"parallelism": "²"}},
        "wrong_type",
    ),
    (
        "Pod",
        {"metadata": {"uid": "p1", "name": "p", "namespace": "ns", "creationTimestamp": "yesterday"}},
        "bad_time",
    ),
    ("Event", {"metadata": {"uid": "e1"}, "reason": "Evicted", "involvedObject": "pod/x"}, "wrong_type"),
    (
        "Event",
        {
            "metadata": {"uid": "e2"},
            "reason": "Evicted",
            "involvedObject": {"uid": "p", "kind": "Pod"},
            "count": "²",
        },
        "wrong_type",
    ),
    ("Workload", {"metadata": {"uid": "w1", "labels": {"kueue.x-k8s.io/job-uid": "j" * 300}}}, "bad_key"),
    ("Workload", {"metadata": {"uid": "w2"}, "status": {"conditions": {"type": "Admitted"}}}, "wrong_type"),
]


@pytest.mark.parametrize(("kind", "obj", "reason"), MALFORMED)
async def test_an_object_that_cannot_be_parsed_is_set_aside(
    store: Store, kind: str, obj: dict[str, Any], reason: str
) -> None:
    ingestor, registry, _ = make_ingestor(store)
    normal_uid, normal = lifecycle("normal")
    await apply(ingestor, [(kind, "ADDED", obj), *normal])
    assert (await stored.get_job(store, "test", normal_uid)) is not None
    assert ingestor.stats.parse_errors == 1
    assert rejected_total(registry, kind, reason) == 1
    [record] = await stored.rejected_objects(store, "test")
    assert (record.kind, record.reason, record.count) == (kind, reason, 1)


async def test_the_logged_once_memory_is_bounded(store: Store, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="inno_notify.service.ingest")
    ingestor, _, _ = make_ingestor(store, logged_once_max=2)

    def bad(uid: str) -> tuple[str, str, Any]:
        metadata = {"uid": uid, "name": "\x00" + "n" * 400, "namespace": "ns"}
        return ("Job", "ADDED", {"metadata": metadata, "spec": {"parallelism": "²"}})

    for uid in ("a", "b", "a", "c", "a"):
        await apply(ingestor, [bad(uid)])
    logged = [r.getMessage() for r in caplog.records if "set aside" in r.getMessage()]
    # a, b logged; a again is remembered; c pushes the oldest (b) out; a is still remembered.
    assert [m.split("uid=")[1].split(" ")[0] for m in logged] == ["'a'", "'b'", "'c'"]
    await apply(ingestor, [bad("b")])  # forgotten, so logged again: the memory holds two
    assert sum("uid='b'" in r.getMessage() for r in caplog.records) == 2
    assert all(len(m) < 1200 and "\x00" not in m for m in logged)  # repr, capped


class FlakyJobs(JobRepository):
    """The real job repository, whose ingest transactions fail `failures` times as a lost
    connection does."""

    def __init__(self, engine: AsyncEngine, failures: int) -> None:
        super().__init__(engine)
        self.failures = failures

    @asynccontextmanager
    async def ingest_transaction(self) -> AsyncIterator[IngestTransaction]:
        if self.failures > 0:
            self.failures -= 1
            raise sa_exc.OperationalError("INSERT …", {}, ConnectionResetError("connection lost"))
        async with super().ingest_transaction() as tx:
            yield tx


class FlakyStore(Store):
    """The real store, whose ingest transactions fail `failures` times."""

    def __init__(self, store: Store, failures: int) -> None:
        super().__init__(store.engine)
        self.jobs = FlakyJobs(store.engine, failures)


async def test_a_database_that_fails_for_a_while_is_waited_for_with_capped_backoff(store: Store) -> None:
    flaky = FlakyStore(store, failures=6)
    ingestor, _, sleeps = make_ingestor(flaky, retry_cap_seconds=0.5)
    uid, events = lifecycle("patient")
    await apply(ingestor, events)
    assert sleeps.delays == [0.1, 0.2, 0.4, 0.5, 0.5, 0.5]
    assert (ingestor.stats.write_errors, ingestor.stats.retried_writes, ingestor.stats.rejected) == (6, 1, 0)
    job = await stored.get_job(store, "test", uid)
    assert job is not None and job.status is JobStatus.SUCCEEDED


async def test_relisted_objects_of_odd_shape_do_not_stop_reconciliation(store: Store) -> None:
    ingestor, _, _ = make_ingestor(store)
    uid, events = lifecycle("open")
    await apply(ingestor, events[:2])
    # A relist hands its objects over as SYNC events (odd ones are set aside), then their uids.
    odd: Sequence[Any] = [{"metadata": "x"}, {"metadata": {"uid": ["list"]}}]
    await apply(ingestor, [*(("Job", "SYNC", o) for o in odd), ("relist", "Job", frozenset())])
    job = await stored.get_job(store, "test", uid)
    assert job is not None and job.status is JobStatus.DELETED  # not in the relist: closed out
    async with store.engine.connect() as conn:
        assert await conn.scalar(sa.text("SELECT count(*) FROM jobs")) == 1
