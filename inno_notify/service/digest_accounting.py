"""What a digest is priced and budgeted with: `accounting.rates` and the teams' `budgets`.

Every place that builds a team digest (the dispatcher's DigestMessages, the team page and the API,
`inno-notify digest`, the demo, the bench) is handed one of these, built from the settings by the
runtime, so the figures reach the digest builder explicitly and never through a global. The
budgets' figures are service.budgets' (the API's and the alerts'): one source. A single digest (the
team page, the CLI) costs one extra query where its team has a budget (the store's spend cells of
the team's periods), none otherwise. A round that builds many digests (the dispatcher's, the
bench's) uses `for_round`: every budget is read in one pass, once, when the first digest of a team
with a budget is built — one pass over the periods' jobs instead of one per team, which on a large
database reads the same table pages once rather than once per team. The admins' cluster digest
ranks teams by idle cost with the same rates.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
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
        if self.budgets is None or not self.has_budget(team):
            return []
        return await self.budgets.reports(team=team)

    def has_budget(self, team: str) -> bool:
        return self.budgets is not None and any(b.team == team for b in self.budgets.budgets)

    async def team_digest(
        self, store: Store, team: str, week: str, tz: str, *, cluster: str | None = None
    ) -> Digest:
        """The team's digest of `week` in zone `tz`, priced and with its budgets."""
        return await self.priced(store, team, week, tz, await self.budget_reports(team), cluster=cluster)

    async def priced(
        self,
        store: Store,
        team: str,
        week: str,
        tz: str,
        reports: Sequence[BudgetReport],
        *,
        cluster: str | None = None,
    ) -> Digest:
        """The team's digest with these budget reports (the team's own are picked)."""
        own = [r for r in reports if r.status.budget.team == team]
        return await store.digest.team_digest(team, week, tz, cluster=cluster, rates=self.rates, budgets=own)

    def for_round(self) -> RoundAccounting:
        """For a round of many digests: every budget read once, in one pass (module docstring)."""
        return RoundAccounting(self)


class RoundAccounting:
    """One round's digests: the budgets' reports read once, when first needed, for every team."""

    def __init__(self, accounting: DigestAccounting) -> None:
        self.accounting = accounting
        self._reports: list[BudgetReport] | None = None
        self._reading = asyncio.Lock()

    @property
    def rates(self) -> Rates | None:
        return self.accounting.rates

    async def team_digest(
        self, store: Store, team: str, week: str, tz: str, *, cluster: str | None = None
    ) -> Digest:
        reports: Sequence[BudgetReport] = ()
        if self.accounting.has_budget(team) and self.accounting.budgets is not None:
            async with self._reading:
                if self._reports is None:
                    self._reports = await self.accounting.budgets.reports()
            reports = self._reports
        return await self.accounting.priced(store, team, week, tz, reports, cluster=cluster)


NO_ACCOUNTING = DigestAccounting()
