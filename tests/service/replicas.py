"""Replicas of `inno-notify serve` as real processes, for the fail-over test and bench/failover.py.

Each replica process gets its own probe and API ports and its own fake Bot API and Slack Web API
servers (running in the caller's process, with message ids in a range of the replica's own), so
that every delivery is known by who sent it and the id a provider gave it tells which replica's
record it is. Its log is JSON lines in a file, from which `leader_intervals` reads when it acted
as leader: from its "leading …" line to its "leader work stopped …" line (or to its SIGKILL).
"""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import json
import os
import signal
import socket
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp.test_utils import TestServer

from tests.adapters.channels import fake_slack, fake_telegram
from tests.adapters.channels.fake_slack import FakeSlack
from tests.adapters.channels.fake_telegram import FakeTelegram

REPO = Path(__file__).resolve().parents[2]
API_TOKEN = "ha-admin-token"
# Provider ids of replica number n start at n * ID_RANGE.
ID_RANGE = 1_000_000

# A delivery: ("telegram", chat id) or ("slack", user id).
Recipient = tuple[str, str]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def base_config(database_url: str, kubeconfig: str, ha: Mapping[str, Any], **more: Any) -> dict[str, Any]:
    """The settings every replica shares: Postgres, the sim API server, no Prometheus (summaries go
    out at once with the figures missing), no grouping wait."""
    config: dict[str, Any] = {
        "database_url": database_url,
        "kubernetes": {"kubeconfig": kubeconfig, "kueue": False},
        "prometheus": {"url": "http://127.0.0.1:9", "metrics_delay_seconds": 0, "give_up_after_seconds": 0},
        "notify": {"group_wait_seconds": 0},
        "ha": dict(ha),
    }
    config.update(more)
    return config


@dataclass
class Replica:
    name: str
    number: int
    proc: asyncio.subprocess.Process
    probes_port: int
    api_port: int
    log: Path
    telegram: FakeTelegram
    slack: FakeSlack
    servers: list[TestServer]
    killed_at: float | None = None  # wall clock, once the process was SIGKILLed and reaped
    # The Slack server is the caller's, shared by every replica (as one real Slack is): its posts
    # are the caller's to count, not this replica's deliveries.
    shared_slack: bool = False

    @property
    def probes(self) -> str:
        return f"http://127.0.0.1:{self.probes_port}"

    @property
    def api(self) -> str:
        return f"http://127.0.0.1:{self.api_port}"

    def deliveries(self) -> list[Recipient]:
        posts = [] if self.shared_slack else self.slack.accepted_posts()
        slack: list[Recipient] = [("slack", channel) for channel, _ in posts]
        return [("telegram", str(chat)) for chat, _ in self.telegram.sent()] + slack

    def owns(self, provider_message_id: str | None) -> bool:
        """Whether a recorded provider id was given by this replica's servers."""
        if provider_message_id is None:
            return False
        serial = provider_message_id.rsplit(".", 1)[-1]
        return serial.isdigit() and int(serial) // ID_RANGE == self.number

    async def leads(self, session: aiohttp.ClientSession) -> bool:
        """inno_notify_leader on its probe port (False while it does not answer)."""
        try:
            async with session.get(f"{self.probes}/metrics") as response:
                text = await response.text()
        except aiohttp.ClientError:
            return False
        return any(line == "inno_notify_leader 1.0" for line in text.splitlines())

    async def wait_ready(self, session: aiohttp.ClientSession, within: float = 60.0) -> None:
        async with asyncio.timeout(within):
            while True:
                if self.proc.returncode is not None:
                    raise AssertionError(f"{self.name} exited {self.proc.returncode}:\n{self.tail()}")
                try:
                    async with session.get(f"{self.probes}/readyz") as response:
                        if response.status == 200:
                            return
                except aiohttp.ClientError:
                    pass
                await asyncio.sleep(0.1)

    async def kill(self) -> None:
        self.proc.kill()
        await self.proc.wait()
        self.killed_at = time.time()

    async def terminate(self, within: float = 60.0) -> int:
        self.proc.send_signal(signal.SIGTERM)
        return await asyncio.wait_for(self.proc.wait(), within)

    async def close(self) -> None:
        if self.proc.returncode is None:
            await self.kill()
        for server in self.servers:
            await server.close()

    def log_lines(self) -> list[dict[str, Any]]:
        lines = []
        for line in self.log.read_text(errors="replace").splitlines():
            try:
                entry = json.loads(line)
            except ValueError:
                continue
            if isinstance(entry, dict):
                lines.append(entry)
        return lines

    def tail(self, lines: int = 30) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])

    def leader_intervals(self) -> list[tuple[float, float]]:
        """(start, end) in wall-clock seconds of every term this replica led; a term still open
        ends at its kill (or now, for a replica still running)."""
        intervals: list[tuple[float, float]] = []
        start: float | None = None
        for entry in self.log_lines():
            message = str(entry.get("message", ""))
            at = datetime.fromisoformat(str(entry["time"])).timestamp()
            if message.startswith("leadership: leading "):
                start = at
            elif message.startswith("leadership: leader work stopped") and start is not None:
                intervals.append((start, at))
                start = None
        if start is not None:
            intervals.append((start, self.killed_at if self.killed_at is not None else time.time()))
        return intervals

    def first_leading_at(self) -> float | None:
        for entry in self.log_lines():
            if str(entry.get("message", "")).startswith("leadership: leading "):
                return datetime.fromisoformat(str(entry["time"])).timestamp()
        return None


