"""When a model that serves is news: once per revision, never for one that served before we looked."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from inno_notify.domain.serving import ServingRecord, announce, trained_by_ref

T0 = datetime(2026, 11, 30, 10, 0, tzinfo=UTC)
HORIZON = T0 - timedelta(hours=1)
READY = ServingRecord(
    cluster="c", uid="u", namespace="ns", name="m", ready=True, ready_at=T0, revision="m-predictor-00002"
)


@pytest.mark.parametrize(
    ("record", "announced", "known", "decision"),
    [
        (READY, None, False, True),  # new and ready: news
        (READY, "m-predictor-00001", True, True),  # a new revision after a rollout
        (READY, "m-predictor-00002", True, None),  # announced already (restart, relist, flapping)
        (replace(READY, ready=False, revision=None), None, True, None),  # not ready: nothing to say
        (replace(READY, ready_at=T0 - timedelta(days=30)), None, False, False),  # served before we looked
        (replace(READY, ready_at=None), None, False, False),
        # Known (seen not ready first) and now ready: news even if Ready flipped long ago.
        (replace(READY, ready_at=T0 - timedelta(days=30)), None, True, True),
        # A new revision while Ready stayed True since long ago (Knative rollout): news.
        (replace(READY, ready_at=T0 - timedelta(days=30)), "m-predictor-00001", True, True),
    ],
)
def test_announce(record: ServingRecord, announced: str | None, known: bool, decision: bool | None) -> None:
    assert announce(record, announced, known, HORIZON) is decision


@pytest.mark.parametrize(
    ("value", "ref"),
    [
        ("job/train-resnet-7", ("job", "train-resnet-7")),
        ("workflow/hpo-x9k2m", ("workflow", "hpo-x9k2m")),
        ("train-resnet-7", (None, "train-resnet-7")),
        ("pod/x", None),
        ("job/a/b", None),
        ("job/", None),
        ("", None),
        (None, None),
    ],
)
def test_trained_by_ref(value: str | None, ref: tuple[str | None, str] | None) -> None:
    assert trained_by_ref(value) == ref
