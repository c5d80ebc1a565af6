"""Domain records (and the store's job rows) to the API's resources (resources.py), field for field.

One function per resource, returning the resource's TypedDict: a plain dict that orjson encodes
(datetimes as RFC 3339 in UTC with a `Z`, enums as their values). Where a resource's fields are
the record's attributes of the same names, `same_names` copies them in the resource's order, so a
field added to the resource is served without another edit (tests/api/test_serialize.py checks
that the record has each one); elsewhere mypy holds each literal to its class.
"""

from __future__ import annotations

import functools
from collections.abc import Collection, Mapping, Sequence
from datetime import datetime
from typing import Any, TypeVar, cast

import orjson

from inno_notify.adapters.db.codec import parse_iso
from inno_notify.adapters.db.pipeline_events import EventRecord
from inno_notify.adapters.db.recommendation_queries import JobRecommendation
from inno_notify.adapters.db.usage_queries import UsageGroup
from inno_notify.api import resources
from inno_notify.domain import costs
from inno_notify.domain.costs import Rates
from inno_notify.domain.model import (
    Channel,
    DirectoryUser,
    KindName,
    Notification,
    NotifyMode,
    Recommendation,
    WorkloadKind,
)
from inno_notify.domain.preferences import Preferences

JSON_OPTIONS = orjson.OPT_UTC_Z | orjson.OPT_NON_STR_KEYS
R = TypeVar("R")


def dumps(document: object) -> bytes:
    return orjson.dumps(document, option=JSON_OPTIONS)


@functools.cache
def _names(resource: Any, skip: frozenset[str]) -> tuple[str, ...]:
    return tuple(name for name in resource.__annotations__ if name not in skip)  # in declared order


def same_names(resource: type[R], record: object, skip: Collection[str] = ()) -> R:
    """The `resource` whose fields (but `skip`) are `record`'s attributes of the same names."""
    names = _names(cast(Any, resource), frozenset(skip))
    return cast(R, {name: getattr(record, name) for name in names})


def recommendation(rec: Recommendation) -> resources.Recommendation:
    return same_names(resources.Recommendation, rec)


def job_row(row: Sequence[Any], recs: list[resources.Recommendation], rates: Rates) -> resources.Job:
    """The Job resource from a row of the store's job page (job_details.PAGE_COLUMNS) and its
    recommendations (job_details.RECOMMENDATION_FIELDS each, the keys of resources.Recommendation),
    without building domain records: on the list endpoint that cost most of a page's CPU
    (tests/api/test_job_rows.py holds the result to the records' own definitions)."""
    (
        cluster,
        uid,
        namespace,
        name,
        owner,
        team,
        status,
        reason,
        exit_code,
        exit_reason,
        created_at,
        started_at,
        finished_at,
        queued_until,
        gpus,
        cpu_cores,
        memory_bytes,
        kueue,
        _sort_at,
        usage_uid,
        gpu_minutes,
        used_gpu_minutes,
        gpus_idle,
        util_mean,
        gpu_memory_peak,
        memory_peak,
        cpu_p95,
        missing,
        kind,
        parent,
        attempts,
        replicas,
        usage_replicas,
        gpu_model,
        idle_gpu_minutes,
        parallelism,
        _recommendations,
    ) = row
    # JobRecord.runtime_seconds, on the row's values.
    ran = started_at is not None and finished_at is not None
    runtime = max(0.0, (finished_at - started_at).total_seconds()) if ran else None
    return {
        "uid": uid,
        "cluster": cluster,
        "namespace": namespace,
        "name": name,
        "kind": _KIND_NAMES.get(kind) or _kind_name(kind),
        "parent": parent,
        "attempts": attempts,
        "owner": owner,
        "team": team,
        "gpu_model": gpu_model,
        "status": status,
        "reason": reason,
        "exit_code": exit_code,
        "exit_reason": exit_reason,
        "created_at": created_at,
        "started_at": started_at,
        "finished_at": finished_at,
        # JobRecord.queue_seconds, on the row's values.
        "queue_seconds": None
        if created_at is None or queued_until is None
        else max(0.0, (queued_until - created_at).total_seconds()),
        "runtime_seconds": runtime,
        "requested": {"gpus": gpus, "cpu_cores": cpu_cores, "memory_bytes": memory_bytes},
        "usage": None
        if usage_uid is None
        else {
            "gpu_minutes": gpu_minutes,
            "used_gpu_minutes": used_gpu_minutes,
            "gpus_idle": gpus_idle,
            "gpu_util_mean_percent": util_mean,
            "gpu_memory_peak_bytes": gpu_memory_peak,
            "memory_peak_bytes": memory_peak,
            "cpu_cores_p95": cpu_p95,
            "missing": [{"figure": m["figure"], "reason": m["reason"]} for m in missing] if missing else [],
        },
        "recommendations": recs,
        # Most runs have neither (a plain Job): no call for them on the list's hottest loop.
        "kueue": job_kueue(kueue) if kueue else None,
        "replicas": job_replicas(replicas, usage_replicas) if replicas or usage_replicas else [],
        "cost": None
        if usage_uid is None or not rates.priced
        else cost(
            costs.job_cost(
                rates,
                gpu_model=gpu_model,
                gpu_minutes=gpu_minutes,
                idle_gpu_minutes=idle_gpu_minutes,
                cpu_cores=cpu_cores,
                memory_bytes=memory_bytes,
                parallelism=parallelism,
                runtime_seconds=runtime,
            )
        ),
    }


