"""The pods of the agent's node, by UID: where a process's pod UID gets its namespace, name and containers.

Two sources (``agent.pods``):

- ``api`` (default): a LIST+WATCH of the API server's pods with ``fieldSelector=spec.nodeName=<node>``
  (the kubelet watches its own pods the same way). Needs ``get``/``list``/``watch`` on ``pods``,
  read-only, and keeps a new pod's name at hand before its first CUDA call.
- ``kubelet``: the kubelet's ``/pods`` on port 10250, fetched when a process belongs to a pod not
  yet known (at most once per ``agent.pod_refresh_seconds``). No load on the API server, but the
  kubelet authorizes ``/pods`` as ``nodes/proxy``, which also authorizes exec and attach through
  the kubelet: a far wider grant than reading pods.

A pod object that cannot be read is set aside and counted, never fatal.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from inno_notify.domain.agent import PodIdentity, parse_pod_identity

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class PodLookup:
    """The pods found for the UIDs asked about; ``pods`` is None when no pod list was ever read, and
    ``error`` says why the latest attempt failed (stale answers are still answers: UIDs are unique)."""

    pods: Mapping[str, PodIdentity] | None
    error: str | None = None


class PodDirectory(Protocol):
    async def resolve(self, uids: Collection[str]) -> PodLookup: ...

    @property
    def size(self) -> int: ...


def _index(objects: Sequence[Any]) -> tuple[dict[str, PodIdentity], int]:
    pods: dict[str, PodIdentity] = {}
    rejected = 0
    for obj in objects:
        identity = parse_pod_identity(obj)
        if identity is None:
            rejected += 1
        else:
            pods[identity.uid] = identity
    return pods, rejected


class WatchedPods:
    """Kept current by ``adapters.kube.ResourceWatcher`` callbacks (``on_event``, ``on_relist``)."""

    def __init__(self) -> None:
        self._pods: dict[str, PodIdentity] = {}
        self._synced = False
        self.rejected = 0

    @property
    def size(self) -> int:
        return len(self._pods)

    async def on_event(self, kind: str, event_type: str, obj: dict[str, Any]) -> None:
        identity = parse_pod_identity(obj)
        if identity is None:
            self.rejected += 1
            return
        if event_type == "DELETED":
            self._pods.pop(identity.uid, None)
        else:
            self._pods[identity.uid] = identity

    async def on_relist(self, kind: str, uids: frozenset[str]) -> None:
        # The listed pods came through on_event (SYNC) already; what the list lacks has left the node.
        self._pods = {uid: pod for uid, pod in self._pods.items() if uid in uids}
        self._synced = True

    async def resolve(self, uids: Collection[str]) -> PodLookup:
        if not self._synced:
            return PodLookup(None, "the node's pod list has not been read yet")
        return PodLookup({uid: pod for uid in uids if (pod := self._pods.get(uid)) is not None})


FetchPods = Callable[[], Awaitable[Sequence[Any]]]


class PolledPods:
    """Read from a pod list on demand (the kubelet's ``/pods``): again when a UID is unknown and the
    last read is ``min_refresh_seconds`` old, and at least every ``max_age_seconds`` so that pods
    that left the node are forgotten."""

    def __init__(
        self,
        fetch: FetchPods,
        *,
        min_refresh_seconds: float = 30.0,
        max_age_seconds: float = 600.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._fetch = fetch
        self._min_refresh = min_refresh_seconds
        self._max_age = max_age_seconds
        self._clock = clock
        self._pods: dict[str, PodIdentity] | None = None
        self._tried_at: float | None = None
        self._error: str | None = None
        self.fetches = 0
        self.rejected = 0

    @property
    def size(self) -> int:
        return len(self._pods or {})

    async def resolve(self, uids: Collection[str]) -> PodLookup:
        now = self._clock()
        if self._due(uids, now):
            self._tried_at = now
            self.fetches += 1
            try:
                objects = await self._fetch()
            except Exception as exc:
                self._error = " ".join(str(exc).split())[:200] or type(exc).__name__
                log.warning("reading the node's pods failed: %s", self._error)
            else:
                self._pods, rejected = _index(objects)
                self.rejected += rejected
                self._error = None
        if self._pods is None:
            return PodLookup(None, self._error)
        found = {uid: pod for uid in uids if (pod := self._pods.get(uid)) is not None}
        return PodLookup(found, self._error)

    def _due(self, uids: Collection[str], now: float) -> bool:
        if self._tried_at is None:
            return True
        age = now - self._tried_at
        if age >= self._max_age:
            return True
        unknown = self._pods is None or any(uid not in self._pods for uid in uids)
        return unknown and age >= self._min_refresh
