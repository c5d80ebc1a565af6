"""`serve` assembled from settings: watch → store → REST API, against the simulated cluster."""

from __future__ import annotations

import asyncio
import hashlib
import signal
import socket
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from inno_notify.api.probes import ProbesBindError
from inno_notify.runtime import serve
from inno_notify.settings import Settings
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
from tests import waiting

TOKEN = "test-admin-token"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


async def get_json(session: aiohttp.ClientSession, url: str) -> tuple[int, Any]:
    async with session.get(url, headers={"Authorization": f"Bearer {TOKEN}"}) as response:
        return response.status, await response.json(content_type=None)


async def eventually(session: aiohttp.ClientSession, url: str, accept: Any, within: float = 20.0) -> Any:
    """Polls an endpoint of the running service until it answers 200 and `accept(body)` holds."""
    answered: list[Any] = []

    async def answers() -> bool:
        try:
            status, body = await get_json(session, url)
        except aiohttp.ClientConnectionError:
            return False  # not listening yet
        if status == 200 and accept(body):
            answered.append(body)
            return True
        return False

    await waiting.eventually(answers, within=within, what=f"an accepted answer from {url}")
    return answered[-1]


async def test_serve_watches_stores_and_answers_the_api(tmp_path: Path) -> None:
    sim = SimKubeServer(bookmark_interval=1.0)
    await sim.start()
    port = free_port()
    settings = Settings.model_validate(
        {
            "database_url": f"sqlite+aiosqlite:///{tmp_path / 'serve.db'}",
            "probes": {"listen": f"127.0.0.1:{free_port()}"},
            "cluster": "it",
            "kubernetes": {"kubeconfig": str(sim.kubeconfig(tmp_path / "kubeconfig")), "kueue": False},
            # Nothing listens there: usage collection retries quietly; the watch path is under test.
            "prometheus": {"url": "http://127.0.0.1:9", "metrics_delay_seconds": 0},
            "api": {
                "listen": f"127.0.0.1:{port}",
                "tokens": [
                    {"name": "t", "sha256": hashlib.sha256(TOKEN.encode()).hexdigest(), "role": "admin"}
                ],
            },
            "directory": {"teams": [{"name": "face", "namespaces": ["face-research"]}]},
        }
    )
    stop = asyncio.Event()
    service = asyncio.create_task(serve(settings, stop))
    base = f"http://127.0.0.1:{port}"
    try:
        async with aiohttp.ClientSession() as session:
            await eventually(session, f"{base}/readyz", lambda body: True)
            now = datetime.now(UTC).replace(microsecond=0)
            spec = JobSpec(name="train-e2e", namespace="face-research", owner="alice@example.com", gpus=2)
            job = sim.create(JOBS, job_started(job_object(spec, now - timedelta(minutes=10)), now))
            pod = sim.create(PODS, pod_object(job, "abcde", now - timedelta(minutes=10)))
            running = sim.update(PODS, pod_running(pod, "gpu-1", now - timedelta(minutes=9), now))
            sim.update(PODS, pod_terminated(running, now, 0))
            sim.update(JOBS, job_succeeded(job, now + timedelta(seconds=1)))

            body = await eventually(
                session,
                f"{base}/api/v1/jobs?team=face",
                lambda b: any(item["status"] == "succeeded" for item in b["items"]),
            )
            item = body["items"][0]
            assert (item["name"], item["owner"], item["team"]) == ("train-e2e", "alice@example.com", "face")
            assert item["requested"]["gpus"] == 2.0
            assert item["exit_code"] == 0

            async with session.get(f"{base}/metrics") as response:
                metrics = await response.text()
            assert 'inno_notify_watch_events_total{resource="Job",type="MODIFIED"}' in metrics
            assert "inno_notify_outbox_depth" in metrics and "inno_notify_sends_total" in metrics
    finally:
        stop.set()
        await asyncio.wait_for(service, timeout=10)
        await sim.stop()


