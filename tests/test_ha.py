"""`serve` with high availability: when election runs, two replicas in one process on Postgres (one
leads, the other serves the API and is ready; a stop hands over), and SQLite's one instance per
database file, as the command line reports it."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import sys
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from inno_notify.runtime import election_enabled, serve
from inno_notify.service.single_instance import AlreadyServing, single_instance, sqlite_file
from inno_notify.settings import ConfigError, Settings
from inno_notify.sim.kube_api import SimKubeServer
from tests.test_serve import eventually, free_port

REPO = Path(__file__).resolve().parents[1]
SQLITE = "sqlite+aiosqlite:///x.db"
POSTGRES = "postgresql+asyncpg://postgres@127.0.0.1/x"


@pytest.mark.parametrize(
    ("url", "enabled", "elects"),
    [
        (SQLITE, "auto", False),
        (SQLITE, False, False),
        (POSTGRES, "auto", True),
        (POSTGRES, True, True),
        (POSTGRES, False, False),
        (SQLITE, True, ConfigError),
    ],
)
def test_election_runs_with_postgres_unless_turned_off(url: str, enabled: Any, elects: Any) -> None:
    settings = Settings.model_validate({"database_url": url, "ha": {"enabled": enabled}})
    if elects is ConfigError:
        with pytest.raises(ConfigError, match=r"ha\.enabled: true needs Postgres"):
            election_enabled(settings)
    else:
        assert election_enabled(settings) is elects


def test_the_lock_file_lies_beside_the_sqlite_file(tmp_path: Path) -> None:
    assert sqlite_file(f"sqlite+aiosqlite:///{tmp_path}/a.db?timeout=5") == tmp_path / "a.db"
    assert sqlite_file("sqlite+aiosqlite:///relative.db") == Path("relative.db")
    assert sqlite_file("sqlite+aiosqlite://") is None
    assert sqlite_file("sqlite+aiosqlite:///:memory:") is None
    assert sqlite_file(POSTGRES) is None
    url = f"sqlite+aiosqlite:///{tmp_path}/a.db"
    with single_instance(url) as lock:
        assert lock == tmp_path / "a.db.lock"
        with pytest.raises(AlreadyServing, match=f"pid {os.getpid()}"), single_instance(url):
            pass
    with single_instance(url):  # released with its holder
        pass


def _probes_metric(text: str, name: str) -> float:
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    raise AssertionError(f"{name} not exported")


async def _leader(session: aiohttp.ClientSession, port: int) -> float:
    async with session.get(f"http://127.0.0.1:{port}/metrics") as response:
        return _probes_metric(await response.text(), "inno_notify_leader")


@pytest.mark.postgres
async def test_two_replicas_one_leader_the_follower_serves_and_a_stop_hands_over(
    postgres_session_database: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from tests.db_support import truncate_all

    await truncate_all(postgres_session_database)
    sim = SimKubeServer(bookmark_interval=1.0)
    await sim.start()
    kubeconfig = str(sim.kubeconfig(tmp_path / "kubeconfig"))
    ports = {name: free_port() for name in ("a", "b")}

    def settings(name: str) -> Settings:
        return Settings.model_validate(
            {
                "database_url": postgres_session_database,
                "kubernetes": {"kubeconfig": kubeconfig, "kueue": False},
                "prometheus": {"url": "http://127.0.0.1:9"},
                "api": {"listen": ""},
                "probes": {"listen": f"127.0.0.1:{ports[name]}"},
                # A 60 s lease: the follower can only take over this fast because a stop releases it.
                "ha": {
                    "identity": name,
                    "lease_seconds": 60,
                    "renew_deadline_seconds": 40,
                    "retry_period_seconds": 0.2,
                },
            }
        )

    stops = {name: asyncio.Event() for name in ports}
    services = {"a": asyncio.create_task(serve(settings("a"), stops["a"]))}
    try:
        async with aiohttp.ClientSession() as session:
            probes_a = f"http://127.0.0.1:{ports['a']}"
            # Ready as a follower first (it can serve the API), then as the leader with its parts.
            ready = await eventually(
                session, f"{probes_a}/readyz", lambda b: b["ready"] and "watch:Job" in b["checks"], within=30
            )
            assert {"database", "watch:Job", "dispatcher_alive"} <= set(ready["checks"])
            services["b"] = asyncio.create_task(serve(settings("b"), stops["b"]))
            probes_b = f"http://127.0.0.1:{ports['b']}"
            follower = await eventually(session, f"{probes_b}/readyz", lambda b: b["ready"], within=30)
            # Ready to serve the API; the leader's parts are not its to report.
            assert follower["checks"] == {"database": True}
            assert (await _leader(session, ports["a"]), await _leader(session, ports["b"])) == (1, 0)

            stops["a"].set()
            with caplog.at_level(logging.INFO, logger="inno_notify.runtime"):
                await asyncio.wait_for(services.pop("a"), 30)
            # The ended term's reference cycles were collected at its end (inno_notify.memory).
            (ended,) = [m for r in caplog.records if (m := r.getMessage()).startswith("leader work ended")]
            assert int(ended.split(": ")[1].split()[0]) > 0, ended
            await eventually(
                session, f"{probes_b}/readyz", lambda b: "watch:Job" in b["checks"] and b["ready"]
            )
            assert await _leader(session, ports["b"]) == 1
    finally:
        for name, service in services.items():
            stops[name].set()
            await asyncio.wait_for(service, 30)
        await sim.stop()


async def test_a_second_serve_on_one_sqlite_file_refuses_with_one_line(tmp_path: Path) -> None:
    sim = SimKubeServer(bookmark_interval=1.0)
    await sim.start()
    database = tmp_path / "one.db"
    config = {
        "database_url": f"sqlite+aiosqlite:///{database}",
        "kubernetes": {"kubeconfig": str(sim.kubeconfig(tmp_path / "kubeconfig")), "kueue": False},
        "prometheus": {"url": "http://127.0.0.1:9"},
        "api": {"listen": ""},
        "probes": {"listen": f"127.0.0.1:{free_port()}"},
    }
    stop = asyncio.Event()
    first = asyncio.create_task(serve(Settings.model_validate(config), stop))
    try:
        async with aiohttp.ClientSession() as session:
            await eventually(session, f"http://{config['probes']['listen']}/readyz", lambda b: b["ready"])  # type: ignore[index]
        second = {**config, "probes": {"listen": f"127.0.0.1:{free_port()}"}}
        (tmp_path / "second.yaml").write_text(json.dumps(second))
        env = {k: v for k, v in os.environ.items() if not k.startswith("INNO_NOTIFY_")}
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "inno_notify", "serve", "--config", str(tmp_path / "second.yaml"),
            cwd=REPO, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        _, err = await asyncio.wait_for(proc.communicate(), 60)
        assert proc.returncode == 1, err.decode()
        lines = err.decode().splitlines()
        assert len(lines) == 1, lines
        assert lines[0].startswith("inno-notify: serve failed: another inno-notify serve")
        assert f"is running on {database}" in lines[0] and "use Postgres" in lines[0]
    finally:
        stop.set()
        await asyncio.wait_for(first, 30)
        await sim.stop()
