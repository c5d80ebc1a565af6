"""Whether a family's new run followed the advice its previous run was given, and what that freed.

The product exists to move a cluster's requests toward what jobs use; advice nobody follows
changes nothing. When a new run of a family (the key right-sizing learns from) has been measured,
its requests are compared with the recommendations of the family's previous run, the newest one
that finished before the new run was created (its advice was the open advice then). Each piece of
advice is judged on its own field of the spec, then the run as a whole:

- ``followed``: every advised field was set at (or beyond, but not below the measured usage) the
  suggestion;
- ``partly``: some moved toward the suggestion but not all the way, or some were followed and
  some not;
- ``ignored``: no advised field moved toward its suggestion;
- ``over_corrected``: a decrease went below the usage the advice was measured on (the memory peak,
  the CPU p95, the GPUs that were busy), or the new run was OOM-killed after a memory decrease;
- ``no_prior_advice``: the previous run was given no advice;
- ``unknown``: every advised field is unset on the new run, so there is nothing to compare.

What the followed advice freed is an estimate against the previous request: the per-pod request
delta × the new run's pods × the new run's runtime, in GPU-hours (GPU-equivalents) and memory
GiB-hours; only advice followed in full or in part counts, and a run whose runtime is unknown has
null figures, never 0. Pure: the caller passes the records and the time in.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from inno_notify.domain.model import JobRecord, Recommendation, RecommendationKind, Requested

GIB = 1024**3
OOM_KILLED = "OOMKilled"
MIG_PREFIX = "nvidia.com/mig-"
# The time-sliced GPU resource the gpu_memory rule points to (GPU operator, renameByDefault).
SHARED_GPU = "nvidia.com/gpu.shared"
# Float requests (cores) compare equal within this; memory requests are whole bytes.
_EPSILON = 1e-9

_KEY = re.compile(r'\["(?P<key>[^"]+)"\]$')

_GPU_KINDS = frozenset(
    {RecommendationKind.GPU_COUNT, RecommendationKind.IDLE_GPU, RecommendationKind.GPU_MEMORY}
)


class Outcome(enum.StrEnum):
    FOLLOWED = "followed"
    PARTLY = "partly"
    IGNORED = "ignored"
    OVER_CORRECTED = "over_corrected"
    NO_PRIOR_ADVICE = "no_prior_advice"
    UNKNOWN = "unknown"


# Outcomes of runs that had advice to follow: the denominator of "followed in 5 of 8 new runs".
ADVISED = frozenset({Outcome.FOLLOWED, Outcome.PARTLY, Outcome.IGNORED, Outcome.OVER_CORRECTED})
# Outcomes whose freed requests count toward "GPU-h freed".
ACTED = frozenset({Outcome.FOLLOWED, Outcome.PARTLY})


@dataclass(frozen=True, slots=True)
class AdviceCheck:
    """One recommendation of the previous run against the new run's request for the same field."""

    kind: RecommendationKind
    field_path: str | None
    current: float | str | None
    suggested: float | str
    new: float | str | None
    outcome: Outcome


@dataclass(frozen=True, slots=True)
class Adoption:
    """What one new run of a family did with its previous run's advice."""

    cluster: str
    job_uid: str
    namespace: str
    name: str
    family: str
    owner: str | None
    team: str | None
    finished_at: datetime | None
    previous_uid: str | None
    previous_name: str | None
    outcome: Outcome
    checks: tuple[AdviceCheck, ...]
    gpu_hours_freed: float | None
    memory_gib_hours_freed: float | None
    evaluated_at: datetime


def _key(field_path: str | None) -> str | None:
    match = _KEY.search(field_path or "")
    return match.group("key") if match else None


def _number(value: float | str | None) -> float | None:
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return None
    return float(value)


def new_request(rec: Recommendation, requested: Requested) -> float | str | None:
    """The new run's value of the field `rec` is about; None when the new run does not set it."""
    limits = "limits" in (rec.field_path or "")
    if rec.kind is RecommendationKind.CPU:
        return requested.cpu_limit_cores if limits else requested.cpu_cores
    if rec.kind is RecommendationKind.MEMORY:
        value = requested.memory_limit_bytes if limits else requested.memory_bytes
        return None if value is None else float(value)
    if rec.kind is RecommendationKind.MEMORY_INCREASE:
        value = requested.memory_limit_bytes
        return None if value is None else float(value)
    if rec.kind is RecommendationKind.GPU_MEMORY:
        return _gpu_kind(requested)
    key = _key(rec.field_path)
    if key is None:
        return None
    # A GPU not asked for at all is 0 GPUs (what idle_gpu's "run it without a GPU" means).
    return float(requested.extended.get(key, 0))


