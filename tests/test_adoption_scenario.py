"""A family whose second run followed the advice, played on the simulated cluster through the whole
service (watch → ingest → usage from simulated DCGM/cAdvisor traces → advice → adoption): the weekly
digest and GET /api/v1/adoption show it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from inno_notify.adapters.db.repository import Store
from inno_notify.sim.objects import JobSpec
from inno_notify.sim.workload import GIB, PEOPLE, Behaviour, SimJob, Workload
from tests import stored
from tests.api.conftest import serve_api
from tests.scenario import play

pytestmark = pytest.mark.slow

START = datetime(2026, 11, 23, 8, 0, tzinfo=UTC)
ALICE = PEOPLE[0]
FAMILY = {"inno-notify/family": "train-resnet"}


def run(name: str, gpus: int, submit: datetime) -> SimJob:
    """One hour on `gpus` GPUs of which only two compute; memory and CPU well within the request."""
    utils = (80.0, 75.0) + (0.0,) * (gpus - 2)
    return SimJob(
        spec=JobSpec(
            name=name, namespace="face-research", owner=ALICE.email, gpus=gpus, memory="64Gi", cpu="8",
            labels=FAMILY,
        ),
        person=ALICE,
        submit_at=submit,
        queue_seconds=30.0,
        run_seconds=3600.0,
        outcome="succeeded",
        behaviour=Behaviour(
            gpu_util_percent=utils, gpu_memory_gib=(20.0,) * gpus, memory_peak_bytes=40 * GIB, cpu_cores=5.0
        ),
        node="gpu-node-1",
    )  # fmt: skip


async def test_the_second_run_followed_the_advice(tmp_path: Path) -> None:
    first = run("train-resnet-7f9c2", 4, START)
    # Submitted ten minutes after the first run's advice was out (it ended at 1 h 30 s).
    second = run("train-resnet-x8k2p", 2, START + timedelta(hours=1, minutes=12))
    workload = Workload(start=START, jobs=(first, second))

    result = await play(workload, tmp_path, speed=1000, timeout_seconds=120)

    store = Store.from_url(result.database_url)
    try:
        advice = await stored.recommendations_of(store, "demo", first.spec.uid)
        assert [(r.kind.value, r.current, r.suggested) for r in advice] == [("gpu_count", 4, 2)]
        judged = await store.adoption.get("demo", second.spec.uid)
        assert judged is not None and judged.outcome.value == "followed"
        assert judged.previous_uid == first.spec.uid
        # 2 GPUs fewer over the second run's runtime: started at submit + 1 s, ended at submit +
        # 30 s + 1 h + 2 s, so 3631 s.
        assert judged.gpu_hours_freed == pytest.approx(2 * 3631 / 3600)

        text, _ = result.digests["face"]
        assert "Advice followed in 1 of 1 new runs; 2 GPU-h freed this week." in text
        assert f"{ALICE.email}: 1 of 1 runs followed, 2 GPU-h freed" in text

        async with serve_api(store) as api:
            status, body = await api.get("/api/v1/adoption", "viewer", params={"team": "face"})
        assert status == 200
        assert body["total"]["followed"] == 1 and body["total"]["advised"] == 1
        assert body["total"]["runs"] == 2  # the first run had no prior advice
        assert body["groups"][0]["owner"] == ALICE.email
        assert body["groups"][0]["gpu_hours_freed"] == pytest.approx(2 * 3631 / 3600)
    finally:
        await store.close()
