"""`inno-notify demo`: the real service against a simulated GPU cluster, on the embedded SQLite default.

What runs is the production pipeline — the Kubernetes watch over real HTTP (kubernetes-asyncio
against the simulated API server), ingestion into SQLite, usage collection, right-sizing, routing,
the outbox and the dispatcher with the real renderer, the workflow tracker with an Argo training
pipeline, an Airflow DAG run, a KServe model coming online and a distributed PyTorchJob, and the
live check that nudges the owners of idling GPUs — with stand-ins at the edges: the cluster's
metrics come from the simulator's traces (through the same interfaces as the Prometheus meters),
e-mail goes to files and the terminal instead of an SMTP server, and the Slack app's answers to a
stand-in workspace instead of Slack's Web API. Simulated time runs `speed`
times faster than the wall clock. A JupyterHub server someone left running on a GPU, idle, gets
its nudge while the jobs run.

The simulated GPUs are of two models (H100s and A100s, by node), priced by the demo's
`accounting.rates`, so each team's digest shows its cost by GPU model; one team has a weekly budget
of A100 GPU-hours that its jobs cross, and the leader's budget check, run once the jobs are done,
sends its lead exactly one alert (demo_budget says how the allowance is chosen).
its nudge while the jobs run. At the end, the researcher with the most runs asks the Slack app
`/inno status`: a signed slash command posted to the service's own HTTP API (POST /slack/commands),
answered in a direct message the dispatcher sends to a stand-in Slack workspace (sim.slack_workspace).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import math
import secrets
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlencode
from zoneinfo import ZoneInfo

import aiohttp
from aiohttp import web
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text
from slack_sdk.signature import SignatureVerifier

from inno_notify.adapters.channels.digest_views import DigestRenderer
from inno_notify.adapters.channels.nudge_views import NudgeListView
from inno_notify.adapters.db.job_details import KIND, STATUS, UID, WORKFLOW
from inno_notify.adapters.db.jobs import JobFilter
from inno_notify.adapters.db.migrate import migrate
from inno_notify.adapters.db.repository import Store, SummaryState, WorkflowState
from inno_notify.adapters.kube import ClusterWatcher, WatchOptions, load_api_client
from inno_notify.api.app import create_app
from inno_notify.api.keys import SlackRequests
from inno_notify.domain.budgets import MIN_ELAPSED, WARN_SHARE, Period, elapsed_share, period_bounds
from inno_notify.domain.kinds import OPTIONAL_KINDS
from inno_notify.domain.messages import decode_pipeline
from inno_notify.domain.model import DeliveryStatus, JobStatus, Notification, NotificationKind
from inno_notify.domain.parsing.airflow import make_safe_label_value
from inno_notify.domain.personal_page import PERSONAL_DAYS, PageOpening
from inno_notify.domain.weeks import week_of
from inno_notify.domain.workflows import airflow_run_uid
from inno_notify.runtime import build_digest_accounting, build_digest_renderer, build_pipeline
from inno_notify.runtime.builders import build_me_page_renderer, live_options, page_links
from inno_notify.runtime.configuration import seed_directory
from inno_notify.service.digest_accounting import DigestAccounting
from inno_notify.service.digest_pages import render_digest, team_digest
from inno_notify.service.live_check import LiveCheck
from inno_notify.service.slack_bot import SlackHandler
from inno_notify.settings import ApiSettings, ApiToken, Settings
from inno_notify.sim.cluster import ClusterPlayer, SimClock
from inno_notify.sim.kube_api import SimKubeServer
from inno_notify.sim.kube_store import TRAINING_CRDS
from inno_notify.sim.mailbox import MailboxSender
from inno_notify.sim.metrics import SimMetrics
from inno_notify.sim.slack_workspace import SimSlack, message_text
from inno_notify.sim.workload import (
    MIG_PROFILE,
    SECOND_GPU_MODEL,
    Workload,
    generate,
    gpu_model_of,
)

log = logging.getLogger(__name__)

DEFAULT_OUT = Path("demo-out")
SENDER = "gpu-bot@inno-notify.example"
CLUSTER = "demo"
# Where the links in the demo's messages point (`links.public_url`): nothing serves it during the demo;
# `inno-notify serve` with the demo's database and settings would (tests/pages/test_message_links.py).
PUBLIC_URL = "http://inno-notify.example/"
# What the demo cluster's GPU-hours cost (accounting.rates): its two models, priced apart.
DEMO_RATES: dict[str, Any] = {"currency": "EUR", "gpu_hour": {"*H100*": 2.5, "*A100*": 1.6}}
BUDGET_MODELS = "*A100*"
# The Slack workspace of the demo's `/inno status` (sim.slack_workspace).
SLACK_TEAM = "T0DEMO"
SLACK_COMMAND = "/inno status"


@dataclass(frozen=True, slots=True)
class SlackExchange:
    """A researcher's `/inno status` in Slack and the app's answer, as they read it."""

    email: str
    user_id: str
    command: str
    reply: str


@dataclass(frozen=True, slots=True)
class DemoResult:
    workload: Workload
    out: Path
    database_url: str
    summaries_sent: int
    # (recipient, headline) of each idle nudge delivered.
    nudges: tuple[tuple[str, str], ...]
    messages: int
    recipients: Counter[str]
    seconds: float
    # Of the deliveries: workflow summaries (Argo and Airflow) and "model is serving" messages.
    workflow_summaries: int
    # team -> (the digest as text, the file of its HTML page)
    digests: dict[str, tuple[str, Path]]
    # The personal page (GET /me) of the researcher with the most runs, as a file.
    personal_page: Path | None = None
    # The budget alerts delivered (title and text of each): one, to the lead of demo_budget's team.
    budget_alerts: tuple[tuple[str, str], ...] = ()
    # That researcher's `/inno status` in Slack and the app's answer (also written to `out`).
    slack: SlackExchange | None = None


def _a100_gpu_hours(workload: Workload) -> dict[str, float]:
    """Per team, the GPU-hours its jobs will hold on A100s (where the sim places them): GPUs (a
    seventh of one for a MIG slice) × runtime."""
    hours: dict[str, float] = {}
    for job in workload.jobs:
        if gpu_model_of(job.node) == SECOND_GPU_MODEL and job.spec.gpus:
            gpus = 1 / 7 if job.mig_profile else float(job.spec.gpus)
            hours[job.person.team] = hours.get(job.person.team, 0.0) + gpus * job.run_seconds / 3600
    return hours


def demo_budget(workload: Workload) -> dict[str, Any] | None:
    """A weekly budget of A100 GPU-hours for the team whose jobs hold the most of them, set from the
    generated workload so that, at its end, exactly one alert is due: with the week's elapsed share
    `e` then and the expected spend `s`, before MIN_ELAPSED (no forecast yet) or late in the week
    the allowance puts spend between 80 % and 100 % with the forecast within it (the 80 % alert);
    otherwise it lies between 1.25 s and s / e, the forecast's (the forecast alert alone)."""
    hours = _a100_gpu_hours(workload)
    if not hours:
        return None
    team, spend = max(hours.items(), key=lambda item: (item[1], item[0]))
    now = workload.end
    elapsed = elapsed_share(*period_bounds(Period.WEEK, now, ZoneInfo("UTC")), now)
    if elapsed < MIN_ELAPSED:
        allowance = spend / ((WARN_SHARE + 1.0) / 2)
    elif elapsed < 1 / (1 / WARN_SHARE + 0.05):
        allowance = spend * math.sqrt(1 / (WARN_SHARE * elapsed))
    else:
        allowance = spend * (1 / elapsed + 1 / WARN_SHARE) / 2
    return {"team": team, "period": "week", "gpu_hours": round(allowance, 3), "gpu_model": BUDGET_MODELS}


