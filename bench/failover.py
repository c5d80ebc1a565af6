"""Fail-over under load: two `serve` replicas on Postgres, the leader SIGKILLed again and again.

A stream of jobs (``--rate`` per second, each owned by a person of its own, half on Telegram,
half on Slack) ends in the simulated API server while two replicas run (tests/service/replicas.py:
real `inno-notify serve` processes, each with its own fake Bot API and Web API servers). Every
``--settle`` seconds after a leader took over, at a random moment, the leader is SIGKILLed and a
new process takes its place as a follower; ``--kills`` times. Then the stream stops, the outbox
drains, and the replicas are stopped with SIGTERM.

Prints ``name=value`` lines:

- ``failover_p50_s`` / ``failover_max_s``: from a kill to the moment the next leader logged
  "leadership: leading …" (its first leader action comes after that line);
- ``lost``: jobs whose summary no provider received by the end (``--drain`` seconds after the
  stream stopped);
- ``duplicates``: summaries a provider received more than once (the contract allows those the
  killed process had handed to a provider and not yet recorded);
- ``late_records_p50_ms`` / ``late_records_max_ms`` (over ``records_measured`` messages): from a
  provider accepting a message to the outbox showing it sent under that message's id (read every
  50 ms: an upper bound); ``dups_beyond_window``: duplicates whose first copy was accepted more
  than 1 s before the kill that lost its record (target 0 and ≤ 500 ms, issue 32);
- ``double_active_s``: seconds in which two replicas both acted as leader. Every replica logs,
  by wall clock, when it started leading ("leadership: leading … in term N", written after the
  lease is acquired and before any leader component starts) and when its leader work had ended
  ("leadership: leader work stopped, term N", written after every leader component returned or
  was cancelled); a SIGKILLed replica's interval ends when the bench has reaped the process. The
  intervals of different replicas are intersected pairwise and the overlaps summed. Each interval
  covers every leader-only action of its replica, so an overlap of 0 means no two replicas acted
  as leader at the same time (all processes share this machine's clock).

Exits 1 when ``lost > 0``, ``failover_max_s > 30`` or ``double_active_s > 0``. The lease timings
are the settings' defaults (15 s lease, 10 s renew deadline, 2 s retry period) unless given.

    .venv/bin/python bench/failover.py [--kills 10 --rate 3 --settle 8]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import statistics
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import aiohttp
import asyncpg
from sqlalchemy.engine import make_url

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from inno_notify.adapters.db import migrate
from inno_notify.settings import HaSettings
from inno_notify.sim.kube_api import SimKubeServer
from inno_notify.sim.kube_store import JOBS, PODS
from inno_notify.sim.objects import (
    JobSpec,
    job_object,
    job_started,
    job_succeeded,
    pod_object,
    pod_running,
    pod_terminated,
)
from tests.service.replicas import (
    Ledger,
    Recipient,
    Replica,
    base_config,
    overlap_seconds,
    start_replica,
    wait_leader,
)

ADMIN_URL = "postgresql+asyncpg://postgres@127.0.0.1:5432/postgres"
NAMESPACE = "face-research"


def person(i: int) -> tuple[dict[str, Any], Recipient]:
    """The directory entry of job i's owner, and where its summary goes."""
    email = f"p{i}@example.com"
    if i % 2:
        return {"email": email, "telegram_chat_id": 200_000 + i, "channels": ["telegram"]}, (
            "telegram",
            str(200_000 + i),
        )
    return {"email": email, "slack_user_id": f"U{i:07d}", "channels": ["slack"]}, ("slack", f"U{i:07d}")


async def admin(sql: str) -> None:
    url = make_url(ADMIN_URL)
    conn = await asyncpg.connect(user=url.username, host=url.host, port=url.port, database=url.database)
    try:
        await conn.execute(sql)
    finally:
        await conn.close()


class JobStream:
    """Jobs that start and end in the simulated cluster at a fixed rate, until stopped."""

    def __init__(self, sim: SimKubeServer, rate: float, limit: int) -> None:
        self.sim = sim
        self.rate = rate
        self.limit = limit
        self.made = 0
        self.stop = asyncio.Event()

    async def run(self) -> None:
        began = time.monotonic()
        while not self.stop.is_set() and self.made < self.limit:
            delay = began + self.made / self.rate - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
            self.finish(self.made)
            self.made += 1

    def finish(self, i: int) -> None:
        now = datetime.now(UTC).replace(microsecond=0)
        spec = JobSpec(name=f"stream-{i}", namespace=NAMESPACE, owner=f"p{i}@example.com", gpus=1)
        job = self.sim.create(JOBS, job_started(job_object(spec, now - timedelta(minutes=5)), now))
        pod = self.sim.create(PODS, pod_object(job, f"s{i:05d}", now - timedelta(minutes=5)))
        running = self.sim.update(PODS, pod_running(pod, "gpu-1", now - timedelta(minutes=4), now))
        self.sim.update(PODS, pod_terminated(running, now, 0))
        self.sim.update(JOBS, job_succeeded(job, now + timedelta(seconds=1)))


