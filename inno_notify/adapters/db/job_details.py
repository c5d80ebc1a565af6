"""The admin API's job pages: a page of jobs with their usage and advice, in one statement.

The API's job list is its hottest path (dashboards poll it), so it does not go through domain
records. One statement reads the page: jobs LEFT JOIN usage, only the columns the resource shows,
the usage's `missing` list picked out of its JSON detail instead of decoding every per-GPU figure,
and on Postgres each job's recommendations as a JSON array from a correlated subquery (SQLite reads
them with a second statement); where the filter admits workflows, their table's page is merged in
by a UNION ALL in the same statement (only a page that holds workflows reads their steps' figures
with a second one). The caller gets plain rows. Statements are built once per shape (which filters
are set, which dialect, the page size) and take every other value as a bound parameter, so
SQLAlchemy's compiled cache and the driver's prepared statements are hit on every request instead
of SQL being rebuilt and recompiled per page.

On Postgres the compiled statements run on the driver's connection itself: measured on the
bench's pages (50 jobs, bench/api.py), SQLAlchemy's execution and result processing cost 2.3 ms of
CPU per page and asyncpg alone 1.0 ms, on a path whose CPU is what limits the request rate. The
SQL is still SQLAlchemy's, compiled once per shape; SQLite goes through SQLAlchemy as usual.
"""

from __future__ import annotations

import functools
import operator
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql
from sqlalchemy.ext.asyncio import AsyncConnection

from inno_notify.adapters.db import codec
from inno_notify.adapters.db.jobs import JobFilter
from inno_notify.adapters.db.sql import (
    STATEMENTS_KEPT,
    InvalidCursor,
    chunks,
    decode_cursor,
    encode_cursor,
    fetch,
)
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
    # NULL for none missing (most measured runs): no JSON to decode per row on the hot path.
    sa.func.nullif(usage.c.detail["missing"], sa.literal_column("'[]'"), type_=usage.c.detail.type).label(
        "usage_missing"
    ),
    jobs.c.kind,
    jobs.c.parent_uid,
    jobs.c.attempts,
    jobs.c.replicas,
    usage.c.detail["replicas"].label("usage_replicas"),
    jobs.c.gpu_model,
    usage.c.idle_gpu_minutes,
    jobs.c.requested["parallelism"].as_integer().label("parallelism"),
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
Filters = dict[str, tuple[sa.ColumnElement[Any], str]]


def _filters_of(table: sa.Table) -> Filters:
    """The list's filters on a table of runs (jobs, workflows: the same column names)."""
    equal = {name: (table.c[name], "eq") for name in ("cluster", "namespace", "owner", "team", "status")}
    return {**equal, "since": (table.c.sort_at, "ge"), "until": (table.c.sort_at, "lt")}


_FILTERS: Filters = {**_filters_of(jobs), "kinds": (jobs.c.kind, "in")}


# Positions in a page row: derived from PAGE_COLUMNS, so a column added there cannot shift them silently.
_NAMES = [c.name for c in PAGE_COLUMNS]
CLUSTER, UID = 0, 1
STATUS = _NAMES.index("status")
SORT_AT = _NAMES.index("sort_at")
KIND = _NAMES.index("kind")
GPUS = _NAMES.index("gpus_requested")
ATTEMPTS = _NAMES.index("attempts")
USAGE_FIRST, USAGE_LAST = _NAMES.index("usage_job_uid"), _NAMES.index("usage_missing")
RECOMMENDATIONS = len(PAGE_COLUMNS)

# A workflow (an Argo Workflow, an Airflow DAG run) as a page row: the workflows table's own
# columns where it has them, typed NULLs elsewhere (so that the two tables' rows are one UNION in
# one statement), its kind; its steps' figures are filled in after (_workflow_rows).
WORKFLOW = WorkloadKind.WORKFLOW.value
_WORKFLOW_VALUES: dict[str, sa.ColumnElement[Any]] = {
    "cluster": workflows.c.cluster,
    "uid": workflows.c.uid,
    "namespace": workflows.c.namespace,
    "name": workflows.c.name,
    "owner": workflows.c.owner,
    "team": workflows.c.team,
    "status": workflows.c.status,
    "reason": workflows.c.record["reason"].as_string(),
    "created_at": workflows.c.created_at,
    "started_at": workflows.c.started_at,
    "finished_at": workflows.c.finished_at,
    "sort_at": workflows.c.sort_at,
    "kind": sa.cast(sa.literal_column(f"'{WORKFLOW}'"), jobs.c.kind.type),
}
WORKFLOW_COLUMNS = tuple(
    _WORKFLOW_VALUES.get(c.name, sa.cast(sa.null(), c.type)).label(c.name) for c in PAGE_COLUMNS
)
_WORKFLOW_FILTERS: Filters = _filters_of(workflows)

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