async def start_replica(
    name: str,
    number: int,
    config: Mapping[str, Any],
    folder: Path,
    *,
    telegram_chats: Iterable[int] = (),
    slack_users: Mapping[str, str] | None = None,
    slack: FakeSlack | None = None,
) -> Replica:
    """Starts `python -m inno_notify serve` with `config` plus its own ports and channel servers
    (which know the given Telegram chats and Slack users, e-mail -> user id); with `slack`, a
    started Slack server the caller shares between replicas instead of one of its own."""
    telegram = FakeTelegram(
        token=f"{4200 + number}:AAE-ha-{name}",
        chats=set(telegram_chats),
        _ids=itertools.count(number * ID_RANGE),
    )
    servers = [await fake_telegram.start(telegram)]
    shared = slack is not None
    if slack is None:
        slack = FakeSlack(
            token=f"xoxb-ha-{name}", users=dict(slack_users or {}), _ts=itertools.count(number * ID_RANGE)
        )
        servers.append(await fake_slack.start(slack))
    probes_port, api_port = free_port(), free_port()
    own = dict(config)
    own["channels"] = {
        **dict(config.get("channels", {})),  # e-mail, say, shared by the replicas (bench/soak.py)
        "telegram": {"token": telegram.token, "api_url": str(servers[0].make_url("")).rstrip("/")},
        "slack": {"token": slack.token, "api_url": f"{slack.base_url}/api/"},
    }
    own["probes"] = {"listen": f"127.0.0.1:{probes_port}"}
    token_hash = hashlib.sha256(API_TOKEN.encode()).hexdigest()
    own["api"] = {
        "listen": f"127.0.0.1:{api_port}",
        "tokens": [{"name": "t", "sha256": token_hash, "role": "admin"}],
    }
    own["ha"] = {**own.get("ha", {}), "identity": name}
    path = folder / f"{name}.yaml"
    path.write_text(json.dumps(own))
    env = {k: v for k, v in os.environ.items() if not k.startswith("INNO_NOTIFY_")}
    env["INNO_NOTIFY_LOG_FORMAT"] = "json"
    log = folder / f"{name}.log"
    with log.open("ab") as out:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "inno_notify", "serve", "--config", str(path),
            cwd=REPO, env=env, stdout=out, stderr=out,
        )  # fmt: skip
    return Replica(
        name, number, proc, probes_port, api_port, log, telegram, slack, servers, shared_slack=shared
    )


async def wait_leader(
    session: aiohttp.ClientSession, replicas: Sequence[Replica], within: float = 60.0
) -> Replica:
    """The replica that reports itself leader, once one does."""
    async with asyncio.timeout(within):
        while True:
            for replica in replicas:
                if replica.proc.returncode is None and await replica.leads(session):
                    return replica
            await asyncio.sleep(0.05)


def overlap_seconds(intervals: Mapping[str, Sequence[tuple[float, float]]]) -> float:
    """Seconds in which two replicas both acted as leader, summed over every pair of intervals of
    different replicas."""
    total = 0.0
    names = sorted(intervals)
    for i, first in enumerate(names):
        for second in names[i + 1 :]:
            for a_start, a_end in intervals[first]:
                for b_start, b_end in intervals[second]:
                    total += max(0.0, min(a_end, b_end) - max(a_start, b_start))
    return total


@dataclass
class Ledger:
    """Every delivery of every replica, by recipient."""

    by_recipient: dict[Recipient, list[str]] = field(default_factory=dict)

    @classmethod
    def of(cls, replicas: Iterable[Replica]) -> Ledger:
        ledger = cls()
        for replica in replicas:
            for recipient in replica.deliveries():
                ledger.by_recipient.setdefault(recipient, []).append(replica.name)
        return ledger

    def delivered(self) -> set[Recipient]:
        return set(self.by_recipient)

    def duplicates(self) -> dict[Recipient, list[str]]:
        return {r: names for r, names in self.by_recipient.items() if len(names) > 1}

    def duplicates_on(self, channel: str) -> int:
        """Deliveries beyond the first to the recipients of one channel."""
        return sum(len(names) - 1 for (on, _), names in self.by_recipient.items() if on == channel)
