"""Advice adoption in the store (adapters/db/adoption.py), on both dialects: the previous run's
advice, the record written once, and the sums per team and owner on hand-computed figures."""

from __future__ import annotations

import json
from dataclasses import asdict, replace
from datetime import UTC, datetime, timedelta

import pytest

from inno_notify.adapters.db import Store
from inno_notify.adapters.db import adoption as adoption_queries
from inno_notify.domain.adoption import Adoption, AdoptionTally, AdviceCheck, Outcome, judge
from inno_notify.domain.model import RecommendationKind
from tests import stored

from .records import T0, job, recommendations, usage

DAY = timedelta(days=1)


async def _finished(store: Store, uid: str, finished: datetime, **changes: object) -> None:
    """A measured run of the train-resnet family that finished at `finished`."""
    record = job(uid, created_at=finished - timedelta(hours=2), finished_at=finished, **changes)
    await stored.upsert_jobs(store, [record])
    await stored.save_usage(store, "default", uid, usage())


async def test_previous_advice_is_the_newest_measured_run_finished_before(store: Store) -> None:
    await _finished(store, "old", T0)
    await _finished(store, "prev", T0 + DAY)
    await stored.save_recommendations(store, "default", "prev", recommendations())
    await _finished(store, "later", T0 + 3 * DAY)  # finished after the new run was created
    await _finished(store, "elsewhere", T0 + 2 * DAY - timedelta(hours=1), namespace="other")
    # Finished, never measured: it was given no advice yet.
    await stored.upsert_jobs(store, [job("unmeasured", finished_at=T0 + 2 * DAY - timedelta(hours=2))])

    found = await store.adoption.previous_advice(
        "default", "face-research", "train-resnet", T0 + 2 * DAY, "new"
    )

    assert found is not None
    previous, advice = found
    assert previous.uid == "prev"
    assert tuple(advice) == recommendations()
    repo = store.adoption
    assert await repo.previous_advice("default", "face-research", "other", T0 + 2 * DAY, "x") is None
    assert await repo.previous_advice("default", "face-research", "train-resnet", T0, "x") is None


async def test_an_adoption_is_recorded_once(store: Store) -> None:
    await _finished(store, "prev", T0)
    await _finished(store, "new", T0 + DAY)
    previous = await stored.get_job(store, "default", "prev")
    new = await stored.get_job(store, "default", "new")
    assert previous is not None and new is not None
    new = replace(new, requested=replace(new.requested, extended={"nvidia.com/gpu": 2}, gpus=2.0))
    adoption = judge(new, previous, recommendations(), T0 + 2 * DAY)
    assert adoption is not None

    assert await store.adoption.record(adoption) is True
    assert await store.adoption.record(replace(adoption, outcome=Outcome.IGNORED)) is False

    assert await store.adoption.get("default", "new") == adoption
    assert await store.adoption.get("default", "prev") is None


async def test_an_adoption_is_stored_with_the_summary_once(store: Store) -> None:
    """The usage collector hands the judged run to complete_summary: one transaction with the
    summary, and a summary stored again (a claim taken over after a crash) keeps the first."""
    await _finished(store, "new", T0 + DAY)
    new = await stored.get_job(store, "default", "new")
    assert new is not None
    adoption = judge(new, None, [], T0 + 2 * DAY)
    assert adoption is not None

    await store.jobs.complete_summary("default", "new", usage(), [], [], adoption=adoption)
    await store.jobs.complete_summary(
        "default", "new", usage(), [], [], adoption=replace(adoption, outcome=Outcome.IGNORED)
    )

    assert await store.adoption.get("default", "new") == adoption