def _workflow_select() -> sa.Select[Any]:
    return sa.select(*WORKFLOW_COLUMNS, sa.cast(sa.null(), sa.JSON()).label("recommendations"))


# Statements (and their compiled SQL, sql.fetch) are kept one per shape and page size in use, up to
# sql.STATEMENTS_KEPT: a caller chooses the page size (params.MAX_LIMIT of them) and the filters.
@functools.lru_cache(maxsize=STATEMENTS_KEPT)
def _page_statement(
    filters: frozenset[str],
    with_cursor: bool,
    dialect: str,
    rows: int,
    with_jobs: bool = True,
    with_workflows: bool = True,
) -> sa.Select[Any]:
    """At most `rows` of the jobs', the workflows' or both tables' rows, in one statement: where
    both, each table's page (its index gives it in order) merged by a UNION ALL and cut to `rows`
    again. The list is the API's hottest path, and a second statement per page, for a table that
    mostly has no row to add, cost a round trip: 0.26 ms of the service's CPU on bench/api.py's
    pages, a tenth of the request's.

    `rows` is written into the SQL, not bound: Postgres plans a prepared statement for its
    parameters' values until a plan for any values is as cheap, and with the LIMIT unknown no such
    plan is (it expects a tenth of the rows, and plans parallel workers), so every page paid for a
    planning, the UNION's dearer than one table's: measured 0.3-1.0 ms of Postgres' CPU per page.
    With the LIMIT written in, Postgres takes the generic plan from the sixth execution on."""
    pages = []
    if with_jobs:
        pages.append(_paged(_job_select(dialect), jobs, _FILTERS, filters, with_cursor, dialect, rows))
    if with_workflows:
        query = _workflow_select()
        only = filters - {"kinds"}
        pages.append(_paged(query, workflows, _WORKFLOW_FILTERS, only, with_cursor, dialect, rows))
    if len(pages) == 1:
        return pages[0]
    merged = sa.union_all(*(sa.select(page.subquery()) for page in pages)).subquery("page")
    return (
        sa.select(merged)
        .order_by(merged.c.sort_at.desc(), merged.c.uid.desc(), merged.c.cluster.desc())
        .limit(_literal(rows))
    )


def _literal(rows: int) -> sa.ColumnElement[int]:
    return sa.literal_column(str(int(rows)), sa.Integer())


def _paged(
    query: sa.Select[Any],
    table: sa.Table,
    columns: Mapping[str, tuple[sa.ColumnElement[Any], str]],
    filters: frozenset[str],
    with_cursor: bool,
    dialect: str,
    rows: int,
) -> sa.Select[Any]:
    """`query` filtered, after the cursor, newest first by (sort_at, uid, cluster), `rows` of it."""
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
    order = (table.c.sort_at.desc(), table.c.uid.desc(), table.c.cluster.desc())
    return query.order_by(*order).limit(_literal(rows))


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
    if cursor is not None:
        at, uid, cluster = decode_cursor(cursor, (str, str, str))
        try:
            params["c_at"] = codec.parse_iso(at)
        except ValueError as exc:
            raise InvalidCursor("invalid cursor") from exc
        params["c_uid"], params["c_cluster"] = uid, cluster
    kinds = filters.kinds
    with_jobs = kinds is None or bool(set(kinds) - {WORKFLOW})
    with_workflows = kinds is None or WORKFLOW in kinds
    if not with_jobs:
        params.pop("f_kinds", None)
    rows: list[Row] = []
    if with_jobs or with_workflows:
        shape = (frozenset(values), cursor is not None, conn.dialect.name)
        statement = _page_statement(*shape, limit + 1, with_jobs, with_workflows)
        rows = await fetch(conn, statement, params)
    if with_workflows and WORKFLOW in map(operator.itemgetter(KIND), rows):
        rows = await _workflow_rows(conn, rows)
    next_cursor = None
    if len(rows) > limit:
        del rows[limit:]
        last = rows[-1]
        next_cursor = encode_cursor([last[SORT_AT].isoformat(), last[UID], last[CLUSTER]])
    return JobPage(rows, await _recommendation_rows(conn, rows), next_cursor)


