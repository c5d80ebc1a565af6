"""The admin API's job pages: a page of jobs with their usage and advice, in one statement.

The API's job list is its hottest path (dashboards poll it), so it does not go through domain
records. One statement reads the page: jobs LEFT JOIN usage, only the columns the resource shows,
the usage's `missing` list picked out of its JSON detail instead of decoding every per-GPU figure,
and on Postgres each job's recommendations as a JSON array from a correlated subquery (SQLite reads
them with a second statement). The caller gets plain rows. Statements are built once per shape
(which filters are set, which dialect) and take every value as a bound parameter, so SQLAlchemy's
compiled cache and the driver's prepared statements are hit on every request instead of SQL being
rebuilt and recompiled per page.

On Postgres the compiled statements run on the driver's connection itself: measured on the
bench's pages (50 jobs, bench/api.py), SQLAlchemy's execution and result processing cost 2.3 ms of
CPU per page and asyncpg alone 1.0 ms, on a path whose CPU is what limits the request rate. The
SQL is still SQLAlchemy's, compiled once per shape; SQLite goes through SQLAlchemy as usual.
"""

from __future__ import annotations

import functools
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql
from sqlalchemy.ext.asyncio import AsyncConnection

from inno_notify.adapters.db import codec
from inno_notify.adapters.db.jobs import JobFilter
from inno_notify.adapters.db.sql import InvalidCursor, chunks, decode_cursor, encode_cursor
from inno_notify.adapters.db.tables import jobs, recommendations, usage, workflows
from inno_notify.domain.model import WorkloadKind

JobKey = tuple[str, str]  # (cluster, uid)

# The columns of a page row, in order.
PAGE_COLUMNS = (
    jobs.c.cluster,
    jobs.c.uid,
    jobs.c.namespace,
    jobs.c.name,
    jobs.c.owner,
    jobs.c.team,
    jobs.c.status,
    jobs.c.reason,
    jobs.c.exit_code,
    jobs.c.exit_reason,
    jobs.c.created_at,
    jobs.c.started_at,
    jobs.c.finished_at,
    jobs.c.queued_until,
    jobs.c.gpus_requested,
    jobs.c.cpu_requested_cores,
    jobs.c.memory_requested_bytes,
    jobs.c.kueue,
    jobs.c.sort_at,
    # NULL when the job has no usage row yet (the outer join found none).
    usage.c.job_uid.label("usage_job_uid"),
    usage.c.gpu_minutes,
    usage.c.used_gpu_minutes,
    usage.c.gpus_idle,
    usage.c.gpu_util_mean_percent,
    usage.c.gpu_memory_peak_bytes,
    usage.c.memory_peak_bytes,
    usage.c.cpu_cores_p95,
    usage.c.detail["missing"].label("usage_missing"),
    jobs.c.kind,
    jobs.c.parent_uid,
    jobs.c.attempts,
    jobs.c.replicas,
    usage.c.detail["replicas"].label("usage_replicas"),
)
# A recommendation as the job resource embeds it: field -> column (amounts hold the two figures).
RECOMMENDATION_FIELDS: dict[str, sa.ColumnElement[Any]] = {
    "kind": recommendations.c.kind,
    "severity": recommendations.c.severity,
    "current": recommendations.c.amounts["current"],
    "suggested": recommendations.c.amounts["suggested"],
    "unit": recommendations.c.unit,
    "waste_gpu_minutes": recommendations.c.waste_gpu_minutes,
    "message": recommendations.c.message,
    "evidence": recommendations.c.evidence,
}
# Filter name -> (column, comparison); the bound parameter is named after the filter.
_FILTERS: dict[str, tuple[sa.ColumnElement[Any], str]] = {
    "cluster": (jobs.c.cluster, "eq"),
    "namespace": (jobs.c.namespace, "eq"),
    "owner": (jobs.c.owner, "eq"),
    "team": (jobs.c.team, "eq"),
    "status": (jobs.c.status, "eq"),
    "kinds": (jobs.c.kind, "in"),
    "since": (jobs.c.sort_at, "ge"),
    "until": (jobs.c.sort_at, "lt"),
}


