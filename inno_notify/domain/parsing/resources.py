"""What a pod asks for, computed the way the scheduler computes it.

A pod's effective request is not the plain sum of its containers: init containers run one at a time
before the app containers, so each resource is ``max(sum of app containers, largest init container)``;
sidecars (init containers with ``restartPolicy: Always``, Kubernetes 1.28+) keep running and add to
the sum, and every init container that starts after a sidecar runs beside it. This mirrors
``PodRequests``/``PodLimits`` in k8s.io/component-helpers/resource. Pod-level ``spec.resources``
(1.32+), where set, replaces the container total for that resource. Pod overhead (RuntimeClass) is not
added: it is the runtime's, not the job's.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence

from ..model import Requested
from .config import ParseConfig
from .fields import BAD_QUANTITY, JsonObject, ParseError, finite, mapping, objects
from .quantities import QuantityError, parse_quantity
from .storable import INDEXED_MAX_BYTES, QUANTITY_MAX, storable

__all__ = [
    "ContainerResources",
    "container_resources",
    "gpu_equivalents",
    "is_extended",
    "is_sidecar",
    "pod_effective",
    "pod_effective_of",
    "requested_for_pod",
]

ContainerResources = tuple[dict[str, float], dict[str, float]]


def is_sidecar(container: JsonObject) -> bool:
    return container.get("restartPolicy") == "Always"


def is_extended(resource: str) -> bool:
    """Extended resources are domain-prefixed names outside kubernetes.io (``nvidia.com/gpu``)."""
    return "/" in resource and not resource.split("/", 1)[0].endswith("kubernetes.io")


def _amounts(resources: JsonObject, key: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for name, raw in mapping(resources, key).items():
        if raw is None:
            continue
        resource = storable(str(name), INDEXED_MAX_BYTES)
        try:
            amount = parse_quantity(raw)
        except QuantityError as exc:
            raise ParseError(f"resources.{key}[{resource[:80]}]: {exc}", BAD_QUANTITY) from exc
        # Requests and limits are never negative; the ceiling keeps byte counts within a BIGINT.
        if not 0 <= amount <= QUANTITY_MAX:
            finite(f"resources.{key}[{resource[:80]}]", amount, QUANTITY_MAX)  # raises, naming the field
        out[resource] = amount
    return out


def container_resources(container: JsonObject) -> ContainerResources:
    """(requests, limits) of one container; a resource with only a limit requests that limit,
    as the API server's defaulting does."""
    resources = mapping(container, "resources")
    limits = _amounts(resources, "limits")
    requests = {**limits, **_amounts(resources, "requests")}
    return requests, limits


def _add(total: dict[str, float], amounts: Mapping[str, float]) -> None:
    for name, value in amounts.items():
        total[name] = total.get(name, 0.0) + value


def _raise_to(total: dict[str, float], amounts: Mapping[str, float]) -> None:
    for name, value in amounts.items():
        total[name] = max(total.get(name, 0.0), value)


def _effective(
    app: Iterable[Mapping[str, float]], init: Sequence[tuple[bool, Mapping[str, float]]]
) -> dict[str, float]:
    total: dict[str, float] = {}
    for amounts in app:
        _add(total, amounts)
    init_peak: dict[str, float] = {}
    sidecars: dict[str, float] = {}
    for sidecar, amounts in init:
        if sidecar:
            _add(total, amounts)
            _add(sidecars, amounts)
            _raise_to(init_peak, sidecars)
        else:
            running = dict(sidecars)
            _add(running, amounts)
            _raise_to(init_peak, running)
    _raise_to(total, init_peak)
    return total


def pod_effective(pod_spec: JsonObject) -> tuple[dict[str, float], dict[str, float]]:
    """The pod's effective (requests, limits) per resource name."""
    app = [container_resources(c) for c in objects(pod_spec, "containers")]
    init = [(is_sidecar(c), container_resources(c)) for c in objects(pod_spec, "initContainers")]
    return pod_effective_of(pod_spec, app, init)


def pod_effective_of(
    pod_spec: JsonObject,
    app: Sequence[tuple[Mapping[str, float], Mapping[str, float]]],
    init: Sequence[tuple[bool, tuple[Mapping[str, float], Mapping[str, float]]]],
) -> tuple[dict[str, float], dict[str, float]]:
    """`pod_effective` from its containers' resources already read (in spec order; init containers
    with whether each is a sidecar): a pod parser that reads every container anyway reads it once."""
    requests = _effective((r for r, _ in app), [(s, r) for s, (r, _) in init])
    limits = _effective((lim for _, lim in app), [(s, lim) for s, (_, lim) in init])
    pod_level = mapping(pod_spec, "resources")
    if pod_level:
        pod_limits = _amounts(pod_level, "limits")
        limits.update(pod_limits)
        requests.update({**pod_limits, **_amounts(pod_level, "requests")})
    return requests, limits


def gpu_equivalents(limits: Mapping[str, float], cfg: ParseConfig) -> float:
    return sum((amount * cfg.gpu_resources.get(name, 0.0) for name, amount in limits.items()), 0.0)


def _bytes(field: str, value: float | None) -> int | None:
    # Kubernetes rounds fractional byte quantities ("1.5k" is fine, "100m" bytes is legal) up.
    # Each amount is within range, but a pod's total of many containers may not be.
    return None if value is None else math.ceil(finite(field, value, QUANTITY_MAX))


def requested_for_pod(
    pod_spec: JsonObject, cfg: ParseConfig, parallelism: int = 1, completions: int | None = None
) -> Requested:
    requests, limits = pod_effective(pod_spec)
    extended = {name: value for name, value in limits.items() if is_extended(name)}
    for name, value in requests.items():
        if is_extended(name):
            extended.setdefault(name, value)
    return Requested(
        gpus=gpu_equivalents(limits, cfg),
        cpu_cores=requests.get("cpu"),
        memory_bytes=_bytes("requests[memory]", requests.get("memory")),
        cpu_limit_cores=limits.get("cpu"),
        memory_limit_bytes=_bytes("limits[memory]", limits.get("memory")),
        extended=extended,
        parallelism=parallelism,
        completions=completions,
    )