# How often the outbox is read for newly recorded sends: a record's lag is known to within this.
RECORD_POLL_SECONDS = 0.05
# A duplicate whose first copy was accepted longer than this before the kill that lost its record
# had a record that lagged (issue 32): the window CONTRACT §6 allows should be milliseconds.
DUP_WINDOW_SECONDS = 1.0


async def watch_records(database: str, recorded: dict[str, float], stop: asyncio.Event) -> None:
    """Notes, by wall clock, when each provider message id first shows up recorded as sent."""
    url = make_url(ADMIN_URL)
    conn = await asyncpg.connect(user=url.username, host=url.host, port=url.port, database=database)
    try:
        while True:
            rows = await conn.fetch(
                "SELECT provider_message_id FROM outbox"
                " WHERE status = 'sent' AND provider_message_id IS NOT NULL"
            )
            seen = time.time()
            for (message_id,) in rows:
                recorded.setdefault(message_id, seen)
            if stop.is_set():
                return
            await asyncio.sleep(RECORD_POLL_SECONDS)
    finally:
        await conn.close()


def record_lags(
    replicas: list[Replica], recorded: dict[str, float], kill_times: list[float]
) -> tuple[list[float], int]:
    """Per message recorded under the id its provider gave: milliseconds from the provider's
    acceptance to the record being seen (an upper bound, by RECORD_POLL_SECONDS); and the
    duplicates whose first copy was accepted more than DUP_WINDOW_SECONDS before the next kill."""
    accepted: dict[str, float] = {}
    by_recipient: dict[tuple[str, str], list[float]] = {}
    for replica in replicas:
        for channel, fake in (("telegram", replica.telegram), ("slack", replica.slack)):
            for message_id, recipient, at in fake.accepted:
                accepted[message_id] = at
                by_recipient.setdefault((channel, recipient), []).append(at)
    late = [1000.0 * (recorded[m] - at) for m, at in accepted.items() if m in recorded]
    beyond = 0
    for times in by_recipient.values():
        if len(times) < 2:
            continue
        first = min(times)
        kill = next((k for k in sorted(kill_times) if k >= first), None)
        if kill is None or kill - first > DUP_WINDOW_SECONDS:
            beyond += len(times) - 1
    return late, beyond