# Positions in a page row: derived from PAGE_COLUMNS, so a column added there cannot shift them silently.
CLUSTER, UID = 0, 1
STATUS = [c.name for c in PAGE_COLUMNS].index("status")
SORT_AT = [c.name for c in PAGE_COLUMNS].index("sort_at")
KIND = [c.name for c in PAGE_COLUMNS].index("kind")
RECOMMENDATIONS = len(PAGE_COLUMNS)

# A workflow (an Argo Workflow, an Airflow DAG run) as a page row: the workflows table's own
# columns, then its steps' figures summed (_step_totals); what it has no figure for is None.
WORKFLOW = WorkloadKind.WORKFLOW.value
WORKFLOW_COLUMNS = (
    workflows.c.cluster,
    workflows.c.uid,
    workflows.c.namespace,
    workflows.c.name,
    workflows.c.owner,
    workflows.c.team,
    workflows.c.status,
    workflows.c.record["reason"].as_string().label("reason"),
    workflows.c.created_at,
    workflows.c.started_at,
    workflows.c.finished_at,
    workflows.c.sort_at,
)
_WORKFLOW_FILTERS: dict[str, tuple[sa.ColumnElement[Any], str]] = {
    "cluster": (workflows.c.cluster, "eq"),
    "namespace": (workflows.c.namespace, "eq"),
    "owner": (workflows.c.owner, "eq"),
    "team": (workflows.c.team, "eq"),
    "status": (workflows.c.status, "eq"),
    "since": (workflows.c.sort_at, "ge"),
    "until": (workflows.c.sort_at, "lt"),
}

Row = Sequence[Any]
RecommendationItem = dict[str, Any]  # the RECOMMENDATION_FIELDS of one recommendation


@dataclass(frozen=True, slots=True)
class JobPage:
    """Rows of jobs (in page order) and, for each, its recommendations in their stored order.

    A job row holds the values of `PAGE_COLUMNS` by position, then one more (used here only);
    datetimes are aware (UTC), JSON is decoded.
    """

    rows: Sequence[Row]
    recommendations: Sequence[list[RecommendationItem]]  # parallel to rows
    next_cursor: str | None


def _recommendations_column(dialect: str) -> sa.ColumnElement[Any]:
    """Postgres: each job's recommendations as one JSON array, by a correlated subquery (one round
    trip per page, measured 0.77 vs 0.91-1.11 ms of CPU for two). SQLite (3.40 has no ordered
    aggregates) reads them in a second statement instead."""
    if dialect != "postgresql":
        return sa.null().label("recommendations")
    pairs = [
        part
        for name, column in RECOMMENDATION_FIELDS.items()
        for part in (sa.literal_column(f"'{name}'"), column)
    ]
    aggregate = sa.func.json_agg(
        postgresql.aggregate_order_by(sa.func.json_build_object(*pairs), recommendations.c.position)
    )
    return (
        sa.select(aggregate)
        .where(recommendations.c.cluster == jobs.c.cluster, recommendations.c.job_uid == jobs.c.uid)
        .scalar_subquery()
        .label("recommendations")
    )


def _job_select(dialect: str) -> sa.Select[Any]:
    return sa.select(*PAGE_COLUMNS, _recommendations_column(dialect)).select_from(
        jobs.outerjoin(usage, sa.and_(usage.c.cluster == jobs.c.cluster, usage.c.job_uid == jobs.c.uid))
    )


@functools.cache
def _page_statement(filters: frozenset[str], with_cursor: bool, dialect: str) -> sa.Select[Any]:
    return _paged(_job_select(dialect), jobs, _FILTERS, filters, with_cursor, dialect)


@functools.cache
def _workflow_page_statement(filters: frozenset[str], with_cursor: bool, dialect: str) -> sa.Select[Any]:
    query = sa.select(*WORKFLOW_COLUMNS)
    return _paged(query, workflows, _WORKFLOW_FILTERS, filters - {"kinds"}, with_cursor, dialect)


