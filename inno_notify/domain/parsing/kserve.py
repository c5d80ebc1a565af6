"""A KServe InferenceService (serving.kserve.io/v1beta1; KFServing's serving.kubeflow.org has the
same shape) turned into a :class:`ServingRecord`.

Ready is the aggregate ``Ready`` condition. The revision is the predictor's ``latestReadyRevision``
(Knative mode; ``<isvc>-predictor-000NN`` since KServe 0.11, ``<isvc>-predictor-default-…``
before). Standard mode (formerly RawDeployment) fills no revision fields, so there the generation
the controller last observed (``status.observedGeneration``, else ``metadata.generation``) stands
for the revision. The predictor is read in each of its spellings: ``model`` (with ``modelFormat``),
a framework key (``sklearn``, ``pytorch``, ``huggingface``, …), or plain ``containers``; its GPUs
per replica follow the accounting rules (limits, else requests, times ``gpu_resources``).
"""

from __future__ import annotations

from datetime import datetime

from ..links import mlflow_links, web_url
from ..serving import TRAINED_BY_KEY, ServingRecord
from .annotations import indexed_lookup, read_words
from .config import ParseConfig
from .fields import (
    JsonObject,
    SetAside,
    conditions,
    indexed_text,
    integer,
    mapping,
    objects,
    required_identity,
    text,
    timestamp,
)
from .resources import container_resources, gpu_equivalents
from .storable import INDEXED_MAX_BYTES

__all__ = ["parse_inference_service"]

# Predictor keys that hold one framework container (v1beta1 PredictorSpec).
FRAMEWORKS = (
    "sklearn",
    "xgboost",
    "tensorflow",
    "pytorch",
    "triton",
    "onnx",
    "pmml",
    "lightgbm",
    "paddle",
    "huggingface",
)
DEPLOYMENT_MODE_KEY = "serving.kserve.io/deploymentMode"
_READY_TIMES = ("Ready", "PredictorReady", "LatestDeploymentReady")


def _ready(status: JsonObject) -> tuple[bool, datetime | None]:
    found = conditions(status)
    ready = found.get("Ready")
    if ready is None or ready.get("status") != "True":
        return False, None
    times = [
        t
        for name in _READY_TIMES
        if (c := found.get(name)) is not None and c.get("status") == "True"
        if (t := timestamp(c, "lastTransitionTime")) is not None
    ]
    return True, max(times) if times else None


def _predictor(predictor: JsonObject, cfg: ParseConfig) -> tuple[str | None, str | None, float]:
    """(model format, storage URI, GPU-equivalents per replica) of the predictor."""
    containers: list[JsonObject] = []
    model_format = storage_uri = None
    model = mapping(predictor, "model")
    if model:
        containers.append(model)
        model_format = indexed_text(mapping(model, "modelFormat"), "name")
        storage_uri = text(model, "storageUri", INDEXED_MAX_BYTES)
    for framework in FRAMEWORKS:
        spec = mapping(predictor, framework)
        if spec:
            containers.append(spec)
            model_format = model_format or framework
            storage_uri = storage_uri or text(spec, "storageUri", INDEXED_MAX_BYTES)
    containers.extend(objects(predictor, "containers"))
    gpus = 0.0
    for container in containers:
        requests, limits = container_resources(container)
        gpus += gpu_equivalents(limits or requests, cfg)
    return model_format, storage_uri, gpus


def _revision(metadata: JsonObject, status: JsonObject) -> str | None:
    revision = indexed_text(mapping(mapping(status, "components"), "predictor"), "latestReadyRevision")
    if revision:
        return revision
    generation = integer(status, "observedGeneration", 0) or integer(metadata, "generation", 0)
    return f"generation {generation}" if generation else None


def parse_inference_service(
    obj: JsonObject, cfg: ParseConfig, notes: list[SetAside] | None = None
) -> ServingRecord:
    """The service's record; values refused but not fatal go to ``notes``."""
    metadata = mapping(obj, "metadata")
    spec = mapping(obj, "spec")
    status = mapping(obj, "status")
    uid, namespace, name = required_identity(metadata, "InferenceService")
    words = read_words(metadata, namespace, cfg, notes)
    intent, layers = words.intent, words.layers
    predictor = mapping(spec, "predictor")
    model_format, storage_uri, gpus = _predictor(predictor, cfg)
    ready, ready_at = _ready(status)
    return ServingRecord(
        cluster=cfg.cluster,
        uid=uid,
        namespace=namespace,
        name=name,
        ready=ready,
        ready_at=ready_at,
        revision=_revision(metadata, status) if ready else None,
        url=web_url(text(status, "url", INDEXED_MAX_BYTES)),
        mode=indexed_text(status, "deploymentMode") or indexed_lookup(layers, (DEPLOYMENT_MODE_KEY,)),
        model_format=model_format,
        storage_uri=storage_uri,
        gpus=gpus,
        min_replicas=integer(predictor, "minReplicas", 0),
        max_replicas=integer(predictor, "maxReplicas", 0),
        owner=intent.owner,
        team=intent.team,
        notify=intent.notify,
        channels=intent.channels,
        trained_by=indexed_lookup(layers, (TRAINED_BY_KEY,)),
        links=mlflow_links(layers, cfg.mlflow_url),
    )
