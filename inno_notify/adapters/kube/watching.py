"""LIST-then-WATCH of one resource, kept alive through every way a watch can die.

A missed Job event means a missed summary, so the watcher's promise is: every object's latest
state reaches the consumer, and every object deleted while we were not looking is reported. It
LISTs (paginated, consistent, the next page asked for while one is handed over), hands the objects
over page by page as they arrive, then WATCHes from the list's version with bookmarks. A list is
streamed, never held whole: a cluster of 150,000 pods is 150,000 dicts only if someone keeps them,
so the watcher keeps just their uids (for `on_relist`, which reconciles deletions) and the
consumer's bounded queue paces the pages (a consumer may take a page at once: `on_listed`).

A consumer that holds the cluster already (`KnownObjects`: a restart over a store that has it) is
spared most of a LIST: the watcher asks for the objects' metadata first (PartialObjectMetadataList,
as client-go's metadata informers do), the consumer says which objects it lacks, and those alone are
fetched by name and handed over. A fetched object may be newer than the list; the watch starts at
the list's version, so its events up to the state handed over are passed over, and the consumer
never sees an object go back. Past `fetch_max` objects lacking, or a server that answers with whole
objects, the list is simply taken whole.

A dropped stream resumes from the last version seen; 410 Gone means history moved past us, so it
LISTs again and the consumer reconciles (`on_relist`); a stream that goes silent for longer than
the inactivity timeout (bookmarks come every ~60 s) is presumed dead and restarted; errors back
off, capped and jittered. Objects stay plain dicts throughout.

What the server sends is not trusted either: a watch line that is not JSON, or not an event object
with an object inside, is set aside and counted (`WatcherStats.malformed`, by reason) and the stream
goes on; restarting on it would only read the same line again. The watcher remembers when it last
heard from each stream (a LIST page, an event, a bookmark), which is what readiness goes by: a
stream silent for longer than `stale_after` is not live, whatever it once synced.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import random
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Protocol

import aiohttp
import orjson
from kubernetes_asyncio.client import ApiClient

from inno_notify.adapters.kube.protocol import (
    JsonObj,
    KubeApiError,
    LineSplitter,
    Resource,
    get_object,
    list_pages,
    object_name,
    open_watch,
)
from inno_notify.domain.backoff import Backoff, Streak

log = logging.getLogger(__name__)

# on_event(kind, event_type, obj): event_type is ADDED, MODIFIED, DELETED, or SYNC for an object
# handed over from a LIST.
OnEvent = Callable[[str, str, JsonObj], Awaitable[None]]
# on_relist(kind, uids): called once a LIST is complete (every object of it was handed over as
# SYNC first), with the uids of the complete current set of this resource in the watched
# namespaces; anything the consumer holds that is not in it was deleted while we were away.
OnRelist = Callable[[str, frozenset[str]], Awaitable[None]]
# on_listed(kind, objects): the objects of one LIST page at once, each as on_event(kind, "SYNC", obj)
# would have had it; for a consumer that does better with a page than with its objects one by one
# (the ingestor passes over what it holds already without queueing it).
OnListed = Callable[[str, list[JsonObj]], Awaitable[None]]


class KnownObjects(Protocol):
    """What the consumer holds already, so that a LIST asks for the rest only: after a restart the
    store holds the cluster as it was, and most objects are unchanged (ingest's stored versions)."""

    async def holds(self, kind: str) -> bool:
        """Whether it holds objects of `kind` by resourceVersion: the LIST then asks for their
        metadata first (a fraction of the bytes to send and decode) and for the objects it lacks."""
        ...

    def unknown(self, kind: str, items: list[JsonObj]) -> list[JsonObj]:
        """Of these objects (their metadata only), those it does not hold as they are. Nothing is
        taken yet: should the list be taken whole after all, every object comes again."""
        ...

    def passed_over(self, kind: str, count: int) -> None:
        """A LIST is done: `count` of its objects were held as they are (handed over as SYNC)."""
        ...


Sleep = Callable[[float], Awaitable[None]]
Clock = Callable[[], float]

# Event types a watch stream carries; anything else is set aside.
_EVENT_TYPES = frozenset({"ADDED", "MODIFIED", "DELETED", "BOOKMARK", "ERROR"})
# Reasons a watch line is set aside (the `reason` label of inno_notify_rejected_objects_total).
INVALID_JSON = "invalid_json"
NOT_AN_OBJECT = "not_an_object"
UNKNOWN_TYPE = "unknown_type"
LINE_TOO_LONG = "line_too_long"
_VERSION_MAX = 64

# Failures that mean "try again later"; anything else (a bug, a consumer error) propagates.
TRANSIENT = (aiohttp.ClientError, TimeoutError, KubeApiError, orjson.JSONDecodeError, ConnectionError)


@dataclass(frozen=True, slots=True)
class WatchOptions:
    """Timing of the watch loop; tests shrink these instead of sleeping."""

    # No event and no bookmark for this long: the stream is presumed dead and restarted.
    inactivity_timeout: float = 70.0
    backoff_base: float = 0.5
    backoff_factor: float = 2.0
    backoff_cap: float = 30.0
    # Objects per LIST page (`limit`): what one request holds in memory, on both sides.
    page_size: int = 500
    list_timeout: float = 60.0
    # Objects a metadata-first LIST found the consumer lacking that are then asked for one by one;
    # with more, the list is taken again whole (one LIST of 500 costs what a few GETs do).
    fetch_max: int = 1000
    connect_timeout: float = 10.0
    # A stream not heard from (LIST page, event or bookmark) for this long is not live; None: twice
    # the inactivity timeout, so one silent stream restarted is not yet stale, two are.
    stale_after: float | None = None
    # A watch line longer than this is dropped: the API server stores objects up to ~1.5 MiB (etcd's
    # request limit; Argo offloads or compresses larger workflow status), so a longer line is no
    # object a real cluster holds, and decoding it would hold the interpreter for a second or more
    # (orjson keeps the GIL, so even a worker thread's decode pauses the event loop).
    max_line_bytes: int = 4 * 2**20
    sleep: Sleep = asyncio.sleep
    clock: Clock = time.monotonic
    rng: random.Random = field(default_factory=random.Random)

    @property
    def stale_seconds(self) -> float:
        return self.stale_after if self.stale_after is not None else 2 * self.inactivity_timeout

    def backoff(self) -> Streak:
        """A fresh streak of reconnect delays: base × factor^n up to the cap, each drawn from [½, 1] of
        its nominal delay, so replicas reconnecting at once spread out and none waits past the cap."""
        schedule = Backoff(self.backoff_base, self.backoff_factor, self.backoff_cap, low=0.5, high=1.0)
        return Streak(schedule, self.rng.random)


@dataclass(slots=True)
class WatcherStats:
    """What the watcher went through; exported as metrics and read by tests."""

    lists: int = 0
    relists: int = 0
    watch_starts: int = 0
    inactivity_restarts: int = 0
    gone: int = 0
    failures: int = 0
    events: int = 0
    bookmarks: int = 0
    # The watcher ended with an exception and its supervisor started it again (ClusterWatcher).
    crashes: int = 0
    # Watch lines and LIST items set aside, by reason (invalid_json, not_an_object, …).
    malformed: dict[str, int] = field(default_factory=dict)


class _Relist(Exception):
    """A stream learned that its version was compacted away."""


class _ListWhole(Exception):
    """A metadata-first LIST is given up for a LIST of whole objects (the reason is the message)."""


class _Ref(NamedTuple):
    """An object to ask for by name, and the version its metadata was listed at."""

    namespace: str | None
    name: str
    uid: str
    version: str


class _Inactive(Exception):
    """No byte arrived within the inactivity timeout: the stream is presumed dead."""


class _Broken(Exception):
    """The stream failed (connection cut, garbage); the cause is chained."""


class ResourceWatcher:
    """One resource across the watched namespaces ([] = all): one LIST+WATCH per namespace.

    A 410 in any namespace relists all of them, so that `on_relist` always gets the complete
    set and the consumer can reconcile without knowing about namespaces.
    """

    def __init__(
        self,
        api: ApiClient,
        resource: Resource,
        on_event: OnEvent,
        on_relist: OnRelist,
        *,
        namespaces: Sequence[str] = (),
        options: WatchOptions | None = None,
        on_listed: OnListed | None = None,
        known: KnownObjects | None = None,
    ) -> None:
        self.api = api
        self.resource = resource
        self.kind = resource.kind
        self.on_event = on_event
        self.on_relist = on_relist
        self.on_listed = on_listed
        self.known = known
        self.scopes: list[str | None] = list(namespaces) if namespaces and resource.namespaced else [None]
        self.options = options or WatchOptions()
        self.synced = asyncio.Event()
        self.stats = WatcherStats()
        self._failing: set[str] = set()
        # When each stream was last heard from (options.clock); empty until the first LIST page.
        self._heard: dict[str | None, float] = {}
        self._warned_malformed: set[str] = set()
        # uid → resourceVersion of objects handed over newer than the list they complete: the watch,
        # which starts at the list's version, passes over their events up to that state.
        self._ahead: dict[str, str] = {}

    # liveness ----------------------------------------------------------------------------------

    def not_live_reason(self) -> str | None:
        """None while every stream of this resource has been heard from recently; else why not."""
        if not self.synced.is_set():
            return "initial list not received yet"
        now = self.options.clock()
        limit = self.options.stale_seconds
        ages = [now - self._heard.get(scope, float("-inf")) for scope in self.scopes]
        oldest = max(ages)
        if oldest > limit:
            silent = "never" if oldest == float("inf") else f"for {oldest:.0f} s"
            return f"no event or bookmark {silent} (stale after {limit:g} s)"
        return None

    def _heard_from(self, scope: str | None) -> None:
        self._heard[scope] = self.options.clock()

    def _set_aside(self, reason: str, sample: object, *, where: str) -> None:
        self.stats.malformed[reason] = self.stats.malformed.get(reason, 0) + 1
        # The first of each reason is a warning; repeats would only spam the log.
        level = logging.DEBUG if reason in self._warned_malformed else logging.WARNING
        self._warned_malformed.add(reason)
        log.log(level, "%s %s: set aside a watch line (%s): %.200r", self.kind, where, reason, sample)

    async def run(self) -> None:
        """Watch until cancelled. Exceptions raised by the callbacks propagate."""
        while True:
            versions = await self._list_all()
            try:
                if len(self.scopes) == 1:
                    await self._watch(self.scopes[0], versions[self.scopes[0]])
                else:
                    await self._watch_all(versions)
            except _Relist:
                self.stats.relists += 1
                log.info("%s: history compacted past our version, listing again", self.kind)

    async def _watch_all(self, versions: dict[str | None, str]) -> None:
        try:
            async with asyncio.TaskGroup() as group:
                for scope in self.scopes:
                    group.create_task(self._watch(scope, versions[scope]))
        except* _Relist as relist:
            # One namespace's 410 ends the others too (the TaskGroup cancels them): all relist.
            raise _Relist from relist

    # LIST ------------------------------------------------------------------------------------

    async def _list_all(self) -> dict[str | None, str]:
        present: set[str] = set()
        versions: dict[str | None, str] = {}
        self._ahead = {}
        known = self.known if self.known is not None and await self.known.holds(self.kind) else None
        for scope in self.scopes:
            uids, versions[scope] = await self._list(scope, known)
            present |= uids
        await self.on_relist(self.kind, frozenset(present))
        self.synced.set()
        return versions

    async def _list(self, scope: str | None, known: KnownObjects | None) -> tuple[set[str], str]:
        """Streams one namespace's LIST to the consumer (SYNC), page by page; returns the uids
        listed and the version the list is consistent at.

        With `known`, the LIST asks for metadata first, and only the objects the consumer lacks are
        asked for, one by one (at most `fetch_max`; past that, or with one it cannot ask for by
        name, the list starts again whole)."""
        backoff = self.options.backoff()
        while True:
            # A list that fails half-way starts again from page one: the pages already handed over
            # are handed over again (upserts are idempotent) and the uids are collected afresh, so
            # an object deleted meanwhile is not counted as present.
            uids: set[str] = set()
            version = ""
            lacking: list[_Ref] = []
            held = 0
            try:
                pages = list_pages(
                    self.api,
                    self.resource,
                    scope,
                    page_size=self.options.page_size,
                    request_timeout=self.options.list_timeout,
                    metadata_only=known is not None,
                )
                async with contextlib.aclosing(pages):
                    async for page in pages:
                        self._heard_from(scope)
                        version = version or page.version
                        objects = self._objects_of(page.items, scope, uids)
                        if not page.partial:
                            await self._hand_over(objects)
                        elif known is None:
                            raise _ListWhole("the server sent metadata only")
                        else:
                            unknown = known.unknown(self.kind, objects)
                            held += len(objects) - len(unknown)
                            lacking += self._refs(unknown, len(lacking))
                if lacking:
                    await self._fetch(lacking)
                if known is not None and held:
                    known.passed_over(self.kind, held)
                self.stats.lists += 1
                self._recovered(f"list {scope}")
                return uids, version
            except _ListWhole as exc:
                log.info("%s list %s: listing whole objects (%s)", self.kind, scope, exc)
                known = None
            except TRANSIENT as exc:
                if known is not None and isinstance(exc, KubeApiError) and exc.status in _REFUSED:
                    # A server (or a role) that will not answer a metadata-only LIST or a GET by name.
                    log.info("%s list %s: listing whole objects (%s)", self.kind, scope, exc)
                    known = None
                    continue
                # Includes an expired continue token (410): the next LIST starts from page one.
                await self._pause(backoff, f"list {scope}", exc)

    def _refs(self, lacking: list[JsonObj], before: int) -> list[_Ref]:
        """How to ask for each of these objects by name; _ListWhole when they and the `before` found
        earlier are too many for that, or one cannot be asked for (no usable name, uid or version:
        the whole list hands it over, and the consumer sets it aside)."""
        if before + len(lacking) > self.options.fetch_max:
            raise _ListWhole(f"more than {self.options.fetch_max} objects to ask for one by one")
        refs = []
        for item in lacking:
            metadata = item.get("metadata")
            metadata = metadata if isinstance(metadata, dict) else {}
            name, uid, version = object_name(metadata.get("name")), _uid_of(item), _version_of(item)
            namespace = object_name(metadata.get("namespace")) if self.resource.namespaced else None
            if name is None or uid is None or version is None or (self.resource.namespaced and not namespace):
                raise _ListWhole("an object that cannot be asked for by name")
            refs.append(_Ref(namespace, name, uid, version))
        return refs

    async def _fetch(self, refs: list[_Ref]) -> None:
        """The objects a metadata-first LIST found the consumer lacking, asked for by name and
        handed over (SYNC). Each is as it is now, which may be newer than the list: the watch starts
        at the list's version, so it passes over that object's events up to the state handed over
        (`_ahead`). One deleted or replaced since is not handed over: the watch reports it."""
        objects: list[JsonObj] = []
        for start in range(0, len(refs), _GETS_AT_ONCE):
            chunk = refs[start : start + _GETS_AT_ONCE]
            got = await asyncio.gather(
                *(
                    get_object(
                        self.api,
                        self.resource,
                        ref.namespace,
                        ref.name,
                        request_timeout=self.options.list_timeout,
                    )
                    for ref in chunk
                )
            )
            for ref, obj in zip(chunk, got, strict=True):
                if obj is None or _uid_of(obj) != ref.uid:
                    continue
                version = _version_of(obj)
                if version is not None and version != ref.version:
                    self._ahead[ref.uid] = version
                objects.append(obj)
            if len(objects) >= self.options.page_size:
                await self._hand_over(objects)
                objects = []
        if objects:
            await self._hand_over(objects)

    def _behind(self, event_type: str, obj: JsonObj) -> bool:
        """Whether a watch event is older than (or is) the state of its object handed over after
        the list (`_fetch`): such events are passed over, and the object is caught up at its own."""
        if not self._ahead:
            return False
        uid = _uid_of(obj)
        if uid is None or uid not in self._ahead:
            return False
        if event_type == "DELETED":
            del self._ahead[uid]
            return False
        if _version_of(obj) == self._ahead[uid]:
            del self._ahead[uid]
        return True

    def _objects_of(self, page: list[Any], scope: str | None, uids: set[str]) -> list[JsonObj]:
        """A page's objects, their uids added to `uids`; anything else in it is set aside. Objects
        without a usable uid go on too: the consumer sets them aside."""
        objects: list[JsonObj] = []
        for item in page:
            if isinstance(item, dict):
                objects.append(item)
                uid = _uid_of(item)
                if uid is not None:
                    uids.add(uid)
            else:
                self._set_aside(NOT_AN_OBJECT, item, where=f"list {scope}")
        return objects

    async def _hand_over(self, objects: list[JsonObj]) -> None:
        """One page of a LIST to the consumer: at once to `on_listed`, else object by object."""
        if self.on_listed is not None:
            await self.on_listed(self.kind, objects)
            return
        for n, obj in enumerate(objects, 1):
            await self.on_event(self.kind, "SYNC", obj)
            if n % _EVENTS_PER_TURN == 0:
                await asyncio.sleep(0)

    # WATCH -----------------------------------------------------------------------------------

    async def _watch(self, scope: str | None, version: str) -> None:
        """Keep one namespace's stream going; returns never, raises _Relist on 410."""
        backoff = self.options.backoff()
        where = f"watch {scope}"
        while True:
            try:
                async with asyncio.timeout(self.options.inactivity_timeout):
                    response = await open_watch(
                        self.api, self.resource, scope, version, connect_timeout=self.options.connect_timeout
                    )
            except TRANSIENT as exc:
                if isinstance(exc, KubeApiError) and exc.gone:
                    self.stats.gone += 1
                    raise _Relist from exc
                await self._pause(backoff, where, exc)
                continue
            self.stats.watch_starts += 1
            received = 0
            failure: BaseException | None = None
            stream = _EventStream(
                response,
                self.options.inactivity_timeout,
                self.options.max_line_bytes,
                functools.partial(self._set_aside, where=where),
            )
            try:
                async for event_type, obj in stream:
                    received += 1
                    if event_type == "ERROR":
                        error = KubeApiError.from_status(500, obj)
                        if error.gone:
                            self.stats.gone += 1
                            raise _Relist from error
                        failure = error
                        break
                    self._heard_from(scope)
                    if event_type == "BOOKMARK":
                        self.stats.bookmarks += 1
                    else:
                        self.stats.events += 1
                        # Consumer errors propagate. The version moves past an event only once the
                        # consumer has taken it, so a restart redelivers rather than skips it.
                        if not self._behind(event_type, obj):
                            await self.on_event(self.kind, event_type, obj)
                    version = _version_of(obj) or version
                    if received % _EVENTS_PER_TURN == 0:
                        # One read may hold thousands of events, and handing them over does not
                        # wait while the consumer's queue has room: let the rest of the loop run.
                        await asyncio.sleep(0)
            except _Inactive:
                self.stats.inactivity_restarts += 1
                log.warning(
                    "%s %s: nothing for %g s, restarting the stream",
                    self.kind,
                    where,
                    self.options.inactivity_timeout,
                )
                continue
            except _Broken as exc:
                failure = exc.__cause__ or exc
            finally:
                # close, not release: an unfinished stream's connection must not be reused.
                response.close()
            if failure is not None or received == 0:
                # A stream that ends before saying anything is a failure too: without a pause a
                # server that closes at once would be hammered in a loop.
                await self._pause(backoff, where, failure or ConnectionError("stream closed at once"))
            else:
                self._recovered(where)
                backoff.reset()

    # failures --------------------------------------------------------------------------------

    async def _pause(self, backoff: Streak, where: str, exc: BaseException) -> None:
        self.stats.failures += 1
        delay = backoff.next_delay()
        # First failure of a streak is a warning; the repeats would only spam the log.
        level = logging.DEBUG if where in self._failing else logging.WARNING
        self._failing.add(where)
        log.log(level, "%s %s failed (%s), retrying in %.2f s", self.kind, where, exc, delay)
        await self.options.sleep(delay)

    def _recovered(self, where: str) -> None:
        if where in self._failing:
            self._failing.discard(where)
            log.info("%s %s recovered", self.kind, where)


def _uid_of(obj: JsonObj) -> str | None:
    """The object's uid if it is a usable one (a non-empty string); else None."""
    metadata = obj.get("metadata")
    uid = metadata.get("uid") if isinstance(metadata, dict) else None
    return uid if isinstance(uid, str) and uid else None


def _version_of(obj: JsonObj) -> str | None:
    """The object's resourceVersion if it is one (a short string); else None, and the version stays."""
    metadata = obj.get("metadata")
    version = metadata.get("resourceVersion") if isinstance(metadata, dict) else None
    return version if isinstance(version, str) and 0 < len(version) <= _VERSION_MAX else None


# Events handed to the consumer between two turns of the event loop.
_EVENTS_PER_TURN = 100
# Objects asked for by name at the same time, after a metadata-first LIST.
_GETS_AT_ONCE = 8
# Answers that refuse a metadata-only LIST or a GET by name (unauthorized, forbidden, method not
# allowed, not acceptable): the LIST is taken whole instead, as it always was.
_REFUSED = frozenset({401, 403, 405, 406})
# Watch lines longer than this are decoded in a worker thread rather than on the event loop.
_DECODE_OFF_LOOP_BYTES = 1 << 20


class _EventStream:
    """Async iterator of (type, object) from a watch response, with a per-read inactivity timeout.

    Lines that are not a watch event (not JSON, not an object, no object inside, an unknown type)
    are handed to `set_aside` and skipped.
    """

    __slots__ = ("_pending", "_response", "_set_aside", "_splitter", "_timeout")

    def __init__(
        self,
        response: aiohttp.ClientResponse,
        timeout: float,
        max_line_bytes: int,
        set_aside: Callable[[str, object], None],
    ) -> None:
        self._response = response
        self._timeout = timeout
        self._splitter = LineSplitter(max_line_bytes)
        self._pending: list[bytes] = []
        self._set_aside = set_aside

    def __aiter__(self) -> _EventStream:
        return self

    async def __anext__(self) -> tuple[str, JsonObj]:
        while True:
            while not self._pending:
                # Only the wait for bytes is timed, not the consumer's work between reads.
                try:
                    async with asyncio.timeout(self._timeout):
                        chunk = await self._response.content.readany()
                except TimeoutError:
                    raise _Inactive from None
                except (aiohttp.ClientError, ConnectionError) as exc:
                    raise _Broken from exc
                if not chunk:
                    raise StopAsyncIteration
                self._pending = self._splitter.feed(chunk)
                self._pending.reverse()
                for _ in range(self._splitter.take_dropped()):
                    self._set_aside(LINE_TOO_LONG, f"a line over {self._splitter.max_line} bytes")
            line = self._pending.pop()
            event = await self._event(line)
            if event is not None:
                return event

    async def _event(self, line: bytes) -> tuple[str, JsonObj] | None:
        try:
            # A line of megabytes (a Workflow with its nodes) takes a second or more to decode:
            # off the event loop, so that probes and every other stream keep being answered.
            event: Any = (
                await asyncio.to_thread(orjson.loads, line)
                if len(line) > _DECODE_OFF_LOOP_BYTES
                else orjson.loads(line)
            )
        except orjson.JSONDecodeError:
            self._set_aside(INVALID_JSON, line[:200])
            return None
        if not isinstance(event, dict) or not isinstance(event.get("object"), dict):
            self._set_aside(NOT_AN_OBJECT, line[:200])
            return None
        event_type = event.get("type")
        if not isinstance(event_type, str) or event_type not in _EVENT_TYPES:
            self._set_aside(UNKNOWN_TYPE, line[:200])
            return None
        return event_type, event["object"]
