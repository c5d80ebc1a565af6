"""Workflow recording: how fast Workflow objects parse, and how fast the one pipeline writes their events.

Prints `name=value` lines:
- parse_workflows_per_s / parse_steps_per_s: parse_workflow on the final state of a generated
  workflow of `--steps` steps (every fourth retried once), repeated;
- pipeline_events_per_s: every Workflow and step-pod event of `--workflows` 4-step workflows (what
  the Argo controller writes, sim.pipelines) applied through the ingestion pipeline with its
  workflow recorder (Ingestor.apply) in batches of 500 into a fresh SQLite database: the
  workflows and their pods, and the GPU step pods as the pipeline's runs too (before 2026-12-03
  the tracker alone was measured: `tracker_events_per_s`);
- pipeline_workflows_per_s: the same, in workflows.

Usage: .venv/bin/python bench/workflows.py [--steps 500] [--workflows 200]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from inno_notify.adapters.db.migrate import migrate
from inno_notify.adapters.db.repository import Store
from inno_notify.domain.parsing import ParseConfig
from inno_notify.domain.parsing.argo import parse_workflow
from inno_notify.domain.routing import Directory
from inno_notify.service.ingest import IngestOptions, Ingestor
from inno_notify.service.serving import ServingAnnouncer
from inno_notify.service.workflow_tracking import WorkflowOptions, join_recorder
from inno_notify.sim.kube_store import ARGO_WORKFLOWS
from inno_notify.sim.pipelines import SimArgoWorkflow, SimAttempt, SimStep, argo_changes

T0 = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)
CFG = ParseConfig(cluster="bench")


def workflow(index: int, steps: int) -> SimArgoWorkflow:
    made = []
    at = T0
    for i in range(steps):
        tries = 2 if i % 4 == 3 else 1
        attempts = []
        for _ in range(tries):
            attempts.append(SimAttempt(at, 30, 1 if len(attempts) < tries - 1 else 0))
            at += timedelta(seconds=40)
        made.append(SimStep(f"step-{i}", tuple(attempts), gpus=1 if i % 2 else 0))
    return SimArgoWorkflow(
        name=f"wf-{index}", namespace="ml", created=T0, owner="a@example.com", steps=tuple(made)
    )


def bench_parse(steps: int) -> None:
    final = [c for c in argo_changes(workflow(0, steps)) if c.rt is ARGO_WORKFLOWS][-1].obj
    rounds = max(3, 20000 // steps)
    started = time.perf_counter()
    for _ in range(rounds):
        record = parse_workflow(final, CFG)
    elapsed = time.perf_counter() - started
    assert len(record.steps) == steps
    print(f"parse_workflows_per_s={rounds / elapsed:.1f}")
    print(f"parse_steps_per_s={rounds * steps / elapsed:.0f}")


async def no_directory() -> Directory:
    return Directory({}, {})


async def bench_pipeline(workflows: int) -> None:
    kinds = {ARGO_WORKFLOWS: "Workflow"}
    events = []
    for i in range(workflows):
        for change in argo_changes(workflow(i, 4)):
            op = {"create": "ADDED", "update": "MODIFIED", "delete": "DELETED"}[change.op]
            events.append((kinds.get(change.rt, "Pod"), op, change.obj))
    with tempfile.TemporaryDirectory() as folder:
        url = f"sqlite+aiosqlite:///{folder}/bench.db"
        await migrate(url)
        store = Store.from_url(url)
        announcer = ServingAnnouncer(store, no_directory, frozenset(), T0, 3600)
        ingestor = Ingestor(store, CFG, IngestOptions(), lambda: T0, T0)
        recorder = join_recorder(ingestor, WorkflowOptions(), announcer)
        started = time.perf_counter()
        for start in range(0, len(events), 500):
            await ingestor.apply(events[start : start + 500])
        elapsed = time.perf_counter() - started
        await store.close()
    assert recorder.stats.workflows_ended == workflows
    print(f"pipeline_events_per_s={len(events) / elapsed:.0f}")
    print(f"pipeline_workflows_per_s={workflows / elapsed:.1f}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=500)
    parser.add_argument("--workflows", type=int, default=200)
    args = parser.parse_args()
    bench_parse(args.steps)
    asyncio.run(bench_pipeline(args.workflows))


if __name__ == "__main__":
    main()