def demo_settings(
    workload: Workload,
    database_url: str,
    links_secret_file: Path | None = None,
    budgets: Sequence[Mapping[str, Any]] | None = None,
) -> Settings:
    """The configuration a team would write for this cluster: its people, teams and GPU resources.
    `links_secret_file`: the key the links in messages are signed with (`links.secret_file`); without
    it they are plain links. `budgets`: the `budgets` list (default: `demo_budget`'s one, if any)."""
    if budgets is None:
        budgets = [budget] if (budget := demo_budget(workload)) is not None else []
    links: dict[str, Any] = {"public_url": PUBLIC_URL}
    if links_secret_file is not None:
        links["secret_file"] = str(links_secret_file)
    config: dict[str, Any] = {
        "database_url": database_url,
        "cluster": CLUSTER,
        "prometheus": {"metrics_delay_seconds": 60, "give_up_after_seconds": 1800},
        "accounting": {
            "gpu_resources": {"nvidia.com/gpu": 1.0, f"nvidia.com/mig-{MIG_PROFILE}": 1 / 7},
            "rates": DEMO_RATES,
        },
        "budgets": list(budgets),
        # A sweep's jobs end within a few simulated minutes of each other: wait for them.
        "notify": {"group_wait_seconds": 600},
        "links": links,
        "channels": {"email": {"host": "mailbox", "sender": SENDER}},
        # Half an hour of an idle GPU is worth a nudge in a demo that lasts a few simulated hours.
        "live": {"idle_minutes": 30},
        "directory": {
            "users": [{"email": p.email, "name": p.name, "channels": ["email"]} for p in workload.people],
            "teams": [
                {"name": t.name, "namespaces": [t.namespace], "leads": [t.lead]} for t in workload.teams
            ],
        },
    }
    return Settings.model_validate(config)


