"""Raw LIST and WATCH requests through kubernetes-asyncio's ApiClient, answered as plain dicts.

kubernetes-asyncio's `Watch` turns every event into a generated model object (and makes its own
ApiClient from the global default configuration); on our hot path that costs more than parsing.
We keep the client's configuration, auth, TLS and connection pool, ask for the raw response
(`_preload_content=False`) and decode the JSON ourselves with orjson. This module is the only
place that knows URL layout, query parameters and the Status error format.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncGenerator
from dataclasses import dataclass
from typing import Any, NamedTuple

import aiohttp
import orjson
from kubernetes_asyncio.client import ApiClient

JsonObj = dict[str, Any]


@dataclass(frozen=True, slots=True)
class Resource:
    """A watched group/version/resource and the selectors applied to it."""

    kind: str
    group: str
    version: str
    plural: str
    namespaced: bool = True
    label_selector: str | None = None
    field_selector: str | None = None

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    def path(self, namespace: str | None) -> str:
        base = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if namespace is not None and self.namespaced:
            return f"{base}/namespaces/{namespace}/{self.plural}"
        return f"{base}/{self.plural}"


JOBS = Resource("Job", "batch", "v1", "jobs")
PODS = Resource("Pod", "", "v1", "pods")
EVENTS = Resource("Event", "", "v1", "events")
NAMESPACES = Resource("Namespace", "", "v1", "namespaces", namespaced=False)
KUEUE_GROUP = "kueue.x-k8s.io"


ARGO_GROUP = "argoproj.io"
KSERVE_GROUP = "serving.kserve.io"


def workloads(version: str) -> Resource:
    return Resource("Workload", KUEUE_GROUP, version, "workloads")


def cluster_queues(version: str) -> Resource:
    return Resource("ClusterQueue", KUEUE_GROUP, version, "clusterqueues", namespaced=False)


def local_queues(version: str) -> Resource:
    return Resource("LocalQueue", KUEUE_GROUP, version, "localqueues")


def argo_workflows(version: str = "v1alpha1") -> Resource:
    return Resource("Workflow", ARGO_GROUP, version, "workflows")


def inference_services(version: str = "v1beta1") -> Resource:
    return Resource("InferenceService", KSERVE_GROUP, version, "inferenceservices")


class KubeApiError(Exception):
    """A non-2xx answer or an ERROR watch event, carrying the Status code and reason."""

    def __init__(self, status: int, reason: str = "", message: str = "") -> None:
        super().__init__(f"{status} {reason}: {message}".strip())
        self.status = status
        self.reason = reason
        self.message = message

    @property
    def gone(self) -> bool:
        return self.status == 410

    @classmethod
    def from_status(cls, status: int, body: bytes | JsonObj) -> KubeApiError:
        doc: Any = body
        if isinstance(body, bytes):
            try:
                doc = orjson.loads(body)
            except orjson.JSONDecodeError:
                doc = {"message": body[:200].decode("utf-8", "replace")}
        if not isinstance(doc, dict):
            doc = {}
        return cls(
            int(doc.get("code") or status), str(doc.get("reason") or ""), str(doc.get("message") or "")
        )


_JSON = "application/json"
# client-go's metadata client asks so: metadata alone where the server can, the whole object if not.
_METADATA_OR_JSON = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json"
PARTIAL_LIST = "PartialObjectMetadataList"
_AUTH = ["BearerToken"]


def _selectors(resource: Resource) -> list[tuple[str, str]]:
    params = []
    if resource.label_selector:
        params.append(("labelSelector", resource.label_selector))
    if resource.field_selector:
        params.append(("fieldSelector", resource.field_selector))
    return params


async def get_json(api: ApiClient, path: str, *, request_timeout: float) -> JsonObj:
    """GET a document (discovery, one page of a list); KubeApiError on a non-200 answer."""
    return await _get(api, path, [], request_timeout)


async def _request(
    api: ApiClient,
    path: str,
    query: list[tuple[str, str]],
    limits: aiohttp.ClientTimeout,
    accept: str = _JSON,
) -> aiohttp.ClientResponse:
    """A GET with the client's bearer token, asking for JSON; the body is left for the caller to read."""
    response: aiohttp.ClientResponse = await api.call_api(
        path,
        "GET",
        query_params=query,
        header_params={"Accept": accept},
        auth_settings=_AUTH,
        _preload_content=False,
        _request_timeout=limits,
    )
    return response


async def _read_all(response: aiohttp.ClientResponse) -> bytes:
    """The whole body; the connection goes back to the pool whether or not the read succeeds."""
    try:
        return await response.read()
    finally:
        response.release()


async def _get(
    api: ApiClient, path: str, query: list[tuple[str, str]], request_timeout: float, accept: str = _JSON
) -> JsonObj:
    response = await _request(api, path, query, aiohttp.ClientTimeout(total=request_timeout), accept)
    body = await _read_all(response)
    if response.status != 200:
        raise KubeApiError.from_status(response.status, body)
    doc = orjson.loads(body)
    if not isinstance(doc, dict):
        # Not an answer the API server gives: treated like a failed request (retried).
        raise KubeApiError(502, "BadGateway", f"expected a JSON object, got {type(doc).__name__}")
    return doc


class Page(NamedTuple):
    """One page of a LIST: its items, the version the whole list is at, and whether the items are
    metadata only (PartialObjectMetadata) rather than whole objects."""

    items: list[Any]
    version: str
    partial: bool = False


