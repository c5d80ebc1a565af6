"""The live check's reads and writes: running GPU pods, and the idle nudges sent about them.

`Store.live`. The leader reads the running pods that hold GPUs, asks Prometheus how busy they are,
and enqueues nudges together with their entries in the nudge ledger the weekly digest reads.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from inno_notify.adapters.db import live_queries, nudge_ledger, outbox
from inno_notify.adapters.db.transactions import Repository, reads
from inno_notify.domain.digest import NudgeEntry
from inno_notify.domain.model import Notification


class LiveRepository(Repository):
    """Running GPU pods and the nudges about them."""

    running_gpu_pods = reads(live_queries.running_gpu_pods)

    async def enqueue_nudges(
        self,
        nudges: Sequence[tuple[Sequence[Notification], Sequence[tuple[str, NudgeEntry]]]],
        *,
        nudged: Sequence[tuple[str, str]] = (),
        at: datetime | None = None,
        keep_after: datetime | None = None,
    ) -> int:
        """Enqueues each nudge's rows (one person's, of one round) and, for a nudge whose rows were
        new, adds its (team, entry) pairs to the nudge ledger the digest reads; records the
        (cluster, pod uid) pairs of `nudged` as nudged `at` (forgetting those nudged before
        `keep_after`); one fenced transaction (the live check is leader-only work). Returns how
        many rows were new."""
        written = 0
        entries: list[tuple[str, NudgeEntry]] = []
        async with self._leader_write() as conn:
            for rows, ledger in nudges:
                new = await outbox.enqueue(conn, rows)
                written += new
                if new:
                    entries.extend(ledger)
            await nudge_ledger.record(conn, entries)
            if at is not None:
                by_cluster: dict[str, list[str]] = {}
                for cluster, uid in nudged:
                    by_cluster.setdefault(cluster, []).append(uid)
                for cluster, uids in by_cluster.items():
                    await live_queries.record_nudged(conn, cluster, uids, at, keep_after or at)
        return written

    # When each of these pods was last nudged about idle GPUs; never-nudged pods are absent.
    last_nudges = reads(live_queries.last_nudges)
