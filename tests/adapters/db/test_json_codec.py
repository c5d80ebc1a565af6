"""The typed codec: JSON shapes derived from the domain types, both ways."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
import sqlalchemy as sa

from inno_notify.adapters.db.json_codec import RowCodec, json_dumper, json_loader
from inno_notify.domain.model import (
    ContainerRecord,
    GpuUsage,
    JobStatus,
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


def test_a_null_field_reads_as_none_but_an_enums_is_refused() -> None:
    # As the store always read them back: a null where the writer had None, whatever the type.
    loaded = _load(ContainerRecord, {"name": "main", "requests": None, "terminated": None})
    assert (loaded.requests, loaded.terminated) == (None, None)
    with pytest.raises(ValueError):
        _load(MissingFigure, {"figure": "cpu", "reason": None})


def test_what_is_no_t_is_a_value_error() -> None:
    with pytest.raises(ValueError):
        _load(MissingFigure, {"figure": "cpu", "reason": "no such reason"})
    with pytest.raises(ValueError):
        _load(GpuUsage, {"pod_uid": "p"})  # required fields missing
    with pytest.raises(ValueError):
        _load(tuple[GpuUsage, ...], "not a list")


def test_floats_the_store_holds_are_written_as_they_are() -> None:
    stored = _dump(Requested, Requested(gpus=float("inf"), extended={"a": 4, "b": float("nan")}))
    assert stored["gpus"] == float("inf") and stored["extended"]["a"] == 4
    assert type(stored["extended"]["a"]) is int and stored["extended"]["b"] != stored["extended"]["b"]


@dataclass(frozen=True, slots=True)
class _Record:
    key: str
    status: JobStatus = JobStatus.PENDING
    at: datetime | None = None
    count: int = 1
    tags: tuple[str, ...] = ()
    kueue: KueueInfo | None = None
    note: str | None = None
    gpus: tuple[GpuUsage, ...] = ()


def _table(*names: str) -> sa.Table:
    return sa.Table("records", sa.MetaData(), *(sa.Column(name) for name in names))


_WITH_REST = RowCodec(_Record, _table("key", "status", "at", "count", "tags", "kueue", "rest"), rest="rest")
_RECORD = _Record(
    key="k",
    status=JobStatus.FAILED,
    at=datetime(2026, 11, 30, 12, 0, tzinfo=timezone(timedelta(hours=3))),
    count=3,
    tags=("a", "b"),
    kueue=KueueInfo(local_queue="lq", admitted_at=datetime(2026, 11, 30, 9, 0, tzinfo=UTC)),
    note="n",
    gpus=(GpuUsage("p", "n", "0", held_minutes=4),),
)


def _through_the_database(row: dict[str, Any]) -> dict[str, Any]:
    return {k: json.loads(json.dumps(v)) if isinstance(v, (dict, list)) else v for k, v in row.items()}


def test_a_row_is_the_columns_in_field_order_then_the_rest() -> None:
    row = _WITH_REST.to_row(_RECORD)
    assert list(row) == ["key", "status", "at", "count", "tags", "kueue", "rest"]
    assert row["status"] == "failed" and type(row["status"]) is str
    assert row["at"] is _RECORD.at  # a typed column takes the datetime as it is
    assert row["tags"] == ["a", "b"]
    assert row["kueue"]["admitted_at"] == "2026-11-30T09:00:00+00:00"
    assert list(row["rest"]) == ["note", "gpus"] and row["rest"]["gpus"][0]["held_minutes"] == 4
    assert _WITH_REST.from_row(_through_the_database(row)) == _RECORD


def test_a_null_column_reads_as_the_default_unless_the_field_may_be_none() -> None:
    row = _through_the_database(_WITH_REST.to_row(_RECORD))
    nulls = {**row, "status": None, "count": None, "tags": None, "kueue": None, "at": None}
    assert _WITH_REST.from_row(nulls) == _Record("k", note="n", gpus=_RECORD.gpus)


def test_the_rest_object_missing_null_and_unknown_keys() -> None:
    row = _through_the_database(_WITH_REST.to_row(_RECORD))
    assert _WITH_REST.from_row({**row, "rest": None}).gpus == ()
    assert _WITH_REST.from_row({**row, "rest": {"note": None, "later": 1}}).note is None
    # A key in the object named like a column does not win over the column.
    assert _WITH_REST.from_row({**row, "rest": {"key": "other"}}).key == "k"


def test_without_rest_fields_without_a_column_are_not_stored() -> None:
    codec = RowCodec(_Record, _table("key", "count", "ignored"))
    assert codec.columns == ("key", "count")
    row = codec.to_row(_RECORD)
    assert row == {"key": "k", "count": 3}
    assert codec.from_row({**row, "ignored": 1, "note": "not a column"}) == _Record("k", count=3)
