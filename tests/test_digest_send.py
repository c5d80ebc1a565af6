"""`inno-notify digest --send`: the team's digest through the real dispatcher to a real SMTP server."""

from __future__ import annotations

from pathlib import Path

from inno_notify.commands.digest import digest_command
from inno_notify.settings import Settings
from tests.adapters.channels import fake_smtp


async def test_digest_send_delivers_once_to_each_lead(tmp_path: Path) -> None:
    handler = fake_smtp.RecordingHandler()
    smtp = fake_smtp.start(handler)
    try:
        settings = Settings.model_validate(
            {
                "database_url": f"sqlite+aiosqlite:///{tmp_path / 'd.db'}",
                "channels": {
                    "email": {
                        "host": "127.0.0.1",
                        "port": smtp.port,
                        "starttls": False,
                        "sender": "bot@x.org",
                    }
                },
                "directory": {
                    "teams": [
                        {"name": "face", "namespaces": ["face-research"], "leads": ["lead@example.com"]}
                    ]
                },
            }
        )
        first = await digest_command(settings, "face", "2026-W48", "text", send=True)
        assert first == "sent digest/face/2026-W48/email/lead@example.com"
        # Sending the same week again is a no-op: the outbox row exists and was sent.
        again = await digest_command(settings, "face", "2026-W48", "text", send=True)
        assert again == first
    finally:
        smtp.stop()
    assert [r.rcpt_tos for r in handler.received] == [["lead@example.com"]]
    assert "2026-W48" in str(handler.received[0].message["Subject"])
