"""Property: Kubernetes-shaped objects with arbitrary values, mixed into a normal job's events, go
through parsing and the store's ingest write on both databases; nothing escapes the pipeline, every
object parsing accepted is stored (the database refuses none), and the normal job is recorded."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from inno_notify.adapters.db.repository import Store
from inno_notify.domain.model import JobStatus
from inno_notify.domain.parsing import ParseConfig
from inno_notify.service.ingest import IngestOptions, Ingestor
from inno_notify.sim.objects import JobSpec, job_object, job_started, job_succeeded
from tests import stored
from tests.domain.parsing.hostile import KIND_OF, TEMPLATES, hostile_object

T0 = datetime(2026, 11, 30, 10, 0, tzinfo=UTC)
CFG = ParseConfig(cluster="prop", namespace_teams={"nlp": "nlp"})
_serial = itertools.count()

hostile_events = st.lists(
    st.sampled_from(sorted(TEMPLATES)).flatmap(
        lambda template: st.tuples(
            st.just(KIND_OF[template]),
            st.sampled_from(["ADDED", "MODIFIED", "DELETED"]),
            hostile_object(template),
        )
    ),
    min_size=1,
    max_size=4,
)


def normal_job() -> tuple[str, list[tuple[str, str, Any]]]:
    spec = JobSpec(name=f"normal-{next(_serial)}", namespace="ns", owner="alice@example.com")
    job = job_object(spec, T0)
    done = job_succeeded(job_started(job, T0), T0 + timedelta(hours=1))
    return spec.uid, [("Job", "ADDED", job), ("Job", "MODIFIED", done)]


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(hostile=hostile_events, position=st.integers(0, 4))
async def test_hostile_objects_never_escape_and_whatever_parses_is_stored(
    store: Store, hostile: list[tuple[str, str, Any]], position: int
) -> None:
    ingestor = Ingestor(
        store, CFG, IngestOptions(catch_up_seconds=86400), lambda: T0 + timedelta(hours=2), T0
    )
    uid, normal = normal_job()
    events = [*normal[:1], *hostile[:position], *normal[1:], *hostile[position:]]
    await ingestor.apply(events)
    stats = ingestor.stats
    assert (stats.unstorable, stats.dropped_batches, stats.write_errors) == (0, 0, 0)
    job = await stored.get_job(store, "prop", uid)
    assert job is not None and job.status is JobStatus.SUCCEEDED
