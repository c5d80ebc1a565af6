"""Test helpers for the kube adapter: a consumer that keeps what the watcher delivered the way the
ingestion pipeline would, and a way to run a watcher in the background."""

from __future__ import annotations

import asyncio
import contextlib
from collections import defaultdict
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from inno_notify.sim.kube_api import SimKubeServer
from inno_notify.sim.kube_store import ResourceType

JsonObj = dict[str, Any]


class Consumer:
    """Keeps the latest object per uid, and what was deleted live or found gone at a relist."""

    def __init__(self) -> None:
        self.objects: dict[str, dict[str, JsonObj]] = defaultdict(dict)
        self.deleted: dict[str, set[str]] = defaultdict(set)
        self.gone_at_relist: dict[str, set[str]] = defaultdict(set)
        self.relists: dict[str, int] = defaultdict(int)
        self.types: list[str] = []
        self._changed = asyncio.Event()

    async def on_event(self, kind: str, event_type: str, obj: JsonObj) -> None:
        uid = obj["metadata"]["uid"]
        self.types.append(event_type)
        if event_type == "DELETED":
            self.objects[kind].pop(uid, None)
            self.deleted[kind].add(uid)
        else:
            self.objects[kind][uid] = obj
        self._changed.set()

    async def on_relist(self, kind: str, present: frozenset[str]) -> None:
        for uid in set(self.objects[kind]) - present:
            del self.objects[kind][uid]
            self.gone_at_relist[kind].add(uid)
        self.relists[kind] += 1
        self._changed.set()

    def versions(self, kind: str) -> dict[str, str]:
        return {uid: o["metadata"]["resourceVersion"] for uid, o in self.objects[kind].items()}

    async def wait_for(self, condition: Callable[[], bool], within: float = 5.0) -> None:
        """Waits, woken by each delivery, until `condition` holds; fails the test after `within` s."""
        try:
            async with asyncio.timeout(within):
                while not condition():
                    self._changed.clear()
                    await self._changed.wait()
        except TimeoutError:
            raise AssertionError(f"consumer state not reached within {within:g} s") from None


class Knowing(Consumer):
    """A consumer that holds objects by version already (the watcher's `KnownObjects`): what it
    holds as it is, it takes from the metadata; `on_lacking` runs when it is asked about any."""

    def __init__(
        self, held: dict[str, str], on_lacking: Callable[[list[JsonObj]], None] | None = None
    ) -> None:
        super().__init__()
        self.held = dict(held)
        self.passed_over_counts: list[int] = []
        self.present: frozenset[str] = frozenset()
        self.on_lacking = on_lacking

    async def holds(self, kind: str) -> bool:
        return bool(self.held)

    def unknown(self, kind: str, items: list[JsonObj]) -> list[JsonObj]:
        lacking = [
            i for i in items if self.held.get(i["metadata"]["uid"]) != i["metadata"]["resourceVersion"]
        ]
        if lacking and self.on_lacking is not None:
            self.on_lacking(lacking)
        return lacking

    def passed_over(self, kind: str, count: int) -> None:
        self.passed_over_counts.append(count)

    async def on_relist(self, kind: str, present: frozenset[str]) -> None:
        self.present = present
        await super().on_relist(kind, present)


def server_versions(sim: SimKubeServer, rt: ResourceType) -> dict[str, str]:
    return {o["metadata"]["uid"]: o["metadata"]["resourceVersion"] for o in sim.store.objects(rt)}


@contextlib.asynccontextmanager
async def running(coro: Awaitable[None]) -> AsyncIterator[asyncio.Task[None]]:
    """Run a watcher in the background for the block, then cancel it (and surface its crash)."""
    task: asyncio.Task[None] = asyncio.ensure_future(coro)
    try:
        yield task
    finally:
        if task.done() and not task.cancelled() and task.exception() is not None:
            raise task.exception()  # type: ignore[misc]
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


def job(name: str, namespace: str = "ml", **labels: str) -> JsonObj:
    return {
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": {"template": {"spec": {"containers": [{"name": "main", "image": "trainer:1"}]}}},
        "status": {"active": 1},
    }


FINISHED: JsonObj = {
    "status": {"active": None, "succeeded": 1, "conditions": [{"type": "Complete", "status": "True"}]}
}


class FakeClock:
    """Seconds that pass only when the code under test sleeps through `sleep`."""

    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds
        await asyncio.sleep(0)
