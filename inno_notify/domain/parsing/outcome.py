"""Which container exit speaks for the whole job (CONTRACT.md §4, ``exit_code`` / ``exit_reason``).

A job may have run many pods (retries, parallel indexes), each with app containers, init containers
and sidecars, and restarted containers remember their previous end in ``lastState.terminated``. The
rule:

1. Candidates are the ``state.terminated`` and ``lastState.terminated`` of every main container
   (not init, not sidecar: those never decide the outcome) of every pod.
2. When the job failed (``job_failed=True``), only non-zero exits are considered if there are any:
   a sibling index that succeeded later did not decide the failure.
   When the job succeeded (``job_failed=False``), only zero exits are considered if there are any.
3. Among the rest, the one that finished last wins; an exit without ``finishedAt`` counts as the
   pod's finish or deletion time, and one with no time at all as earlier than any timed one.
   On a tie the non-zero exit wins (the failing container in a pod is the interesting one).

``job_failed=None`` (outcome not known yet) skips step 2.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

from ..model import PodRecord, TerminatedState

__all__ = ["decide_exit", "pod_exit"]

_NEVER = datetime.min.replace(tzinfo=UTC)


def _candidates(pods: Sequence[PodRecord]) -> list[tuple[datetime, TerminatedState]]:
    found: list[tuple[datetime, TerminatedState]] = []
    for pod in pods:
        fallback = pod.finished_at or pod.deleted_at or _NEVER
        for container in pod.containers:
            if container.init or container.sidecar:
                continue
            for state in (container.terminated, container.last_terminated):
                if state is not None:
                    found.append((state.finished_at or fallback, state))
    return found


def decide_exit(
    pods: Sequence[PodRecord], *, job_failed: bool | None = None
) -> tuple[int | None, str | None]:
    """(exit code, termination reason) of the container exit that decided the job; (None, None) if
    no main container has terminated yet."""
    candidates = _candidates(pods)
    if job_failed is not None:
        preferred = [c for c in candidates if (c[1].exit_code != 0) == job_failed]
        candidates = preferred or candidates
    if not candidates:
        return None, None
    _, state = max(candidates, key=lambda c: (c[0], c[1].exit_code != 0))
    return state.exit_code, state.reason


def pod_exit(pod: PodRecord) -> tuple[int | None, str | None]:
    """:func:`decide_exit` of a workload that is one pod (a bare pod, a workflow step): its exit is
    decided only once the pod has ended (a pod still running has no outcome to prefer)."""
    terminal = pod.phase in ("Succeeded", "Failed")
    return decide_exit([pod], job_failed=pod.phase == "Failed" if terminal else None)
