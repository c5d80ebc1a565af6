"""Two clusters, two services, one database (issue 21): one API and one team digest across them.

Two sim API servers ("north" and "south") each run a job of the same name, namespace and uid (the
key is (cluster, uid), so nothing collides); one `serve` per cluster, each with its own `cluster`
name and election, writes into one Postgres database. Checked:

- each job is stored once per cluster, labelled with its cluster, and its owner's summary is sent
  by that cluster's service (a leader claims only its own cluster's work);
- `/api/v1/usage` sums both clusters and `?cluster=` filters it, as it does `/api/v1/jobs` and
  `/api/v1/recommendations`;
- the team's weekly digest, planned by both services (the digest is turned on by restarting them),
  is delivered exactly once and counts both clusters' GPU-hours;
- restarting (SIGKILL, then start) north's service changes nothing in south's records: its jobs,
  its outbox rows and its lease term.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from inno_notify.adapters.db import Store
from inno_notify.adapters.db.jobs import JobFilter
from inno_notify.adapters.db.leases import LeaseRepository
from inno_notify.domain.model import NotificationKind
from inno_notify.domain.weeks import last_complete_week
from inno_notify.sim.kube_api import SimKubeServer
from inno_notify.sim.kube_store import JOBS, PODS
from inno_notify.sim.objects import (
    JobSpec,
    job_object,
    job_started,
    job_succeeded,
    pod_object,
    pod_running,
    pod_terminated,
)
from tests.db_support import postgres_database
from tests.waiting import eventually

from .replicas import API_TOKEN, Replica, base_config, start_replica, wait_leader
from .support import all_rows

pytestmark = [pytest.mark.postgres, pytest.mark.slow, pytest.mark.serial]

FAST_HA = {"lease_seconds": 3, "renew_deadline_seconds": 2, "retry_period_seconds": 0.5}
SHARED_UID = "0b6f1c2e-0000-4000-8000-000000000021"
# (cluster, GPUs, minutes held): 2 GPU-hours in north, 3 in south.
CLUSTERS = {"north": (2, 60), "south": (1, 180)}
OWNERS = {"north": "nora@example.com", "south": "sam@example.com"}
SLACK_IDS = {"nora@example.com": "UNORA", "sam@example.com": "USAM", "lead@example.com": "ULEAD"}
HEADERS = {"Authorization": f"Bearer {API_TOKEN}"}


def last_week_thursday(now: datetime) -> datetime:
    monday = (now - timedelta(days=now.weekday())).replace(hour=12, minute=0, second=0, microsecond=0)
    return monday - timedelta(days=4)


def run_job(sim: SimKubeServer, cluster: str, end: datetime) -> None:
    gpus, minutes = CLUSTERS[cluster]
    start = end - timedelta(minutes=minutes)
    spec = JobSpec(
        name="train-llm", namespace="face-research", owner=OWNERS[cluster], gpus=gpus, uid=SHARED_UID
    )
    job = sim.create(JOBS, job_started(job_object(spec, start - timedelta(minutes=1)), start))
    pod = sim.create(PODS, pod_object(job, "abcde", start - timedelta(minutes=1), uid=f"pod-{SHARED_UID}"))
    running = sim.update(PODS, pod_running(pod, "gpu-1", start, start))
    sim.update(PODS, pod_terminated(running, end, 0))
    sim.update(JOBS, job_succeeded(job, end))


def config(database: str, kubeconfig: Path, cluster: str, *, digest: bool) -> dict[str, Any]:
    users = [{"email": e, "slack_user_id": s, "channels": ["slack"]} for e, s in SLACK_IDS.items()]
    team = {
        "name": "face",
        "namespaces": ["face-research"],
        "leads": ["lead@example.com"],
        # The digest is off until the jobs are recorded: then the restarts turn it on.
        "digest_channels": ["slack"] if digest else [],
    }
    return base_config(
        database,
        str(kubeconfig),
        FAST_HA,
        cluster=cluster,
        kubernetes={"kubeconfig": str(kubeconfig), "kueue": False, "catch_up_seconds": 30 * 86400},
        directory={"users": users, "teams": [team]},
        digest={"schedule": "* * * * *", "timezone": "UTC"},
    )


async def get_json(session: aiohttp.ClientSession, replica: Replica, path: str) -> Any:
    async with session.get(f"{replica.api}/api/v1/{path}", headers=HEADERS) as response:
        assert response.status == 200, await response.text()
        return await response.json()


async def snapshot(store: Store, leases: LeaseRepository, cluster: str) -> tuple[Any, ...]:
    page = await store.jobs.job_page(JobFilter(cluster=cluster), limit=100)
    rows = [row for row in await all_rows(store) if row.cluster == cluster]
    lease = await leases.get(cluster)
    assert lease is not None
    return (repr(page.rows), repr(page.recommendations), rows, lease.holder, lease.term)


@pytest.fixture
async def database() -> AsyncIterator[str]:
    async with postgres_database("clusters", migrated=True) as url:
        yield url


async def test_two_clusters_into_one_database(database: str, tmp_path: Path) -> None:
    sims = {name: SimKubeServer(bookmark_interval=1.0) for name in CLUSTERS}
    for sim in sims.values():
        await sim.start()
    kubeconfigs = {name: sim.kubeconfig(tmp_path / f"kubeconfig-{name}") for name, sim in sims.items()}
    now = datetime.now(UTC)
    end = last_week_thursday(now)
    week = last_complete_week(now, "UTC")
    for name, sim in sims.items():
        run_job(sim, name, end)
    store = Store.from_url(database)
    leases = LeaseRepository.from_url(database)
    replicas: dict[str, Replica] = {}
    everyone: list[Replica] = []  # replaced ones too: what they delivered counts
    try:
        async with aiohttp.ClientSession() as session:
            for number, name in enumerate(CLUSTERS, start=1):
                cfg = config(database, kubeconfigs[name], name, digest=False)
                replicas[name] = await start_replica(name, number, cfg, tmp_path, slack_users=SLACK_IDS)
                everyone.append(replicas[name])
            for replica in replicas.values():
                await replica.wait_ready(session)
                assert await wait_leader(session, [replica]) is replica  # each cluster elects its own

            # Each owner's summary comes from their own cluster's service, once.
            async def summaries_sent() -> bool:
                return {r: [c for c, _ in rep.slack.posted()] for r, rep in replicas.items()} == {
                    "north": ["UNORA"],
                    "south": ["USAM"],
                }

            await eventually(summaries_sent, within=60, what="each owner's summary, from its cluster")

            jobs = (await get_json(session, replicas["north"], "jobs"))["items"]
            assert sorted((j["cluster"], j["uid"], j["name"]) for j in jobs) == [
                ("north", SHARED_UID, "train-llm"),
                ("south", SHARED_UID, "train-llm"),
            ]
            only_south = (await get_json(session, replicas["north"], "jobs?cluster=south"))["items"]
            assert [(j["cluster"], j["owner"]) for j in only_south] == [("south", OWNERS["south"])]
            one = await get_json(session, replicas["south"], "jobs/face-research/train-llm?cluster=north")
            assert (one["cluster"], one["owner"]) == ("north", OWNERS["north"])
            recs = await get_json(session, replicas["north"], "recommendations?cluster=north")
            assert all(item["job"]["cluster"] == "north" for item in recs["items"])

            async def usage_is(replica: Replica, path: str, minutes: float) -> bool:
                groups = (await get_json(session, replica, path))["groups"]
                return [(g["group"], g["gpu_minutes"]) for g in groups] == [("face", minutes)]

            # The report is cached per window and cluster: poll until it has both jobs. Each service
            # computes the report of all time (every cluster) as it starts, before these jobs were
            # recorded, and serves it for 30 s: the sum of both is asked of north's next service.
            south = replicas["south"]
            await eventually(lambda: usage_is(south, "usage?group_by=team&cluster=north", 120.0), within=60)
            await eventually(lambda: usage_is(south, "usage?group_by=team&cluster=south", 180.0), within=60)

            # --- restart north with the digest on: south's records do not change ---------------
            south_before = await snapshot(store, leases, "south")
            north_term = (await leases.get("north")).term  # type: ignore[union-attr]
            await replicas["north"].kill()
            cfg = config(database, kubeconfigs["north"], "north", digest=True)
            replicas["north"] = await start_replica("north-2", 3, cfg, tmp_path, slack_users=SLACK_IDS)
            everyone.append(replicas["north"])
            await replicas["north"].wait_ready(session)
            assert await wait_leader(session, [replicas["north"]]) is replicas["north"]
            assert (await leases.get("north")).term > north_term  # type: ignore[union-attr]
            # Started after both jobs were recorded: the report of all time it computed sums both.
            north = replicas["north"]
            await eventually(
                lambda: usage_is(north, "usage?group_by=team", 300.0), within=60, what="both summed"
            )

            def digests() -> list[tuple[str, str]]:
                return [
                    (rep.name, str(payload.get("text", "")))
                    for rep in everyone
                    for channel, payload in rep.slack.posted()
                    if channel == "ULEAD"
                ]

            await eventually(lambda: len(digests()) == 1, within=60, what="the team digest")
            assert await snapshot(store, leases, "south") == south_before

            # South plans the same digest when it restarts with the digest on: the dedup key has no
            # cluster, so no second row and no second message.
            assert await replicas["south"].terminate() == 0
            cfg = config(database, kubeconfigs["south"], "south", digest=True)
            replicas["south"] = await start_replica("south-2", 4, cfg, tmp_path, slack_users=SLACK_IDS)
            everyone.append(replicas["south"])
            await replicas["south"].wait_ready(session)
            assert await wait_leader(session, [replicas["south"]]) is replicas["south"]
            rows = [r for r in await all_rows(store) if r.kind is NotificationKind.DIGEST]
            assert [(r.cluster, r.dedup_key) for r in rows] == [
                (None, f"digest/face/{week}/slack/lead@example.com")
            ]
            (_, text), *more = digests()
            assert more == []
            # Both clusters' jobs are in it: 2 + 3 GPU-hours.
            assert "5 h of GPU held" in text and "over 2 jobs" in text, text
            digest = await get_json(session, replicas["south"], f"digests/face?week={week}")
            assert digest["gpu_hours"] == pytest.approx(5.0)
    finally:
        for replica in everyone:
            await replica.close()
        await leases.close()
        await store.close()
        for sim in sims.values():
            await sim.stop()
