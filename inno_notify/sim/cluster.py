"""Plays a simulated workload onto the simulated API server, on a simulated clock.

Each job goes through what the Job controller and the kubelet would write: the Job and its pending
pod at submission, the pod scheduled and running, then the containers' end and the Job's
SuccessCriteriaMet/Complete or FailureTarget/Failed conditions. The workload's pipelines (Argo
Workflows, Airflow DAG runs, KServe services: sim.pipelines) are played in the same time line, and
so is a workspace (a JupyterHub server): a running pod from its start until it is stopped, when
its pod is deleted. Time runs `speed` times faster than the wall clock, so hours of cluster life
pass in seconds while every timestamp in the objects stays consistent.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from inno_notify.sim.kube_api import SimKubeServer
from inno_notify.sim.kube_store import JOBS, PODS, JsonObj
from inno_notify.sim.objects import (
    job_failed,
    job_object,
    job_started,
    job_succeeded,
    notebook_pod,
    pod_object,
    pod_running,
    pod_terminated,
)
from inno_notify.sim.pipelines import Change, apply_change
from inno_notify.sim.workload import SimJob, SimWorkspace, Workload


class SimClock:
    """`now()` runs `speed` times faster than the wall clock, from `start`."""

    def __init__(
        self, start: datetime, speed: float, monotonic: Callable[[], float] = time.monotonic
    ) -> None:
        self.start = start
        self.speed = speed
        self._monotonic = monotonic
        self._t0 = monotonic()

    def now(self) -> datetime:
        return self.start + timedelta(seconds=(self._monotonic() - self._t0) * self.speed)

    async def sleep_until(self, at: datetime) -> None:
        delay = (at - self.now()).total_seconds() / self.speed
        if delay > 0:
            await asyncio.sleep(delay)


@dataclass(frozen=True, slots=True)
class Step:
    at: datetime
    job: SimJob | None
    phase: str  # submit | run | end (a job), open | close (a workspace)
    workspace: SimWorkspace | None = None


def timeline(workload: Workload) -> list[Step]:
    steps = []
    for job in workload.jobs:
        steps += [
            Step(job.submit_at, job, "submit"),
            Step(job.scheduled_at, job, "run"),
            Step(job.ends_at, job, "end"),
        ]
    for workspace in workload.workspaces:
        steps += [
            Step(workspace.start, None, "open", workspace),
            Step(workspace.stop, None, "close", workspace),
        ]
    return sorted(steps, key=lambda s: (s.at, s.phase != "submit"))


class ClusterPlayer:
    """Writes each step of the timeline to the server when the simulated clock reaches it."""

    def __init__(self, server: SimKubeServer, workload: Workload, clock: SimClock) -> None:
        self.server = server
        self.workload = workload
        self.clock = clock
        self.submitted = 0
        self.ended = 0
        self._jobs: dict[str, JsonObj] = {}
        self._pods: dict[str, JsonObj] = {}

    async def run(self) -> None:
        items: list[Step | Change] = [*timeline(self.workload), *self.workload.pipeline_changes()]
        # Stable: a job's own steps and a pipeline's own changes keep their order at equal times.
        for item in sorted(items, key=lambda i: i.at):
            await self.clock.sleep_until(item.at)
            if isinstance(item, Step):
                self.apply(item)
            else:
                apply_change(self.server, item)

    def apply(self, step: Step) -> None:
        if step.workspace is not None:
            self._workspace(step.workspace, step.phase)
            return
        assert step.job is not None
        job, uid = step.job, step.job.spec.uid
        if step.phase == "submit":
            obj = job_object(job.spec, job.submit_at)
            pod = pod_object(obj, job.pod_uid[:5], job.submit_at + timedelta(seconds=1), uid=job.pod_uid)
            self._jobs[uid] = self.server.create(JOBS, obj)
            self._pods[uid] = self.server.create(PODS, pod)
            self.submitted += 1
        elif step.phase == "run":
            started = job.scheduled_at + timedelta(seconds=20)
            self._jobs[uid] = self.server.update(
                JOBS, job_started(self._jobs[uid], job.submit_at + timedelta(seconds=1))
            )
            self._pods[uid] = self.server.update(
                PODS, pod_running(self._pods[uid], job.node, job.scheduled_at, started)
            )
        else:
            reason = {"oom": "OOMKilled", "deadline": "Error"}.get(job.outcome)
            message = "Killed: job exceeded activeDeadlineSeconds" if job.outcome == "deadline" else None
            self.server.update(
                PODS, pod_terminated(self._pods[uid], job.ends_at, job.exit_code, reason, message)
            )
            end = job.ends_at + timedelta(seconds=2)
            if job.outcome == "succeeded":
                final = job_succeeded(self._jobs[uid], end)
            elif job.outcome == "deadline":
                final = job_failed(self._jobs[uid], end, "DeadlineExceeded")
            else:
                final = job_failed(self._jobs[uid], end, "BackoffLimitExceeded")
            self.server.update(JOBS, final)
            self.ended += 1

    def _workspace(self, workspace: SimWorkspace, phase: str) -> None:
        """A notebook server starts running, and is stopped (its pod deleted) at the end."""
        if phase == "open":
            self.server.create(
                PODS,
                notebook_pod(
                    workspace.pod_name,
                    workspace.namespace,
                    workspace.pod_uid,
                    workspace.username,
                    workspace.node,
                    workspace.start,
                    workspace.gpus,
                ),
            )
        else:
            self.server.delete(PODS, workspace.namespace, workspace.pod_name)