def _fresh_output(out: Path) -> tuple[Path, Path]:
    """The database file and mail folder of a run, with what an earlier run left there removed."""
    out.mkdir(parents=True, exist_ok=True)
    db_path = out / "inno-notify-demo.db"
    for stale in out.glob("inno-notify-demo.db*"):
        stale.unlink()
    mail_dir = out / "mail"
    for old in [*mail_dir.glob("*.eml"), *mail_dir.glob("*.html")]:
        old.unlink()
    return db_path, mail_dir


async def run_demo(
    jobs: int = 24,
    speed: float = 400.0,
    out: Path = DEFAULT_OUT,
    console: Console | None = None,
    *,
    start: datetime | None = None,
    timeout_seconds: float = 300.0,
    workload: Workload | None = None,
    training: bool = True,
    database_url: str | None = None,
    links_secret_file: Path | None = None,
    budgets: Sequence[Mapping[str, Any]] | None = None,
) -> DemoResult:
    """Plays a generated workload of `jobs` jobs (or the given `workload`, a scenario) through the
    whole service on a simulated clock, and reports what was delivered. `training`: the generated
    workload includes a distributed PyTorchJob (1 Master + 3 Workers on 4 GPUs each). `database_url`:
    another database than the demo's own SQLite file (a scenario test on Postgres).
    `links_secret_file`: sign the links in messages with this key (`links.secret_file`). `budgets`:
    the teams' budgets (default: `demo_budget`'s)."""
    console = console or Console()
    db_path, mail_dir = _fresh_output(out)
    database_url = database_url or f"sqlite+aiosqlite:///{db_path}"
    start = start or datetime.now(UTC).replace(minute=0, second=0, microsecond=0) - timedelta(hours=4)
    if workload is None:
        workload = generate(jobs, start, training=training)
    else:
        start = workload.start
    settings = demo_settings(workload, database_url, links_secret_file, budgets)
    clock = SimClock(start, speed)

    await migrate(database_url)
    store = Store.from_url(database_url)
    await seed_directory(store, settings)
    mailbox = MailboxSender(mail_dir, SENDER, console)
    # Slack members by their profile's e-mail (the app finds a directory user without a Slack id so).
    slack = SimSlack({_member_id(i): p.email for i, p in enumerate(workload.people)}, console)
    metrics = SimMetrics(
        workload.jobs,
        pods=workload.pod_behaviours(),
        workspaces=workload.workspaces,
        spans=workload.pod_spans(),
    )
    pipeline = build_pipeline(
        settings,
        store,
        metrics,
        # Slack carries only the app's answers: everyone's channels are e-mail.
        {"email": mailbox, "slack": slack},
        clock.now,
        started_at=start,
        poll_seconds=0.05,
    )
    # The live check looks every few tenths of a second of wall-clock time (a minute or two of
    # simulated time).
    live = LiveCheck(
        store, metrics, replace(live_options(settings), interval_seconds=0.2), clock.now, {"email"}
    )
    components = [*pipeline.components, ("live", live.run)]
    server = SimKubeServer(bookmark_interval=5.0, crds=("argo", "kserve", *TRAINING_CRDS))
    await server.start()
    api = await load_api_client(server.kubeconfig(out / "kubeconfig"))
    watcher = ClusterWatcher(
        api,
        pipeline.ingestor.on_event,
        pipeline.ingestor.on_relist,
        kueue=False,
        argo=True,
        kserve=True,
        options=WatchOptions(),
        workloads=[(spec, True) for spec in OPTIONAL_KINDS],
        on_kinds=pipeline.ingestor.watch_kinds,
        on_listed=pipeline.ingestor.on_listed,
        known=pipeline.ingestor,
    )
    player = ClusterPlayer(server, workload, clock)
    stop = asyncio.Event()
    began = asyncio.get_running_loop().time()
    exchange: SlackExchange | None = None
    console.rule(f"[bold]inno-notify demo[/] · {len(workload.jobs)} jobs · simulated time × {speed:g}")
    try:
        async with asyncio.TaskGroup() as group:
            watch = group.create_task(watcher.run(), name="watch")
            for name, component in components:
                group.create_task(component(stop), name=name)
            await watcher.wait_ready()
            play = group.create_task(player.run(), name="player")
            try:
                async with asyncio.timeout(timeout_seconds):
                    await _progress(console, store, workload, player, play)
                    # The leader checks budgets every few minutes of wall-clock time; the demo's
                    # simulated week is over sooner: one check now, its alert delivered.
                    if pipeline.check_budgets is not None and settings.budgets:
                        await pipeline.check_budgets()
                        await _until_sent(store)
                    exchange = await _slack_status(store, workload, clock, slack, console)
            finally:
                stop.set()
                watch.cancel()
                play.cancel()
    finally:
        with contextlib.suppress(Exception):
            await api.close()
        await server.stop()
    sent = await _sent(store)
    pipeline_kinds = (NotificationKind.WORKFLOW_SUMMARY, NotificationKind.MODEL_SERVING)
    accounting = build_digest_accounting(settings, store, clock.now)
    digests = await _digests(store, workload, out, build_digest_renderer(settings), accounting)
    budget_alerts = await _budget_alerts(store)
    personal = await _personal_page(store, workload, out, settings)
    await store.close()
    recipients = Counter(r.email or "" for r, _ in mailbox.sent)
    nudges = tuple(
        (row.recipient, NudgeListView.from_payload(row.payload).headline)
        for row in sent
        if row.kind is NotificationKind.IDLE_NUDGE
    )
    result = DemoResult(
        workload=workload,
        out=out,
        database_url=database_url,
        summaries_sent=sum(1 for n in sent if n.kind not in _NOT_SUMMARIES) - len(budget_alerts),
        nudges=nudges,
        messages=len(mailbox.sent),
        recipients=recipients,
        seconds=asyncio.get_running_loop().time() - began,
        digests=digests,
        workflow_summaries=sum(1 for n in sent if n.kind in pipeline_kinds),
        personal_page=personal,
        budget_alerts=budget_alerts,
        slack=exchange,
    )
    if exchange is not None:
        await asyncio.to_thread(
            (out / "slack-inno-status.txt").write_text,
            f"{exchange.email} ({exchange.user_id}): {exchange.command}\n\n{exchange.reply}\n",
            "utf-8",
        )
    _report(console, result)
    return result


