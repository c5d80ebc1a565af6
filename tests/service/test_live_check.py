"""The live check end to end: pods ingested from Kubernetes objects (Coder's and JupyterHub's own labels
among them), a real Prometheus filled by promtool, the store on both dialects, nudges routed into
the outbox, suppressed across a restart, and sent by the dispatcher through a real SMTP server."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from inno_notify.adapters.channels.email import EmailSender
from inno_notify.adapters.db import Store
from inno_notify.adapters.prometheus.client import ClientConfig, PrometheusClient
from inno_notify.adapters.prometheus.live_meter import LiveConfig, LiveMeter
from inno_notify.domain.live import findings_from_payload, parse_quiet_hours
from inno_notify.domain.model import DeliveryStatus, DirectoryUser, NotificationKind, WorkloadKind
from inno_notify.runtime.configuration import parse_config, seed_directory
from inno_notify.service.dispatcher import Dispatcher
from inno_notify.service.ingest import IngestOptions, Ingestor
from inno_notify.service.live_check import LiveCheck, LiveOptions
from inno_notify.settings import Settings
from inno_notify.telemetry import Telemetry
from tests.adapters.channels.fake_smtp import RecordingHandler
from tests.adapters.prometheus import live_scenario as scenario
from tests.adapters.prometheus.promserver import HAVE_PROMETHEUS, PrometheusServer
from tests.service.support import FakeClock, all_rows, renderer

NOW = datetime.fromtimestamp(scenario.NOW, tz=UTC)
CODER_OWNER = "bob@example.com"
# The JupyterHub capture's user name is the local part of this directory user's e-mail.
JHUB_OWNER = "j51000101@uni.example"
POD_OWNER = "carol@example.com"
SETTINGS = Settings.model_validate(
    {
        "cluster": "lab",
        "prometheus": {"scrape_interval_seconds": scenario.SCRAPE},
        "accounting": {"gpu_resources": {"nvidia.com/gpu": 1.0, "nvidia.com/mig-3g.40gb": 3 / 7}},
        "directory": {
            "users": [
                {"email": CODER_OWNER, "channels": ["email"]},
                {"email": JHUB_OWNER, "channels": ["email"]},
                {"email": POD_OWNER, "channels": ["email"]},
            ]
        },
    }
)


def ts(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def coder_labels(captures: Path) -> dict[str, str]:
    """The pod template labels of Coder's Kubernetes template, its Terraform expressions filled in."""
    capture = json.loads((captures / "coder" / "kubernetes-template-workspace-labels.json").read_text())
    labels = capture["kubernetes_deployment.main"]["spec"]["template"]["metadata"]["labels"]
    values = {
        "${data.coder_workspace.me.id}": "7c1d0a4e-2f6b-4a8e-9d3c-5b1e2f3a4c5d",
        "${data.coder_workspace.me.name}": "dev",
        "${data.coder_workspace_owner.me.id}": "0e9a1b2c-3d4e-4f5a-8b6c-7d8e9f0a1b2c",
        "${data.coder_workspace_owner.me.name}": "bob",
    }

    def fill(value: str) -> str:
        for expression, real in values.items():
            value = value.replace(expression, real)
        return value

    return {key: fill(value) for key, value in labels.items()}


def pod_object(pod: scenario.LivePod, labels: dict[str, str], annotations: dict[str, str]) -> dict[str, Any]:
    gpus = pod.trace.gpus
    resource = "nvidia.com/mig-3g.40gb" if gpus[0].gpu.mig_profile else "nvidia.com/gpu"
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": pod.name,
            "namespace": pod.namespace,
            "uid": pod.uid,
            "creationTimestamp": ts(pod.trace.start - 5),
            "labels": labels,
            "annotations": annotations,
        },
        "spec": {
            "nodeName": gpus[0].gpu.host,
            "restartPolicy": "Always",
            "containers": [{"name": "main", "resources": {"limits": {resource: str(len(gpus))}}}],
        },
        "status": {
            "phase": "Running",
            "startTime": ts(pod.trace.start),
            "conditions": [
                {"type": "PodScheduled", "status": "True", "lastTransitionTime": ts(pod.trace.start)}
            ],
        },
    }


def cluster_objects(captures: Path) -> list[dict[str, Any]]:
    jhub = json.loads(
        (captures / "jupyterhub" / "singleuser-pod-metadata-z2jh-3.3.8-excerpt.json").read_text()
    )["metadata"]
    objects = []
    for pod in scenario.pods():
        if pod.name.startswith("coder-"):
            obj = pod_object(pod, coder_labels(captures), {})
            # A Deployment's pod: owned by its ReplicaSet, which the bare-pod rule leaves alone.
            obj["metadata"]["ownerReferences"] = [
                {
                    "apiVersion": "apps/v1",
                    "kind": "ReplicaSet",
                    "name": "coder-7c1d0a4e-5d8b9",
                    "uid": "rs-1",
                    "controller": True,
                }
            ]
        elif pod.name.startswith("jupyter-"):
            obj = pod_object(pod, dict(jhub["labels"]), dict(jhub["annotations"]))
        else:
            annotations = {"inno-notify/owner": POD_OWNER}
            if pod.name == "opted-out":
                annotations["inno-notify/notify"] = "never"
            obj = pod_object(pod, {"app": pod.name}, annotations)
        objects.append(obj)
    return objects


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrometheusServer]:
    if not HAVE_PROMETHEUS:
        pytest.skip("prometheus/promtool not installed")
    with scenario.serve(tmp_path_factory.mktemp("live-service")) as server:
        yield server


