"""The reads and writes of one chat request (a Telegram update, a Slack command), in one
transaction (service.telegram_updates, service.slack_bot, service.self_service).

Handling an update changes preferences, records a linking token as used, plans the bot's answer
as an outbox row and, when polling, moves the stored update offset past it: all of it commits
together or not at all, so a crash never leaves a chat linked without its answer, nor an update
both handled and due again. The answer's dedup key is made from the update id, so an update
delivered twice (a webhook Telegram sends again) finds its answer planned and changes nothing.

The offset is a checkpoint per bot (its id, the token's number part): a new bot starts from 0.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from inno_notify.adapters.db import directory, outbox, preferences
from inno_notify.adapters.db.recommendation_queries import open_recommendations
from inno_notify.adapters.db.sql import dialect_insert, upsert
from inno_notify.adapters.db.tables import checkpoints, jobs, telegram_link_uses, usage
from inno_notify.domain.bot_replies import (
    HOME_ADVICE_MAX,
    HOME_RUNS_MAX,
    STATUS_JOBS_MAX,
    HomeAdvice,
    HomeRun,
    RunningJob,
    StatusFigures,
)
from inno_notify.domain.model import DirectoryUser, JobStatus, Notification
from inno_notify.domain.preferences import Origin, Preferences

OFFSET_KEY = "telegram.update_offset"


def offset_key(bot_id: str) -> str:
    return f"{OFFSET_KEY}.{bot_id}"


async def update_offset(conn: AsyncConnection, bot_id: str) -> int:
    """The first update id not handled yet (0: none handled)."""
    value = await directory.get_checkpoint(conn, offset_key(bot_id))
    try:
        return max(0, int(value)) if value is not None else 0
    except ValueError:
        return 0


class BotTransaction:
    """One update's reads and writes on one connection (see the module docstring)."""

    def __init__(self, conn: AsyncConnection) -> None:
        self._conn = conn

    async def users(self) -> list[DirectoryUser]:
        """The directory with everyone's preferences applied."""
        return await directory.list_users(self._conn)

    async def preferences(self, email: str) -> Preferences | None:
        return await preferences.get_preferences(self._conn, email)

    async def handled(self, dedup_key: str) -> bool:
        """Whether the answer with this key is planned already (the update was handled)."""
        return bool(await outbox.statuses(self._conn, [dedup_key]))

    async def use_link_token(
        self, token_id: str, email: str, chat_id: int, now: datetime, expires_at: datetime
    ) -> bool:
        """Records the token as used; False if it was used before. Rows of expired tokens go."""
        await self._conn.execute(sa.delete(telegram_link_uses).where(telegram_link_uses.c.expires_at <= now))
        stmt = (
            dialect_insert(self._conn, telegram_link_uses)
            .values(token_id=token_id, email=email, chat_id=chat_id, used_at=now, expires_at=expires_at)
            .on_conflict_do_nothing(index_elements=["token_id"])
        )
        return int((await self._conn.execute(stmt)).rowcount) == 1

    async def link_epoch(self, email: str, now: datetime) -> int:
        """The person's link epoch, their preferences row locked until the update's commit, so
        that two links of one person at once take turns (the second sees the first's epoch)."""
        return (await preferences.locked_preferences(self._conn, email, now)).link_epoch

    async def change_preferences(
        self, email: str, changes: Mapping[str, Any], origin: Origin, now: datetime, *, new_link: bool = False
    ) -> Preferences:
        """Changes a person's preferences; `new_link`: a linking token was spent for them, which
        starts a new link generation even when the chat stays the same."""
        return await preferences.change_preferences(
            self._conn, email, now, changes=changes, origin=origin, new_link=new_link
        )

    async def enqueue(self, rows: Sequence[Notification]) -> int:
        return await outbox.enqueue(self._conn, rows)

    async def set_offset(self, bot_id: str, offset: int) -> None:
        """Moves the stored offset to `offset`, never back."""
        current = await update_offset(self._conn, bot_id)
        if offset > current:
            await self._conn.execute(
                upsert(self._conn, checkpoints, ["key"], ["value"]),
                [{"key": offset_key(bot_id), "value": str(offset)}],
            )

    async def owner_status(self, email: str, week_start: datetime, now: datetime) -> StatusFigures:
        """The person's running jobs (the longest running first) and the GPU-hours of their jobs
        that finished since `week_start`, on every cluster in the database.

        Owners are matched without regard to case (annotations are written by hand); each query
        is narrowed by an index first (status, finished_at), so the comparison runs on few rows.
        """
        owner = sa.func.lower(jobs.c.owner) == email.strip().lower()
        running = sa.and_(jobs.c.status == JobStatus.RUNNING.value, owner)
        rows = await self._conn.execute(
            sa.select(jobs.c.namespace, jobs.c.name, jobs.c.started_at, jobs.c.gpus_requested)
            .where(running)
            .order_by(jobs.c.started_at.asc().nulls_last(), jobs.c.name)
            .limit(STATUS_JOBS_MAX)
        )
        listed = tuple(
            RunningJob(
                namespace=r.namespace, name=r.name, started_at=r.started_at, gpus=float(r.gpus_requested)
            )
            for r in rows
        )
        total = int(await self._conn.scalar(sa.select(sa.func.count()).select_from(jobs).where(running)) or 0)
        week = (
            await self._conn.execute(
                sa.select(
                    sa.func.count(),
                    sa.func.count(usage.c.gpu_minutes),
                    sa.func.sum(usage.c.gpu_minutes),
                    sa.func.sum(usage.c.used_gpu_minutes),
                )
                .select_from(
                    jobs.outerjoin(
                        usage, sa.and_(usage.c.cluster == jobs.c.cluster, usage.c.job_uid == jobs.c.uid)
                    )
                )
                .where(jobs.c.finished_at >= week_start, jobs.c.finished_at <= now, owner)
            )
        ).one()
        finished, measured, held, used = week
        return StatusFigures(
            week_start=week_start,
            taken_at=now,
            running=listed,
            running_total=total,
            finished_jobs=int(finished or 0),
            measured_jobs=int(measured or 0),
            gpu_hours_held=None if held is None else float(held) / 60.0,
            gpu_hours_used=None if used is None else float(used) / 60.0,
        )

    async def recent_runs(self, email: str, limit: int = HOME_RUNS_MAX) -> tuple[HomeRun, ...]:
        """The person's latest runs, newest first (steps of a workflow are runs of their own)."""
        owner = sa.func.lower(jobs.c.owner) == email.strip().lower()
        rows = await self._conn.execute(
            sa.select(
                jobs.c.namespace,
                jobs.c.name,
                jobs.c.status,
                jobs.c.finished_at,
                jobs.c.gpu_minutes_held,
                jobs.c.gpu_minutes_used,
            )
            .where(owner)
            .order_by(jobs.c.sort_at.desc(), jobs.c.uid)
            .limit(limit)
        )
        return tuple(
            HomeRun(
                namespace=r.namespace,
                name=r.name,
                status=r.status,
                finished_at=r.finished_at,
                gpu_hours_held=None if r.gpu_minutes_held is None else float(r.gpu_minutes_held) / 60.0,
                gpu_hours_used=None if r.gpu_minutes_used is None else float(r.gpu_minutes_used) / 60.0,
            )
            for r in rows
        )

    async def open_advice(self, email: str, limit: int = HOME_ADVICE_MAX) -> tuple[HomeAdvice, ...]:
        """Open advice for the person's jobs (recommendation_queries), largest waste first."""
        found, _ = await open_recommendations(self._conn, owner=email, limit=limit)
        return tuple(HomeAdvice(r.namespace, r.name, r.recommendation.message) for r in found)
