"""Which Kubernetes Events matter to a job's story, from either Event API.

Most events are noise for us (SuccessfulCreate, Pulled, Started, ...). The few kept explain an
outcome or a wait that the objects themselves forget: the Job controller's BackoffLimitExceeded and
DeadlineExceeded, the kubelet's Evicted and Preempted... (also written by the scheduler as
Preempted), the scheduler's FailedScheduling and node-problem-detector's OOMKilling. core/v1 Events
name the object in ``involvedObject``, events.k8s.io/v1 in ``regarding``.
"""

from __future__ import annotations

from .fields import JsonObject, mapping, text

__all__ = ["KEPT_REASONS", "relevant_event"]

KEPT_REASONS = frozenset(
    {"BackoffLimitExceeded", "DeadlineExceeded", "Evicted", "Preempted", "FailedScheduling", "OOMKilling"}
)


def relevant_event(obj: JsonObject) -> tuple[str, str, str] | None:
    """(involved object uid, its kind, reason) for an event we keep, else None."""
    reason = text(obj, "reason")
    if reason not in KEPT_REASONS:
        return None
    subject = mapping(obj, "regarding") or mapping(obj, "involvedObject")
    uid, kind = text(subject, "uid"), text(subject, "kind")
    if uid is None or kind is None or reason is None:
        return None
    return uid, kind, reason
