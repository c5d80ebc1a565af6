"""The channels' fake servers (Bot API, Web API, SMTP) for the service tests, reused from the channel tests.

The database fixtures come from tests.db_support, which tests/conftest.py registers as a plugin.
"""

from tests.adapters.channels.conftest import slack_api, smtp_server, telegram_api

__all__ = ["slack_api", "smtp_server", "telegram_api"]
