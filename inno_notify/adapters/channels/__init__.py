"""Channels: render summaries per channel and send them to Telegram, Slack and e-mail.

- `base`: Recipient, the rendered message types, ChannelError (retryable / retry_after), Sender.
- `views`, `figures`: the summary view model with every figure spelt for humans.
- `render`: Renderer (Jinja2, sandboxed, per-channel escaping; templates in inno_notify/templates).
- `markup`: Telegram HTML truncation and Slack mrkdwn escaping.
- `telegram`, `slack`, `email`: the senders. They classify failures and never retry.

Nothing is imported here, so that rendering does not pull in the three client libraries.
"""