def _member_id(index: int) -> str:
    """The Slack member id of the demo's `index`-th person."""
    return f"U0DEMO{index:04d}"


def _busiest(workload: Workload) -> str | None:
    """The e-mail of the researcher with the most runs."""
    owners = Counter(job.person.email for job in workload.jobs)
    return owners.most_common(1)[0][0] if owners else None


async def _slack_status(
    store: Store, workload: Workload, clock: SimClock, slack: SimSlack, console: Console
) -> SlackExchange | None:
    """The busiest researcher types `/inno status` in Slack: the slash command, signed with the
    app's signing secret as Slack signs it, is posted to the service's HTTP API (POST
    /slack/commands, its signature checked), handled like any (service.slack_bot), and its answer,
    an outbox row, sent by the running dispatcher to the stand-in workspace as a DM."""
    email = _busiest(workload)
    if email is None:
        return None
    index, person = next((i, p) for i, p in enumerate(workload.people) if p.email == email)
    user_id = _member_id(index)
    secret = secrets.token_hex(16)
    handler = SlackHandler(store, slack, clock.now)

    async def handle(kind: str, payload: Any) -> None:
        await handler.handle(kind, payload, fenced=False)

    # The API as the service serves it, on a free port; its one bearer token is never handed out.
    api_settings = ApiSettings(
        listen="127.0.0.1:0",
        tokens=(
            ApiToken(
                name="demo",
                sha256=hashlib.sha256(secrets.token_bytes(32)).hexdigest(),
                role="viewer",
                teams=None,
                recipients=None,
            ),
        ),
    )
    app = create_app(store, api_settings, slack_requests=SlackRequests(secret, handle))
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    try:
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = runner.addresses[0][1]
        body = urlencode(
            {
                "team_id": SLACK_TEAM,
                "user_id": user_id,
                "user_name": person.name,
                "command": "/inno",
                "text": SLACK_COMMAND.removeprefix("/inno ").strip(),
                "trigger_id": f"demo.{secrets.token_hex(4)}",
            }
        ).encode()
        timestamp = str(int(time.time()))
        signature = SignatureVerifier(secret).generate_signature(timestamp=timestamp, body=body)
        console.rule(f"[bold]Slack · {SLACK_COMMAND}[/]")
        console.print(Text(f"{person.name} ({user_id}) types {SLACK_COMMAND} in Slack"))
        slack.delivered.clear()
        async with (
            aiohttp.ClientSession() as session,
            session.post(
                f"http://127.0.0.1:{port}/slack/commands",
                data=body,
                headers={
                    "Content-Type": "application/x-www-form-urlencoded",
                    "X-Slack-Request-Timestamp": timestamp,
                    "X-Slack-Signature": str(signature),
                },
            ) as response,
        ):
            response.raise_for_status()
        # The answer is the dispatcher's to send, like every message.
        await slack.delivered.wait()
    finally:
        await runner.cleanup()
    _, message = slack.sent[-1]
    return SlackExchange(email, user_id, SLACK_COMMAND, message_text(message))


