"""Migration 0023 on a database with measured jobs: each job's row gains the GPU model of its stored
per-GPU rows (the one with the most held minutes, as one capped line; NULL where none names one), and
it goes down and up again, on both dialects."""

from __future__ import annotations

import json

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from inno_notify.domain.parsing.storable import NAME_MAX_BYTES, TRUNCATION_MARK

from .revisions import columns_of, to, trip
from .test_migrate_queue_quotas import _seed

A100, H100 = "NVIDIA A100-SXM4-80GB", "NVIDIA H100 80GB HBM3"


def _gpu(model: object, minutes: object) -> dict[str, object]:
    return {"pod_uid": "p", "pod_name": "p", "gpu": "n/0", "model": model, "held_minutes": minutes}


# uid -> the usage detail's per-GPU rows as releases before 0023 stored them.
DETAILS: dict[str, object] = {
    "measured": [_gpu(A100, 10.0), _gpu(H100, 30.0), _gpu(A100, 15.0)],  # mixed: most minutes wins
    "hostile": [_gpu("NVIDIA\u0001 A100\t" + "X" * 10_000, 5.0)],
    "no-model": [_gpu(None, 5.0), _gpu(7, 5.0), "not a row"],
    "no-gpus": "not a list",
}


def _seed_details(connection: Connection) -> None:
    for uid in ("hostile", "no-model", "no-gpus"):
        connection.execute(
            sa.text(
                "INSERT INTO jobs (cluster, uid, namespace, name, kind, status, notify, sort_at,"
                " gpus_requested, requested, labels, event_counts, summary_state, usage_attempts)"
                " VALUES ('c', :uid, 'ns', :uid, 'job', 'succeeded', 'always', '2026-11-30 10:05:00', 1.0,"
                " '{}', '{}', '{}', 'none', 0)"
            ),
            {"uid": uid},
        )
        connection.execute(
            sa.text("INSERT INTO usage (cluster, job_uid, detail) VALUES ('c', :uid, '{}')"), {"uid": uid}
        )
    for uid, gpus in DETAILS.items():
        connection.execute(
            sa.text("UPDATE usage SET detail = :detail WHERE job_uid = :uid"),
            {"uid": uid, "detail": json.dumps({"gpus": gpus})},
        )


def _models(connection: Connection) -> dict[str, object]:
    return {uid: model for uid, model in connection.execute(sa.text("SELECT uid, gpu_model FROM jobs"))}


async def test_0023_copies_the_most_held_gpu_model_onto_the_job(empty_database_url: str) -> None:
    async with trip(empty_database_url) as db:
        await db.run(to("0022"), _seed, _seed_details)
        models = await db.run(to("0023"), _models)
        hostile = models.pop("hostile")
        assert models == {"measured": H100, "unmeasured": None, "no-model": None, "no-gpus": None}
        assert isinstance(hostile, str) and hostile.startswith("NVIDIA A100 XXX")
        assert hostile.endswith(TRUNCATION_MARK) and len(hostile.encode()) == NAME_MAX_BYTES
        assert "gpu_model" not in await db.run(to("0022", down=True), columns_of("jobs"))
        assert (await db.up_to_head())[0] == "0023"
