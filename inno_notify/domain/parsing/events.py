"""Which Kubernetes Events matter to a job's story, from either Event API.

Most events are noise for us (SuccessfulCreate, Pulled, Started, ...). The few kept explain an
outcome or a wait that the objects themselves forget: the Job controller's BackoffLimitExceeded and
DeadlineExceeded, the kubelet's Evicted and Preempted... (also written by the scheduler as
Preempted), the scheduler's FailedScheduling and node-problem-detector's OOMKilling. core/v1 Events
name the object in ``involvedObject``, events.k8s.io/v1 in ``regarding``.
"""

from __future__ import annotations

from .fields import JsonObject, integer, key, mapping, text

__all__ = ["KEPT_REASONS", "event_count", "relevant_event"]

KEPT_REASONS = frozenset(
    {"BackoffLimitExceeded", "DeadlineExceeded", "Evicted", "Preempted", "FailedScheduling", "OOMKilling"}
)


def relevant_event(obj: JsonObject) -> tuple[str, str, str] | None:
    """(involved object uid, its kind, reason) for an event we keep, else None."""
    reason = text(obj, "reason")
    if reason not in KEPT_REASONS:
        return None
    subject = mapping(obj, "regarding") or mapping(obj, "involvedObject")
    uid, kind = key(subject, "uid"), text(subject, "kind", 64)
    if uid is None or kind is None or reason is None:
        return None
    return uid, kind, reason


def event_count(obj: JsonObject) -> int:
    """How many times the event happened: ``count`` (core/v1), ``series.count`` (events.k8s.io/v1),
    ``deprecatedCount``; 1 when none says."""
    for count in (integer(obj, "count", 0), integer(mapping(obj, "series"), "count", 0)):
        if count:
            return count
    return integer(obj, "deprecatedCount", 0) or 1
