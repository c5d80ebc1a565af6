"""Finds out whether an optional API (a CRD) is served, and in which version; and what the
namespaces say of their owners.

Kueue's Workloads, Argo's Workflows and KServe's InferenceServices exist only where those projects
are installed; elsewhere, watching them must be neither an error nor a retry loop that fills the
log. Discovery answers once: 404 on the group means absent; a served group gives the version we
prefer that serves the resource (Kueue: v1beta2 from 0.15, else v1beta1). Anything else (the API
server is down, 500s) is not an answer, so it is retried with backoff.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Sequence

from kubernetes_asyncio.client import ApiClient

from inno_notify.adapters.kube.protocol import KUEUE_GROUP, NAMESPACES, KubeApiError, get_json, list_pages
from inno_notify.adapters.kube.watching import TRANSIENT, Sleep
from inno_notify.domain.backoff import Streak

log = logging.getLogger(__name__)

KUEUE_VERSIONS_PREFERRED = ("v1beta2", "v1beta1")


async def served_version(
    api: ApiClient, group_name: str, plural: str, preferred: Sequence[str], *, request_timeout: float = 30.0
) -> str | None:
    """The first of `preferred` versions in which `group_name` serves `plural`, or None when it
    serves none (not installed). Raises on errors."""
    try:
        group = await get_json(api, f"/apis/{group_name}", request_timeout=request_timeout)
    except KubeApiError as exc:
        if exc.status == 404:
            return None
        raise
    served = {v["version"] for v in _objects(group.get("versions")) if isinstance(v.get("version"), str)}
    for version in preferred:
        if version not in served:
            continue
        resources = await get_json(api, f"/apis/{group_name}/{version}", request_timeout=request_timeout)
        if any(r.get("name") == plural for r in _objects(resources.get("resources"))):
            return version
    return None


async def kueue_workload_version(api: ApiClient, *, request_timeout: float = 30.0) -> str | None:
    """The Workload API version to watch, or None when Kueue is not installed. Raises on errors."""
    return await served_version(
        api, KUEUE_GROUP, "workloads", KUEUE_VERSIONS_PREFERRED, request_timeout=request_timeout
    )


async def namespace_annotations(
    api: ApiClient, key: str, *, page_size: int = 500, request_timeout: float = 30.0
) -> dict[str, str] | None:
    """namespace → the value of its annotation `key`, for the namespaces that carry one as a string;
    None when listing namespaces is forbidden (the service was not given it). Raises on errors."""
    found: dict[str, str] = {}
    try:
        pages = list_pages(api, NAMESPACES, None, page_size=page_size, request_timeout=request_timeout)
        async with contextlib.aclosing(pages):
            async for page in pages:
                for item in _objects(page.items):
                    metadata = item.get("metadata")
                    name = metadata.get("name") if isinstance(metadata, dict) else None
                    annotations = metadata.get("annotations") if isinstance(metadata, dict) else None
                    value = annotations.get(key) if isinstance(annotations, dict) else None
                    if isinstance(name, str) and isinstance(value, str):
                        found[name] = value
    except KubeApiError as exc:
        if exc.status in (401, 403):
            return None
        raise
    return found


def _objects(value: object) -> list[dict[str, object]]:
    """The objects of a list in a discovery document; anything else in it is not read."""
    return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []


async def detect_kueue(api: ApiClient, backoff: Streak, sleep: Sleep) -> str | None:
    """`kueue_workload_version`, retried through transient failures until it has an answer."""
    return await detect(api, "Kueue", KUEUE_GROUP, "workloads", KUEUE_VERSIONS_PREFERRED, backoff, sleep)


async def detect(
    api: ApiClient,
    name: str,
    group: str,
    plural: str,
    preferred: Sequence[str],
    backoff: Streak,
    sleep: Sleep,
) -> str | None:
    """`served_version`, retried through transient failures until it has an answer."""
    warned = False
    while True:
        try:
            return await served_version(api, group, plural, preferred)
        except TRANSIENT as exc:
            delay = backoff.next_delay()
            log.log(
                logging.DEBUG if warned else logging.WARNING,
                "%s discovery failed (%s), retrying in %.2f s",
                name,
                exc,
                delay,
            )
            warned = True
            await sleep(delay)