@functools.cache
def _find_statement(with_uid: bool, with_cluster: bool = False, table: sa.Table = jobs) -> sa.Select[Any]:
    query = _workflow_select() if table is workflows else sa.select(table.c.cluster, table.c.uid)
    query = query.where(table.c.namespace == sa.bindparam("namespace"), table.c.name == sa.bindparam("name"))
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
    found = await fetch(conn, _find_statement(uid is not None, cluster is not None), params)
    if found:
        return await job_rows(conn, [(row[0], row[1]) for row in found])
    found = await fetch(conn, _find_statement(uid is not None, cluster is not None, workflows), params)
    return JobPage(await _workflow_rows(conn, found), [[] for _ in found], None)


async def _workflow_rows(conn: AsyncConnection, rows: Sequence[Row]) -> list[Row]:
    """The page rows with each workflow's (WORKFLOW_COLUMNS) completed: its GPUs and usage are its
    GPU steps' (the runs whose parent it is), summed; it has no recommendations. Other rows as
    they are."""
    totals: dict[JobKey, Row] = {}
    statement = _step_totals_statement(conn.dialect.name)
    keys = [(row[CLUSTER], row[UID]) for row in rows if row[KIND] == WORKFLOW]
    for cluster, uids in by_cluster(keys).items():
        for chunk in chunks(uids):
            for total in await fetch(conn, statement, {"cluster": cluster, "uids": list(chunk)}):
                totals[(cluster, total[0])] = total
    return [
        _workflow_page_row(row, totals.get((row[CLUSTER], row[UID]))) if row[KIND] == WORKFLOW else row
        for row in rows
    ]


def _workflow_page_row(row: Row, steps: Row | None) -> Row:
    _, gpus, measured, held, used, idle, gpu_memory, memory, cpu = steps or (None, 0.0, 0, *[None] * 6)
    util = None if not held or used is None else 100.0 * used / held
    measured_uid = row[UID] if measured else None
    filled = list(row)
    filled[GPUS] = float(gpus or 0.0)
    filled[USAGE_FIRST : USAGE_LAST + 1] = (measured_uid, held, used, idle, util, gpu_memory, memory, cpu, [])
    filled[ATTEMPTS] = 1
    filled[RECOMMENDATIONS] = []
    return tuple(filled)


async def job_rows(conn: AsyncConnection, keys: Sequence[JobKey]) -> JobPage:
    """The rows of the given jobs (those that are stored; in no particular order) with their advice."""
    rows: list[Row] = []
    statement = _keys_statement(conn.dialect.name)
    for cluster, uids in by_cluster(keys).items():
        for chunk in chunks(uids):
            rows.extend(await fetch(conn, statement, {"cluster": cluster, "uids": list(chunk)}))
    return JobPage(rows, await _recommendation_rows(conn, rows), None)


async def _recommendation_rows(conn: AsyncConnection, rows: Sequence[Row]) -> list[list[RecommendationItem]]:
    if conn.dialect.name == "postgresql":
        return [row[RECOMMENDATIONS] or [] for row in rows]
    found: dict[JobKey, list[RecommendationItem]] = {}
    names = list(RECOMMENDATION_FIELDS)
    for cluster, uids in by_cluster([(row[CLUSTER], row[UID]) for row in rows]).items():
        for chunk in chunks(uids):
            result = await conn.execute(
                _recommendations_statement(), {"cluster": cluster, "uids": list(chunk)}
            )
            for job_uid, *values in result:
                found.setdefault((cluster, job_uid), []).append(dict(zip(names, values, strict=True)))
    return [found.get((row[CLUSTER], row[UID]), []) for row in rows]


def by_cluster(keys: Sequence[JobKey]) -> dict[str, list[str]]:
    grouped: dict[str, list[str]] = defaultdict(list)
    for cluster, uid in dict.fromkeys(keys):
        grouped[cluster].append(uid)
    return grouped