def _gpu_kind(requested: Requested) -> str | None:
    """What kind of GPU one pod asks for, in the gpu_memory rule's words: a MIG profile name,
    "time-slicing" or "whole GPU"; None without any GPU."""
    for key, amount in sorted(requested.extended.items()):
        if amount and key.startswith(MIG_PREFIX):
            return key.removeprefix(MIG_PREFIX)
    if requested.extended.get(SHARED_GPU):
        return "time-slicing"
    if requested.extended.get("nvidia.com/gpu"):
        return "whole GPU"
    return None


def _measured(rec: Recommendation) -> float | None:
    """The usage a decrease was measured on: going below it is an over-correction."""
    evidence = rec.evidence
    if rec.kind is RecommendationKind.MEMORY:
        return _number(evidence.get("memory_peak_bytes"))
    if rec.kind is RecommendationKind.CPU:
        return _number(evidence.get("cpu_cores_p95"))
    if rec.kind in (RecommendationKind.GPU_COUNT, RecommendationKind.IDLE_GPU):
        # The suggestion is the GPUs that were busy (or the family's p95 of them).
        return _number(rec.suggested)
    return None


def judge_one(rec: Recommendation, new_job: JobRecord) -> AdviceCheck:
    """One piece of advice against the new run's request (the module docstring's rules)."""
    new = new_request(rec, new_job.requested)

    def check(outcome: Outcome) -> AdviceCheck:
        return AdviceCheck(rec.kind, rec.field_path, rec.current, rec.suggested, new, outcome)

    if new is None:
        return check(Outcome.UNKNOWN)
    if rec.kind is RecommendationKind.GPU_MEMORY:
        if new == rec.suggested:
            return check(Outcome.FOLLOWED)
        return check(Outcome.IGNORED if new == rec.current else Outcome.PARTLY)
    current, suggested, value = _number(rec.current), _number(rec.suggested), _number(new)
    if suggested is None or value is None:
        return check(Outcome.UNKNOWN)
    if current is None:
        # memory_increase without a limit before: any limit at or above the suggestion follows it.
        return check(Outcome.FOLLOWED if value >= suggested - _EPSILON else Outcome.PARTLY)
    if suggested > current:  # an increase
        if value >= suggested - _EPSILON:
            return check(Outcome.FOLLOWED)
        return check(Outcome.IGNORED if value <= current + _EPSILON else Outcome.PARTLY)
    measured = _measured(rec)
    oom = rec.kind is RecommendationKind.MEMORY and new_job.exit_reason == OOM_KILLED
    if value < current - _EPSILON and (oom or (measured is not None and value < measured - _EPSILON)):
        return check(Outcome.OVER_CORRECTED)
    if value <= suggested + _EPSILON:
        return check(Outcome.FOLLOWED)
    return check(Outcome.IGNORED if value >= current - _EPSILON else Outcome.PARTLY)


def run_outcome(checks: Sequence[AdviceCheck]) -> Outcome:
    """The run's outcome from its checks (unset fields do not count)."""
    judged = [c.outcome for c in checks if c.outcome is not Outcome.UNKNOWN]
    if not checks:
        return Outcome.NO_PRIOR_ADVICE
    if not judged:
        return Outcome.UNKNOWN
    if Outcome.OVER_CORRECTED in judged:
        return Outcome.OVER_CORRECTED
    if all(o is Outcome.FOLLOWED for o in judged):
        return Outcome.FOLLOWED
    if all(o is Outcome.IGNORED for o in judged):
        return Outcome.IGNORED
    return Outcome.PARTLY


def _pod_hours(job: JobRecord) -> float | None:
    runtime = job.runtime_seconds
    if runtime is None:
        return None
    return max(1, job.requested.parallelism) * runtime / 3600


def freed(
    checks: Sequence[AdviceCheck], previous: JobRecord | None, new_job: JobRecord
) -> tuple[float | None, float | None]:
    """GPU-hours and memory GiB-hours freed by the advice followed (in full or in part), against
    the previous request; None when the new run's runtime is unknown."""
    acted = [c for c in checks if c.outcome in ACTED]
    pod_hours = _pod_hours(new_job)
    if pod_hours is None:
        return (None, None) if acted else (0.0, 0.0)
    gpu = 0.0
    if previous is not None and any(c.kind in _GPU_KINDS for c in acted):
        gpu = max(0.0, previous.requested.gpus - new_job.requested.gpus) * pod_hours
    memory = 0.0
    for c in acted:
        before, after = _number(c.current), _number(c.new)
        if c.kind is RecommendationKind.MEMORY and before is not None and after is not None:
            memory += max(0.0, before - after) / GIB * pod_hours
    return gpu, memory