async def _digests(
    store: Store, workload: Workload, out: Path, renderer: DigestRenderer, accounting: DigestAccounting
) -> dict[str, tuple[str, Path]]:
    """Each team's weekly digest of the simulated week, priced and with its budget (`accounting`):
    its text (with the team page's link, signed like the service's digests), and its page written
    to `out`."""
    week = week_of(workload.start, "UTC")
    found = {}
    for team in workload.teams:
        digest = await team_digest(store, team.name, week, "UTC", workload.end, accounting)
        page = out / f"digest-{team.name}-{week}.html"
        await asyncio.to_thread(page.write_text, render_digest(digest, "html", renderer), "utf-8")
        found[team.name] = (render_digest(digest, "text", renderer), page)
    return found


async def _personal_page(store: Store, workload: Workload, out: Path, settings: Settings) -> Path | None:
    """The personal page (GET /me) of the researcher with the most runs, at the simulated week's end,
    written to `out`: what their messages' footer link opens (read-only here: a file posts nowhere;
    its links to run pages expire with a link made then, as the served page's do)."""
    email = _busiest(workload)
    if email is None:
        return None
    now = workload.end
    page = await store.personal.page(email, now - timedelta(days=PERSONAL_DAYS), now)
    links = page_links(settings)
    opening = PageOpening(email, expires=links.expiry(now) if links.key else None)
    html = build_me_page_renderer(settings).html(page, opening)
    path = out / f"me-{email.split('@')[0]}.html"
    await asyncio.to_thread(path.write_text, html, "utf-8")
    return path