@pytest.fixture
async def meter(prometheus: PrometheusServer) -> AsyncIterator[LiveMeter]:
    meter = LiveMeter(
        PrometheusClient(ClientConfig(url=prometheus.url)),
        LiveConfig(scrape_interval_seconds=scenario.SCRAPE),
    )
    yield meter
    meter.client.close()


@pytest.fixture
async def ingested(store: Store, captures: Path) -> Store:
    """The scenario's pods as the watchers would hand them over, through the real ingestion."""
    await seed_directory(store, SETTINGS)
    clock = FakeClock(NOW)
    ingestor = Ingestor(store, parse_config(SETTINGS), IngestOptions(), clock, NOW)
    await ingestor.apply([("Pod", "ADDED", obj) for obj in cluster_objects(captures)])
    assert ingestor.stats.rejected == 0
    return store


def options(**changes: Any) -> LiveOptions:
    base = LiveOptions(cluster="lab", scrape_interval_seconds=scenario.SCRAPE)
    return LiveOptions(**{**{f: getattr(base, f) for f in base.__dataclass_fields__}, **changes})


def check(store: Store, meter: LiveMeter, **changes: Any) -> LiveCheck:
    return LiveCheck(store, meter, options(**changes), FakeClock(NOW), {"email"})


async def test_rounds_and_nudges_are_counted_in_the_metrics(ingested: Store, meter: LiveMeter) -> None:
    telemetry = Telemetry.create(CollectorRegistry())
    stop = asyncio.Event()

    async def one_round_then_stop(_seconds: float) -> None:
        stop.set()

    live = LiveCheck(
        ingested,
        meter,
        options(),
        FakeClock(NOW),
        {"email"},
        sleep=one_round_then_stop,
        telemetry=telemetry,
    )
    await live.run(stop)

    registry = telemetry.registry
    assert registry.get_sample_value("inno_notify_live_rounds_total", {"outcome": "ok"}) == 1
    assert registry.get_sample_value("inno_notify_nudges_total") == live.stats.nudges > 0


def expected_idle() -> dict[str, scenario.LivePod]:
    return {p.uid: p for p in scenario.pods() if p.idle_gpus}


async def test_workspaces_are_recorded_with_their_platform_owners(ingested: Store) -> None:
    running = {pod.name: job for job, pod in await ingested.live.running_gpu_pods("lab")}
    assert running["coder-ws-gpu"].kind is WorkloadKind.WORKSPACE
    assert running["coder-ws-gpu"].owner == CODER_OWNER  # com.coder.user.username "bob" via the directory
    assert running["jupyter-j51000101"].kind is WorkloadKind.WORKSPACE
    assert running["jupyter-j51000101"].owner == JHUB_OWNER  # hub.jupyter.org/username, a local part
    assert running["idle-from-start"].kind is WorkloadKind.POD
    assert len(running) == len(scenario.pods())


async def test_a_round_nudges_each_idle_pod_once_except_the_opted_out(
    ingested: Store, meter: LiveMeter
) -> None:
    live = check(ingested, meter)
    result = await live.run_once(NOW)

    idle = expected_idle()
    opted_out = next(p.uid for p in scenario.pods() if p.name == "opted-out")
    # The opted-out pod is not even looked at.
    assert {f.pod_uid for f in result.findings} == set(idle) - {opted_out}
    assert (result.opted_out, result.silent) == (1, 0)
    assert meter.last_queries == 4
    assert set(result.nudged) == set(idle) - {opted_out}

    rows = await all_rows(ingested)
    assert all(r.kind is NotificationKind.IDLE_NUDGE for r in rows)
    # One row per recipient and channel, listing all that person's idle pods (issue 29).
    assert len({(r.recipient, r.channel) for r in rows}) == len(rows)
    listed = [(f, r.recipient) for r in rows for f in findings_from_payload(r.payload)[0]]
    assert {f.pod_uid for f, _ in listed} == set(idle) - {opted_out}
    recipients = {f.pod: recipient for f, recipient in listed}
    assert recipients["coder-ws-gpu"] == CODER_OWNER
    assert recipients["jupyter-j51000101"] == JHUB_OWNER
    assert recipients["busy-then-idle"] == POD_OWNER
    for finding, _ in listed:
        pod = idle[finding.pod_uid]
        assert len(finding.idle) == pod.idle_gpus
        assert abs(finding.idle_since.timestamp() - (pod.idle_since or 0)) <= 60
        assert finding.memory_held is pod.memory_held
    coder = next(f for f, recipient in listed if recipient == CODER_OWNER)
    assert (coder.platform, coder.platform_user, coder.workspace_name) == ("coder", "bob", "dev")


