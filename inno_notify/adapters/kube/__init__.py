"""Kubernetes adapter: client configuration and LIST+WATCH of Jobs, Pods, Events, and, where installed,
Kueue Workloads, Argo Workflows and KServe InferenceServices.

Objects reach the consumer as plain dicts through two callbacks, `on_event(kind, type, obj)` and
`on_relist(kind, uids)` (the uids a completed LIST held), and a LIST's pages whole through
`on_listed(kind, objects)` where the consumer gives one; a consumer that holds the cluster already
(`KnownObjects`) is asked what it lacks, and only that is fetched whole. See watching.py for the
guarantees.
"""

from inno_notify.adapters.kube.cluster import ClusterWatcher, KueueMode, OptionalMode
from inno_notify.adapters.kube.config import KubeConfigError, load_api_client
from inno_notify.adapters.kube.protocol import (
    EVENTS,
    JOBS,
    PODS,
    KubeApiError,
    Resource,
    argo_workflows,
    inference_services,
    workloads,
)
from inno_notify.adapters.kube.watching import (
    KnownObjects,
    OnEvent,
    OnListed,
    OnRelist,
    ResourceWatcher,
    WatcherStats,
    WatchOptions,
)

__all__ = [
    "EVENTS",
    "JOBS",
    "PODS",
    "ClusterWatcher",
    "KnownObjects",
    "KubeApiError",
    "KubeConfigError",
    "KueueMode",
    "OnEvent",
    "OnListed",
    "OnRelist",
    "OptionalMode",
    "Resource",
    "ResourceWatcher",
    "WatchOptions",
    "WatcherStats",
    "argo_workflows",
    "inference_services",
    "load_api_client",
    "workloads",
]
