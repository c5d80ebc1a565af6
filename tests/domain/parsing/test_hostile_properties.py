"""Property: on any Kubernetes-shaped object, parsing raises only ParseError, and what it accepts is
storable (no NUL, strings within their caps, numbers within their columns)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

from inno_notify.domain.parsing import (
    ParseConfig,
    ParseError,
    SetAside,
    directory_aliases,
    event_count,
    parse_bare_gpu_pod,
    parse_job,
    parse_pod,
    parse_selectors,
    parse_workload,
    relevant_event,
)
from inno_notify.domain.parsing.airflow import parse_airflow_pod
from inno_notify.domain.parsing.argo import parse_argo_pod, parse_workflow
from inno_notify.domain.parsing.kserve import parse_inference_service
from inno_notify.domain.parsing.workspace import workspace_identity
from inno_notify.settings import DEFAULT_WORKSPACE_SELECTORS
from tests.domain.parsing.hostile import assert_storable, hostile_object

CFG = ParseConfig(
    cluster="c1",
    gpu_resources={"nvidia.com/gpu": 1.0},
    namespace_teams={"nlp": "nlp"},
    workspace_selectors=parse_selectors(DEFAULT_WORKSPACE_SELECTORS),
    user_aliases=directory_aliases(["alice@example.com", "bob@example.com"]),
)
FAST = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _parse(template: str, obj: dict[str, Any]) -> None:
    notes: list[SetAside] = []
    try:
        if template == "Job":
            assert_storable(parse_job(obj, CFG, notes))
        elif template in ("Pod", "BarePod", "Workspace"):
            pod = parse_pod(obj, CFG, notes)
            assert_storable(pod)
            bare = parse_bare_gpu_pod(obj, CFG, notes, pod=pod)
            if bare is not None:
                assert_storable(bare)
                # What a nudge later reads back from the stored labels never raises.
                workspace_identity(bare.labels)
        elif template == "Workload":
            parse_workload(obj)
        elif template == "Workflow":
            assert_storable(parse_workflow(obj, CFG, notes))
        elif template == "ArgoPod":
            step = parse_argo_pod(obj, CFG, notes)
            if step is not None:
                assert_storable(step)
        elif template == "AirflowPod":
            task = parse_airflow_pod(obj, CFG, notes)
            if task is not None:
                assert_storable(task)
        elif template == "InferenceService":
            assert_storable(parse_inference_service(obj, CFG, notes))
        else:
            if relevant_event(obj) is not None:
                assert 0 <= event_count(obj) <= 2**31 - 1
    except ParseError as exc:
        assert exc.reason.isidentifier()  # a fixed word, fit for a metric label
    assert all(note.field in ("owner", "completion_index") for note in notes)


@pytest.mark.parametrize(
    "template",
    [
        "Job",
        "Pod",
        "BarePod",
        "Workspace",
        "Event",
        "Workload",
        "Workflow",
        "ArgoPod",
        "AirflowPod",
        "InferenceService",
    ],
)
def test_only_parse_errors_escape_and_accepted_records_are_storable(template: str) -> None:
    @FAST
    @given(obj=hostile_object(template))
    def check(obj: dict[str, Any]) -> None:
        _parse(template, obj)

    check()
