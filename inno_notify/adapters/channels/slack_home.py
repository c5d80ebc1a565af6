"""The Slack app's Home tab of one person: their latest runs, open advice, and their preferences
with buttons (docs/selfservice.md).

Built here in Python, not from a template, for the same reason as render.py's Block Kit: the view
is JSON that must stay valid and within Slack's limits (100 blocks in a Home tab, 3000 characters
a section). Every value from the cluster or the directory is escaped (markup.escape_mrkdwn) and
every text object is `verbatim`. Each button carries an `action_id` of
domain.slack_commands.ACTIONS, so pressing it gives the command its label names, through the same
interpreter as typing it.
"""

from __future__ import annotations

from typing import Any

from inno_notify.adapters.channels import figures
from inno_notify.adapters.channels.base import SLACK_MAX_SECTION_CHARS
from inno_notify.adapters.channels.markup import cut_mrkdwn, escape_mrkdwn
from inno_notify.adapters.channels.reply_views import channel_names, when
from inno_notify.domain.bot_replies import HomeRun, HomeSnapshot

__all__ = ["home_view", "unknown_home_view"]

_STATUS_MARK = {"succeeded": ":white_check_mark:", "failed": ":x:", "running": ":arrow_forward:"}


def home_view(home: HomeSnapshot) -> dict[str, Any]:
    """The `views.publish` view of `home`."""
    blocks: list[dict[str, Any]] = [
        {"type": "header", "text": {"type": "plain_text", "text": "Your GPU jobs", "emoji": True}},
        _section(
            f"*{escape_mrkdwn(home.person)}* · messages go to {escape_mrkdwn(channel_names(home.channels))}"
        ),
        {"type": "divider"},
        _section("*Latest runs*"),
    ]
    if home.runs:
        blocks.append(_section("\n".join(_run_line(run, home.timezone) for run in home.runs)))
    else:
        blocks.append(_section("No run of yours is known yet."))
    blocks.append(_section("*Open advice*"))
    if home.advice:
        lines = [
            f"• `{escape_mrkdwn(f'{a.namespace}/{a.name}')}`: {escape_mrkdwn(a.message)}" for a in home.advice
        ]
        blocks.append(_section("\n".join(lines)))
    else:
        blocks.append(_section("None: your latest runs asked for what they used."))
    blocks += [{"type": "divider"}, _section("*Your preferences*"), _section(_preferences(home))]
    blocks.append({"type": "actions", "elements": _buttons(home)})
    blocks.append(
        {
            "type": "context",
            "elements": [
                {
                    "type": "mrkdwn",
                    "verbatim": True,
                    "text": "The same as `/inno help` lists: `/inno status`, `/inno mute 8`, `/inno stop`, …",
                }
            ],
        }
    )
    return {"type": "home", "blocks": blocks}


def unknown_home_view() -> dict[str, Any]:
    """The Home tab of a Slack user the directory does not know."""
    return {
        "type": "home",
        "blocks": [
            _section(
                "Your Slack account is not in the inno-notify directory, so there is nothing to show. "
                "Ask your inno-notify admin to add your Slack member id (or your profile's e-mail)."
            )
        ],
    }


def _run_line(run: HomeRun, timezone: str) -> str:
    mark = _STATUS_MARK.get(run.status, ":white_circle:")
    ref = escape_mrkdwn(f"{run.namespace}/{run.name}")
    parts = [f"{mark} `{ref}` {escape_mrkdwn(run.status)}"]
    if run.finished_at is not None:
        parts.append(escape_mrkdwn(when(run.finished_at, timezone)))
    if run.gpu_hours_held is not None:
        used = "" if run.gpu_hours_used is None else f", {figures.number(run.gpu_hours_used)} used"
        parts.append(escape_mrkdwn(f"{figures.number(run.gpu_hours_held)} GPU-h held{used}"))
    return " · ".join(parts)


def _preferences(home: HomeSnapshot) -> str:
    lines = [
        "Summaries: " + ("failed jobs only" if home.failures_only else "every job"),
        "Idle-GPU nudges: " + ("on" if home.nudges else "off"),
    ]
    if home.muted_until is not None:
        where = "every channel" if home.muted_everywhere else "Slack"
        lines.append(f"Muted on {where} until {when(home.muted_until, home.timezone)}")
    return "\n".join(escape_mrkdwn(line) for line in lines)


def _buttons(home: HomeSnapshot) -> list[dict[str, Any]]:
    wanted = [
        ("inno_all", "Every summary") if home.failures_only else ("inno_failures", "Failed jobs only"),
        ("inno_nudges_on", "Nudges on") if not home.nudges else ("inno_nudges_off", "Nudges off"),
    ]
    if home.muted_until is not None:
        wanted.append(("inno_unmute", "Unmute"))
    else:
        wanted += [("inno_mute_8", "Mute Slack 8 h"), ("inno_mute_all_8", "Mute everything 8 h")]
    return [
        {"type": "button", "action_id": action, "text": {"type": "plain_text", "text": label}}
        for action, label in wanted
    ]


def _section(text: str) -> dict[str, Any]:
    piece = cut_mrkdwn(text, SLACK_MAX_SECTION_CHARS)[0]
    return {"type": "section", "text": {"type": "mrkdwn", "text": piece, "verbatim": True}}
