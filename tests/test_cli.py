"""The command line as a user runs it: real subprocesses, exit codes and one-line errors."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from inno_notify import __version__


def run_cli(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("INNO_NOTIFY_")}
    full_env.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "inno_notify", *args],
        cwd=cwd,
        env=full_env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_version(tmp_path: Path) -> None:
    result = run_cli("version", cwd=tmp_path)
    assert result.returncode == 0
    assert result.stdout.strip() == f"inno-notify {__version__}"


@pytest.mark.parametrize(
    ("config", "env", "expected"),
    [
        ("prometheus: {urll: x}\n", {}, "prometheus.urll: unknown key"),
        ("prometheus: {timeout_seconds: soon}\n", {}, "prometheus.timeout_seconds"),
        ("channels: {telegram: {token_file: /no/such/secret}}\n", {}, "cannot read token_file"),
        ("", {"INNO_NOTIFY_NOTIFY__NOPE": "1"}, "unknown key 'notify.nope'"),
        ("rightsizing: {warning_gpu_minutes: 900}\n", {}, "warning_gpu_minutes <= critical_gpu_minutes"),
        ("live: {workspace_selectors: ['a in (b']}\n", {}, "live: unbalanced '('"),
        ("live: {quiet_hours: '07:00-07:00'}\n", {}, "live: quiet hours '07:00-07:00' are empty"),
        ("live: {quiet_hours: '7-8'}\n", {}, "live.quiet_hours"),
        ("live: {timezone: Mars/Olympus}\n", {}, "unknown time zone"),
    ],
)
@pytest.mark.parametrize("command", ["check", "migrate", "serve"])
def test_bad_configuration_exits_2_with_one_line(
    tmp_path: Path, command: str, config: str, env: dict[str, str], expected: str
) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(config, encoding="utf-8")
    result = run_cli(command, "--config", str(path), cwd=tmp_path, env=env)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert expected in lines[0]
    assert "Traceback" not in result.stderr


def test_missing_config_file_from_environment_exits_2(tmp_path: Path) -> None:
    result = run_cli("check", cwd=tmp_path, env={"INNO_NOTIFY_CONFIG": str(tmp_path / "absent.yaml")})
    assert result.returncode == 2
    assert "absent.yaml: cannot read the configuration file" in result.stderr


def test_check_reports_unreachable_database(tmp_path: Path) -> None:
    # Port 9 (discard) on loopback: nothing listens there, the connection is refused at once.
    result = run_cli(
        "check", cwd=tmp_path, env={"INNO_NOTIFY_DATABASE_URL": "postgresql+asyncpg://u:pw@127.0.0.1:9/x"}
    )
    assert result.returncode == 1
    line = next(line for line in result.stdout.splitlines() if line.split()[1:2] == ["database"])
    assert line.startswith("fail database postgresql+asyncpg://u:***@127.0.0.1:9/x")
    assert "pw" not in result.stdout


def test_check_reaches_sqlite(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'check.db'}"
    result = run_cli("check", cwd=tmp_path, env={"INNO_NOTIFY_DATABASE_URL": url})
    assert f"ok database {url}" in result.stdout


def test_migrate_twice_on_sqlite(tmp_path: Path) -> None:
    env = {"INNO_NOTIFY_DATABASE_URL": f"sqlite+aiosqlite:///{tmp_path / 'm.db'}"}
    first = run_cli("migrate", cwd=tmp_path, env=env)
    assert first.returncode == 0, first.stderr
    assert first.stdout.startswith("applied ")
    second = run_cli("migrate", cwd=tmp_path, env=env)
    assert second.returncode == 0, second.stderr
    assert second.stdout.strip() == "database schema is up to date"


def test_serve_with_empty_config_is_ready_then_stops_on_sigterm(tmp_path: Path) -> None:
    (tmp_path / "empty.yaml").write_text("", encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith("INNO_NOTIFY_")}
    env["INNO_NOTIFY_PROBES__LISTEN"] = f"127.0.0.1:{free_port()}"  # never the shared default 8081
    proc = subprocess.Popen(
        [sys.executable, "-m", "inno_notify", "serve", "--config", "empty.yaml"],
        cwd=tmp_path,
        env=env,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stderr is not None
    try:
        deadline = time.monotonic() + 30
        seen = []
        while time.monotonic() < deadline:
            line = proc.stderr.readline()
            if not line:
                break
            seen.append(line)
            if "inno-notify ready" in line:
                break
        assert any("inno-notify ready" in line for line in seen), "".join(seen)
        proc.send_signal(signal.SIGTERM)
        # Reading the rest of stderr while it stops: a full pipe would block its last log lines. The
        # limit only catches a hang (a loaded machine stretches a clean stop to seconds).
        _, rest = proc.communicate(timeout=60)
        assert proc.returncode == 0, "".join(seen) + rest
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert (tmp_path / "inno-notify.db").exists()


@pytest.mark.parametrize(("fmt", "expected"), [("text", "GPU digest — team face"), ("json", '"team"')])
def test_digest_of_a_week_without_jobs(tmp_path: Path, fmt: str, expected: str) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(
        f"database_url: sqlite+aiosqlite:///{tmp_path / 'd.db'}\n"
        "directory: {teams: [{name: face, namespaces: [face-research], leads: [lead@example.com]}]}\n",
        encoding="utf-8",
    )
    result = run_cli(
        "digest",
        "--config",
        str(config),
        "--team",
        "face",
        "--week",
        "2026-W48",
        "--format",
        fmt,
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    assert expected in result.stdout
    assert "2026-W48" in result.stdout


def test_digest_of_an_unknown_team_and_a_bad_week(tmp_path: Path) -> None:
    env = {"INNO_NOTIFY_DATABASE_URL": f"sqlite+aiosqlite:///{tmp_path / 'd.db'}"}
    unknown = run_cli("digest", "--team", "nobody", cwd=tmp_path, env=env)
    assert unknown.returncode == 1
    assert "unknown team 'nobody'" in unknown.stderr
    bad = run_cli("digest", "--team", "face", "--week", "last", cwd=tmp_path, env=env)
    assert bad.returncode == 2
    assert "--week must look like 2026-W48" in bad.stderr


@pytest.mark.parametrize("command", [["version"], ["migrate"], ["check"]])
def test_log_level_from_the_environment_works_for_every_command(tmp_path: Path, command: list[str]) -> None:
    env = {
        "INNO_NOTIFY_LOG_LEVEL": "debug",
        "INNO_NOTIFY_DATABASE_URL": f"sqlite+aiosqlite:///{tmp_path / 'l.db'}",
        "INNO_NOTIFY_KUBERNETES__KUBECONFIG": str(tmp_path / "absent"),
    }
    result = run_cli(*command, cwd=tmp_path, env=env)
    assert "unknown key" not in result.stderr and "configuration error" not in result.stderr, result.stderr
    assert result.returncode == (1 if command == ["check"] else 0), result.stderr  # check: no cluster here
    if command == ["migrate"]:
        assert " DEBUG " in result.stderr  # the level took effect


@pytest.mark.parametrize(
    ("env", "args", "expected"),
    [
        (
            {"INNO_NOTIFY_LOG_LEVEL": "chatty"},
            ["version"],
            "INNO_NOTIFY_LOG_LEVEL: not a log level: 'CHATTY'",
        ),
        ({"INNO_NOTIFY_LOG_FORMAT": "xml"}, ["version"], "INNO_NOTIFY_LOG_FORMAT: must be text or json"),
        ({"INNO_NOTIFY_LOG_FORMAT": "xml"}, ["check"], "INNO_NOTIFY_LOG_FORMAT: must be text or json"),
    ],
)
def test_a_bad_log_setting_exits_2_with_one_line(
    tmp_path: Path, env: dict[str, str], args: list[str], expected: str
) -> None:
    result = run_cli(*args, cwd=tmp_path, env=env)
    assert result.returncode == 2
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("inno-notify: configuration error: environment variable ")
    assert expected in line


def test_json_logs_and_the_flag_over_the_file(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(
        f"database_url: sqlite+aiosqlite:///{tmp_path / 'j.db'}\nlog_format: json\nlog_level: ERROR\n"
    )
    quiet = run_cli("migrate", "--config", str(config), cwd=tmp_path)
    assert quiet.returncode == 0 and quiet.stderr == ""  # ERROR from the file: the INFO lines are gone
    loud = run_cli("--log-level", "debug", "migrate", "--config", str(config), cwd=tmp_path)
    lines = [json.loads(line) for line in loud.stderr.splitlines()]
    assert lines and {"time", "level", "logger", "message"} <= set(lines[0])
    assert any(line["level"] == "DEBUG" for line in lines)