def _paged(
    query: sa.Select[Any],
    table: sa.Table,
    columns: Mapping[str, tuple[sa.ColumnElement[Any], str]],
    filters: frozenset[str],
    with_cursor: bool,
    dialect: str,
) -> sa.Select[Any]:
    """`query` filtered, after the cursor, newest first by (sort_at, uid, cluster), one page."""
    for name in sorted(filters):
        column, op = columns[name]
        if op == "in":
            query = query.where(_in(column, f"f_{name}", dialect))
            continue
        value = sa.bindparam(f"f_{name}", type_=column.type)
        query = query.where(
            column == value if op == "eq" else column >= value if op == "ge" else column < value
        )
    if with_cursor:
        key = sa.tuple_(table.c.sort_at, table.c.uid, table.c.cluster)
        query = query.where(
            key
            < sa.tuple_(
                sa.bindparam("c_at", type_=table.c.sort_at.type),
                sa.bindparam("c_uid", type_=sa.String()),
                sa.bindparam("c_cluster", type_=sa.String()),
            )
        )
    return query.order_by(table.c.sort_at.desc(), table.c.uid.desc(), table.c.cluster.desc()).limit(
        sa.bindparam("page_limit", type_=sa.Integer())
    )


@functools.cache
def _step_totals_statement(dialect: str) -> sa.Select[Any]:
    """Per workflow (one cluster's uids): its GPU steps' GPUs, and their usage summed (held, used
    and idle) or at its peak (memory, CPU), over the steps measured (how many: `measured`)."""
    return (
        sa.select(
            jobs.c.parent_uid,
            sa.func.sum(jobs.c.gpus_requested),
            sa.func.count(usage.c.job_uid).label("measured"),
            sa.func.sum(usage.c.gpu_minutes),
            sa.func.sum(usage.c.used_gpu_minutes),
            sa.func.sum(usage.c.gpus_idle),
            sa.func.max(usage.c.gpu_memory_peak_bytes),
            sa.func.max(usage.c.memory_peak_bytes),
            sa.func.max(usage.c.cpu_cores_p95),
        )
        .select_from(
            jobs.outerjoin(usage, sa.and_(usage.c.cluster == jobs.c.cluster, usage.c.job_uid == jobs.c.uid))
        )
        .where(jobs.c.cluster == sa.bindparam("cluster"), _in(jobs.c.parent_uid, "uids", dialect))
        .group_by(jobs.c.parent_uid)
    )


@functools.cache
def _keys_statement(dialect: str) -> sa.Select[Any]:
    """The job rows of one cluster's uids (the same columns as a page)."""
    return _job_select(dialect).where(jobs.c.cluster == sa.bindparam("cluster"), _uid_in(jobs.c.uid, dialect))


@functools.cache
def _recommendations_statement() -> sa.Select[Any]:
    """SQLite's second statement: the recommendations of one cluster's uids."""
    return (
        sa.select(recommendations.c.job_uid, *(c.label(n) for n, c in RECOMMENDATION_FIELDS.items()))
        .where(
            recommendations.c.cluster == sa.bindparam("cluster"),
            recommendations.c.job_uid.in_(sa.bindparam("uids", expanding=True)),
        )
        .order_by(recommendations.c.job_uid, recommendations.c.position)
    )


def _uid_in(column: sa.ColumnElement[str], dialect: str) -> sa.ColumnElement[bool]:
    return _in(column, "uids", dialect)


def _in(column: sa.ColumnElement[Any], name: str, dialect: str) -> sa.ColumnElement[bool]:
    """`column` among the values of the list parameter `name` (one bound array on Postgres)."""
    if dialect == "postgresql":
        return column == sa.any_(sa.bindparam(name, type_=postgresql.ARRAY(sa.String())))
    return column.in_(sa.bindparam(name, expanding=True))


@dataclass(frozen=True, slots=True)
class _Compiled:
    sql: str
    names: tuple[str, ...]  # the bound parameters in positional order
    fixed: Mapping[str, Any]  # values bound at build time (the JSON key of usage_missing)


_COMPILED: dict[tuple[sa.Select[Any], str], _Compiled] = {}


