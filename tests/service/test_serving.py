"""KServe end to end, on both databases: an InferenceService that becomes Ready gives one "model is
serving" message (naming the job that trained it), a restart does not repeat it, a new revision is
news again, and a service that served before we first looked is recorded without a message."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from pathlib import Path

from inno_notify.adapters.db import Store
from inno_notify.domain.messages import decode_serving
from inno_notify.domain.model import DeliveryStatus, Notification, NotificationKind
from inno_notify.sim.kube_store import INFERENCE_SERVICES, JOBS, PODS
from inno_notify.sim.objects import JobSpec, job_object, job_started, job_succeeded, pod_object
from inno_notify.sim.pipelines import (
    SimInferenceService,
    inference_service_object,
    isvc_ready,
    serving_changes,
)

from .workflow_support import T0, Harness, StepMeter, harness


async def serving_rows(h: Harness) -> list[Notification]:
    return [row for row in await h.outbox() if row.kind is NotificationKind.MODEL_SERVING]


ISVC = SimInferenceService(
    name="resnet-serve",
    namespace="face-research",
    created=T0 + timedelta(hours=2),
    owner="alice@example.com",
    trained_by="job/train-resnet-7",
    gpus=1,
)


async def test_a_model_that_becomes_ready_is_announced_once(
    store: Store, database_url: str, tmp_path: Path
) -> None:
    async with harness(store, database_url, tmp_path, StepMeter({}), now=T0 + timedelta(hours=2)) as h:
        trained = JobSpec(name="train-resnet-7", namespace="face-research", owner="alice@example.com", gpus=4)
        job = job_object(trained, T0)
        h.sim.create(JOBS, job)
        h.sim.create(PODS, pod_object(job, "a1b2c", T0))
        h.sim.update(JOBS, job_succeeded(job_started(job, T0), T0 + timedelta(hours=1)))
        created, ready = serving_changes(ISVC)
        h.sim.create(INFERENCE_SERVICES, created.obj)

        async def seen() -> bool:
            recorder = h.pipeline.workflows.recorder if h.pipeline.workflows else None
            return recorder is not None and recorder.stats.by_kind.get("InferenceService", 0) >= 1

        await h.until(seen)
        assert await serving_rows(h) == []  # created, not ready: nothing to say yet
        h.sim.update(INFERENCE_SERVICES, ready.obj)

        async def announced() -> bool:
            return len(await serving_rows(h)) == 1

        await h.until(announced)
        await h.rounds(ISVC.ready_at + timedelta(seconds=1))
        [row] = await serving_rows(h)
        assert (row.kind, row.recipient, row.status) == (
            NotificationKind.MODEL_SERVING,
            "alice@example.com",
            DeliveryStatus.SENT,
        )
        notice = decode_serving(row.payload)
        assert (notice.name, notice.revision, notice.url, notice.gpus) == (
            "resnet-serve",
            "resnet-serve-predictor-00001",
            "https://resnet-serve.face-research.example.org",
            1.0,
        )
        assert notice.trained_by is not None
        assert (notice.trained_by.kind, notice.trained_by.name, notice.trained_by.status) == (
            "job",
            "train-resnet-7",
            "succeeded",
        )
        [(email, mail)] = [(e, m) for e, m in h.sender.mails() if "is serving" in m.subject]
        assert email == "alice@example.com"
        assert (
            mail.subject
            == "[inno-notify] face-research/resnet-serve is serving (resnet-serve-predictor-00001)"
        )
        assert "Trained by:  job face-research/train-resnet-7 (succeeded)" in mail.text
        # The same Ready state again (a relist after a compaction), and a flapping status: no news.
        h.sim.update(
            INFERENCE_SERVICES,
            isvc_ready(
                h.sim.store.get(INFERENCE_SERVICES, "face-research", "resnet-serve"),
                "resnet-serve-predictor-00001",
                ISVC.ready_at,
            ),
        )
        h.sim.compact()
        h.sim.drop_watches()
        events = h.watcher.watchers["InferenceService"].stats.lists

        async def relisted() -> bool:
            return h.watcher.watchers["InferenceService"].stats.lists > events

        await h.until(relisted)
        await h.rounds(ISVC.ready_at + timedelta(minutes=5))
        assert len(await serving_rows(h)) == 1
        sim = h.sim

    # A restart: a new pipeline relists the ready service; the revision is recorded, nothing is sent.
    async with harness(
        store, database_url, tmp_path, StepMeter({}), now=ISVC.ready_at + timedelta(hours=1)
    ) as again:
        current = sim.store.get(INFERENCE_SERVICES, "face-research", "resnet-serve")
        again.sim.create(INFERENCE_SERVICES, current)

        async def seen_again() -> bool:
            recorder = again.pipeline.workflows.recorder if again.pipeline.workflows else None
            return recorder is not None and recorder.stats.by_kind.get("InferenceService", 0) >= 1

        await again.until(seen_again)
        await again.rounds(ISVC.ready_at + timedelta(hours=1))
        assert len(await serving_rows(again)) == 1 and again.sender.sent == []
        # A rollout to a new revision is news.
        later = ISVC.ready_at + timedelta(hours=3)
        again.sim.update(INFERENCE_SERVICES, isvc_ready(current, "resnet-serve-predictor-00002", later))

        async def second() -> bool:
            return len(await serving_rows(again)) == 2

        await again.until(second)
        await again.rounds(later + timedelta(seconds=1))
        assert [decode_serving(r.payload).revision for r in await serving_rows(again)] == [
            "resnet-serve-predictor-00001",
            "resnet-serve-predictor-00002",
        ]
        assert len(again.sender.sent) == 1


async def test_a_model_serving_since_before_we_looked_is_no_news(
    store: Store, database_url: str, tmp_path: Path
) -> None:
    old = replace(ISVC, created=T0 - timedelta(days=30))
    start = T0 + timedelta(hours=5)
    async with harness(store, database_url, tmp_path, StepMeter({}), started_at=start, now=start) as h:
        h.sim.create(
            INFERENCE_SERVICES,
            isvc_ready(inference_service_object(old), "resnet-serve-predictor-00004", old.ready_at),
        )

        async def recorded() -> bool:
            async with store.workflows.workflow_transaction() as tx:
                return (await tx.served_model("test", old.uid))[0]

        await h.until(recorded)
        await h.rounds(start + timedelta(minutes=1))
        assert await serving_rows(h) == [] and h.sender.sent == []
