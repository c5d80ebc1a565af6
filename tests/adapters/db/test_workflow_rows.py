"""Workflow rows written before the typed codec still read back exactly, on both databases.

OLD_WORKFLOW and OLD_POD are the `record` JSON the hand-written copying of adapters/db/workflow_rows.py
(before it went through json_codec) wrote for records.workflow() and records.workflow_pod(). Rows
holding them must read back as those records, and the typed codec must write the same text, so the
rows written from now on are the rows already stored.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import sqlalchemy as sa

from inno_notify.adapters.db import Store, tables
from inno_notify.adapters.db.workflow_rows import pod_to_json, record_to_json
from inno_notify.domain.model import NotifyMode
from inno_notify.domain.workflows import AttemptRecord, StepRecord, WorkflowPod, WorkflowRecord

from .records import PLUS3, T0, workflow, workflow_pod

OLD_WORKFLOW: dict[str, Any] = {
    "reason": "child failed",
    "notify": "failure",
    "channels": ["slack", "email"],
    "steps": [
        {"name": "prepare", "phase": "Succeeded", "template": None, "attempts": [], "attempts_dropped": 0},
        {
            "name": "train",
            "phase": "Failed",
            "template": "train-tpl",
            "attempts": [
                {
                    "key": "wf-1-111",
                    "phase": "Error",
                    "started_at": "2026-11-30T10:00:00.123456+00:00",
                    "finished_at": "2026-11-30T10:05:00.123456+00:00",
                    "exit_code": 1,
                    "message": "OOMKilled",
                    "pod_name": "wf-1-train-111",
                },
                {
                    "key": "wf-1-222",
                    "phase": "Failed",
                    "started_at": "2026-11-30T10:06:00.123456+00:00",
                    "finished_at": "2026-11-30T10:09:00.123456+00:00",
                    "exit_code": 137,
                    "message": None,
                    "pod_name": None,
                },
            ],
            "attempts_dropped": 3,
        },
    ],
    "steps_dropped": 2,
    "links": [{"title": "Logs", "url": "https://logs.example.com/wf?a=1&b=2"}],
    "resource_version": "4711",
    "creator": {"subject": "sub-1", "email": "alice@example.com", "preferred_username": "alice"},
}

OLD_POD: dict[str, Any] = {
    "kind": "airflow",
    "workflow_name": "pipeline-wf-1",
    "step_key": "train.3",
    "step": "train",
    "attempt": 2,
    "run_id": "run-7",
    "phase": "Failed",
    "created_at": "2026-11-30T10:00:00.123456+00:00",
    "started_at": "2026-11-30T10:01:00.123456+00:00",
    "finished_at": "2026-11-30T10:09:00.123456+00:00",
    "deleted_at": "2026-11-30T10:11:00.123456+00:00",
    "exit_code": 137,
    "exit_reason": "OOMKilled",
    "gpus": 2.5,
    "owner": "alice@example.com",
    "team": "face",
    "notify": "never",
    "channels": ["email"],
    "links": [{"title": "Run", "url": "https://wandb.example.com/r"}],
}


async def _insert_workflow(store: Store, record: WorkflowRecord, old_json: Mapping[str, Any]) -> None:
    columns = {
        "cluster": record.cluster,
        "uid": record.uid,
        "kind": record.kind.value,
        "namespace": record.namespace,
        "name": record.name,
        "run_id": record.run_id,
        "status": record.status.value,
        "owner": record.owner,
        "team": record.team,
        "created_at": record.created_at,
        "started_at": record.started_at,
        "finished_at": record.finished_at,
    }
    async with store.engine.begin() as conn:
        await conn.execute(sa.insert(tables.workflows).values(**columns, record=old_json))


async def _insert_pod(store: Store, pod: WorkflowPod, old_json: Mapping[str, Any]) -> None:
    columns = {
        "cluster": pod.cluster,
        "uid": pod.uid,
        "workflow_uid": pod.workflow_uid,
        "namespace": pod.namespace,
        "name": pod.name,
    }
    async with store.engine.begin() as conn:
        await conn.execute(sa.insert(tables.workflow_pods).values(**columns, record=old_json))


async def _read_back(store: Store, record: WorkflowRecord) -> WorkflowRecord:
    async with store.workflows.workflow_transaction() as tx:
        found = await tx.get_workflows(record.cluster, [record.uid])
    assert (
        await store.workflows.find_workflow(record.cluster, record.namespace, record.name)
        == found[record.uid]
    )
    return found[record.uid]


def test_the_typed_codec_writes_the_json_the_old_code_wrote() -> None:
    # The same text, key order included.
    assert json.dumps(record_to_json(workflow())) == json.dumps(OLD_WORKFLOW)
    assert json.dumps(pod_to_json(workflow_pod())) == json.dumps(OLD_POD)


async def test_old_workflow_and_pod_rows_read_back_unchanged(store: Store) -> None:
    await _insert_workflow(store, workflow(), OLD_WORKFLOW)
    await _insert_pod(store, workflow_pod(), OLD_POD)

    assert await _read_back(store, workflow()) == workflow()
    assert await store.workflows.workflow_pods("default", "wf-1") == [workflow_pod()]


async def test_keys_an_early_row_lacks_read_as_the_fields_defaults(store: Store) -> None:
    # No notify, channels, creator, resource version or dropped counts; a time in another zone.
    attempt = {"key": "wf-1-111", "phase": "Error", "started_at": T0.astimezone(PLUS3).isoformat()}
    early = {"reason": None, "steps": [{"name": "train", "phase": "Failed", "attempts": [attempt]}]}
    await _insert_workflow(store, workflow(), early)
    pod_keys = {key: OLD_POD[key] for key in ("kind", "workflow_name", "step_key", "step")}
    await _insert_pod(store, workflow_pod(), pod_keys)

    steps = (StepRecord("train", "Failed", attempts=(AttemptRecord("wf-1-111", "Error", T0),)),)
    assert await _read_back(store, workflow()) == replace(
        workflow(),
        reason=None,
        notify=NotifyMode.ALWAYS,
        channels=None,
        steps=steps,
        steps_dropped=0,
        links=(),
        resource_version=None,
        creator=None,
    )
    pod = workflow_pod()
    assert await store.workflows.workflow_pods("default", "wf-1") == [
        WorkflowPod(
            pod.cluster,
            pod.uid,
            pod.namespace,
            pod.name,
            pod.kind,
            pod.workflow_uid,
            pod.workflow_name,
            pod.step_key,
            pod.step,
        )
    ]