def _compiled(statement: sa.Select[Any], conn: AsyncConnection) -> _Compiled:
    key = (statement, conn.dialect.name)
    found = _COMPILED.get(key)
    if found is None:
        compiled = statement.compile(dialect=conn.dialect)
        names = tuple(compiled.positiontup or ())
        fixed = {name: bind.value for name, bind in compiled.binds.items() if not bind.required}
        found = _Compiled(compiled.string, names, fixed)
        _COMPILED[key] = found
    return found


async def _fetch(conn: AsyncConnection, statement: sa.Select[Any], params: Mapping[str, Any]) -> list[Row]:
    """The statement's rows; on Postgres run by asyncpg outside any transaction (a read at READ
    COMMITTED gains nothing from one but BEGIN and ROLLBACK round trips)."""
    if conn.dialect.name != "postgresql":
        return list(await conn.execute(statement, dict(params)))
    compiled = _compiled(statement, conn)
    args = [params[n] if n in params else compiled.fixed[n] for n in compiled.names]
    # The checked-out connection's driver connection, without get_raw_connection's greenlet hop.
    driver: Any = conn.sync_connection.connection.driver_connection  # type: ignore[union-attr]
    try:
        records: list[Row] = await driver.fetch(compiled.sql, *args)
    except Exception as exc:
        # SQLAlchemy did not see this statement fail, so it would pool a dead connection again.
        await conn.invalidate(exc)
        raise
    return records


def _filter_values(filters: JobFilter) -> dict[str, Any]:
    values: dict[str, Any] = {
        "cluster": filters.cluster,
        "namespace": filters.namespace,
        "owner": filters.owner,
        "team": filters.team,
        "status": None if filters.status is None else filters.status.value,
        "since": filters.since,
        "until": filters.until,
        "kinds": None if filters.kinds is None else list(filters.kinds),
    }
    return {name: value for name, value in values.items() if value is not None}


async def job_page(conn: AsyncConnection, filters: JobFilter, limit: int, cursor: str | None) -> JobPage:
    """A page of runs of every kind, newest first (by finish, else creation time), with usage and
    advice: the jobs table's, and the workflows' (their own table, listed among them by the same
    key) where the filter admits the Workflow kind.

    Raises InvalidCursor for a cursor this store did not hand out.
    """
    values = _filter_values(filters)
    params = {f"f_{name}": value for name, value in values.items()}
    params["page_limit"] = limit + 1
    if cursor is not None:
        at, uid, cluster = decode_cursor(cursor, (str, str, str))
        try:
            params["c_at"] = codec.parse_iso(at)
        except ValueError as exc:
            raise InvalidCursor("invalid cursor") from exc
        params["c_uid"], params["c_cluster"] = uid, cluster
    kinds = filters.kinds
    rows: list[Row] = []
    if kinds is None or set(kinds) - {WORKFLOW}:
        statement = _page_statement(frozenset(values), cursor is not None, conn.dialect.name)
        rows = await _fetch(conn, statement, params)
    if kinds is None or WORKFLOW in kinds:
        statement = _workflow_page_statement(frozenset(values), cursor is not None, conn.dialect.name)
        found = await _fetch(conn, statement, {k: v for k, v in params.items() if k != "f_kinds"})
        if found:
            rows.extend(await _workflow_rows(conn, found))
            rows.sort(key=lambda row: (row[SORT_AT], row[UID], row[CLUSTER]), reverse=True)
    next_cursor = None
    if len(rows) > limit:
        del rows[limit:]
        last = rows[-1]
        next_cursor = encode_cursor([last[SORT_AT].isoformat(), last[UID], last[CLUSTER]])
    return JobPage(rows, await _recommendation_rows(conn, rows), next_cursor)


@functools.cache
def _find_statement(with_uid: bool, with_cluster: bool = False, table: sa.Table = jobs) -> sa.Select[Any]:
    columns = WORKFLOW_COLUMNS if table is workflows else (table.c.cluster, table.c.uid)
    query = sa.select(*columns).where(
        table.c.namespace == sa.bindparam("namespace"), table.c.name == sa.bindparam("name")
    )
    if with_uid:
        query = query.where(table.c.uid == sa.bindparam("uid"))
    if with_cluster:
        query = query.where(table.c.cluster == sa.bindparam("cluster"))
    return query.order_by(table.c.created_at.desc().nulls_last(), table.c.uid.desc()).limit(1)