def cost(priced: costs.Cost | None) -> resources.Cost | None:
    if priced is None:
        return None
    return {"amount": priced.amount, "idle": priced.idle, "currency": priced.currency}


def _kind_name(stored: str) -> KindName:
    return KindName(WorkloadKind(stored).api_name)  # raises ValueError for a kind no release stored


# Stored kind -> its API name, looked up once per row instead of two enum constructions.
_KIND_NAMES: dict[str, KindName] = {kind.value: _kind_name(kind.value) for kind in WorkloadKind}


def job_replicas(
    asked: Sequence[Mapping[str, Any]] | None, measured: Sequence[Mapping[str, Any]] | None
) -> list[resources.JobReplica]:
    """The run's roles (the jobs table's `replicas`, ReplicaSpec each) with their figures (the usage
    detail's `replicas`, ReplicaUsage each) where measured."""
    figures = {m["role"]: m for m in measured or ()}
    roles: list[resources.JobReplica] = []
    for spec in asked or ():
        role = spec["role"]
        per_pod = float((spec.get("requested") or {}).get("gpus") or 0.0)
        found = figures.pop(role, None)
        roles.append(_replica(role, spec.get("replicas") or 0, per_pod, found))
    for role, found in figures.items():  # a role the pods showed that the spec did not name
        pods = found.get("pods") or 0
        roles.append(_replica(role, pods, (found.get("gpus_requested") or 0.0) / max(1, pods), found))
    return roles


def _replica(role: str, pods: int, per_pod: float, found: Mapping[str, Any] | None) -> resources.JobReplica:
    return {
        "role": role,
        "pods": int(found["pods"]) if found is not None else int(pods),
        "gpus_requested": per_pod,
        "usage": None
        if found is None
        else {
            "gpu_minutes": found.get("gpu_minutes"),
            "used_gpu_minutes": found.get("used_gpu_minutes"),
            "gpus_idle": found.get("gpus_idle"),
            "idle_gpu_minutes": found.get("idle_gpu_minutes"),
            "memory_peak_bytes": found.get("memory_peak_bytes"),
        },
    }


def job_kueue(data: Mapping[str, Any] | None) -> resources.JobKueue | None:
    """The kueue JSON column (codec._kueue_json) as the Job resource shows it."""
    if not data:
        return None
    return {
        "local_queue": data.get("local_queue"),
        "cluster_queue": data.get("cluster_queue"),
        "workload": data.get("workload_name"),
        "quota_reserved_at": _instant(data.get("quota_reserved_at")),
        "admitted_at": _instant(data.get("admitted_at")),
        "evictions": int(data.get("evictions") or 0),
        "preemptions": int(data.get("preemptions") or 0),
        "last_eviction_reason": data.get("last_eviction_reason"),
    }


def _instant(value: str | None) -> datetime | None:
    return None if value is None else parse_iso(value)


def job_recommendation(item: JobRecommendation) -> resources.JobRecommendation:
    job: resources.RecommendedJob = {
        "cluster": item.cluster,
        "uid": item.job_uid,
        "namespace": item.namespace,
        "name": item.name,
        "owner": item.owner,
        "team": item.team,
        "finished_at": item.finished_at,
    }
    advice = same_names(resources.JobRecommendation, item.recommendation, skip=("id", "job"))
    return {"id": item.id, "job": job, **advice}


_PRICED = ("cost", "idle_cost", "currency")


def usage_group(group: UsageGroup) -> resources.UsageGroup:
    shown = same_names(resources.UsageGroup, group.figures, skip=("group", *_PRICED))
    shown["group"] = group.key
    cost = group.cost
    shown["cost"] = None if cost is None else cost.amount
    shown["idle_cost"] = None if cost is None else cost.idle
    shown["currency"] = None if cost is None else cost.currency
    return shown


def notification(n: Notification) -> resources.Notification:
    return same_names(resources.Notification, n)


def user(u: DirectoryUser, prefs: Preferences | None = None) -> resources.User:
    """A user as routing sees them (their own preferences applied), with those preferences and
    where each came from."""
    shown = same_names(resources.User, u, skip=("notify", "muted_until", "emails", "preferences"))
    shown["notify"] = "failure" if u.notify is NotifyMode.FAILURE else "always"
    shown["muted_until"] = prefs.muted_until if prefs is not None else None
    # Not the directory entry's: routing reads it from the preferences, of people in it or not.
    shown["emails"] = not (prefs is not None and prefs.email_off)
    shown["preferences"] = preferences(prefs)
    return shown


def preferences(prefs: Preferences | None) -> resources.UserPreferences:
    """The preferences the person set, each with its origin."""
    shown: dict[str, resources.Preference] = {}
    for name, origin in (prefs.origins if prefs is not None else {}).items():
        # orjson spells tuples, enums and datetimes as the other resources do.
        shown[name] = {"value": getattr(prefs, name), "via": origin.via, "by": origin.by, "at": origin.at}
    return cast(resources.UserPreferences, shown)


def event_receipt(event: EventRecord, duplicate: bool) -> resources.EventReceipt:
    recipients: list[resources.EventRecipient] = [
        {"recipient": recipient, "channel": Channel(channel)} for recipient, channel in event.recipients
    ]
    return {"id": event.id, "key": event.key, "recipients": recipients, "duplicate": duplicate}
