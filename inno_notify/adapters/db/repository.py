"""The store: the one object the rest of the service uses to read and write the database.

It owns the engine (open, close, readiness) and the fence, and exposes one repository per
purpose, each in its own module:

- `store.jobs` (job_repository.py): ingestion batches, job and pod reads, the objects set aside,
  summary states and usage claims, the summary transaction;
- `store.usage` (usage_repository.py): usage, series and recommendations, their aggregations;
- `store.live` (live_repository.py): running GPU pods and idle nudges;
- `store.outbox` (outbox_repository.py): enqueueing, the delivery log, the dispatcher's claims;
- `store.directory` (directory_repository.py): users, teams, preferences, the Telegram bot;
- `store.digest` (digest_repository.py): teams' weekly digests;
- `store.workflows` (workflow_repository.py): workflows, served models, pipeline events;
- `store.adoption` (adoption.py): advice adoption, judged once per new run of a family;
- `store.trends` (trend_queries.py): weekly GPU-hours held, used and idle per team or cluster;
- `store.queues` (queue_quotas.py): the Kueue queues and the GPU quotas they give teams.

Every repository method is one transaction and takes or returns domain records, so callers never
see a row or a connection. Leader-only writes (ingestion, usage, summaries, enqueueing, outbox
claims) are fenced: each such transaction first checks the store's `fence` (leases.py), which
raises LostLeadership once this replica's leadership term is over (transactions.py).
"""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from inno_notify.adapters.db.adoption import AdoptionRepository
from inno_notify.adapters.db.digest_repository import DigestRepository
from inno_notify.adapters.db.directory_repository import DirectoryRepository
from inno_notify.adapters.db.engine import DEFAULT_STATEMENT_TIMEOUT_SECONDS, READ_INTENT, create_engine
from inno_notify.adapters.db.job_repository import IngestTransaction, JobRepository
from inno_notify.adapters.db.jobs import JobFilter, RecordNotFound, SummaryState, TerminalMark, UsageClaim
from inno_notify.adapters.db.leases import UNFENCED, Fence
from inno_notify.adapters.db.live_repository import LiveRepository
from inno_notify.adapters.db.outbox_repository import OutboxRepository
from inno_notify.adapters.db.personal_page import PersonalPageRepository
from inno_notify.adapters.db.pipeline_events import EventRecord, EventRepository
from inno_notify.adapters.db.queue_quotas import QueueRepository
from inno_notify.adapters.db.telegram_bot import BotTransaction
from inno_notify.adapters.db.trend_queries import TrendRepository
from inno_notify.adapters.db.usage_repository import UsageRepository
from inno_notify.adapters.db.workflow_repository import WorkflowRepository
from inno_notify.adapters.db.workflow_rows import (
    TerminalWorkflow,
    WorkflowState,
    WorkflowTransaction,
)

__all__ = [
    "BotTransaction",
    "EventRecord",
    "IngestTransaction",
    "JobFilter",
    "RecordNotFound",
    "Store",
    "SummaryState",
    "TerminalMark",
    "TerminalWorkflow",
    "UsageClaim",
    "WorkflowState",
    "WorkflowTransaction",
]


class Store:
    """The database (Postgres or SQLite, schema at the newest revision) and its repositories."""

    def __init__(self, engine: AsyncEngine, fence: Fence = UNFENCED) -> None:
        self._engine = engine
        self._reader = engine.execution_options(**READ_INTENT)
        self.fence = fence
        self.jobs = JobRepository(engine, fence)
        self.usage = UsageRepository(engine, fence)
        self.live = LiveRepository(engine, fence)
        self.outbox = OutboxRepository(engine, fence)
        self.directory = DirectoryRepository(engine, fence)
        self.digest = DigestRepository(engine, fence)
        self.workflows = WorkflowRepository(engine, fence)
        self.events = EventRepository(engine, fence)
        self.adoption = AdoptionRepository(engine, fence)
        self.trends = TrendRepository(engine)
        self.queues = QueueRepository(engine, fence)
        self.personal = PersonalPageRepository(engine, fence)

    @classmethod
    def from_url(
        cls,
        url: str,
        fence: Fence = UNFENCED,
        *,
        statement_timeout_seconds: float | None = DEFAULT_STATEMENT_TIMEOUT_SECONDS,
        idle_in_transaction_seconds: float | None = None,
    ) -> Store:
        engine = create_engine(
            url,
            statement_timeout_seconds=statement_timeout_seconds,
            idle_in_transaction_seconds=idle_in_transaction_seconds,
        )
        return cls(engine, fence)

    @property
    def engine(self) -> AsyncEngine:
        return self._engine

    def read(self) -> AbstractAsyncContextManager[AsyncConnection]:
        """A connection for reads only: on SQLite its transaction takes no write lock, so it runs
        beside an ingest batch instead of queueing behind it (engine.py says why)."""
        return self._reader.connect()

    async def close(self) -> None:
        await self._engine.dispose()

    async def ping(self) -> None:
        """Raises if the database cannot be reached (readiness, `inno-notify check`)."""
        async with self.read() as conn:
            await conn.execute(sa.text("SELECT 1"))