async def _progress(
    console: Console, store: Store, workload: Workload, player: ClusterPlayer, play: asyncio.Task[None]
) -> None:
    """Shows the cluster's progress until every job ended and every summary was delivered."""
    total = len(workload.jobs)
    columns = (TextColumn("{task.description}"), BarColumn(), TextColumn("{task.completed}/{task.total}"))
    with Progress(*columns, TimeElapsedColumn(), console=console, transient=True) as progress:
        submitted = progress.add_task("jobs submitted", total=total)
        ended = progress.add_task("jobs ended", total=total)
        sent = progress.add_task("summaries delivered", total=total)
        while True:
            delivered = await _delivered(store)
            progress.update(submitted, completed=player.submitted)
            progress.update(ended, completed=player.ended)
            progress.update(sent, completed=delivered)
            if play.done() and await _settled(store, workload):
                return
            await asyncio.sleep(0.1)


async def _until_sent(store: Store) -> None:
    """Until no message waits to be sent (the budget alert's, enqueued last)."""
    while True:
        pending, _ = await store.outbox.list_notifications(DeliveryStatus.PENDING, limit=1)
        if not pending:
            return
        await asyncio.sleep(0.1)


async def _budget_alerts(store: Store) -> tuple[tuple[str, str], ...]:
    """The budget alerts delivered: (title, text) of each."""
    alerts = []
    for row in await _sent(store):
        if row.kind is NotificationKind.PIPELINE_EVENT:
            message = decode_pipeline(row.payload)
            if message.key.startswith("budget:"):
                alerts.append((message.title, message.text or ""))
    return tuple(alerts)


async def _sent(store: Store) -> list[Notification]:
    rows, _ = await store.outbox.list_notifications(DeliveryStatus.SENT, limit=500)
    return rows


async def _delivered(store: Store) -> int:
    return sum(1 for row in await _sent(store) if row.kind is not NotificationKind.IDLE_NUDGE)


def _run_uids(workload: Workload) -> list[str]:
    return [
        airflow_run_uid(r.namespace, make_safe_label_value(r.dag_id), make_safe_label_value(r.run_id))
        for r in workload.dag_runs
    ]


async def _settled(store: Store, workload: Workload) -> bool:
    """Every job ended and was summarized, every pipeline summarized and every model announced, every
    workspace stopped, and no message is still waiting to be sent."""
    total = len(workload.jobs) + len(workload.workspaces) + len(workload.training)
    # Pipelines' GPU steps are runs of the jobs table too; the pipelines themselves are waited for below.
    listed = (await store.jobs.job_page(JobFilter(), limit=total + 100)).rows
    page = [row for row in listed if row[KIND] != WORKFLOW]
    if len(page) < total or any(not JobStatus(row[STATUS]).is_terminal for row in page):
        return False
    uids = [row[UID] for row in page]
    for uid in [w.uid for w in workload.workflows] + _run_uids(workload):
        if await store.workflows.workflow_state(CLUSTER, uid) is not WorkflowState.SUMMARIZED:
            return False
    sent, _ = await store.outbox.list_notifications(DeliveryStatus.SENT, limit=500)
    if sum(1 for n in sent if n.kind is NotificationKind.MODEL_SERVING) < len(workload.services):
        return False
    states = await store.jobs.summary_states(CLUSTER, uids)
    if any(states.get(uid) in (None, SummaryState.NONE, SummaryState.AWAITING_USAGE) for uid in uids):
        return False
    pending, _ = await store.outbox.list_notifications(DeliveryStatus.PENDING, limit=1)
    return not pending


