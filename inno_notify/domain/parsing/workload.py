"""A Kueue Workload (``kueue.x-k8s.io`` v1beta1 or v1beta2) turned into the job's :class:`KueueInfo`.

Kueue holds a Job suspended until its Workload is admitted, and evicts it (suspending it again) on
preemption or deactivation. The Job itself only shows ``suspend`` flipping; the Workload says which
ClusterQueue admitted it, when quota was reserved, and how often and why it was evicted. Both API
versions keep these fields where this module reads them (``status.admission.clusterQueue``, the
``QuotaReserved``/``Admitted``/``Evicted``/``Preempted`` conditions, ``status.schedulingStats``).
"""

from __future__ import annotations

from ..model import KueueInfo
from .fields import (
    JsonObject,
    condition,
    indexed_text,
    integer,
    key,
    labelled_uid,
    mapping,
    objects,
    string_map,
    timestamp,
)
from .job import KUEUE_QUEUE_LABEL
from .storable import INDEXED_MAX_BYTES, INT32_MAX, storable

__all__ = ["JOB_UID_LABEL", "parse_workload"]

JOB_UID_LABEL = "kueue.x-k8s.io/job-uid"


def _owner_uid(metadata: JsonObject) -> str | None:
    refs = objects(metadata, "ownerReferences")
    # A Workload has one controller owner; prefer it, then a batch Job, then whatever is there.
    for wanted in (lambda r: r.get("controller") is True, lambda r: r.get("kind") == "Job", lambda r: True):
        for ref in refs:
            if wanted(ref) and (uid := key(ref, "uid")):
                return uid
    return None


def _evictions(status: JsonObject) -> tuple[int, int, str | None]:
    """(evictions, preemptions, last reason) from schedulingStats (Kueue 0.13+) and the conditions.

    Only a true ``Evicted`` condition names the latest eviction for sure: once the workload is
    readmitted the condition turns False with an unrelated reason, and schedulingStats keeps counts per
    reason without order. So the reason is the true condition's, else schedulingStats' when it knows
    only one reason, else unknown (the merge keeps what an earlier observation saw).
    """
    evictions = preemptions = 0
    reasons: set[str] = set()
    for entry in objects(mapping(status, "schedulingStats"), "evictions"):
        count = integer(entry, "count", 0) or 0
        # A sum of 32-bit counts stays a 32-bit count.
        evictions = min(evictions + count, INT32_MAX)
        reason = indexed_text(entry, "reason")
        if reason:
            reasons.add(reason)
        if reason == "Preempted":
            preemptions = min(preemptions + count, INT32_MAX)
    evicted = condition(status, "Evicted")
    last_reason = next(iter(reasons)) if len(reasons) == 1 else None
    if evicted is not None:
        evictions = max(evictions, 1)
        last_reason = indexed_text(evicted, "reason") or last_reason
        if last_reason == "Preempted":
            preemptions = max(preemptions, 1)
    if condition(status, "Preempted") is not None:
        preemptions = max(preemptions, 1)
    return evictions, preemptions, last_reason


def _capped(value: str | None) -> str | None:
    return storable(value, INDEXED_MAX_BYTES) if value else None


def parse_workload(obj: JsonObject) -> tuple[str | None, KueueInfo]:
    """(uid of the job the Workload stands for, what Kueue says about it)."""
    metadata = mapping(obj, "metadata")
    spec = mapping(obj, "spec")
    status = mapping(obj, "status")
    labels = string_map(metadata, "labels")
    job_uid = labelled_uid(labels, JOB_UID_LABEL) or _owner_uid(metadata)

    quota = condition(status, "QuotaReserved")
    admitted = condition(status, "Admitted")
    evictions, preemptions, last_reason = _evictions(status)
    info = KueueInfo(
        local_queue=indexed_text(spec, "queueName") or _capped(labels.get(KUEUE_QUEUE_LABEL)),
        cluster_queue=indexed_text(mapping(status, "admission"), "clusterQueue"),
        workload_name=indexed_text(metadata, "name"),
        quota_reserved_at=timestamp(quota, "lastTransitionTime") if quota is not None else None,
        admitted_at=timestamp(admitted, "lastTransitionTime") if admitted is not None else None,
        evictions=evictions,
        preemptions=preemptions,
        last_eviction_reason=last_reason,
    )
    return job_uid, info
