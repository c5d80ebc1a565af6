"""The directory planner: routes with the stored directory, logs each skipped channel once, and
keeps what a submitter controls from flooding its memory or its log."""

from __future__ import annotations

import logging
from dataclasses import replace

import pytest

from inno_notify.adapters.db import Store
from inno_notify.domain.model import DirectoryUser
from inno_notify.service.planner import DirectoryPlanner

from .support import ALL_CHANNELS, T0, FakeClock, finished_job

ALICE = DirectoryUser("alice@example.com", "Alice", slack_user_id="U0ALICE", channels=("slack", "email"))


@pytest.fixture
async def planner(store: Store) -> DirectoryPlanner:
    await store.directory.upsert_user(ALICE)
    return DirectoryPlanner(store, ALL_CHANNELS, 30.0, FakeClock(), logged_once_limit=3)


def logged(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "inno_notify.service.planner"]


async def test_routes_with_the_stored_directory_and_allowed_domains(store: Store) -> None:
    await store.directory.upsert_user(ALICE)
    planner = DirectoryPlanner(store, ALL_CHANNELS, 30.0, FakeClock(), allowed_email_domains=["corp.example"])

    rows = await planner(finished_job("j1"), T0)

    assert [(n.recipient, n.channel.value) for n in rows] == [("alice@example.com", "slack")]


async def test_each_skip_is_logged_once_and_the_memory_of_it_is_bounded(
    planner: DirectoryPlanner, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="inno_notify.service.planner")
    channels = [f"pager-{i}" for i in range(5)]
    for channel in [*channels, *channels[3:], channels[4]]:
        await planner(finished_job("j1", channels=(channel,)), T0)

    # pager-0 … pager-4 once each; pager-3 and pager-4 were still among the 3 remembered.
    assert logged(caplog) == [
        f"no 'pager-{i}' summary for 'alice@example.com': unknown channel" for i in range(5)
    ]
    caplog.clear()
    # pager-0 fell out of the 3 remembered, so it is logged again.
    await planner(finished_job("j1", channels=(channels[0],)), T0)
    assert len(logged(caplog)) == 1
    for i in range(1000):
        await planner(finished_job("j1", channels=(f"flood-{i}",)), T0)
    caplog.clear()
    # After a flood only the last 3 are remembered: those stay quiet, the one before is logged again.
    for i in (999, 998, 997, 996):
        await planner(finished_job("j1", channels=(f"flood-{i}",)), T0)
    assert logged(caplog) == ["no 'flood-996' summary for 'alice@example.com': unknown channel"]


async def test_submitter_controlled_values_are_logged_with_repr_and_cut_short(
    planner: DirectoryPlanner, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="inno_notify.service.planner")
    hostile = "pager\nINFO forged log line \x1b[31m" + "x" * 10_000
    await planner(finished_job("j1", channels=(hostile,)), T0)
    await planner(replace(finished_job("j2", owner=None, team=None), name="n\r\n" * 5000), T0)

    lines = logged(caplog)
    assert len(lines) == 3  # the skipped channel, and each job that gets no summary
    assert all("\n" not in line and "\r" not in line and "\x1b" not in line for line in lines)
    assert all(len(line) < 600 for line in lines)
    assert "'pager\\nINFO forged log line \\x1b[31mxx" in lines[0]
