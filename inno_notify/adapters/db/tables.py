"""The database schema, as SQLAlchemy Core tables shared by the repository and the migrations.

Core tables (not ORM classes) because the hot path is bulk upserts of plain dicts, and the
repository converts rows to domain dataclasses itself. Columns that filters, sorting and SQL
aggregation need are real columns; nested detail that is only ever read back whole (containers,
labels, per-GPU usage) is JSON. Every constraint is named so SQLite batch migrations can find it.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql
from sqlalchemy.engine import Dialect
from sqlalchemy.types import TypeDecorator

NAMING_CONVENTION = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_N_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

metadata = sa.MetaData(naming_convention=NAMING_CONVENTION)


class UTCDateTime(TypeDecorator[datetime]):
    """A timestamp that goes in as an aware datetime and comes back as an aware UTC datetime.

    Postgres keeps the zone itself (timestamptz); SQLite stores text without one, so we normalise
    to UTC on the way in and re-attach UTC on the way out. Naive datetimes are refused: their
    meaning depends on the machine's zone, which is exactly the bug this type exists to prevent.
    """

    impl = sa.DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None or value.utcoffset() is None:
            raise ValueError(f"naive datetime {value!r}: store timezone-aware UTC times")
        value = value.astimezone(UTC)
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        return value.astimezone(UTC)


def _json() -> sa.types.TypeEngine[Any]:
    # JSONB on Postgres (compact, indexable later); SQL NULL, not JSON 'null', for Python None.
    return sa.JSON(none_as_null=True).with_variant(postgresql.JSONB(none_as_null=True), "postgresql")


# An autoincrementing 64-bit id: SQLite only autoincrements an INTEGER PRIMARY KEY (the rowid).
_BIG_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")

# Column groups several tables share. Each call makes new columns (a column belongs to one table).


def _id() -> sa.Column[int]:
    return sa.Column("id", _BIG_ID, primary_key=True, autoincrement=True)


def _key(*names: str) -> list[sa.Column[str]]:
    """Primary-key columns of strings, in the order named (a cluster object's: "cluster", "uid")."""
    return [sa.Column(name, sa.String(), primary_key=True) for name in names]


def _job_foreign_key() -> sa.ForeignKeyConstraint:
    # A job's rows go with it.
    return sa.ForeignKeyConstraint(["cluster", "job_uid"], ["jobs.cluster", "jobs.uid"], ondelete="CASCADE")


def _object_name() -> list[sa.Column[Any]]:
    return [
        sa.Column("namespace", sa.String(), nullable=False),
        sa.Column("name", sa.String(), nullable=False),
    ]


def _owner_and_team() -> list[sa.Column[Any]]:
    return [sa.Column("owner", sa.String()), sa.Column("team", sa.String())]


def _run_times() -> list[sa.Column[Any]]:
    return [
        sa.Column("created_at", UTCDateTime()),
        sa.Column("started_at", UTCDateTime()),
        sa.Column("finished_at", UTCDateTime()),
    ]


def _summary_state() -> sa.Column[str]:
    """Where a run stands on the way to its summary: owned by the store, never overwritten by an upsert."""
    return sa.Column("summary_state", sa.String(), nullable=False, server_default="none")


def _claim(prefix: str = "") -> list[sa.Column[Any]]:
    """Who holds a lease: a claim token checked by every write of what was claimed, and the leadership
    term it was claimed in (a newer term may take an older term's claims at once)."""
    return [sa.Column(f"{prefix}claim_token", sa.String()), sa.Column(f"{prefix}claim_term", sa.BigInteger())]


# The jobs columns the weekly digest reads besides team and finished_at (digest_queries.py).
DIGEST_JOB_COLUMNS = [
    "cluster",
    "uid",
    "owner",
    "status",
    "exit_reason",
    "gpus_requested",
    "memory_requested_bytes",
    "created_at",
    "first_scheduled_at",
    "queued_until",
    # The usage figures a weekly trend sums (trend_queries.py), copied from `usage` by save_usage.
    "gpu_minutes_held",
    "gpu_minutes_used",
    "gpu_minutes_idle",
    # The usage's peak memory, copied alike, for the digest's memory requested vs peak.
    "memory_peak_bytes",
    # The largest waste of the job's recommendations, copied with them: the digest's top waste.
    "top_waste_gpu_minutes",
    # The usage's GPU model, copied alike: the digest's cost by GPU model and idle cost by person.
    "gpu_model",
]

jobs = sa.Table(
    "jobs",
    metadata,
    *_key("cluster", "uid"),
    *_object_name(),
    sa.Column("kind", sa.String(), nullable=False),
    sa.Column("status", sa.String(), nullable=False),
    sa.Column("reason", sa.String()),
    *_owner_and_team(),
    sa.Column("notify", sa.String(), nullable=False),
    sa.Column("channels", _json()),
    sa.Column("group_key", sa.String()),
    sa.Column("family", sa.String()),
    *_run_times(),
    sa.Column("first_scheduled_at", UTCDateTime()),
    # The end of the queue wait (JobRecord.queued_until: Kueue's admission, else the first pod's
    # scheduling), so the digest's queue-wait percentiles need not open the kueue JSON.
    sa.Column("queued_until", UTCDateTime()),
    # finished_at, else created_at, else the epoch: the never-null key of the job list's keyset
    # pagination (NULLs sort differently on the two dialects and break row comparisons).
    sa.Column("sort_at", UTCDateTime(), nullable=False),
    sa.Column("exit_code", sa.Integer()),
    sa.Column("exit_reason", sa.String()),
    # Queryable copies of `requested`, which holds the whole Requested record.
    sa.Column("gpus_requested", sa.Double(), nullable=False),
    sa.Column("cpu_requested_cores", sa.Double()),
    sa.Column("memory_requested_bytes", sa.BigInteger()),
    sa.Column("requested", _json(), nullable=False),
    sa.Column("kueue", _json()),
    sa.Column("labels", _json(), nullable=False),
    sa.Column("event_counts", _json(), nullable=False),
    sa.Column("resource_version", sa.String()),
    # Owned by the store, never overwritten by an upsert of the record.
    sa.Column("terminal_recorded_at", UTCDateTime()),
    _summary_state(),
    sa.Column("usage_due_at", UTCDateTime()),
    sa.Column("usage_attempts", sa.Integer(), nullable=False, server_default="0"),
    # Who holds the usage lease.
    *_claim("usage_"),
    # [{title, url}]: links the summary shows (an MLflow run).
    sa.Column("links", _json()),
    # Copies of the usage row's GPU-minutes held, used and idle, written with it (jobs.save_usage),
    # so that a twelve-week trend reads the (team, finished_at) index alone (trend_queries.py).
    sa.Column("gpu_minutes_held", sa.Double()),
    sa.Column("gpu_minutes_used", sa.Double()),
    sa.Column("gpu_minutes_idle", sa.Double()),
    sa.Column("memory_peak_bytes", sa.BigInteger()),
    # The usage's GPU model (Usage.gpu_model: one line, at most storable.NAME_MAX_BYTES), copied
    # alike, so that the job list shows it without opening the usage's JSON detail.
    sa.Column("gpu_model", sa.String()),
    # The largest waste_gpu_minutes of the job's recommendations (NULL: it has none), written with
    # them (jobs.save_recommendations): the digest ranks its week's jobs by it from the index above
    # and reads only the winners' recommendations (digest_queries.py).
    sa.Column("top_waste_gpu_minutes", sa.Double()),
    # Every workload kind is a row here (CONTRACT.md §3a): a step's run, restarts as attempts, and
    # [{role, replicas, requested}] of a multi-pod run.
    sa.Column("parent_uid", sa.String()),
    sa.Column("attempts", sa.Integer(), nullable=False, server_default="1"),
    sa.Column("replicas", _json()),
    sa.Index(None, "owner"),
    sa.Index(None, "team"),
    sa.Index(None, "namespace", "name", "created_at"),
    sa.Index(None, "status"),
    sa.Index(None, "finished_at"),
    sa.Index(None, "sort_at", "uid", "cluster"),
    # A workflow's figures are its steps' (job_details.workflow rows).
    sa.Index(None, "cluster", "parent_uid"),
    sa.Index(None, "summary_state", "usage_due_at"),
    # Right-sizing reads the newest runs of a family in a namespace.
    sa.Index(None, "cluster", "namespace", "family", "finished_at"),
    # The weekly digest aggregates one team's jobs that finished in a week. On Postgres the index
    # also carries every jobs column the digest reads, so the digest scans the index alone (an
    # index-only scan: the week's entries lie side by side, the table's rows do not).
    sa.Index(None, "team", "finished_at", postgresql_include=DIGEST_JOB_COLUMNS),
)

pods = sa.Table(
    "pods",
    metadata,
    *_key("cluster", "uid"),
    *_object_name(),
    sa.Column("job_uid", sa.String()),
    sa.Column("phase", sa.String(), nullable=False),
    sa.Column("created_at", UTCDateTime()),
    sa.Column("node", sa.String()),
    sa.Column("reason", sa.String()),
    sa.Column("scheduled_at", UTCDateTime()),
    sa.Column("started_at", UTCDateTime()),
    sa.Column("finished_at", UTCDateTime()),
    sa.Column("deleted_at", UTCDateTime()),
    sa.Column("gpu_equivalents", sa.Double(), nullable=False),
    # Containers live in the pod row: they are written and read only with their pod, and a child
    # table would turn every pod upsert into a delete plus several inserts on the hot path.
    sa.Column("containers", _json(), nullable=False),
    sa.Column("completion_index", sa.Integer()),
    sa.Column("resource_version", sa.String()),
    # The replica role the pod plays in its run (Master, Worker, head…).
    sa.Column("role", sa.String()),
    # No foreign key to jobs: a pod event may well arrive before its job's.
    sa.Index(None, "cluster", "job_uid"),
)

# Objects that belong to a run without being one (a JobSet's child Jobs, an MPIJob's launcher Job,
# a RayJob's RayCluster and submitter Job): their pods name them as controller, and this says whose
# run they are, across restarts (domain.kinds.Link).
workload_links = sa.Table(
    "workload_links",
    metadata,
    *_key("cluster", "uid"),
    sa.Column("parent_uid", sa.String(), nullable=False),
    sa.Column("seen_at", UTCDateTime(), nullable=False),
)

usage = sa.Table(
    "usage",
    metadata,
    *_key("cluster", "job_uid"),
    sa.Column("gpu_minutes", sa.Double()),
    sa.Column("used_gpu_minutes", sa.Double()),
    sa.Column("gpus_idle", sa.Integer()),
    sa.Column("idle_gpu_minutes", sa.Double()),
    sa.Column("gpu_util_mean_percent", sa.Double()),
    sa.Column("gpu_memory_peak_bytes", sa.BigInteger()),
    sa.Column("memory_peak_bytes", sa.BigInteger()),
    sa.Column("cpu_cores_mean", sa.Double()),
    sa.Column("cpu_cores_p95", sa.Double()),
    sa.Column("collected_at", UTCDateTime()),
    # Per-GPU and per-pod detail and the reasons for missing figures.
    sa.Column("detail", _json(), nullable=False),
    _job_foreign_key(),
)

# A job's usage over time (domain.model.UsageSeries), written with its usage: the chart in its summary
# and on its page. Its own table, so that nothing that reads the usage figures (lists, digests,
# right-sizing history) reads the points too. The lines and pods are JSON, read back whole.
usage_series = sa.Table(
    "usage_series",
    metadata,
    *_key("cluster", "job_uid"),
    sa.Column("step_seconds", sa.Integer(), nullable=False),
    sa.Column("start_at", UTCDateTime()),
    sa.Column("series", _json(), nullable=False),
    # The summary's chart (PNG) drawn from `series` by the usage round that stored it, so that
    # whichever replica sends finds it drawn; NULL where none was drawn (nothing to draw, nothing to
    # send, or drawing failed): the send draws it then, or goes without.
    sa.Column("chart", sa.LargeBinary()),
    _job_foreign_key(),
    # The charts not yet released (series.release_sent_charts): only those rows, so a sweep after
    # each usage round reads a handful, not every job's series.
    sa.Index(
        None,
        "cluster",
        "job_uid",
        postgresql_where=sa.text("chart IS NOT NULL"),
        sqlite_where=sa.text("chart IS NOT NULL"),
    ),
)

recommendations = sa.Table(
    "recommendations",
    metadata,
    _id(),
    sa.Column("cluster", sa.String(), nullable=False),
    sa.Column("job_uid", sa.String(), nullable=False),
    sa.Column("position", sa.Integer(), nullable=False),
    sa.Column("kind", sa.String(), nullable=False),
    sa.Column("severity", sa.String(), nullable=False),
    # {"current": …, "suggested": …}: each a number or a name (a MIG profile). An object, because
    # SQLite's NUMERIC affinity would turn a bare JSON scalar like 4 into an INTEGER that no longer
    # reads back as JSON.
    sa.Column("amounts", _json(), nullable=False),
    sa.Column("unit", sa.String(), nullable=False),
    sa.Column("message", sa.Text(), nullable=False),
    sa.Column("waste_gpu_minutes", sa.Double(), nullable=False),
    sa.Column("waste_gib_hours", sa.Double(), nullable=False),
    sa.Column("waste_core_hours", sa.Double(), nullable=False),
    sa.Column("field_path", sa.String()),
    sa.Column("evidence", _json(), nullable=False),
    _job_foreign_key(),
    sa.Index(None, "cluster", "job_uid"),
    sa.Index(None, "waste_gpu_minutes"),
)

# The advice_adoption columns the digest and the API sum besides team and finished_at (adoption.py).
ADOPTION_SUM_COLUMNS = ["cluster", "owner", "outcome", "gpu_hours_freed", "memory_gib_hours_freed"]

# One row per new run of a family that was judged against its previous run's advice
# (domain.adoption, written once when the new run is measured; adoption.py). Team, owner and
# finished_at are copied from the job so that the digest and the API aggregate without a join.
advice_adoption = sa.Table(
    "advice_adoption",
    metadata,
    *_key("cluster", "job_uid"),
    *_object_name(),
    sa.Column("family", sa.String(), nullable=False),
    *_owner_and_team(),
    sa.Column("finished_at", UTCDateTime()),
    sa.Column("previous_uid", sa.String()),
    sa.Column("previous_name", sa.String()),
    sa.Column("outcome", sa.String(), nullable=False),
    # [{"kind", "field_path", "current", "suggested", "new", "outcome"}]: read back whole.
    sa.Column("checks", _json(), nullable=False),
    sa.Column("gpu_hours_freed", sa.Double()),
    sa.Column("memory_gib_hours_freed", sa.Double()),
    sa.Column("evaluated_at", UTCDateTime(), nullable=False),
    _job_foreign_key(),
    # The digest sums one team's week: on Postgres from the index alone (as ix_jobs_team_finished_at).
    sa.Index(None, "team", "finished_at", postgresql_include=ADOPTION_SUM_COLUMNS),
    sa.Index(None, "finished_at"),
)

outbox = sa.Table(
    "outbox",
    metadata,
    _id(),
    sa.Column("dedup_key", sa.String(), nullable=False),
    sa.Column("kind", sa.String(), nullable=False),
    sa.Column("channel", sa.String(), nullable=False),
    sa.Column("recipient", sa.String(), nullable=False),
    sa.Column("status", sa.String(), nullable=False),
    sa.Column("cluster", sa.String()),
    sa.Column("job_uid", sa.String()),
    sa.Column("group_key", sa.String()),
    sa.Column("payload", _json(), nullable=False),
    # Where the recipient is reached (domain.model.RecipientAddress). NULL only in a row written by a
    # release before migration 0020 (an old leader during a rolling upgrade): its address is still in
    # its payload, and the codec reads it from there.
    sa.Column("address", _json()),
    sa.Column("created_at", UTCDateTime(), nullable=False),
    sa.Column("due_at", UTCDateTime(), nullable=False),
    # When a pending row may next be claimed: due_at at first, then a retry time or a claim's
    # lease expiry (so the rows of a claimer that crashed come back); NULL once sent or failed.
    sa.Column("next_attempt_at", UTCDateTime()),
    sa.Column("attempts", sa.Integer(), nullable=False),
    sa.Column("last_error", sa.Text()),
    sa.Column("provider_message_id", sa.String()),
    sa.Column("sent_at", UTCDateTime()),
    sa.Column("failed_at", UTCDateTime()),
    # The claim that leased the row: mark_* only settle a row whose token still matches, and the
    # leadership term lets a new leader take an older term's leased rows without waiting.
    *_claim(),
    sa.UniqueConstraint("dedup_key"),
    sa.Index(None, "status", "next_attempt_at"),
    sa.Index(None, "recipient", "channel", "status"),
    sa.Index(None, "cluster", "job_uid"),
)

users = sa.Table(
    "users",
    metadata,
    *_key("email"),
    sa.Column("name", sa.String()),
    sa.Column("slack_user_id", sa.String()),
    sa.Column("telegram_chat_id", sa.BigInteger()),
    sa.Column("channels", _json(), nullable=False),
)

teams = sa.Table(
    "teams",
    metadata,
    *_key("name"),
    sa.Column("namespaces", _json(), nullable=False),
    sa.Column("leads", _json(), nullable=False),
    sa.Column("digest_channels", _json(), nullable=False),
    sa.Column("slack_channel", sa.String()),
    sa.Column("notify_unowned", sa.Boolean(), nullable=False),
)

# Objects a cluster user wrote that could not be parsed or stored: set aside, one row per object
# (the newest reason wins), so one bad object never stops anyone else's records.
rejected_objects = sa.Table(
    "rejected_objects",
    metadata,
    *_key("cluster", "kind", "uid"),
    sa.Column("namespace", sa.String()),
    sa.Column("name", sa.String()),
    sa.Column("reason", sa.String(), nullable=False),
    sa.Column("detail", sa.Text()),
    sa.Column("first_seen_at", UTCDateTime(), nullable=False),
    sa.Column("last_seen_at", UTCDateTime(), nullable=False),
    sa.Column("count", sa.Integer(), nullable=False),
    sa.Index(None, "last_seen_at"),
)

# Leader election (service.leadership): one lease per name (the cluster name, so several clusters
# sharing a database elect one leader each). `term` grows on every acquisition and is what fenced
# writes and claims carry; every time in this table comes from the database's clock, never a
# replica's, so a skewed clock cannot make two leaders.
leader_leases = sa.Table(
    "leader_leases",
    metadata,
    *_key("name"),
    sa.Column("holder", sa.String(), nullable=False),
    sa.Column("term", sa.BigInteger(), nullable=False),
    sa.Column("acquired_at", UTCDateTime(), nullable=False),
    sa.Column("renewed_at", UTCDateTime(), nullable=False),
    sa.Column("expires_at", UTCDateTime(), nullable=False),
)

checkpoints = sa.Table(
    "checkpoints",
    metadata,
    *_key("key"),
    sa.Column("value", sa.Text(), nullable=False),
)

# The admin API's job list of one team, newest first (issue 8). Without it the page walks the
# sort_at index past every other team's jobs: on the bench's 20 teams, 1,003 index entries and heap
# rows for a page of 51, where this index reads exactly 51.
sa.Index(None, jobs.c.team, jobs.c.sort_at, jobs.c.uid, jobs.c.cluster)

# --- workflows, served models, pipeline events (issue 18) --------------------------------------------

# An Argo Workflow or an Airflow DAG run; `record` holds the whole WorkflowRecord (steps, owner, links).
workflows = sa.Table(
    "workflows",
    metadata,
    *_key("cluster", "uid"),
    sa.Column("kind", sa.String(), nullable=False),
    *_object_name(),
    sa.Column("run_id", sa.String()),
    sa.Column("status", sa.String(), nullable=False),
    *_owner_and_team(),
    *_run_times(),
    sa.Column("record", _json(), nullable=False),
    # Airflow: when the run's last pod stopped; NULL while one runs (the run is not quiet).
    sa.Column("quiet_since", UTCDateTime()),
    # Owned by the store: where the workflow stands on the way to its summary, and when it is due.
    _summary_state(),
    sa.Column("due_at", UTCDateTime()),
    sa.Column("terminal_recorded_at", UTCDateTime()),
    # The summary claim, as for jobs' usage claims.
    *_claim(),
    # The job list's sort key, as jobs.sort_at: a workflow is listed among the jobs (job_details).
    sa.Column("sort_at", UTCDateTime()),
    sa.Index(None, "summary_state", "due_at"),
    sa.Index(None, "kind", "summary_state", "quiet_since"),
    sa.Index(None, "namespace", "name", "created_at"),
    sa.Index(None, "sort_at", "uid", "cluster"),
    # The job list of one team (as for jobs, below).
    sa.Index(None, "team", "sort_at", "uid", "cluster"),
)

# The pods of workflow steps: which workflow and step each ran (WorkflowPod in `record`).
workflow_pods = sa.Table(
    "workflow_pods",
    metadata,
    *_key("cluster", "uid"),
    sa.Column("workflow_uid", sa.String(), nullable=False),
    *_object_name(),
    sa.Column("record", _json(), nullable=False),
    sa.Index(None, "cluster", "workflow_uid"),
)

# KServe InferenceServices seen, and the ready revision last recorded (announced or, for one that
# served before we first looked, recorded silently).
served_models = sa.Table(
    "served_models",
    metadata,
    *_key("cluster", "uid"),
    *_object_name(),
    sa.Column("revision", sa.String()),
    sa.Column("announced", sa.Boolean(), nullable=False),
    sa.Column("recorded_at", UTCDateTime(), nullable=False),
)

# Messages pipelines posted (POST /api/v1/events): one per (token name, key), ever (issue 29: a key
# of one pipeline neither answers nor suppresses another's). `fingerprint` is a hash of the body
# posted, so the same key with another body is told apart (409); NULL for events posted before.
pipeline_events = sa.Table(
    "pipeline_events",
    metadata,
    _id(),
    sa.Column("key", sa.String(), nullable=False),
    sa.Column("sender", sa.String(), nullable=False),
    sa.Column("title", sa.Text(), nullable=False),
    sa.Column("recipients", _json(), nullable=False),
    sa.Column("created_at", UTCDateTime(), nullable=False),
    sa.Column("fingerprint", sa.String()),
    sa.UniqueConstraint("sender", "key"),
    # The per-token rate limit counts a token's events of the last minute.
    sa.Index(None, "sender", "created_at"),
)

# Who each event went to, one row per resolved recipient (lower-case address, or a team's Slack
# channel): the per-recipient rate limit counts them over the last hour, on every replica alike.
pipeline_event_recipients = sa.Table(
    "pipeline_event_recipients",
    metadata,
    sa.Column("event_id", _BIG_ID, primary_key=True),
    *_key("recipient"),
    sa.Column("created_at", UTCDateTime(), nullable=False),
    sa.Index(None, "recipient", "created_at"),
)

# --- self-service on Telegram (issue 19) ---------------------------------------------------------------

# What a person set for themselves over their directory entry (domain.preferences): a field counts
# only when `origins` names it, with who set it, through what, and when. Kept apart from `users`,
# which the service re-seeds from the YAML file at every start.
user_preferences = sa.Table(
    "user_preferences",
    metadata,
    *_key("email"),
    sa.Column("telegram_chat_id", sa.BigInteger()),
    sa.Column("channels", _json()),
    sa.Column("notify", sa.String()),
    sa.Column("muted_until", UTCDateTime()),
    # False: the person turned idle-GPU nudges off (NULL: never said).
    sa.Column("nudges", sa.Boolean()),
    sa.Column("origins", _json(), nullable=False),
    sa.Column("updated_at", UTCDateTime(), nullable=False),
    # The channels the mute holds (NULL: every channel); set and unset with muted_until.
    sa.Column("muted_channels", _json()),
    # The person's Telegram link generation (domain.telegram_linking): moved on by every link,
    # relink and /stop; a linking token of an older one links nothing.
    sa.Column("link_epoch", sa.BigInteger(), nullable=False, server_default="0"),
    # False: the person turned e-mail off (the one-click unsubscribe; NULL: never said).
    sa.Column("emails", sa.Boolean()),
    # The claim looks up the mutes of its rows' recipients; few people are muted at a time.
    sa.Index(None, "muted_until"),
)

# Linking tokens that were used (domain.telegram_linking): a second use finds its row and is refused.
# A row can go once the token has expired, since an expired token is refused for that anyway.
telegram_link_uses = sa.Table(
    "telegram_link_uses",
    metadata,
    *_key("token_id"),
    sa.Column("email", sa.String(), nullable=False),
    sa.Column("chat_id", sa.BigInteger(), nullable=False),
    sa.Column("used_at", UTCDateTime(), nullable=False),
    sa.Column("expires_at", UTCDateTime(), nullable=False),
    sa.Index(None, "expires_at"),
)

# What the Kueue watch saw (service/kueue_queues.py): each ClusterQueue's nominal GPU quota, in
# GPU-equivalents summed over its flavors (None: it covers no GPU resource), and each LocalQueue's
# ClusterQueue, so that a team's namespaces lead to its quota (queue_quotas.py).
cluster_queues = sa.Table(
    "cluster_queues",
    metadata,
    *_key("cluster", "name"),
    sa.Column("nominal_gpus", sa.Double()),
    sa.Column("updated_at", UTCDateTime(), nullable=False),
)

local_queues = sa.Table(
    "local_queues",
    metadata,
    *_key("cluster", "namespace", "name"),
    sa.Column("cluster_queue", sa.String()),
    sa.Column("updated_at", UTCDateTime(), nullable=False),
)