async def bench(args: argparse.Namespace) -> int:
    rng = random.Random(args.seed)
    name = f"inno_bench_failover_{uuid.uuid4().hex[:8]}"
    await admin(f'CREATE DATABASE "{name}"')
    url = make_url(ADMIN_URL).set(database=name).render_as_string(hide_password=False)
    await migrate(url)
    sim = SimKubeServer(bookmark_interval=5.0)
    await sim.start()
    capacity = int(args.rate * (args.kills * (args.settle + 40) + 60)) + 100
    people = [person(i) for i in range(capacity)]
    chats = {int(r[1]) for _, r in people if r[0] == "telegram"}
    slack_users = {entry["email"]: r[1] for entry, r in people if r[0] == "slack"}
    folder = Path(tempfile.mkdtemp(prefix="inno-failover-"))
    defaults = HaSettings()
    ha = {
        "lease_seconds": args.lease or defaults.lease_seconds,
        "renew_deadline_seconds": args.renew_deadline or defaults.renew_deadline_seconds,
        "retry_period_seconds": args.retry_period or defaults.retry_period_seconds,
    }
    config = base_config(
        url,
        str(sim.kubeconfig(folder / "kubeconfig")),
        ha,
        directory={
            "users": [entry for entry, _ in people],
            "teams": [{"name": "face", "namespaces": [NAMESPACE]}],
        },
    )
    stream = JobStream(sim, args.rate, capacity)
    replicas: list[Replica] = []
    numbers = iter(range(1, 1000))
    kill_times: list[float] = []
    exit_code = 0

    async def replica() -> Replica:
        number = next(numbers)
        started = await start_replica(
            f"r{number}", number, config, folder, telegram_chats=chats, slack_users=slack_users
        )
        replicas.append(started)
        return started

    recorded: dict[str, float] = {}
    drained = asyncio.Event()
    watching = asyncio.create_task(watch_records(name, recorded, drained))
    try:
        async with aiohttp.ClientSession() as session:
            first = await replica()
            await first.wait_ready(session, within=120)
            await (await replica()).wait_ready(session, within=120)
            leader = await wait_leader(session, replicas, within=120)
            streaming = asyncio.create_task(stream.run())
            for kill in range(args.kills):
                await asyncio.sleep(rng.uniform(args.settle / 2, args.settle))
                await leader.kill()
                kill_times.append(time.time())
                print(f"# kill {kill + 1}: {leader.name} at job {stream.made}", file=sys.stderr, flush=True)
                # The killed one's place is taken by a new process, which joins as a follower.
                joining = await replica()
                alive = [r for r in replicas if r.proc.returncode is None]
                leader = await wait_leader(session, alive, within=120)
                await joining.wait_ready(session, within=120)
            await asyncio.sleep(args.settle)
            stream.stop.set()
            await streaming
            wanted = {people[i][1] for i in range(stream.made)}
            deadline = time.monotonic() + args.drain
            while time.monotonic() < deadline and not wanted <= Ledger.of(replicas).delivered():  # noqa: ASYNC110
                await asyncio.sleep(0.5)
            for running in [r for r in replicas if r.proc.returncode is None]:
                if await running.terminate() != 0:
                    print(f"# {running.name} did not exit 0 on SIGTERM", file=sys.stderr)
                    exit_code = 1

        drained.set()
        await watching
        ledger = Ledger.of(replicas)
        late_ms, beyond = record_lags(replicas, recorded, kill_times)
        starts = sorted(t for r in replicas for t, _ in r.leader_intervals())
        failovers = []
        for killed_at in kill_times:
            later = [t for t in starts if t >= killed_at]
            failovers.append(later[0] - killed_at if later else float("inf"))
        lost = len(wanted - ledger.delivered())
        duplicates = sum(len(names) - 1 for names in ledger.duplicates().values())
        double_active = overlap_seconds({r.name: r.leader_intervals() for r in replicas})
        print(f"kills={len(kill_times)}")
        print(f"jobs={stream.made}")
        print(f"rate_per_s={args.rate:g}")
        print(f"lease_seconds={ha['lease_seconds']:g}")
        print(f"renew_deadline_seconds={ha['renew_deadline_seconds']:g}")
        print(f"retry_period_seconds={ha['retry_period_seconds']:g}")
        print(f"failover_p50_s={statistics.median(failovers):.1f}")
        print(f"failover_max_s={max(failovers):.1f}")
        print(f"lost={lost}")
        print(f"duplicates={duplicates}")
        print(f"double_active_s={double_active:.3f}")
        print(f"records_measured={len(late_ms)}")
        print(
            f"late_records_p50_ms={statistics.median(late_ms):.0f}" if late_ms else "late_records_p50_ms=null"
        )
        print(f"late_records_max_ms={max(late_ms):.0f}" if late_ms else "late_records_max_ms=null")
        print(f"dups_beyond_window={beyond}")
        print(f"load_average_1m={os.getloadavg()[0]:.2f}")
        if lost > 0 or max(failovers) > 30 or double_active > 0:
            exit_code = 1
        if exit_code:
            print(f"# logs kept in {folder}", file=sys.stderr)
    finally:
        stream.stop.set()
        watching.cancel()
        for running in replicas:
            await running.close()
        await sim.stop()
        await admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    return exit_code


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kills", type=int, default=10)
    parser.add_argument("--rate", type=float, default=3.0, help="jobs ending per second")
    parser.add_argument(
        "--settle", type=float, default=8.0, help="at most this long under a leader before a kill"
    )
    parser.add_argument("--drain", type=float, default=120.0, help="seconds allowed for the last summaries")
    parser.add_argument("--lease", type=float, help="ha.lease_seconds (default: the setting's default)")
    parser.add_argument("--renew-deadline", type=float, help="ha.renew_deadline_seconds")
    parser.add_argument("--retry-period", type=float, help="ha.retry_period_seconds")
    parser.add_argument("--seed", type=int, default=None)
    sys.exit(asyncio.run(bench(parser.parse_args())))


if __name__ == "__main__":
    main()
