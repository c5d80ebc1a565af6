"""The typed codec: JSON shapes derived from the domain types, both ways."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

from inno_notify.adapters.db.json_codec import json_dumper, json_loader
from inno_notify.domain.model import (
    ContainerRecord,
    GpuUsage,
    KueueInfo,
    MissingFigure,
    MissingReason,
    Recommendation,
    RecommendationKind,
    Requested,
    Severity,
    TerminatedState,
    Unit,
)

from .records import pod, recommendations, usage


def _load(tp: Any, data: Any) -> Any:
    load = json_loader(tp)
    return data if load is None else load(data)


def _dump(tp: Any, value: Any) -> Any:
    dump = json_dumper(tp)
    return value if dump is None else dump(value)


@pytest.mark.parametrize(
    ("tp", "value"),
    [
        (tuple[ContainerRecord, ...], pod().containers),
        (tuple[GpuUsage, ...], usage().gpus),
        (tuple[MissingFigure, ...], usage().missing),
        (tuple[Recommendation, ...], recommendations()),
        (KueueInfo | None, None),
        (Requested, Requested()),
    ],
)
def test_round_trip(tp: Any, value: Any) -> None:
    assert _load(tp, _dump(tp, value)) == value


def test_times_are_stored_in_utc_and_read_back_aware() -> None:
    at = datetime(2026, 11, 30, 12, 0, tzinfo=timezone(timedelta(hours=3)))
    stored = _dump(TerminatedState, TerminatedState(exit_code=1, finished_at=at))
    assert stored["finished_at"] == "2026-11-30T09:00:00+00:00"
    assert _load(TerminatedState, stored).finished_at == at.astimezone(UTC)
    with pytest.raises(ValueError, match="without a zone"):
        _load(TerminatedState, {**stored, "finished_at": "2026-11-30T09:00:00"})


@pytest.mark.parametrize(
    ("tp", "data", "expected"),
    [
        # Keys written before a field existed read as its default.
        (ContainerRecord, {"name": "main"}, ContainerRecord(name="main")),
        (GpuUsage, {"pod_uid": "p", "pod_name": "n", "gpu": "0"}, GpuUsage("p", "n", "0")),
        # Keys the type does not know (a newer writer) are left aside.
        (
            MissingFigure,
            {"figure": "cpu", "reason": "no_samples", "detail": None, "later": 1},
            MissingFigure("cpu", MissingReason.NO_SAMPLES),
        ),
    ],
)
def test_missing_and_unknown_keys(tp: Any, data: dict[str, Any], expected: Any) -> None:
    assert _load(tp, data) == expected


def test_plain_values_come_back_as_stored() -> None:
    loaded = _load(Requested, {"extended": {"nvidia.com/gpu": 4, "nvidia.com/mig-1g.10gb": 0.5}})
    assert [type(v) for v in loaded.extended.values()] == [int, float]


def test_enums_are_stored_as_their_values() -> None:
    rec = Recommendation(RecommendationKind.GPU_COUNT, Severity.WARNING, 4, 1, Unit.GPUS, "request 1 GPU")
    stored = _dump(Recommendation, rec)
    assert (stored["kind"], stored["severity"], stored["unit"]) == ("gpu_count", "warning", "gpus")
    assert stored["current"] == 4 and isinstance(_load(Recommendation, stored).current, int)