async def list_pages(
    api: ApiClient,
    resource: Resource,
    namespace: str | None,
    *,
    page_size: int,
    request_timeout: float,
    metadata_only: bool = False,
) -> AsyncGenerator[Page, None]:
    """The pages of a consistent LIST (limit/continue).

    With `metadata_only` the server is asked for each object's metadata alone, as client-go's
    metadata client asks (a fraction of a pod's bytes to send and decode); a server that cannot
    answer so sends whole objects, and `Page.partial` says which came. Such a list is read as fast
    as it comes, so its next page is asked for as soon as a page's continue token is known: the API
    server encodes it while the caller reads this one (one page ahead). Whole objects wait on the
    consumer's queue instead, where a page fetched ahead would only be one more page held. Close
    the iterator (`contextlib.aclosing`) when leaving it early: that cancels a page on its way.

    Whole objects get their kind/apiVersion back: typed lists carry them only on the list itself.
    Items that are not objects are passed on as they are, for the caller to set aside.
    """
    path = resource.path(namespace)
    selectors = _selectors(resource)
    accept = _METADATA_OR_JSON if metadata_only else _JSON

    def fetch(token: str | None) -> asyncio.Task[JsonObj]:
        query = [("limit", str(page_size)), *selectors]
        if token:
            query.append(("continue", token))
        return asyncio.ensure_future(_get(api, path, query, request_timeout, accept))

    pending: asyncio.Task[JsonObj] | None = fetch(None)
    try:
        while pending is not None:
            doc = await pending
            pending = None
            items = doc.get("items") or []
            if not isinstance(items, list):
                raise KubeApiError(502, "BadGateway", f"items: expected a list, got {type(items).__name__}")
            metadata = doc.get("metadata")
            metadata = metadata if isinstance(metadata, dict) else {}
            version, token = metadata.get("resourceVersion"), metadata.get("continue")
            token = token if token and isinstance(token, str) else None
            if metadata_only and token:
                pending = fetch(token)
            partial = doc.get("kind") == PARTIAL_LIST
            if not partial:
                kind, api_version = resource.kind, resource.api_version
                for item in items:
                    if isinstance(item, dict):
                        item.setdefault("kind", kind)
                        item.setdefault("apiVersion", api_version)
            yield Page(items, version if isinstance(version, str) else "", partial)
            if pending is None and token:
                pending = fetch(token)
    finally:
        if pending is not None:
            # Not awaited: a cancellation of the caller must not be spent waiting on it here.
            pending.cancel()
            pending.add_done_callback(_forget)


async def get_object(
    api: ApiClient, resource: Resource, namespace: str | None, name: str, *, request_timeout: float
) -> JsonObj | None:
    """One object as it is now (with its kind/apiVersion); None when there is none of that name.
    The name must be a Kubernetes object name (`object_name`)."""
    path = f"{resource.path(namespace)}/{name}"
    try:
        doc = await _get(api, path, [], request_timeout)
    except KubeApiError as exc:
        if exc.status == 404:
            return None
        raise
    doc.setdefault("kind", resource.kind)
    doc.setdefault("apiVersion", resource.api_version)
    return doc


# What an object's name and namespace may be (RFC 1123 subdomain): anything else is not asked for
# by name (it would not be a path segment as it is).
_NAME = re.compile(r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?")


def object_name(value: object) -> str | None:
    """`value` if it can name an object in a request path, else None."""
    return value if isinstance(value, str) and _NAME.fullmatch(value) else None


def _forget(task: asyncio.Task[JsonObj]) -> None:
    """Retrieves how a page nobody waits for any more ended, so that it is not logged as unhandled."""
    if not task.cancelled():
        task.exception()


async def open_watch(
    api: ApiClient,
    resource: Resource,
    namespace: str | None,
    resource_version: str,
    *,
    connect_timeout: float,
) -> aiohttp.ClientResponse:
    """Start a WATCH with bookmarks from `resource_version`; the caller reads and releases it.

    No read timeout here: the watcher applies its own inactivity timeout to each read, which
    does not count the time its consumer spends on an event.
    """
    query = [
        ("watch", "true"),
        ("allowWatchBookmarks", "true"),
        ("resourceVersion", resource_version),
        *_selectors(resource),
    ]
    limits = aiohttp.ClientTimeout(connect=connect_timeout, sock_connect=connect_timeout)
    response = await _request(api, resource.path(namespace), query, limits)
    if response.status != 200:
        raise KubeApiError.from_status(response.status, await _read_all(response))
    return response


class LineSplitter:
    """Cuts a watch stream's byte chunks into JSON lines, keeping a partial line for later.

    A line longer than `max_line` is dropped (counted in `take_dropped`) rather than held in memory
    whole: no object the API server stores comes near the default.
    """

    __slots__ = ("_dropped", "_rest", "_skipping", "max_line")

    def __init__(self, max_line: int = 4 * 2**20) -> None:
        self._rest = b""
        self._skipping = False
        self._dropped = 0
        self.max_line = max_line

    def feed(self, chunk: bytes) -> list[bytes]:
        data = self._rest + chunk if self._rest else chunk
        lines = data.split(b"\n")
        self._rest = lines.pop()
        if self._skipping and lines:
            lines.pop(0)  # the end of the line being dropped
            self._skipping = False
        if len(self._rest) > self.max_line:
            if not self._skipping:
                self._dropped += 1
            self._rest = b""
            self._skipping = True
        kept = []
        for line in lines:
            if len(line) > self.max_line:
                self._dropped += 1
            elif line.strip():
                kept.append(line)
        return kept

    def take_dropped(self) -> int:
        """How many lines were dropped for their length since the last call."""
        dropped, self._dropped = self._dropped, 0
        return dropped
