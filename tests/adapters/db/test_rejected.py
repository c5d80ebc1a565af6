"""The rejected_objects records, and which write failures are the database's (retried) and which the
data's (never retried): classified on the errors the real databases raise."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import exc as sa_exc

from inno_notify.adapters.db import Store
from inno_notify.adapters.db.failures import describe, is_database_error, is_transient, sqlstate
from inno_notify.domain.model import JobRecord, RejectedObject
from tests import stored

T0 = datetime(2026, 11, 30, 10, 0, tzinfo=UTC)


async def test_a_rejected_object_is_one_row_whose_count_grows(store: Store) -> None:
    first = RejectedObject(cluster="c", kind="Job", uid="u1", reason="wrong_type", namespace="ns", name="a")
    await store.jobs.record_rejected([first], T0)
    again = dataclasses.replace(first, reason="unstorable", detail="DataError [22021]: invalid byte sequence")
    await store.jobs.record_rejected([again, again], T0 + timedelta(minutes=5))
    other = RejectedObject(cluster="c", kind="Pod", uid="u1", reason="bad_time")
    await store.jobs.record_rejected([other], T0 + timedelta(minutes=1))
    job, pod = await stored.rejected_objects(store, "c")  # most recently refused first
    assert (job.kind, job.reason, job.detail, job.count) == ("Job", "unstorable", again.detail, 3)
    assert (job.first_seen_at, job.last_seen_at) == (T0, T0 + timedelta(minutes=5))
    assert (pod.kind, pod.count) == ("Pod", 1)
    assert await stored.rejected_objects(store, "other-cluster") == []


async def test_what_a_rejected_record_holds_is_made_storable(store: Store) -> None:
    hostile = RejectedObject(
        cluster="c",
        kind="Job",
        uid="",
        reason="missing_field",
        namespace="n\x00s",
        name="日" * 2000,
        detail="x\x00" * 5000,
    )
    await store.jobs.record_rejected([hostile], T0)
    [record] = await stored.rejected_objects(store)
    assert record.namespace == "ns"
    assert record.name is not None and len(record.name.encode()) <= 256
    assert record.detail is not None and "\x00" not in record.detail and len(record.detail) <= 1024


async def _refusal(store: Store, record: JobRecord) -> BaseException:
    with pytest.raises(Exception) as raised:
        await stored.upsert_jobs(store, [record])
    return raised.value


BASE = JobRecord(cluster="c", uid="u", namespace="ns", name="n")
REFUSED_BY_POSTGRES = [
    pytest.param(dataclasses.replace(BASE, reason="a\x00b"), "22021", id="NUL in text"),
    pytest.param(dataclasses.replace(BASE, labels={"a": "\x00"}), "22P05", id="NUL in jsonb"),
    pytest.param(dataclasses.replace(BASE, exit_code=2**40), "22000", id="integer out of range"),
    pytest.param(
        dataclasses.replace(BASE, team="".join(chr(0x4E00 + i * 7 % 20000) for i in range(1500))),
        "54000",
        id="index row too large",
    ),
]


@pytest.mark.postgres
@pytest.mark.parametrize(("record", "code"), REFUSED_BY_POSTGRES)
@pytest.mark.parametrize("db_dialect", ["postgres"], indirect=True)
async def test_what_postgres_refuses_for_the_data_is_not_transient(
    store: Store, record: JobRecord, code: str
) -> None:
    error = await _refusal(store, record)
    assert sqlstate(error) == code
    assert not is_transient(error) and is_database_error(error)
    assert "INSERT" not in describe(error) and code in describe(error)


async def test_a_value_no_driver_can_encode_is_not_transient(store: Store) -> None:
    error = await _refusal(store, dataclasses.replace(BASE, event_counts={"x": 2**70}))
    assert not is_transient(error)


TRANSIENT = [
    pytest.param(
        sa_exc.OperationalError("SELECT 1", {}, Exception("database is locked")), True, id="sqlite locked"
    ),
    pytest.param(sa_exc.InterfaceError("SELECT 1", {}, Exception("connection is closed")), True, id="closed"),
    pytest.param(sa_exc.TimeoutError("QueuePool limit reached"), True, id="pool timeout"),
    pytest.param(ConnectionResetError("reset"), True, id="connection reset"),
    pytest.param(TimeoutError(), True, id="timeout"),
    pytest.param(sa_exc.IntegrityError("INSERT", {}, Exception("constraint")), False, id="integrity"),
    pytest.param(sa_exc.DataError("INSERT", {}, Exception("bad value")), False, id="data"),
    pytest.param(ValueError("naive datetime"), False, id="our own refusal"),
]


@pytest.mark.parametrize(("error", "transient"), TRANSIENT)
def test_transient_or_not(error: BaseException, transient: bool) -> None:
    assert is_transient(error) is transient


class _Coded(Exception):
    def __init__(self, code: str) -> None:
        super().__init__(f"failed with {code}")
        self.sqlstate = code


@pytest.mark.parametrize(
    ("code", "transient"),
    [
        *[(code, True) for code in ("08006", "40001", "40P01", "57014", "25006", "53300")],
        *[(code, False) for code in ("22021", "23505", "54000", "42P01")],
    ],
)
def test_postgres_codes(code: str, transient: bool) -> None:
    assert is_transient(sa_exc.DBAPIError("INSERT", {}, _Coded(code))) is transient
