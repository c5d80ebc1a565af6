"""A job's usage series in the `usage_series` table: the row codec and its statements.

Written in the transaction that stores the job's usage (store.jobs.complete_summary), with the
chart the usage round drew from it (a PNG, or null where none was drawn); read per dispatch round
with that chart for the messages in it (`charts_of`), and per page without it (`series_of`: the
page draws its own SVG, and a PNG is some 20 KB). Once no message of the job is pending the chart
is released (`release_sent_charts`: set to NULL), so the database keeps ~20 KB per job only while
its messages wait; a message sent later (an admin's retry) draws its chart again. Labels come from
the cluster and the exporters, so on the way in they lose what Postgres' JSONB refuses and SQLite
would keep (NUL, unpaired surrogates); values are finite numbers or null.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from inno_notify.adapters.db.sql import chunks, upsert_rows
from inno_notify.adapters.db.tables import outbox, usage_series
from inno_notify.domain.model import DeliveryStatus, SeriesLine, SeriesPod, UsageSeries

_KINDS = ("gpu_util", "gpu_memory", "memory")
# What the job page reads: everything but the chart.
_SERIES_COLUMNS = (
    usage_series.c.job_uid,
    usage_series.c.step_seconds,
    usage_series.c.start_at,
    usage_series.c.series,
)


@dataclass(frozen=True, slots=True)
class StoredSeries:
    """A job's stored series with the chart drawn from it when it was stored (None: none drawn)."""

    series: UsageSeries
    chart: bytes | None = None


def _text(value: str) -> str:
    return value.replace("\x00", "\ufffd").encode("utf-8", "replace").decode("utf-8")


def _number(value: float | None) -> float | None:
    return value if value is not None and math.isfinite(value) else None


def _line_json(line: SeriesLine) -> dict[str, Any]:
    return {
        "label": _text(line.label),
        "pod": _text(line.pod_name),
        "values": [_number(v) for v in line.values],
        "shared": line.shared,
    }


def _line(data: Mapping[str, Any]) -> SeriesLine:
    return SeriesLine(
        label=str(data["label"]),
        pod_name=str(data["pod"]),
        # Numbers or null as stored (JSON gives back what series_to_row wrote: finite floats).
        values=tuple(data["values"]),
        shared=bool(data.get("shared", False)),
    )


def series_to_row(
    cluster: str, job_uid: str, series: UsageSeries, chart: bytes | None = None
) -> dict[str, Any]:
    """The row of a series and its chart: a series stored again replaces the chart too (with None
    when none was drawn from it), so that a stored chart is always the picture of its series."""
    document: dict[str, Any] = {kind: [_line_json(line) for line in getattr(series, kind)] for kind in _KINDS}
    document["pods"] = [
        {"name": _text(p.name), "node": None if p.node is None else _text(p.node)} for p in series.pods
    ]
    return {
        "cluster": cluster,
        "job_uid": job_uid,
        "step_seconds": series.step_seconds,
        "start_at": series.start,
        "series": document,
        "chart": chart,
    }


def series_from_row(row: Mapping[Any, Any]) -> UsageSeries:
    document = row["series"]
    return UsageSeries(
        step_seconds=int(row["step_seconds"]),
        start=row["start_at"],
        gpu_util=tuple(_line(line) for line in document.get("gpu_util", ())),
        gpu_memory=tuple(_line(line) for line in document.get("gpu_memory", ())),
        memory=tuple(_line(line) for line in document.get("memory", ())),
        pods=tuple(SeriesPod(str(p["name"]), p.get("node")) for p in document.get("pods", ())),
    )


async def save_series(
    conn: AsyncConnection, cluster: str, uid: str, series: UsageSeries, chart: bytes | None = None
) -> None:
    await upsert_rows(
        conn, usage_series, ("cluster", "job_uid"), [series_to_row(cluster, uid, series, chart)]
    )


async def series_of(conn: AsyncConnection, cluster: str, uids: Sequence[str]) -> dict[str, UsageSeries]:
    """The stored series of these jobs, by uid (jobs without one are absent), without their charts."""
    return {uid: row.series for uid, row in (await _read(conn, cluster, uids, with_chart=False)).items()}


async def charts_of(conn: AsyncConnection, cluster: str, uids: Sequence[str]) -> dict[str, StoredSeries]:
    """The stored series of these jobs with their charts, by uid (jobs without a series are absent)."""
    return await _read(conn, cluster, uids, with_chart=True)


async def _read(
    conn: AsyncConnection, cluster: str, uids: Sequence[str], *, with_chart: bool
) -> dict[str, StoredSeries]:
    columns = (*_SERIES_COLUMNS, usage_series.c.chart) if with_chart else _SERIES_COLUMNS
    found: dict[str, StoredSeries] = {}
    for part in chunks(sorted(set(uids))):
        query = sa.select(*columns).where(usage_series.c.cluster == cluster, usage_series.c.job_uid.in_(part))
        for row in (await conn.execute(query)).mappings():
            chart = row["chart"] if with_chart else None
            found[row["job_uid"]] = StoredSeries(
                series_from_row(row), None if chart is None else bytes(chart)
            )
    return found


async def release_sent_charts(conn: AsyncConnection, limit: int = 1000) -> int:
    """Sets to NULL up to `limit` stored charts whose job has no pending message (sent, failed, or
    none planned); returns how many. Reads only the rows that still hold a chart (a partial index)."""
    held = (
        sa.select(usage_series.c.cluster, usage_series.c.job_uid)
        .where(
            usage_series.c.chart.is_not(None),
            ~sa.exists().where(
                outbox.c.cluster == usage_series.c.cluster,
                outbox.c.job_uid == usage_series.c.job_uid,
                outbox.c.status == DeliveryStatus.PENDING.value,
            ),
        )
        .limit(limit)
    )
    rows = (await conn.execute(held)).all()
    released = 0
    for cluster in sorted({row.cluster for row in rows}):
        uids = [row.job_uid for row in rows if row.cluster == cluster]
        for part in chunks(uids):
            result = await conn.execute(
                sa.update(usage_series)
                .where(usage_series.c.cluster == cluster, usage_series.c.job_uid.in_(part))
                .values(chart=None)
            )
            released += result.rowcount or 0
    return released
