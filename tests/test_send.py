"""`inno-notify send` against the real API app on a real store: exit 0 when the service accepted the
message (and again, sending nothing, for the same key), 1 when it refused or cannot be reached, 2 on
bad usage; the message it posted is the one queued."""

from __future__ import annotations

import asyncio
import io
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from aiohttp import web

from inno_notify.adapters.db import Store
from inno_notify.api.app import create_app
from inno_notify.cli import main
from inno_notify.domain.messages import decode_pipeline
from inno_notify.domain.model import DirectoryUser, NotificationKind
from tests.api.support import NOW, PIPELINE_TOKEN, SETTINGS, VIEWER_TOKEN


@pytest.fixture
async def service(store: Store) -> AsyncIterator[str]:
    await store.directory.upsert_user(DirectoryUser("alice@example.com", "Alice", channels=("email",)))
    app = create_app(store, SETTINGS, clock=lambda: NOW)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        yield f"http://127.0.0.1:{runner.addresses[0][1]}"
    finally:
        await runner.cleanup()


def token_file(tmp_path: Path, token: str) -> str:
    path = tmp_path / "token"
    path.write_text(token + "\n")
    return str(path)


async def send(*argv: str) -> int:
    # The command blocks on its request: run it beside the event loop that serves the API.
    return await asyncio.to_thread(main, ["send", *argv])


async def test_send_exits_0_when_accepted_and_sends_once_per_key(
    service: str, store: Store, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = [
        "--api",
        service,
        "--token-file",
        token_file(tmp_path, PIPELINE_TOKEN),
        "--to",
        "alice@example.com",
        "--title",
        "Training finished, model in prod",
        "--text",
        "accuracy 0.93",
        "--link",
        "MLflow run=https://mlflow.example.org/#/experiments/3/runs/ab12?x=1",
        "--key",
        "train-pipeline-x7k2p/publish",
    ]
    assert await send(*argv) == 0
    assert "accepted: alice@example.com (email)" in capsys.readouterr().out
    assert await send(*argv) == 0
    assert "already sent under this key" in capsys.readouterr().out
    [row] = (await store.outbox.list_notifications())[0]
    assert row.kind is NotificationKind.PIPELINE_EVENT
    message = decode_pipeline(row.payload)
    assert (message.title, message.text, message.key, message.sender) == (
        "Training finished, model in prod",
        "accuracy 0.93",
        "train-pipeline-x7k2p/publish",
        "airflow-nightly",
    )
    assert [(link.title, link.url) for link in message.links] == [
        ("MLflow run", "https://mlflow.example.org/#/experiments/3/runs/ab12?x=1")
    ]


async def test_send_reads_the_text_from_stdin(
    service: str, store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO("line one\nline two\n"))
    code = await send(
        "--api", f"{service}/api/v1/", "--token-file", token_file(tmp_path, PIPELINE_TOKEN),
        "--to", "alice@example.com", "--title", "t", "--text", "-",
    )  # fmt: skip
    assert code == 0
    [row] = (await store.outbox.list_notifications())[0]
    assert decode_pipeline(row.payload).text == "line one\nline two\n"


@pytest.mark.parametrize(
    ("token", "whom", "expected"),
    [
        (VIEWER_TOKEN, ["--to", "alice@example.com"], "403: forbidden"),
        ("not-a-token", ["--to", "alice@example.com"], "401: unauthorized"),
        (PIPELINE_TOKEN, ["--team", "no-such-team"], "422: no_recipients"),
        (PIPELINE_TOKEN, ["--to", "a@x.example,b@y.example"], "400: invalid_body"),
    ],
)
async def test_send_exits_1_when_refused(
    service: str,
    store: Store,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    token: str,
    whom: list[str],
    expected: str,
) -> None:
    code = await send("--api", service, "--token-file", token_file(tmp_path, token), *whom, "--title", "t")
    assert code == 1
    assert expected in capsys.readouterr().err
    assert (await store.outbox.list_notifications())[0] == []


async def test_send_exits_1_when_the_service_cannot_be_reached(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = await send(
        "--api", "http://127.0.0.1:9", "--token-file", token_file(tmp_path, PIPELINE_TOKEN),
        "--to", "alice@example.com", "--title", "t",
    )  # fmt: skip
    assert code == 1
    assert "cannot reach http://127.0.0.1:9/api/v1/events" in capsys.readouterr().err


@pytest.mark.parametrize("status", [301, 302, 307, 308])
async def test_send_follows_no_redirect_and_keeps_the_token_at_its_origin(
    service: str, store: Store, tmp_path: Path, capsys: pytest.CaptureFixture[str], status: int
) -> None:
    """A service (or anything in front of it) that answers 3xx to another port: the command exits 1
    naming the new location, and the other origin never sees a request, let alone the token."""
    seen: list[web.Request] = []

    async def elsewhere(request: web.Request) -> web.Response:
        seen.append(request)
        return web.json_response({"id": 1, "key": "k", "recipients": []}, status=202)

    async def redirect(request: web.Request) -> web.Response:
        return web.Response(status=status, headers={"Location": target + "/api/v1/events"})

    other = web.Application()
    other.router.add_route("*", "/{tail:.*}", elsewhere)
    front = web.Application()
    front.router.add_route("*", "/{tail:.*}", redirect)
    runners = [web.AppRunner(other), web.AppRunner(front)]
    for runner in runners:
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", 0).start()
    target = f"http://127.0.0.1:{runners[0].addresses[0][1]}"
    try:
        code = await send(
            "--api", f"http://127.0.0.1:{runners[1].addresses[0][1]}",
            "--token-file", token_file(tmp_path, PIPELINE_TOKEN), "--to", "alice@example.com", "--title", "t",
        )  # fmt: skip
    finally:
        for runner in runners:
            await runner.cleanup()
    assert code == 1
    err = capsys.readouterr().err
    assert f"{status}: the service redirects to {target}/api/v1/events" in err
    assert PIPELINE_TOKEN not in err
    assert seen == []


@pytest.mark.parametrize(
    "argv",
    [
        ["--to", "alice@example.com"],  # no --title
        ["--title", "t"],  # neither --to nor --team
        ["--to", "alice@example.com", "--team", "face", "--title", "t"],
        ["--to", "alice@example.com", "--title", "t", "--link", "no-equals-sign"],
        ["--to", "alice@example.com", "--title", "t", "--link", "x=ftp://example.org/f"],
    ],
)
async def test_send_exits_2_on_bad_usage(tmp_path: Path, argv: list[str]) -> None:
    def run() -> int:
        try:
            return main(
                ["send", "--api", "http://127.0.0.1:9", "--token-file", token_file(tmp_path, "t"), *argv]
            )
        except SystemExit as exc:  # argparse's own usage errors
            return int(exc.code or 0)

    assert await asyncio.to_thread(run) == 2


async def test_send_exits_2_without_a_readable_token(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = await send(
        "--api", "http://127.0.0.1:9", "--token-file", str(tmp_path / "missing"),
        "--to", "alice@example.com", "--title", "t",
    )  # fmt: skip
    assert code == 2
    assert "cannot read --token-file" in capsys.readouterr().err