async def test_a_restart_does_not_nudge_again_within_repeat_hours(
    ingested: Store, meter: LiveMeter, database_url: str
) -> None:
    first = await check(ingested, meter).run_once(NOW - timedelta(minutes=20))
    assert first.rows > 0
    # A new process: a fresh store and check on the same database.
    restarted = Store.from_url(database_url)
    try:
        again = await check(restarted, meter).run_once(NOW)
        assert again.rows == 0 and again.nudged == () and again.findings == ()
        assert again.recently_nudged == len(first.nudged)
        # Past the period, the same pods are nudged again (a new row per pod and channel).
        later = await check(restarted, meter, repeat_hours=0.25).run_once(NOW)
        assert set(later.nudged) == set(first.nudged)
        assert later.rows == first.rows
    finally:
        await restarted.close()


async def test_quiet_hours_plan_no_nudge(ingested: Store, meter: LiveMeter) -> None:
    # NOW is 08:00 UTC.
    quiet = await check(ingested, meter, quiet_hours=parse_quiet_hours("07:30-09:00")).run_once(NOW)
    assert quiet.quiet and quiet.rows == 0
    assert await all_rows(ingested) == []
    awake = await check(ingested, meter, quiet_hours=parse_quiet_hours("22:00-07:59")).run_once(NOW)
    assert not awake.quiet and awake.rows > 0


async def test_the_dispatcher_sends_the_nudges(
    ingested: Store, meter: LiveMeter, smtp_server: tuple[RecordingHandler, int]
) -> None:
    handler, port = smtp_server
    await check(ingested, meter).run_once(NOW)
    sender = EmailSender("127.0.0.1", "inno@example.com", port=port, starttls=False)
    clock = FakeClock(NOW)
    try:
        dispatcher = Dispatcher(ingested, {"email": sender}, renderer(), clock=clock, sleep=clock.sleep)
        sent = await dispatcher.run_once(NOW)
    finally:
        await sender.aclose()
    rows = await all_rows(ingested)
    assert sent == len(rows) and all(r.status is DeliveryStatus.SENT for r in rows)
    mails = [r.message for r in handler.received]
    subjects = {str(m["Subject"]) for m in mails}
    # Its last busy sample was 15 s before the hour ended; "last busy" is read at the subquery's
    # one-minute steps, so the idle time reads up to a minute longer.
    # Carol's idle pods come in one message (issue 29), each under its own headline.
    assert "[inno-notify] 6 of your pods hold idle GPUs" in subjects
    carol = next(m for m in mails if "6 of your pods" in str(m["Subject"]))
    body = carol.get_body(("plain",)).get_content()  # type: ignore[union-attr]
    assert any(f"busy-then-idle: its GPU idle for {t}" in body for t in ("2 h", "2 h 1 min")), body[:3000]
    assert body.count("To release them") == 6
    assert "[inno-notify] workspace dev: its GPU idle for 3 h" in subjects
    jhub = next(m for m in mails if "JupyterHub" in str(m["Subject"]))
    text = jhub.get_body(("plain",)).get_content()  # type: ignore[union-attr]
    assert "GPU memory is allocated" in text and "Hub Control Panel" in text
    assert "never stops or changes your workload" in text


async def test_a_directory_user_added_later_is_reached(ingested: Store, meter: LiveMeter) -> None:
    """The directory is read each round: a user added through the API gets her channels at once."""
    await ingested.directory.upsert_user(
        DirectoryUser(POD_OWNER, channels=("email", "slack"), slack_user_id="U1")
    )
    live = LiveCheck(ingested, meter, options(), FakeClock(NOW), {"email", "slack"})
    await live.run_once(NOW)
    channels = {r.channel.value for r in await all_rows(ingested) if r.recipient == POD_OWNER}
    assert channels == {"email", "slack"}


async def test_a_person_who_turned_nudges_off_gets_none_on_any_channel(
    ingested: Store, meter: LiveMeter
) -> None:
    """Issue 29: a per-person opt-out (`/nudges off`, the API's `nudges` preference)."""
    from inno_notify.domain.preferences import Origin, Via

    await ingested.directory.change_preferences(
        CODER_OWNER, NOW, changes={"nudges": False}, origin=Origin(Via.API, NOW, "ops")
    )
    result = await check(ingested, meter).run_once(NOW)
    rows = await all_rows(ingested)
    assert rows and CODER_OWNER not in {r.recipient for r in rows}
    assert result.silent == 1  # the coder workspace: idle, and its owner asked for no nudges
    user = await ingested.directory.get_user(CODER_OWNER)
    assert user is not None and user.nudges is False
