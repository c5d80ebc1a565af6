"""A Kubernetes API server over real HTTP, for tests, the demo and benchmarks.

The watcher's hard parts are failure modes (dropped and silently stalled streams, compacted
history, a server answering 500) that a real cluster produces rarely and never on demand. This
server speaks the list/watch protocol the way kube-apiserver does — global resourceVersion,
paginated consistent LISTs (of metadata only when asked: PartialObjectMetadataList), BOOKMARK
events, `timeoutSeconds`, label/field selectors, an ERROR event with a 410 Status for a compacted
version, discovery documents — and lets a test inject each of those failures. kubernetes-asyncio
is the client that talks to it.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import itertools
import json
import re
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
from aiohttp import web

from inno_notify.sim.kube_store import (
    BUILTIN_TYPES,
    CRD_TYPES,
    KUEUE_TYPES,
    Gone,
    InvalidSelector,
    JsonObj,
    KubeStore,
    Matcher,
    NotFound,
    ResourceType,
    StoredEvent,
    convert,
    in_namespace,
    kueue_types,
    parse_field_selector,
    parse_label_selector,
    watch_transition,
)

_SNAPSHOTS_KEPT = 64


def _status(code: int, reason: str, message: str) -> JsonObj:
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }


def _error_response(code: int, reason: str, message: str) -> web.Response:
    return web.Response(
        status=code, body=orjson.dumps(_status(code, reason, message)), content_type="application/json"
    )


def _json(body: Any) -> web.Response:
    return web.Response(body=orjson.dumps(body), content_type="application/json")


_KUBE_VERSION = re.compile(r"v(\d+)(?:(alpha|beta)(\d+))?")


def version_priority(version: str) -> tuple[int, int, int, str]:
    """Sort key of an API version as the API server orders a group's versions in discovery
    (apimachinery's CompareKubeAwareVersionStrings): GA, then beta, then alpha, each with the
    higher major (then minor) first; anything else last, by name."""
    match = _KUBE_VERSION.fullmatch(version)
    if match is None:
        return (3, 0, 0, version)
    major, stage, minor = match.groups()
    rank = {None: 0, "beta": 1, "alpha": 2}[stage]
    return (rank, -int(major), -int(minor or 0), version)


def _wants_metadata_only(request: web.Request) -> bool:
    """Whether the client asks for a list of metadata only (`Accept: application/json;
    as=PartialObjectMetadataList;g=meta.k8s.io;v=v1`, as client-go's metadata client does): the
    first media type it accepts decides, as the API server's negotiation does."""
    first = request.headers.get("Accept", "").split(",")[0]
    params = {p.strip() for p in first.split(";")[1:]}
    return {"as=PartialObjectMetadataList", "g=meta.k8s.io", "v=v1"} <= params


def _truthy(value: str | None) -> bool:
    return value is not None and value.lower() in ("1", "true")


@dataclass(slots=True, eq=False)
class _Watch:
    """One open watch connection and the controls a test has over it."""

    request: web.Request
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    dropped: bool = False
    stalled: bool = False

    def notify(self) -> None:
        self.wake.set()


@dataclass(slots=True)
class _Failure:
    status: int
    remaining: int | None
    until: float | None


@dataclass(slots=True)
class SimStats:
    """Request counters, so tests can see that a client really reconnected or re-listed."""

    lists: int = 0
    # LIST pages answered with metadata only (PartialObjectMetadataList), and GETs of one object.
    metadata_lists: int = 0
    gets: int = 0
    watches: int = 0
    failed: int = 0
    gone: int = 0


class SimKubeServer:
    """The simulated API server: an aiohttp app over a `KubeStore`, with fault controls.

    `clock` only measures `fail_requests(seconds=...)`, so a test can pass a fake clock and let
    30 s of failures go by in milliseconds; bookmarks and `timeoutSeconds` run on the event loop.
    """

    def __init__(
        self,
        *,
        kueue_versions: Sequence[str] = (),
        crds: Sequence[str] = (),
        bookmark_interval: float = 60.0,
        store: KubeStore | None = None,
        clock: Callable[[], float] = time.monotonic,
        forbidden: Sequence[str] = (),
    ) -> None:
        unknown = set(kueue_versions) - set(KUEUE_TYPES)
        if unknown:
            raise ValueError(f"unknown Kueue versions: {sorted(unknown)}")
        if set(crds) - set(CRD_TYPES):
            raise ValueError(
                f"unknown CRDs: {sorted(set(crds) - set(CRD_TYPES))}, known: {sorted(CRD_TYPES)}"
            )
        self.store = store or KubeStore()
        self.kueue_versions = tuple(kueue_versions)
        # Installed projects whose custom resources are served ("argo", "kserve"); may change later.
        self.crds = tuple(crds)
        self.bookmark_interval = bookmark_interval
        # Resources (plural names) the client's account may not read: 403, as RBAC answers.
        self.forbidden = frozenset(forbidden)
        self.stats = SimStats()
        # The latest requests (path, query), so a test can see what a client asked for (a field
        # selector, a resourceVersion); bounded for long simulations.
        self.requests: deque[tuple[str, dict[str, str]]] = deque(maxlen=1000)
        self._clock = clock
        self._watches: set[_Watch] = set()
        self._failure: _Failure | None = None
        self._snapshots: OrderedDict[str, tuple[int, list[JsonObj]]] = OrderedDict()
        self._snapshot_ids = itertools.count(1)
        self._runner: web.AppRunner | None = None
        self.url = ""

    # lifecycle -------------------------------------------------------------------------------

    def app(self) -> web.Application:
        app = web.Application(middlewares=[self._faults])
        app.router.add_get("/{path:.*}", self._dispatch)
        return app

    async def start(self, host: str = "127.0.0.1", port: int = 0) -> str:
        # handler_cancellation: a client that hangs up on a stalled watch must end its handler.
        self._runner = web.AppRunner(self.app(), handler_cancellation=True, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, host, port)
        await site.start()
        bound_port = self._runner.addresses[0][1]
        self.url = f"http://{host}:{bound_port}"
        return self.url

    async def stop(self) -> None:
        self.drop_watches()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> SimKubeServer:
        await self.start()
        return self

    async def __aexit__(self, *_exc: object) -> None:
        await self.stop()

    def kubeconfig(self, path: str | Path, *, token: str = "sim-token") -> Path:
        """Write a kubeconfig for this server (JSON is valid YAML); the token is not checked."""
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "sim", "cluster": {"server": self.url}}],
            "users": [{"name": "sim", "user": {"token": token}}],
            "contexts": [{"name": "sim", "context": {"cluster": "sim", "user": "sim"}}],
            "current-context": "sim",
        }
        target = Path(path)
        target.write_text(json.dumps(config, indent=2))
        return target

    # objects ---------------------------------------------------------------------------------

    def create(self, rt: ResourceType, obj: Mapping[str, Any]) -> JsonObj:
        return self.store.create(rt, obj)

    def update(self, rt: ResourceType, obj: Mapping[str, Any]) -> JsonObj:
        return self.store.update(rt, obj)

    def patch(self, rt: ResourceType, namespace: str | None, name: str, patch: Mapping[str, Any]) -> JsonObj:
        return self.store.patch(rt, namespace, name, patch)

    def delete(self, rt: ResourceType, namespace: str | None, name: str) -> JsonObj:
        return self.store.delete(rt, namespace, name)

    # faults ----------------------------------------------------------------------------------

    @property
    def open_watches(self) -> int:
        return len(self._watches)

    def drop_watches(self) -> int:
        """Cut every open watch connection without a final chunk, as a dying proxy does."""
        for watch in self._watches:
            watch.dropped = True
            watch.notify()
        return len(self._watches)

    def stall_watches(self, on: bool = True) -> int:
        """Make the watches open now go silent (no events, no bookmarks) or speak again.

        Only connections already open are affected: a stalled stream models a dead TCP path,
        and the client's way out is a new connection, which works.
        """
        for watch in self._watches:
            watch.stalled = on
            watch.notify()
        return len(self._watches)

    def fail_requests(
        self, status: int = 500, *, count: int | None = None, seconds: float | None = None
    ) -> None:
        """Answer API requests with `status` for the next `count` requests or `seconds` of clock."""
        if count is None and seconds is None:
            raise ValueError("give count or seconds")
        until = None if seconds is None else self._clock() + seconds
        self._failure = _Failure(status, count, until)

    def stop_failing(self) -> None:
        self._failure = None

    def compact(self, rv: int | None = None) -> int:
        """Compact history (default: all of it): older versions now get 410 Gone."""
        return self.store.compact(rv)

    @web.middleware
    async def _faults(
        self, request: web.Request, handler: Callable[[web.Request], Any]
    ) -> web.StreamResponse:
        failure = self._failure
        if failure is not None:
            expired = (failure.until is not None and self._clock() >= failure.until) or (
                failure.remaining is not None and failure.remaining <= 0
            )
            if expired:
                self._failure = None
            else:
                if failure.remaining is not None:
                    failure.remaining -= 1
                self.stats.failed += 1
                return _error_response(failure.status, "InternalError", "injected failure")
        response: web.StreamResponse = await handler(request)
        return response

    # routing ---------------------------------------------------------------------------------

    def _types(self) -> list[ResourceType]:
        return [
            *BUILTIN_TYPES,
            *(rt for v in self.kueue_versions for rt in kueue_types(v)),
            *(rt for name in self.crds for rt in CRD_TYPES[name]),
        ]

    def _find(self, group: str, version: str, plural: str) -> ResourceType | None:
        for rt in self._types():
            if (rt.group, rt.version, rt.plural) == (group, version, plural):
                return rt
        return None

    async def _dispatch(self, request: web.Request) -> web.StreamResponse:
        self.requests.append((request.path, dict(request.query)))
        parts = [p for p in request.match_info["path"].split("/") if p]
        if parts == ["version"]:
            return _json({"major": "1", "minor": "31", "gitVersion": "v1.31.0-inno-sim", "platform": "sim"})
        if parts == ["api"]:
            return _json({"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": []})
        if parts == ["apis"]:
            return _json({"kind": "APIGroupList", "apiVersion": "v1", "groups": self._groups()})
        if len(parts) >= 2 and parts[0] == "api":
            group, version, rest = "", parts[1], parts[2:]
        elif len(parts) >= 2 and parts[0] == "apis":
            group, rest = parts[1], parts[3:]
            if len(parts) == 2:
                return self._group_document(group)
            version = parts[2]
        else:
            return _error_response(404, "NotFound", "the server could not find the requested resource")
        if not rest:
            return self._resource_list(group, version)
        namespace: str | None = None
        if rest[0] == "namespaces" and len(rest) >= 3:
            namespace, rest = rest[1], rest[2:]
        rt = self._find(group, version, rest[0])
        if rt is None or len(rest) > 2 or (namespace is not None and not rt.namespaced):
            return _error_response(404, "NotFound", "the server could not find the requested resource")
        if rt.plural in self.forbidden:
            return _error_response(
                403, "Forbidden", f'{rt.plural} is forbidden: cannot list resource "{rt.plural}"'
            )
        if len(rest) == 2:
            return self._get_one(rt, namespace, rest[1])
        try:
            match = self._matcher(rt, request)
        except InvalidSelector as exc:
            return _error_response(400, "BadRequest", str(exc))
        if _truthy(request.query.get("watch")):
            return await self._watch(request, rt, namespace, match)
        return self._list(request, rt, namespace, match)

    def _groups(self) -> list[JsonObj]:
        by_group: dict[str, list[str]] = {}
        for rt in self._types():
            if rt.group and rt.version not in by_group.setdefault(rt.group, []):
                by_group[rt.group].append(rt.version)
        groups = []
        for name, versions in by_group.items():
            # Kubernetes' version priority: GA before beta before alpha, higher numbers first
            # (v1beta2 over v1beta1 for Kueue 0.15; v1 over v2beta1 in kubeflow.org).
            ordered = sorted(versions, key=version_priority)
            groups.append(
                {
                    "name": name,
                    "versions": [{"groupVersion": f"{name}/{v}", "version": v} for v in ordered],
                    "preferredVersion": {"groupVersion": f"{name}/{ordered[0]}", "version": ordered[0]},
                }
            )
        return groups

    def _group_document(self, group: str) -> web.Response:
        for doc in self._groups():
            if doc["name"] == group:
                return _json({"kind": "APIGroup", "apiVersion": "v1", **doc})
        return _error_response(404, "NotFound", "the server could not find the requested resource")

    def _resource_list(self, group: str, version: str) -> web.Response:
        served = [rt for rt in self._types() if (rt.group, rt.version) == (group, version)]
        if not served:
            return _error_response(404, "NotFound", "the server could not find the requested resource")
        resources = [
            {
                "name": rt.plural,
                "singularName": rt.kind.lower(),
                "namespaced": rt.namespaced,
                "kind": rt.kind,
                "verbs": ["get", "list", "watch"],
            }
            for rt in served
        ]
        group_version = served[0].api_version
        return _json(
            {
                "kind": "APIResourceList",
                "apiVersion": "v1",
                "groupVersion": group_version,
                "resources": resources,
            }
        )

    def _matcher(self, rt: ResourceType, request: web.Request) -> Matcher:
        labels = parse_label_selector(request.query.get("labelSelector"))
        fields = parse_field_selector(request.query.get("fieldSelector"))
        # Field paths are version-specific (involvedObject vs regarding): match what is served.
        return lambda obj: labels(obj) and fields(convert(obj, rt))

    # GET / LIST ------------------------------------------------------------------------------

    def _get_one(self, rt: ResourceType, namespace: str | None, name: str) -> web.Response:
        self.stats.gets += 1
        try:
            return _json(convert(self.store.get(rt, namespace, name), rt))
        except NotFound as exc:
            return _error_response(404, "NotFound", str(exc))

    def _list(
        self, request: web.Request, rt: ResourceType, namespace: str | None, match: Matcher
    ) -> web.Response:
        self.stats.lists += 1
        limit = int(request.query.get("limit") or 0)
        token = request.query.get("continue")
        if token:
            try:
                snapshot_id, offset_text = base64.urlsafe_b64decode(token.encode()).decode().split(":")
                rv, items = self._snapshots[snapshot_id]
                offset = int(offset_text)
            except (ValueError, KeyError):
                return _error_response(410, "Expired", "The provided continue parameter is too old")
            if rv < self.store.compacted_rv:
                self.stats.gone += 1
                return _error_response(410, "Expired", "The provided continue parameter is too old")
        else:
            items, rv = self.store.snapshot(rt, namespace, match)
            snapshot_id, offset = "", 0
        end = len(items) if limit <= 0 else min(len(items), offset + limit)
        metadata: JsonObj = {"resourceVersion": str(rv)}
        if end < len(items):
            if not snapshot_id:
                snapshot_id = str(next(self._snapshot_ids))
                self._snapshots[snapshot_id] = (rv, items)
                while len(self._snapshots) > _SNAPSHOTS_KEPT:
                    self._snapshots.popitem(last=False)
            metadata["continue"] = base64.urlsafe_b64encode(f"{snapshot_id}:{end}".encode()).decode()
            metadata["remainingItemCount"] = len(items) - end
        if _wants_metadata_only(request):
            self.stats.metadata_lists += 1
            return _json(
                {
                    "kind": "PartialObjectMetadataList",
                    "apiVersion": "meta.k8s.io/v1",
                    "metadata": metadata,
                    "items": [
                        {
                            "kind": "PartialObjectMetadata",
                            "apiVersion": "meta.k8s.io/v1",
                            "metadata": obj["metadata"],
                        }
                        for obj in items[offset:end]
                    ],
                }
            )
        page = [self._list_item(obj, rt) for obj in items[offset:end]]
        body = {"kind": f"{rt.kind}List", "apiVersion": rt.api_version, "metadata": metadata, "items": page}
        return _json(body)

    @staticmethod
    def _list_item(obj: JsonObj, rt: ResourceType) -> JsonObj:
        served = convert(obj, rt)
        if rt not in BUILTIN_TYPES:
            # Lists of custom resources carry kind/apiVersion on every item.
            return served
        # Built-in typed lists carry kind/apiVersion on the list, not on each item.
        return {k: v for k, v in served.items() if k not in ("kind", "apiVersion")}

    # WATCH -----------------------------------------------------------------------------------

    async def _watch(
        self, request: web.Request, rt: ResourceType, namespace: str | None, match: Matcher
    ) -> web.StreamResponse:
        self.stats.watches += 1
        loop = asyncio.get_running_loop()
        timeout = request.query.get("timeoutSeconds")
        deadline = loop.time() + float(timeout) if timeout else None
        bookmarks = _truthy(request.query.get("allowWatchBookmarks"))
        response = web.StreamResponse(headers={"Content-Type": "application/json"})
        response.enable_chunked_encoding()
        await response.prepare(request)
        watch = _Watch(request)
        self._watches.add(watch)
        self.store.subscribe(rt, watch.notify)
        try:
            await self._stream(watch, response, rt, namespace, match, deadline, bookmarks)
        finally:
            self.store.unsubscribe(rt, watch.notify)
            self._watches.discard(watch)
        return response

    async def _stream(
        self,
        watch: _Watch,
        response: web.StreamResponse,
        rt: ResourceType,
        namespace: str | None,
        match: Matcher,
        deadline: float | None,
        bookmarks: bool,
    ) -> None:
        loop = asyncio.get_running_loop()
        requested = watch.request.query.get("resourceVersion", "")
        if requested in ("", "0"):
            # No version: the current state as synthetic ADDED events, then changes from there.
            items, cursor = self.store.snapshot(rt, namespace, match)
            initial = [self._line("ADDED", convert(obj, rt)) for obj in items]
            if initial:
                await response.write(b"".join(initial))
        else:
            try:
                cursor = int(requested)
            except ValueError:
                await response.write(
                    self._line("ERROR", _status(400, "BadRequest", "invalid resourceVersion"))
                )
                return
        next_bookmark = loop.time() + self.bookmark_interval
        while True:
            if watch.dropped:
                self._abort(watch)
                return
            if not watch.stalled:
                try:
                    pending = self.store.events_after(rt, cursor)
                except Gone as exc:
                    self.stats.gone += 1
                    await response.write(self._line("ERROR", _status(410, "Expired", str(exc))))
                    return
                if pending:
                    cursor = pending[-1].rv
                    chunk = b"".join(self._encode(event, rt, namespace, match) for event in pending)
                    if chunk:
                        await response.write(chunk)
                    continue
                now = loop.time()
                if deadline is not None and now >= deadline:
                    return
                if bookmarks and now >= next_bookmark:
                    # Everything of this resource up to the global version was sent: say so.
                    cursor = self.store.resource_version
                    bookmark = {
                        "kind": rt.kind,
                        "apiVersion": rt.api_version,
                        "metadata": {"resourceVersion": str(cursor), "creationTimestamp": None},
                    }
                    await response.write(self._line("BOOKMARK", bookmark))
                    next_bookmark = now + self.bookmark_interval
                    continue
            due = [] if watch.stalled else [d for d in (deadline, next_bookmark if bookmarks else None) if d]
            watch.wake.clear()
            if not due:
                await watch.wake.wait()
            else:
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout_at(min(due)):
                        await watch.wake.wait()

    def _encode(self, event: StoredEvent, rt: ResourceType, namespace: str | None, match: Matcher) -> bytes:
        if not in_namespace(event.obj, namespace):
            return b""
        seen_as = watch_transition(event, match)
        if seen_as is None:
            return b""
        if seen_as != event.type:
            return self._line(seen_as, convert(event.obj, rt))
        cached = event.encoded.get(rt.api_version)
        if cached is None:
            cached = event.encoded[rt.api_version] = self._line(event.type, convert(event.obj, rt))
        return cached

    @staticmethod
    def _line(kind: str, obj: JsonObj) -> bytes:
        return orjson.dumps({"type": kind, "object": obj}) + b"\n"

    @staticmethod
    def _abort(watch: _Watch) -> None:
        transport = watch.request.transport
        if transport is not None:
            transport.abort()
