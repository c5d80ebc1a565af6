"""What jobs used and what they should request: usage, series over time, recommendations.

`Store.usage`: the per-job figures the usage collector stores (outside a summary only in
repair paths), the series over time with their charts, a job family's history that right-sizing
learns from, and the admin API's aggregations (usage cells, open recommendations).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from datetime import datetime

from inno_notify.adapters.db import jobs, recommendation_queries, series, usage_queries
from inno_notify.adapters.db.transactions import Repository, reads
from inno_notify.domain.budgets import SpendCell
from inno_notify.domain.model import JobRecord, Usage


class UsageRepository(Repository):
    """Usage, series and recommendations of jobs, and their aggregations."""

    async def get_usage(self, cluster: str, uid: str) -> Usage | None:
        async with self.read() as conn:
            return await jobs.get_usage(conn, cluster, uid)

    # The stored usage series of these jobs, by uid, without their charts.
    series_of = reads(series.series_of)
    # The same with the chart stored with each (a dispatch round's messages).
    charts_of = reads(series.charts_of)

    async def release_sent_charts(self, limit: int = 1000) -> int:
        """Releases the stored charts of jobs with no pending message (the leader's usage service,
        after each round); returns how many."""
        async with self._leader_write() as conn:
            return await series.release_sent_charts(conn, limit)

    async def family_history(
        self, cluster: str, namespace: str, family: str, before: datetime, limit: int = 20
    ) -> list[tuple[JobRecord, Usage]]:
        """Earlier measured runs of a job family, newest first (right-sizing learns from them)."""
        async with self.read() as conn:
            return await jobs.family_history(conn, cluster, namespace, family, before, limit)

    async def usage_cells(
        self, since: datetime | None = None, until: datetime | None = None, cluster: str | None = None
    ) -> list[usage_queries.UsageCell]:
        """Usage per (team, owner, namespace) of the jobs finished in [since, until); every grouping
        (by team, owner or namespace) is a sum of these (usage_queries.group_cells)."""
        async with self.read() as conn:
            return await usage_queries.usage_cells(conn, since, until, cluster)

    async def spend_cells(
        self, teams: Collection[str], windows: Sequence[tuple[datetime, datetime]], cluster: str | None = None
    ) -> list[SpendCell]:
        """What the teams' jobs held per finished-in window and GPU model (budgets)."""
        async with self.read() as conn:
            return await usage_queries.spend_cells(conn, teams, windows, cluster)

    # Open recommendations, largest waste first, and the next page's cursor.
    open_recommendations = reads(recommendation_queries.open_recommendations)
