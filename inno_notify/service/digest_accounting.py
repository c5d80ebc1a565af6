"""What a digest is priced and budgeted with: `accounting.rates` and the teams' `budgets`.

Every place that builds a team digest (the dispatcher's DigestMessages, the team page and the API,
`inno-notify digest`, the demo, the bench) is handed one of these, built from the settings by the
runtime, so the figures reach the digest builder explicitly and never through a global. The
budgets' figures are service.budgets' (the API's and the alerts'): one source, one extra query per
digest of a team that has a budget (the store's spend cells of its periods), none for the others.
The admins' cluster digest ranks teams by idle cost with the same rates.
"""

from __future__ import annotations

from dataclasses import dataclass

from inno_notify.adapters.db.repository import Store
from inno_notify.domain.budgets import BudgetReport
from inno_notify.domain.costs import Rates
from inno_notify.domain.digest import Digest
from inno_notify.service.budgets import Budgets


@dataclass(frozen=True, slots=True)
class DigestAccounting:
    """The rates (None: no costs) and the budgets (None: none configured) of the digests."""

    rates: Rates | None = None
    budgets: Budgets | None = None

    async def budget_reports(self, team: str) -> list[BudgetReport]:
        """The team's budgets as they stand now (no query for a team without one)."""
        if self.budgets is None or not any(b.team == team for b in self.budgets.budgets):
            return []
        return await self.budgets.reports(team=team)

    async def team_digest(
        self, store: Store, team: str, week: str, tz: str, *, cluster: str | None = None
    ) -> Digest:
        """The team's digest of `week` in zone `tz`, priced and with its budgets."""
        reports = await self.budget_reports(team)
        return await store.digest.team_digest(
            team, week, tz, cluster=cluster, rates=self.rates, budgets=reports
        )


NO_ACCOUNTING = DigestAccounting()