async def _adopted(
    store: Store,
    uid: str,
    outcome: Outcome,
    *,
    owner: str = "alice@example.com",
    team: str = "face",
    finished: datetime = T0,
    gpu: float | None = 0.0,
    memory: float | None = 0.0,
) -> None:
    record = job(uid, owner=owner, team=team, finished_at=finished)
    await stored.upsert_jobs(store, [record])
    adoption = judge(record, None, [], finished)
    assert adoption is not None
    await store.adoption.record(
        replace(adoption, outcome=outcome, gpu_hours_freed=gpu, memory_gib_hours_freed=memory)
    )


async def test_groups_sum_per_team_and_owner_within_the_window(store: Store) -> None:
    alice, bob = "alice@example.com", "bob@example.com"
    await _adopted(store, "a1", Outcome.FOLLOWED, gpu=10.0, memory=100.0)
    await _adopted(store, "a2", Outcome.FOLLOWED, gpu=2.5, memory=None)
    await _adopted(store, "a3", Outcome.IGNORED)
    await _adopted(store, "a4", Outcome.NO_PRIOR_ADVICE)
    await _adopted(store, "b1", Outcome.PARTLY, owner=bob, gpu=1.0, memory=8.0)
    await _adopted(store, "b2", Outcome.OVER_CORRECTED, owner=bob)
    await _adopted(store, "b3", Outcome.FOLLOWED, owner=bob, gpu=None, memory=None)
    await _adopted(store, "v1", Outcome.FOLLOWED, team="vision", gpu=7.0)
    await _adopted(store, "late", Outcome.FOLLOWED, finished=T0 + 7 * DAY, gpu=99.0)

    groups = await store.adoption.groups(team="face", since=T0 - DAY, until=T0 + DAY)

    assert [(g.team, g.owner) for g in groups] == [("face", alice), ("face", bob)]
    # Field by field, the hours freed approximately.
    assert asdict(groups[0].tally) == pytest.approx(asdict(AdoptionTally(
        runs=4, advised=3, followed=2, partly=0, ignored=1, over_corrected=0,
        gpu_hours_freed=12.5, memory_gib_hours_freed=100.0,
    )))  # fmt: skip
    assert asdict(groups[1].tally) == pytest.approx(asdict(AdoptionTally(
        runs=3, advised=3, followed=1, partly=1, ignored=0, over_corrected=1,
        gpu_hours_freed=1.0, memory_gib_hours_freed=8.0,
    )))  # fmt: skip
    everyone = await store.adoption.groups()
    assert [(g.team, g.owner) for g in everyone] == [("face", alice), ("face", bob), ("vision", alice)]
    assert everyone[0].tally.runs == 5
    assert await store.adoption.groups(since=datetime(2030, 1, 1, tzinfo=UTC)) == []


def test_the_checks_json_is_what_the_hand_written_codec_wrote() -> None:
    # Rows written before adoption.py went through json_codec hold exactly this shape and key order.
    checks = (
        AdviceCheck(RecommendationKind.GPU_COUNT, "spec.containers[0]", 4, 2.5, "3", Outcome.FOLLOWED),
        AdviceCheck(RecommendationKind.MEMORY, None, None, "16Gi", None, Outcome.IGNORED),
    )
    adoption = Adoption(
        "default", "new", "face-research", "train-new", "train-resnet", None, None, T0, None, None,
        Outcome.PARTLY, checks, 1.5, None, T0,
    )  # fmt: skip
    old = [
        {"kind": "gpu_count", "field_path": "spec.containers[0]", "current": 4, "suggested": 2.5, "new": "3",
         "outcome": "followed"},
        {"kind": "memory", "field_path": None, "current": None, "suggested": "16Gi", "new": None,
         "outcome": "ignored"},
    ]  # fmt: skip
    row = adoption_queries.to_row(adoption)
    assert json.dumps(row["checks"]) == json.dumps(old)
    assert (row["outcome"], row["finished_at"]) == ("partly", T0)
    # A check that no longer reads is left out; the others read back as they were.
    assert adoption_queries.from_row({**row, "checks": [*old, {"kind": "gone"}]}) == adoption  # type: ignore[arg-type]
