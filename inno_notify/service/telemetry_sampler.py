"""Exports what the adapters count but do not export themselves, every few seconds.

The outbox's depth by status (every replica: any of them may be asked for /metrics), and per
watched resource the watch restarts and the watch lines set aside (the leader: it runs the
watchers). The watchers keep plain totals in their stats; the Prometheus counters here grow by the
difference since the last sample, so a counter never goes backwards and nothing is counted twice.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Coroutine
from typing import Any

from inno_notify.adapters.db import Store
from inno_notify.adapters.kube import ClusterWatcher
from inno_notify.telemetry import Telemetry

log = logging.getLogger(__name__)


def telemetry_component(
    store: Store,
    telemetry: Telemetry,
    watcher: ClusterWatcher | None,
    interval: float = 15.0,
    *,
    sample_outbox: bool = True,
) -> Callable[[asyncio.Event], Coroutine[Any, Any, None]]:
    """Samples what the adapters count but do not export: the outbox's depth by status, the watch
    restarts each resource watcher went through, and the watch lines it set aside (added to the
    counters as they grow)."""
    exported: dict[tuple[str, str, str], int] = {}

    def grow(counter: str, kind: str, reason: str, total: int) -> int:
        grown = total - exported.get((counter, kind, reason), 0)
        if grown > 0:
            exported[(counter, kind, reason)] = total
        return grown

    def export_watchers() -> None:
        for kind, resource_watcher in (watcher.watchers if watcher is not None else {}).items():
            stats = resource_watcher.stats
            for reason, total in (
                ("gone", stats.gone),
                ("timeout", stats.inactivity_restarts),
                ("error", stats.failures),
                ("crash", stats.crashes),
            ):
                if (grown := grow("restarts", kind, reason, total)) > 0:
                    telemetry.watch_restarts.labels(kind, reason).inc(grown)
            for reason, total in list(stats.malformed.items()):
                if (grown := grow("malformed", kind, reason, total)) > 0:
                    telemetry.rejected_objects.labels(kind, reason).inc(grown)

    async def run(stop: asyncio.Event) -> None:
        while not stop.is_set():
            export_watchers()
            try:
                if sample_outbox:
                    for status, count in (await store.outbox.outbox_depth()).items():
                        telemetry.outbox_depth.labels(status).set(count)
            except Exception as exc:  # the database is away: readiness says so, try again later
                log.debug("outbox depth not sampled: %s", exc)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), interval)

    return run
