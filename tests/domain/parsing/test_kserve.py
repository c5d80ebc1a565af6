"""KServe InferenceServices: the real KFServing capture and the canary status excerpt parse; Ready,
the revision (Knative and Standard mode), the URL and the predictor's GPUs are read as documented."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from inno_notify.domain.parsing import ParseConfig
from inno_notify.domain.parsing.kserve import parse_inference_service

from ._load import utc

CFG = ParseConfig(cluster="lab", namespace_teams={"kfserving-test": "vision"})


def capture(captures: Path, name: str) -> dict[str, Any]:
    with (captures / "kserve" / name).open() as f:
        data: dict[str, Any] = json.load(f)
    return data


def test_every_kserve_capture_is_covered(captures: Path) -> None:
    assert {p.name for p in (captures / "kserve").glob("*.json")} == {
        "inferenceservice-kfserving-0.5-canary-patch-response.json",
        "isvc-status-components-predictor-canary-tag-routing.json",
    }


def test_the_ready_kfserving_service(captures: Path) -> None:
    record = parse_inference_service(
        capture(captures, "inferenceservice-kfserving-0.5-canary-patch-response.json"), CFG
    )
    assert (record.uid, record.namespace, record.name, record.team) == (
        "d074779a-e0d0-4612-b9c7-a7da69002683",
        "kfserving-test",
        "flower-sample",
        "vision",
    )
    assert (record.ready, record.ready_at) == (True, utc("2021-01-18T00:31:55"))
    # The status still describes generation 1: the revision is the one that is ready.
    assert record.revision == "flower-sample-predictor-default-fg4d6"
    assert record.url == "http://flower-sample.kfserving-test.example.com"
    assert (record.model_format, record.storage_uri, record.gpus) == (
        "tensorflow",
        "gs://kfserving-samples/models/tensorflow/flowers-2",
        0.0,
    )


def test_the_canary_revision_is_the_ready_one(captures: Path) -> None:
    obj = copy.deepcopy(capture(captures, "inferenceservice-kfserving-0.5-canary-patch-response.json"))
    obj["status"]["components"]["predictor"] = capture(
        captures, "isvc-status-components-predictor-canary-tag-routing.json"
    )
    assert parse_inference_service(obj, CFG).revision == "my-model-predictor-default-00003"


def _standard(**status: Any) -> dict[str, Any]:
    return {
        "apiVersion": "serving.kserve.io/v1beta1",
        "kind": "InferenceService",
        "metadata": {
            "name": "llama-chat",
            "namespace": "nlp",
            "uid": "5e1f0000-0000-4000-8000-00000000000a",
            "generation": 3,
            "annotations": {
                "serving.kserve.io/deploymentMode": "RawDeployment",
                "inno-notify/owner": "chen@example.com",
                "inno-notify/trained-by": "workflow/llama-sft-8k2p",
            },
        },
        "spec": {
            "predictor": {
                "minReplicas": 1,
                "maxReplicas": 2,
                "model": {
                    "modelFormat": {"name": "huggingface"},
                    "storageUri": "s3://models/llama-chat/v3",
                    "resources": {"limits": {"nvidia.com/gpu": "2", "memory": "64Gi"}},
                },
            }
        },
        "status": {
            "url": "https://llama-chat.nlp.example.org",
            "conditions": [
                {"type": "PredictorReady", "status": "True", "lastTransitionTime": "2026-11-30T10:00:00Z"},
                {"type": "Ready", "status": "True", "lastTransitionTime": "2026-11-30T10:00:05Z"},
            ],
            **status,
        },
    }


def test_standard_mode_has_no_revisions_the_observed_generation_stands_for_one() -> None:
    record = parse_inference_service(_standard(observedGeneration=2), CFG)
    assert (record.revision, record.mode, record.gpus) == ("generation 2", "RawDeployment", 2.0)
    assert (record.min_replicas, record.max_replicas) == (1, 2)
    assert (record.owner, record.trained_by, record.model_format) == (
        "chen@example.com",
        "workflow/llama-sft-8k2p",
        "huggingface",
    )
    assert record.ready_at == utc("2026-11-30T10:00:05")
    assert parse_inference_service(_standard(), CFG).revision == "generation 3"


@pytest.mark.parametrize("ready", ["False", "Unknown", None])
def test_a_service_that_is_not_ready_has_no_revision(ready: str | None) -> None:
    obj = _standard()
    conditions = obj["status"]["conditions"]
    if ready is None:
        conditions.pop()
    else:
        conditions[1]["status"] = ready
    record = parse_inference_service(obj, CFG)
    assert (record.ready, record.revision) == (False, None)


def test_a_url_that_is_no_web_url_is_dropped() -> None:
    obj = _standard()
    obj["status"]["url"] = "javascript:alert(1)"
    assert parse_inference_service(obj, CFG).url is None
