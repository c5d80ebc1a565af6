"""Runs every registered rule on one finished job and orders the advice, worst waste first.

The single entry point the service calls after usage collection; it adds the job itself to its
family's history so that a family's figures always include the run being judged.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta

from inno_notify.domain.model import JobRecord, PodRecord, Recommendation, Severity, Usage
from inno_notify.domain.rightsizing.family import FamilyRun, recent_runs
from inno_notify.domain.rightsizing.inputs import RuleInput, current_run
from inno_notify.domain.rightsizing.policy import RightsizingPolicy
from inno_notify.domain.rightsizing.replicas import PER_ROLE_RULES, role_advice
from inno_notify.domain.rightsizing.rules import RULES

_SEVERITY_RANK = {Severity.CRITICAL: 2, Severity.WARNING: 1, Severity.INFO: 0}


def _order(rec: Recommendation) -> tuple[int, float, float, float]:
    # GPU time is the scarce resource, so GPU waste outranks memory, and memory CPU.
    return (_SEVERITY_RANK[rec.severity], rec.waste_gpu_minutes, rec.waste_gib_hours, rec.waste_core_hours)


def recommend(
    job: JobRecord,
    usage: Usage,
    pods: Sequence[PodRecord],
    history: Sequence[FamilyRun],
    policy: RightsizingPolicy,
    now: datetime,
) -> list[Recommendation]:
    """Advice for the next run of ``job``, most severe and most wasteful first.

    ``history`` holds earlier runs of the job's family (any order; runs outside the policy's
    window, after ``now`` or of this job itself are ignored). ``now`` is the evaluation time.
    """
    this = current_run(job, usage, pods, policy, now)
    earlier = [run for run in history if run.job_uid != job.uid]
    window = timedelta(days=policy.family_window_days)
    family = (this, *recent_runs(earlier, now, window, policy.family_max_runs - 1))
    inp = RuleInput(job=job, usage=usage, pods=tuple(pods), family=family, policy=policy, now=now)
    if not job.replicas:
        found = [rec for _, rule in RULES if (rec := rule(inp)) is not None]
    else:
        # A multi-pod run: its GPUs judged role by role, the rest as a whole.
        found = [rec for name, rule in RULES if name not in PER_ROLE_RULES and (rec := rule(inp)) is not None]
        found += role_advice(inp)
    return sorted(found, key=_order, reverse=True)