async def test_serve_without_kubernetes_is_not_ready_and_says_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No kubeconfig anywhere and not in a cluster: `serve` still starts (the demo, a first look at
    the probes), but no watcher runs, so /readyz answers 503 naming the missing configuration (it
    answered 200 while no job could ever be watched)."""
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.kube/config
    probes_port = free_port()
    settings = Settings.model_validate(
        {
            "database_url": f"sqlite+aiosqlite:///{tmp_path / 'nokube.db'}",
            "prometheus": {"url": "http://127.0.0.1:9"},
            "api": {"listen": ""},
            "probes": {"listen": f"127.0.0.1:{probes_port}"},
        }
    )
    stop = asyncio.Event()
    service = asyncio.create_task(serve(settings, stop))
    answers: list[tuple[int, Any]] = []

    async def leading() -> bool:
        # Answered once this instance leads (its dispatcher runs): only the missing cluster is left.
        try:
            status, body = await get_json(session, f"http://127.0.0.1:{probes_port}/readyz")
        except aiohttp.ClientConnectionError:
            return False
        answers.append((status, body))
        return bool(body["checks"].get("dispatcher_alive"))

    try:
        async with aiohttp.ClientSession() as session:
            await waiting.eventually(leading, within=30, what="/readyz of the leading instance")
            status, body = answers[-1]
            assert status == 503
            assert body["ready"] is False and body["not_ready"] == ["kubernetes_configured"]
            assert body["checks"]["database"] is True
            async with session.get(f"http://127.0.0.1:{probes_port}/healthz") as response:
                assert response.status == 200
    finally:
        stop.set()
        await asyncio.wait_for(service, timeout=10)


async def test_serve_without_api_tokens_answers_probes_on_their_own_port(tmp_path: Path) -> None:
    """No api.tokens: the admin API stays off (fail closed), yet kubelet and Prometheus get their
    answers on probes.listen, with no token."""
    sim = SimKubeServer(bookmark_interval=1.0)
    await sim.start()
    probes_port, api_port = free_port(), free_port()
    settings = Settings.model_validate(
        {
            "database_url": f"sqlite+aiosqlite:///{tmp_path / 'probes.db'}",
            "kubernetes": {"kubeconfig": str(sim.kubeconfig(tmp_path / "kubeconfig")), "kueue": False},
            "prometheus": {"url": "http://127.0.0.1:9"},
            "api": {"listen": f"127.0.0.1:{api_port}"},
            "probes": {"listen": f"127.0.0.1:{probes_port}"},
        }
    )
    stop = asyncio.Event()
    service = asyncio.create_task(serve(settings, stop))
    base = f"http://127.0.0.1:{probes_port}"
    try:
        async with aiohttp.ClientSession() as session:
            ready = await eventually(session, f"{base}/readyz", lambda body: body["ready"])
            assert ready["not_ready"] == [] and ready["checks"]["database"] is True
            async with session.get(f"{base}/healthz") as response:
                assert (response.status, await response.json()) == (200, {"status": "ok"})
            async with session.get(f"{base}/metrics") as response:
                assert response.status == 200
                assert "# TYPE inno_notify_outbox_depth gauge" in await response.text()
            # Nothing else is routed on the probe port, and the API did not start without tokens.
            async with session.get(f"{base}/api/v1/jobs") as response:
                assert response.status == 404
            try:
                async with session.get(f"http://127.0.0.1:{api_port}/healthz") as response:
                    pytest.fail(f"the API answered ({response.status}) although it has no tokens")
            except aiohttp.ClientConnectionError:
                pass
    finally:
        stop.set()
        await asyncio.wait_for(service, timeout=10)
        await sim.stop()


async def test_serve_stops_at_once_when_the_probe_port_is_taken(tmp_path: Path) -> None:
    sim = SimKubeServer()
    await sim.start()
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        settings = Settings.model_validate(
            {
                "database_url": f"sqlite+aiosqlite:///{tmp_path / 'taken.db'}",
                "kubernetes": {"kubeconfig": str(sim.kubeconfig(tmp_path / "kubeconfig")), "kueue": False},
                "api": {"listen": ""},
                "probes": {"listen": f"127.0.0.1:{port}"},
            }
        )
        try:
            with pytest.raises(ProbesBindError, match=f"probes: cannot listen on 127.0.0.1:{port}"):
                await asyncio.wait_for(serve(settings, asyncio.Event()), timeout=30)
        finally:
            await sim.stop()


@pytest.mark.postgres
@pytest.mark.filterwarnings("ignore:Requiring AUTH while not requiring TLS:UserWarning")  # loopback only
async def test_no_secret_reaches_the_log(tmp_path: Path) -> None:
    """`serve` as a process, at DEBUG with JSON logs, with every kind of secret set (API token,
    Telegram and Slack tokens, SMTP password, database password) and every channel used, one of
    them failing first: its whole log output contains none of them."""
    import json
    import os
    import secrets
    import sys

    from aiosmtpd.smtp import AuthResult, LoginPassword

    from tests.adapters.channels import fake_slack, fake_smtp, fake_telegram
    from tests.db_support import create_postgres_database, drop_postgres_database

    api_token = f"api-{secrets.token_hex(12)}"
    telegram_token = f"424242:{secrets.token_hex(12)}"
    slack_token = f"xoxb-{secrets.token_hex(12)}"
    smtp_password = f"smtp-{secrets.token_hex(12)}"
    db_password = f"db-{secrets.token_hex(12)}"
    known = {"API": api_token, "Telegram": telegram_token, "Slack": slack_token}
    known |= {"SMTP": smtp_password, "database": db_password}

    def smtp_login(server: Any, session: Any, envelope: Any, mechanism: str, data: Any) -> AuthResult:
        ok = isinstance(data, LoginPassword) and data.password == smtp_password.encode()
        return AuthResult(success=ok, handled=False)

    telegram = fake_telegram.FakeTelegram(token=telegram_token, chats={4242})
    telegram.scripted.append((502, fake_telegram.BAD_GATEWAY_HTML))  # a retry, and its error logged
    slack = fake_slack.FakeSlack(token=slack_token, users={"alice@example.com": "U0ALICE"})
    mail = fake_smtp.RecordingHandler()
    smtp = fake_smtp.start(mail, authenticator=smtp_login, auth_require_tls=False, auth_required=True)
    telegram_server = await fake_telegram.start(telegram)
    slack_server = await fake_slack.start(slack)
    sim = SimKubeServer(bookmark_interval=1.0)
    await sim.start()
    database_url = await create_postgres_database("logs")
    for name, value in (("telegram", telegram_token), ("smtp", smtp_password), ("db", db_password)):
        (tmp_path / name).write_text(value + "\n")
    api_port, probes_port = free_port(), free_port()
    email = {"host": "127.0.0.1", "port": smtp.port, "starttls": False, "sender": "bot@example.org"}
    email |= {"username": "notify", "password_file": str(tmp_path / "smtp")}
    alice = {"email": "alice@example.com", "slack_user_id": "U0ALICE", "telegram_chat_id": 4242}
    alice["channels"] = ["telegram", "slack", "email"]
    ops = {"name": "ops", "sha256": hashlib.sha256(api_token.encode()).hexdigest(), "role": "admin"}
    config = {
        "database_url": database_url,
        "database_password_file": str(tmp_path / "db"),
        "kubernetes": {"kubeconfig": str(sim.kubeconfig(tmp_path / "kubeconfig")), "kueue": False},
        "prometheus": {"url": "http://127.0.0.1:9", "metrics_delay_seconds": 0, "give_up_after_seconds": 0},
        "notify": {"group_wait_seconds": 0},
        "channels": {
            "telegram": {
                "token_file": str(tmp_path / "telegram"),
                "api_url": str(telegram_server.make_url("")).rstrip("/"),
            },
            "slack": {"api_url": str(slack_server.make_url("/api/"))},
            "email": email,
        },
        "directory": {"users": [alice], "teams": [{"name": "face", "namespaces": ["face-research"]}]},
        "api": {"listen": f"127.0.0.1:{api_port}", "tokens": [ops]},
        "probes": {"listen": f"127.0.0.1:{probes_port}"},
    }
    (tmp_path / "config.yaml").write_text(json.dumps(config))  # JSON is YAML
    env = {k: v for k, v in os.environ.items() if not k.startswith("INNO_NOTIFY_")}
    env |= {"INNO_NOTIFY_LOG_FORMAT": "json", "INNO_NOTIFY_LOG_LEVEL": "DEBUG"}
    env["INNO_NOTIFY_CHANNELS__SLACK__TOKEN"] = slack_token  # a secret through the environment too
    log_path = tmp_path / "serve.log"
    with log_path.open("w") as log_file:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "inno_notify", "serve", "--config", str(tmp_path / "config.yaml"),
            cwd=tmp_path, env=env, stdout=log_file, stderr=log_file,
        )  # fmt: skip
    try:
        async with aiohttp.ClientSession() as session:
            probes = f"http://127.0.0.1:{probes_port}"
            await eventually(session, f"{probes}/readyz", lambda body: body["ready"], within=60)
            now = datetime.now(UTC).replace(microsecond=0)
            spec = JobSpec(name="train-logs", namespace="face-research", owner="alice@example.com", gpus=1)
            job = sim.create(JOBS, job_started(job_object(spec, now - timedelta(minutes=10)), now))
            pod = sim.create(PODS, pod_object(job, "abcde", now - timedelta(minutes=10)))
            running = sim.update(PODS, pod_running(pod, "gpu-1", now - timedelta(minutes=9), now))
            sim.update(PODS, pod_terminated(running, now, 0))
            sim.update(JOBS, job_succeeded(job, now + timedelta(seconds=1)))
            await waiting.eventually(
                lambda: bool(telegram.sent() and slack.posted() and mail.received),
                within=60,
                what="the summary on Telegram, Slack and e-mail",
            )
            base = f"http://127.0.0.1:{api_port}"
            bearer = {"Authorization": f"Bearer {api_token}"}
            async with session.get(f"{base}/api/v1/jobs", headers=bearer) as response:
                assert (await response.json())["items"][0]["name"] == "train-logs"
            wrong = {"Authorization": "Bearer wrong"}
            async with session.get(f"{base}/api/v1/jobs", headers=wrong) as response:
                assert response.status == 401
        proc.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(proc.wait(), timeout=30) == 0
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
        await sim.stop()
        await telegram_server.close()
        await slack_server.close()
        smtp.stop()
        await drop_postgres_database(database_url)
    assert [chat for chat, _ in telegram.sent()] == [4242]  # after the 502 and a retry
    assert {c.token for c in telegram.calls} == {telegram_token}
    log = log_path.read_text()
    lines = log.splitlines()
    assert len(lines) > 20 and all(isinstance(json.loads(line), dict) for line in lines), log[-2000:]
    assert any("will be retried" in line for line in lines), "the Telegram 502 was not logged"
    for what, secret in known.items():
        assert secret not in log, f"the {what} secret appears in the log"
        assert secret.split(":")[-1] not in log, f"part of the {what} secret appears in the log"


@pytest.mark.postgres
@pytest.mark.parametrize("moment", ["migrating", "before_the_loop"])
async def test_sigterm_during_start_up_ends_serve_with_exit_0(tmp_path: Path, moment: str) -> None:
    """`serve` as a process, held in its start-up by the test: its database migration waits on the
    migration lock the test holds (what another replica's migration looks like). A SIGTERM then
    ends it at once, exit 0, without the lock ever being released. `before_the_loop`: the SIGTERM
    comes while the process is still importing and reading its settings (it waits on a config file
    that is a FIFO the test has not written yet), before any event loop runs."""
    import json
    import os
    import sys

    from asyncpg import connect
    from sqlalchemy import make_url

    from inno_notify.adapters.db.migrate import _PG_MIGRATE_LOCK
    from tests.db_support import create_postgres_database, drop_postgres_database

    database_url = await create_postgres_database("sigterm")
    plain = make_url(database_url).set(drivername="postgresql").render_as_string(hide_password=False)
    config = {
        "database_url": database_url,
        "kubernetes": {"kubeconfig": None},
        "api": {"listen": f"127.0.0.1:{free_port()}"},
        "probes": {"listen": f"127.0.0.1:{free_port()}"},
    }
    config_path = tmp_path / "config.yaml"
    if moment == "before_the_loop":
        os.mkfifo(config_path)  # opening it for reading blocks until the test opens it for writing
    else:
        config_path.write_text(json.dumps(config))
    env = {k: v for k, v in os.environ.items() if not k.startswith("INNO_NOTIFY_")}
    env |= {"KUBECONFIG": str(tmp_path / "no-kubeconfig")}
    holder = await connect(plain)
    log_path = tmp_path / "serve.log"
    proc = None
    try:
        await holder.execute("SELECT pg_advisory_lock($1)", _PG_MIGRATE_LOCK)
        with log_path.open("w") as log_file:
            proc = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "inno_notify", "serve", "--config", str(config_path),
                cwd=tmp_path, env=env, stdout=log_file, stderr=log_file,
            )  # fmt: skip
        if moment == "before_the_loop":
            # The process blocks opening the FIFO until a writer opens it; the SIGTERM comes while
            # it reads its settings, and the settings arrive only after it.
            writer = await asyncio.to_thread(os.open, config_path, os.O_WRONLY)
            proc.send_signal(signal.SIGTERM)
            os.write(writer, json.dumps(config).encode())
            os.close(writer)
        else:
            waiting_sql = "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted"

            async def migration_waits() -> bool:
                return bool(await holder.fetchval(waiting_sql))

            await waiting.eventually(migration_waits, within=60, what="serve's migration waiting on the lock")
            proc.send_signal(signal.SIGTERM)
        code = await asyncio.wait_for(proc.wait(), timeout=30)
        assert code == 0, log_path.read_text()[-3000:]
    finally:
        if proc is not None and proc.returncode is None:
            proc.kill()
            await proc.wait()
        await holder.close()
        await drop_postgres_database(database_url)
    assert "stopping during start-up" in log_path.read_text()
