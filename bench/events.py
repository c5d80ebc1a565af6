"""Benchmark: a flood of pipeline messages against the real API and dispatcher, and what gets out.

Issue 29: `POST /api/v1/events` was a spam relay (200 posts, 200 e-mails to one person in 8.7 s).
This posts ``--events`` events (10,000) from ``--tokens`` pipeline tokens (5) to ``--recipients``
directory people (50), as fast as ``--concurrency`` connections allow, against what `serve` runs:
the real app (``create_api_store`` + ``create_app`` with the default ``api.events`` limits) and the
real dispatcher with the real e-mail channel (aiosmtpd on loopback, the tests' fake_smtp), over
Postgres (its own database, dropped at the end). Meanwhile another caller, a viewer, asks
``GET /api/v1/jobs`` at ``--other-rate`` per second on a fixed schedule (open loop: a request's
latency counts from when it was due). The flood, the other caller and the SMTP server each run in
a child process of their own, so that none's CPU (nor, for the SMTP server's thread, its hold on
the interpreter) is the service's, and the other caller's latencies are not the flood's client's.
Everything talks to 127.0.0.1 only, and the run stops by itself: posting ends after ``--seconds``
(90) even if not all events were posted (``posted=`` says how many were).

Prints ``name=value`` lines: ``accepted=`` (202, new), ``limited=`` (429), ``messages_sent=``
(e-mails the SMTP server received), ``max_messages_per_recipient_hour=`` (the most any one person
received within an hour; never above ``per_recipient_per_hour``), ``other_p99_ms=`` (target ≤ 50),
``service_cpu_s=`` (CPU the service's process used while posting ran) and the load average before
and after.

    .venv/bin/python bench/events.py [--events 10000 --tokens 5 --recipients 50 --group-wait 2]
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import statistics
import subprocess
import sys
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import aiohttp
import asyncpg
from aiohttp import web
from sqlalchemy.engine import make_url

from inno_notify.adapters.channels.email import EmailSender
from inno_notify.adapters.channels.render import Renderer
from inno_notify.adapters.db import Store, migrate
from inno_notify.api.app import create_api_store, create_app
from inno_notify.api.keys import EventRouting
from inno_notify.domain.model import DeliveryStatus, DirectoryUser
from inno_notify.gc_tuning import tune_for_ingest
from inno_notify.service.dispatcher import Dispatcher, DispatchOptions
from inno_notify.settings import ApiEventsSettings, ApiSettings, ApiToken
from tests.adapters.channels import fake_smtp

ADMIN_URL = os.environ.get(
    "INNO_NOTIFY_BENCH_POSTGRES_URL", "postgresql+asyncpg://postgres@127.0.0.1:5432/postgres"
)
VIEWER = "bench-viewer-token"
HOUR = 3600.0


def token(i: int) -> str:
    return f"bench-pipeline-token-{i}"


def person(i: int) -> str:
    return f"person{i:03d}@example.org"


# --- the load (child process) --------------------------------------------------------------------


async def load(spec: dict[str, Any]) -> dict[str, Any]:
    """The flood (once stdin says "start"): `concurrency` posters, each posting its share of the
    events one after another."""
    base, events, tokens, people = spec["base"], spec["events"], spec["tokens"], spec["recipients"]
    statuses: dict[int, int] = {}
    connector = aiohttp.TCPConnector(limit=spec["concurrency"])
    async with aiohttp.ClientSession(base, connector=connector) as session:

        async def post(i: int) -> None:
            # Keyless, as a flood would be: each post is a new message unless a limit says no.
            body = {"to": person(i % people), "title": f"Nightly step {i} finished"}
            headers = {"Authorization": f"Bearer {token(i % tokens)}"}
            async with session.post("/api/v1/events", json=body, headers=headers) as response:
                await response.read()
            statuses[response.status] = statuses.get(response.status, 0) + 1

        async def poster(start: int) -> None:
            for i in range(start, events, spec["concurrency"]):
                if time.perf_counter() > stop_at:
                    return  # out of time: report what was posted
                await post(i)

        started = time.perf_counter()
        stop_at = started + spec["seconds"]
        await asyncio.gather(*(poster(c) for c in range(spec["concurrency"])))
        seconds = time.perf_counter() - started
    return {"posted": sum(statuses.values()), "statuses": statuses, "seconds": seconds}


async def other_caller(base: str, rate: float) -> dict[str, Any]:
    """The other caller, a process of its own as another client would be (its latencies are not the
    flood's client's): from a line "start" on stdin until stdin closes, GET /api/v1/jobs at `rate`
    per second on a fixed schedule, each latency counted from when the request was due. Its
    connection is opened before, as a caller that has been there a while has one."""
    loop = asyncio.get_running_loop()
    headers = {"Authorization": f"Bearer {VIEWER}"}
    other: list[float] = []
    async with aiohttp.ClientSession(base) as session:
        async with session.get("/api/v1/jobs?limit=50", headers=headers) as response:
            await response.read()
        print("ready", flush=True)
        await loop.run_in_executor(None, sys.stdin.readline)
        stopped = loop.run_in_executor(None, sys.stdin.read)

        async def one(due: float) -> None:
            async with session.get("/api/v1/jobs?limit=50", headers=headers) as response:
                await response.read()
                assert response.status == 200, response.status
            other.append((time.perf_counter() - due) * 1000)

        start = time.perf_counter()
        pending: list[asyncio.Task[None]] = []
        i = 0
        while not stopped.done():
            due = start + i / rate
            delay = due - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            pending.append(asyncio.create_task(one(due)))
            i += 1
        await asyncio.gather(*pending)
    other.sort()
    return {
        "other_n": len(other),
        "other_p50": statistics.median(other),
        "other_p99": other[max(0, int(len(other) * 0.99) - 1)],
    }


def run_load(spec: dict[str, Any], other: subprocess.Popen[str], timeout: float) -> dict[str, Any]:
    """The flood and the other caller, started together; the other caller stops when the flood ends."""
    flood = start_child("--load", json.dumps(spec))
    try:
        for child in (flood, other):
            assert child.stdin is not None
            child.stdin.write("start\n")
            child.stdin.flush()
        flooded, _ = flood.communicate("", timeout)
        measured, _ = other.communicate("", 30)
    finally:
        if flood.returncode is None:
            flood.kill()
            flood.wait()
    result: dict[str, Any] = json.loads(flooded)
    result.update(json.loads(measured))
    return result


# --- the SMTP server (child process) --------------------------------------------------------------


def smtp_server(port: int) -> None:
    """Serves SMTP on `port` until its stdin closes, then prints {address: [arrival times]}."""
    from aiosmtpd.controller import Controller

    smtp = fake_smtp.RecordingHandler()
    arrived: dict[str, list[float]] = {}
    handle_data = smtp.handle_DATA

    async def recording(server: Any, session: Any, envelope: Any) -> str:
        for address in envelope.rcpt_tos:
            arrived.setdefault(address.lower(), []).append(time.monotonic())  # CLOCK_MONOTONIC: one per host
        return await handle_data(server, session, envelope)

    smtp.handle_DATA = recording  # type: ignore[method-assign]
    controller = Controller(smtp, hostname="127.0.0.1", port=port)
    controller.start()
    try:
        print("ready", flush=True)
        sys.stdin.read()
    finally:
        controller.stop()
    print(json.dumps({"messages": len(smtp.received), "arrived": arrived}), flush=True)


def start_child(*args: str) -> subprocess.Popen[str]:
    """This script as a child process with `args`, once it printed "ready"; it stops when its
    stdin closes and prints its result."""
    child = subprocess.Popen(
        [sys.executable, __file__, *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert child.stdout is not None
    if child.stdout.readline().strip() != "ready":
        child.kill()
        raise RuntimeError(f"{args[0]}: did not start")
    return child


# --- the service side ------------------------------------------------------------------------------


async def admin(sql: str) -> None:
    url = make_url(ADMIN_URL)
    conn = await asyncpg.connect(user=url.username, host=url.host, port=url.port, database=url.database)
    try:
        await conn.execute(sql)
    finally:
        await conn.close()


def per_hour_peak(times: list[float]) -> int:
    """The most of `times` (seconds, sorted) within any one hour."""
    best, first = 0, 0
    for last, at in enumerate(times):
        while at - times[first] >= HOUR:
            first += 1
        best = max(best, last - first + 1)
    return best


def load_average() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


async def bench(args: argparse.Namespace) -> None:
    name = f"inno_bench_events_{uuid.uuid4().hex[:8]}"
    await admin(f'CREATE DATABASE "{name}"')
    url = make_url(ADMIN_URL).set(database=name).render_as_string(hide_password=False)
    smtp_port = fake_smtp.free_port()
    smtp = await asyncio.to_thread(start_child, "--smtp", str(smtp_port))
    other: subprocess.Popen[str] | None = None
    service = Store.from_url(url)
    api_store = None
    runner = None
    stop = asyncio.Event()
    dispatching: asyncio.Task[None] | None = None
    try:
        await migrate(url)
        for i in range(args.recipients):
            await service.directory.upsert_user(DirectoryUser(person(i), f"Person {i}", channels=("email",)))
        limits = ApiEventsSettings()
        settings = ApiSettings(
            listen="127.0.0.1:0",
            tokens=(
                ApiToken(name="viewer", sha256=hashlib.sha256(VIEWER.encode()).hexdigest(), role="viewer"),
                *(
                    ApiToken(
                        name=f"pipeline-{i}",
                        sha256=hashlib.sha256(token(i).encode()).hexdigest(),
                        role="pipeline",
                    )
                    for i in range(args.tokens)
                ),
            ),
            events=limits,
        )
        api_store = create_api_store(url)
        routing = EventRouting(frozenset({"email"}), ("example.org",), args.group_wait)
        app = create_app(api_store, settings, event_routing=routing)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        base = f"http://127.0.0.1:{runner.addresses[0][1]}"
        email = EmailSender("127.0.0.1", "inno-notify@example.org", port=smtp_port, starttls=False)
        dispatcher = Dispatcher(
            service,
            {"email": email},
            Renderer(),
            DispatchOptions(group_wait_seconds=args.group_wait, poll_seconds=0.2),
            clock=lambda: datetime.now(UTC),
        )
        dispatching = asyncio.create_task(dispatcher.run(stop))
        print(f"load_before={load_average()}", flush=True)
        spec = {
            "base": base,
            "events": args.events,
            "tokens": args.tokens,
            "recipients": args.recipients,
            "concurrency": args.concurrency,
            "seconds": args.seconds,
        }
        other = await asyncio.to_thread(start_child, "--other", base, str(args.other_rate))
        cpu_before = time.process_time()
        result = await asyncio.to_thread(run_load, spec, other, args.seconds + 60)
        cpu_used = time.process_time() - cpu_before
        print(f"load_after={load_average()}", flush=True)
        # Let the last group wait pass and the dispatcher send what is due.
        deadline = time.monotonic() + args.group_wait + 30
        while time.monotonic() < deadline:
            page, _ = await service.outbox.list_notifications(DeliveryStatus.PENDING, limit=1)
            if not page:
                break
            await asyncio.sleep(0.5)
        stop.set()
        await dispatching
        dispatching = None
        await email.aclose()
        captured, _ = await asyncio.to_thread(smtp.communicate, "", 30)
        received = json.loads(captured)
        arrived: dict[str, list[float]] = received["arrived"]
        statuses = result["statuses"]
        print(f"events={args.events}")
        print(f"posted={result['posted']}")
        print(f"tokens={args.tokens}")
        print(f"recipients={args.recipients}")
        print(f"post_seconds={result['seconds']:.1f}")
        print(f"posts_per_s={result['posted'] / result['seconds']:.0f}")
        print(f"statuses={','.join(f'{k}:{v}' for k, v in sorted(statuses.items()))}")
        # JSON keys: the statuses came back from the load process as strings.
        print(f"accepted={statuses.get('202', 0)}")
        print(f"limited={statuses.get('429', 0)}")
        print(f"messages_sent={received['messages']}")
        print(f"per_recipient_per_hour={limits.per_recipient_per_hour}")
        print(
            f"max_messages_per_recipient_hour={max((per_hour_peak(t) for t in arrived.values()), default=0)}"
        )
        print(f"other_requests={result['other_n']}")
        print(f"other_p50_ms={result['other_p50']:.1f}")
        print(f"other_p99_ms={result['other_p99']:.1f}")
        print(f"service_cpu_s={cpu_used:.1f}", flush=True)
    finally:
        stop.set()
        if dispatching is not None:
            await dispatching
        if runner is not None:
            await runner.cleanup()
        if api_store is not None:
            await api_store.close()
        await service.close()
        for child in (smtp, other):
            if child is not None and child.returncode is None:
                child.kill()
                child.wait()
        await admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--events", type=int, default=10_000)
    parser.add_argument("--tokens", type=int, default=5)
    parser.add_argument("--recipients", type=int, default=50)
    parser.add_argument("--concurrency", type=int, default=16, help="posts in flight")
    parser.add_argument("--other-rate", type=float, default=20.0, help="the other caller's GETs per second")
    parser.add_argument("--group-wait", type=float, default=2.0, help="notify.group_wait_seconds")
    parser.add_argument("--seconds", type=float, default=90.0, help="posting stops after this (s)")
    parser.add_argument("--load", help=argparse.SUPPRESS)
    parser.add_argument("--smtp", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--other", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.smtp:
        smtp_server(args.smtp)
        return
    if args.other:
        print(json.dumps(asyncio.run(other_caller(args.other[0], float(args.other[1])))))
        return
    if args.load:
        print("ready", flush=True)
        sys.stdin.readline()
        print(json.dumps(asyncio.run(load(json.loads(args.load)))))
        return
    tune_for_ingest()  # the service's process, as `inno-notify serve` sets it up
    asyncio.run(bench(args))


if __name__ == "__main__":
    main()
