"""Kueue ClusterQueues and LocalQueues (``kueue.x-k8s.io`` v1beta1 or v1beta2), as far as quotas go.

A ClusterQueue's ``spec.resourceGroups[].flavors[].resources[]`` hold a ``nominalQuota`` per
resource and flavor; its nominal GPU quota is the sum, over every flavor, of the GPU resources'
quotas weighted by `accounting.gpu_resources` (GPU-equivalents, as for requests). A ClusterQueue
that covers no GPU resource has None, not 0. A LocalQueue names its ClusterQueue in
``spec.clusterQueue``; teams reach quotas through their namespaces' LocalQueues.

Quotas arrive as numbers or as quantity strings (``8``, ``"40"``, ``"10k"``): both are read. Both
API versions keep these fields where this module reads them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from inno_notify.domain.parsing.fields import (
    BAD_QUANTITY,
    MISSING_FIELD,
    JsonObject,
    ParseError,
    finite,
    indexed_text,
    mapping,
    objects,
)
from inno_notify.domain.parsing.quantities import QuantityError, parse_quantity

# No cluster has a million GPUs; a larger quota is a typo or an attack on the sums.
MAX_NOMINAL_GPUS = 1e6


@dataclass(frozen=True, slots=True)
class ClusterQueueQuota:
    name: str
    # GPU-equivalents over all flavors; None: the queue covers no GPU resource.
    nominal_gpus: float | None


@dataclass(frozen=True, slots=True)
class LocalQueueRef:
    namespace: str
    name: str
    cluster_queue: str | None


def _name(obj: JsonObject) -> str:
    name = indexed_text(mapping(obj, "metadata"), "name")
    if not name:
        raise ParseError("metadata.name: missing", MISSING_FIELD)
    return name


def parse_cluster_queue(obj: JsonObject, gpu_resources: Mapping[str, float]) -> ClusterQueueQuota:
    """The ClusterQueue's name and nominal GPU quota; ParseError for a shape we cannot read."""
    name = _name(obj)
    total: float | None = None
    for group in objects(mapping(obj, "spec"), "resourceGroups"):
        for flavor in objects(group, "flavors"):
            for resource in objects(flavor, "resources"):
                weight = gpu_resources.get(str(resource.get("name")))
                if not weight:
                    continue
                try:
                    amount = parse_quantity(resource.get("nominalQuota", 0))
                except QuantityError as exc:
                    raise ParseError(f"nominalQuota of {resource.get('name')}: {exc}", BAD_QUANTITY) from None
                total = (total or 0.0) + finite("nominalQuota", amount * weight, MAX_NOMINAL_GPUS)
    if total is not None:
        total = finite("nominal GPU quota", total, MAX_NOMINAL_GPUS)
    return ClusterQueueQuota(name, total)


def parse_local_queue(obj: JsonObject) -> LocalQueueRef:
    """The LocalQueue's namespace, name and ClusterQueue; ParseError for a shape we cannot read."""
    name = _name(obj)
    namespace = indexed_text(mapping(obj, "metadata"), "namespace")
    if not namespace:
        raise ParseError("metadata.namespace: missing", MISSING_FIELD)
    return LocalQueueRef(namespace, name, indexed_text(mapping(obj, "spec"), "clusterQueue"))