# Sent rows that are no summary: the nudges, and the Slack app's answer.
_NOT_SUMMARIES = frozenset({NotificationKind.IDLE_NUDGE, NotificationKind.BOT_REPLY})


def _report(console: Console, result: DemoResult) -> None:
    table = Table(title="What happened", show_lines=False)
    table.add_column("job")
    table.add_column("owner")
    table.add_column("outcome")
    table.add_column("GPUs")
    for job in result.workload.jobs:
        outcome = {"succeeded": "[green]succeeded[/]", "oom": "[red]OOMKilled[/]"}.get(
            job.outcome, f"[red]{job.outcome}[/]"
        )
        table.add_row(job.spec.name, job.person.name, outcome, str(job.spec.gpus))
    console.print(table)
    pipelines = Table(title="Pipelines", show_lines=False)
    pipelines.add_column("pipeline")
    pipelines.add_column("owner")
    pipelines.add_column("steps")
    for wf in result.workload.workflows:
        steps = ", ".join(f"{s.name} ({s.gpus} GPU)" if s.gpus else s.name for s in wf.steps)
        pipelines.add_row(f"Argo workflow {wf.name}", wf.owner or "", steps)
    for run in result.workload.dag_runs:
        tasks = ", ".join(
            f"{t.name} ({t.gpus} GPU, {len(t.attempts)} tries)" if t.gpus else t.name for t in run.tasks
        )
        pipelines.add_row(f"Airflow DAG run {run.dag_id} {run.run_id}", run.owner or "", tasks)
    for tr in result.workload.training:
        roles = ", ".join(f"{r.name} × {r.replicas} ({r.gpus} GPUs each)" for r in tr.roles)
        pipelines.add_row(f"{tr.kind} {tr.namespace}/{tr.name}", tr.owner or "", roles)
    for svc in result.workload.services:
        pipelines.add_row(
            f"KServe {svc.namespace}/{svc.name}", svc.owner or "", f"trained by {svc.trained_by}"
        )
    console.print(pipelines)
    if result.nudges:
        nudges = Table(title="Nudged while running: GPUs idling (report only, nothing was stopped)")
        nudges.add_column("to")
        nudges.add_column("what")
        for recipient, headline in result.nudges:
            nudges.add_row(Text(recipient), Text(headline))
        console.print(nudges)
    console.print(
        f"[bold]{result.summaries_sent}[/] job summaries and [bold]{len(result.nudges)}[/] idle nudges "
        f"delivered in [bold]{result.messages}[/] e-mails to {len(result.recipients)} people in "
        f"{result.seconds:.0f} s ({result.workflow_summaries} of the summaries for pipelines: one per "
        "workflow, one per model serving)."
    )
    for title, text in result.budget_alerts:
        console.rule("[bold]budget alert[/]")
        console.print(Text(f"{title}\n{text}"))
    for team, (text, page) in result.digests.items():
        console.rule(f"[bold]weekly digest · {team}[/]")
        console.print(Text(text.strip()))
        console.print(f"Page: {page}")
    if result.personal_page is not None:
        console.print(f"A researcher's own page (the footer link of every message): {result.personal_page}")
    if result.slack is not None:
        exchange = result.out / "slack-inno-status.txt"
        console.print(f"Their {result.slack.command} in Slack and the app's answer: {exchange}")
    console.print(f"E-mails (.eml and .html): {result.out / 'mail'}")
    console.print(f"Database: {result.database_url}")