def judge(
    new_job: JobRecord,
    previous: JobRecord | None,
    advice: Sequence[Recommendation],
    now: datetime,
) -> Adoption | None:
    """The adoption record of `new_job` against `previous` (its family's previous run) and the
    advice `previous` was given; None for a job without a family (nothing to compare with)."""
    if not new_job.family:
        return None
    checks = tuple(judge_one(rec, new_job) for rec in advice) if previous is not None else ()
    gpu, memory = freed(checks, previous, new_job)
    return Adoption(
        cluster=new_job.cluster,
        job_uid=new_job.uid,
        namespace=new_job.namespace,
        name=new_job.name,
        family=new_job.family,
        owner=new_job.owner,
        team=new_job.team,
        finished_at=new_job.finished_at,
        previous_uid=None if previous is None else previous.uid,
        previous_name=None if previous is None else previous.name,
        outcome=run_outcome(checks),
        checks=checks,
        gpu_hours_freed=gpu,
        memory_gib_hours_freed=memory,
        evaluated_at=now,
    )


@dataclass(frozen=True, slots=True)
class AdoptionTally:
    """Adoption over a set of new runs (a team's week, one person's, an API window)."""

    runs: int = 0
    """New runs of families judged, `no_prior_advice` included."""
    advised: int = 0
    """Of those, runs whose previous run was given advice (followed + partly + ignored + over_corrected)."""
    followed: int = 0
    partly: int = 0
    ignored: int = 0
    over_corrected: int = 0
    gpu_hours_freed: float | None = None
    """None: no run that acted on advice had a known runtime."""
    memory_gib_hours_freed: float | None = None


def tally(counts: Sequence[tuple[Outcome, int, float | None, float | None]]) -> AdoptionTally:
    """Sums `(outcome, runs, gpu_hours_freed, memory_gib_hours_freed)` rows (one per outcome,
    as the store aggregates them) into one tally."""
    by: dict[Outcome, int] = {}
    gpu: float | None = None
    memory: float | None = None
    for outcome, runs, g, m in counts:
        by[outcome] = by.get(outcome, 0) + runs
        if g is not None:
            gpu = (gpu or 0.0) + g
        if m is not None:
            memory = (memory or 0.0) + m
    return AdoptionTally(
        runs=sum(by.values()),
        advised=sum(n for o, n in by.items() if o in ADVISED),
        followed=by.get(Outcome.FOLLOWED, 0),
        partly=by.get(Outcome.PARTLY, 0),
        ignored=by.get(Outcome.IGNORED, 0),
        over_corrected=by.get(Outcome.OVER_CORRECTED, 0),
        gpu_hours_freed=gpu,
        memory_gib_hours_freed=memory,
    )


def _plus(a: float | None, b: float | None) -> float | None:
    return a if b is None else b if a is None else a + b


def combine(tallies: Sequence[AdoptionTally]) -> AdoptionTally:
    """The sum of several tallies (a team's people, the teams of a window)."""
    result = AdoptionTally()
    for t in tallies:
        result = AdoptionTally(
            runs=result.runs + t.runs,
            advised=result.advised + t.advised,
            followed=result.followed + t.followed,
            partly=result.partly + t.partly,
            ignored=result.ignored + t.ignored,
            over_corrected=result.over_corrected + t.over_corrected,
            gpu_hours_freed=_plus(result.gpu_hours_freed, t.gpu_hours_freed),
            memory_gib_hours_freed=_plus(result.memory_gib_hours_freed, t.memory_gib_hours_freed),
        )
    return result


@dataclass(frozen=True, slots=True)
class AdoptionPerson:
    """One person's adoption over a window (the digest's per-person lines)."""

    owner: str | None
    tally: AdoptionTally


def adoption_to_dict(t: AdoptionTally) -> dict[str, int | float | None]:
    """A tally as JSON-ready data (the digest's `adoption`, the API's adoption groups)."""
    return {
        "runs": t.runs,
        "advised": t.advised,
        "followed": t.followed,
        "partly": t.partly,
        "ignored": t.ignored,
        "over_corrected": t.over_corrected,
        "gpu_hours_freed": t.gpu_hours_freed,
        "memory_gib_hours_freed": t.memory_gib_hours_freed,
    }
