"""An idle-GPU finding for the tests of what is made of one (routing, bundling, sending a nudge).

One pod of alice's holding one GPU, idle for the two hours before `now`; a test changes what it is
about (`replace`'s keywords) rather than spelling out every field again.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta

from inno_notify.domain.live import IdleFinding, IdleGpu


def idle_finding(now: datetime, **changes: object) -> IdleFinding:
    since = now - timedelta(hours=2)
    base = IdleFinding(
        cluster="default",
        namespace="face-research",
        pod="train-0",
        pod_uid="p1",
        node="gpu-1",
        workload_kind="job",
        workload_name="train",
        workload_uid="uid-1",
        owner="alice@example.com",
        team="face",
        gpus_held=1,
        gpu_equivalents=1.0,
        idle=(IdleGpu("0", since),),
        idle_since=since,
        since_at_least=False,
        idle_gpu_equivalents=1.0,
        idle_gpu_hours=2.0,
        memory_held_mib=None,
        observed_at=now,
        window_minutes=60.0,
    )
    return replace(base, **changes)  # type: ignore[arg-type]
