"""The weekly team digest, aggregated by the database (digest_queries.py).

`Store.digest`: one read transaction per digest, so its figures are consistent with each other.
"""

from __future__ import annotations

from inno_notify.adapters.db import digest_queries
from inno_notify.adapters.db.transactions import Repository
from inno_notify.domain.digest import Digest


class DigestRepository(Repository):
    """Teams' weekly digests."""

    async def team_digest(
        self, team: str, week: str, tz: str, *, cluster: str | None = None, quota_gpus: float | None = None
    ) -> Digest:
        """A team's digest of ISO `week` in zone `tz`, aggregated by the database (digest_queries)."""
        async with self.read() as conn:
            return await digest_queries.load_digest(
                conn, team, week, tz, cluster=cluster, quota_gpus=quota_gpus
            )