async def find_job_row(
    conn: AsyncConnection, namespace: str, name: str, uid: str | None, cluster: str | None = None
) -> JobPage:
    """The newest run (by creation time) of that name, or the one with that uid (of `cluster`, if
    given): a job's, else a workflow's; no row if none."""
    params = {"namespace": namespace, "name": name}
    if uid is not None:
        params["uid"] = uid
    if cluster is not None:
        params["cluster"] = cluster
    found = await _fetch(conn, _find_statement(uid is not None, cluster is not None), params)
    if found:
        return await job_rows(conn, [(row[0], row[1]) for row in found])
    found = await _fetch(conn, _find_statement(uid is not None, cluster is not None, workflows), params)
    return JobPage(await _workflow_rows(conn, found), [[] for _ in found], None)


async def _workflow_rows(conn: AsyncConnection, found: Sequence[Row]) -> list[Row]:
    """Workflow rows (WORKFLOW_COLUMNS) as page rows (PAGE_COLUMNS, then no recommendations): their
    GPUs and usage are their GPU steps' (the runs whose parent they are), summed."""
    totals: dict[JobKey, Row] = {}
    statement = _step_totals_statement(conn.dialect.name)
    for cluster, uids in _by_cluster([(row[0], row[1]) for row in found]).items():
        for chunk in chunks(uids):
            for total in await _fetch(conn, statement, {"cluster": cluster, "uids": list(chunk)}):
                totals[(cluster, total[0])] = total
    return [_workflow_page_row(row, totals.get((row[0], row[1]))) for row in found]


def _workflow_page_row(row: Row, steps: Row | None) -> Row:
    cluster, uid, namespace, name, owner, team, status, reason, created, started, finished, sort_at = row
    _, gpus, measured, held, used, idle, gpu_memory, memory, cpu = steps or (None, 0.0, 0, *[None] * 6)
    util = None if not held or used is None else 100.0 * used / held
    measured_uid = uid if measured else None
    usage_columns: tuple[Any, ...] = (measured_uid, held, used, idle, util, gpu_memory, memory, cpu, [])
    return (
        *(cluster, uid, namespace, name, owner, team, status, reason, None, None),
        *(created, started, finished, None, float(gpus or 0.0), None, None, None, sort_at),
        *usage_columns,
        *(WORKFLOW, None, 1, None, None, []),
    )


async def job_rows(conn: AsyncConnection, keys: Sequence[JobKey]) -> JobPage:
    """The rows of the given jobs (those that are stored; in no particular order) with their advice."""
    rows: list[Row] = []
    statement = _keys_statement(conn.dialect.name)
    for cluster, uids in _by_cluster(keys).items():
        for chunk in chunks(uids):
            rows.extend(await _fetch(conn, statement, {"cluster": cluster, "uids": list(chunk)}))
    return JobPage(rows, await _recommendation_rows(conn, rows), None)


async def _recommendation_rows(conn: AsyncConnection, rows: Sequence[Row]) -> list[list[RecommendationItem]]:
    if conn.dialect.name == "postgresql":
        return [row[RECOMMENDATIONS] or [] for row in rows]
    found: dict[JobKey, list[RecommendationItem]] = {}
    names = list(RECOMMENDATION_FIELDS)
    for cluster, uids in _by_cluster([(row[CLUSTER], row[UID]) for row in rows]).items():
        for chunk in chunks(uids):
            result = await conn.execute(
                _recommendations_statement(), {"cluster": cluster, "uids": list(chunk)}
            )
            for job_uid, *values in result:
                found.setdefault((cluster, job_uid), []).append(dict(zip(names, values, strict=True)))
    return [found.get((row[CLUSTER], row[UID]), []) for row in rows]


def _by_cluster(keys: Sequence[JobKey]) -> dict[str, list[str]]:
    grouped: dict[str, list[str]] = defaultdict(list)
    for cluster, uid in dict.fromkeys(keys):
        grouped[cluster].append(uid)
    return grouped
