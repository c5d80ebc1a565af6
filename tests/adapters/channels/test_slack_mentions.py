"""No mention, channel ping or link can be made from cluster data in anything we post to Slack.

Job names, namespaces, reasons, owners, teams, group keys, advice, digest owners and the pod,
node, GPU, workspace and user names of an idle nudge all carry every mention form Slack knows;
the summary, the group summary, the digest (with its chart) and the nudge are rendered by the
real renderers and posted by the real slack-sdk client to the fake Web API. Everything the fake
received is then checked: each text object is `verbatim`, no `<!…>`, `<@…>` or `<#…>` appears
anywhere, and no word-initial `@` is left that Slack could read as a mention.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Iterator
from dataclasses import fields, replace
from typing import Any

import pytest

from inno_notify.adapters.channels.base import Recipient, SlackMessage
from inno_notify.adapters.channels.digest_chart import render_chart
from inno_notify.adapters.channels.digest_views import DigestRenderer
from inno_notify.adapters.channels.markup import ZWSP
from inno_notify.adapters.channels.nudge_views import NudgeView
from inno_notify.adapters.channels.render import Renderer
from inno_notify.adapters.channels.slack import SlackSender
from inno_notify.adapters.channels.views import SummaryView
from inno_notify.domain.digest import DailyRow, DigestRows, PersonRow, TeamTotals, WasteRow, build_digest
from inno_notify.domain.live import IdleFinding, finding_to_payload
from inno_notify.domain.model import Channel, JobRecord, Recommendation
from tests.adapters.channels.conftest import SLACK_TOKEN, sample_job, sample_recommendations, sample_usage
from tests.adapters.channels.fake_slack import FakeSlack
from tests.adapters.channels.test_nudge_render import finding

MENTIONS = (
    "<!channel> <!here> <!here|here> <!everyone> <@U0ALICE> <@W123|bob> <#C0GENERAL> <#C0GENERAL|general> "
    "<!subteam^S0TEAM|@oncall> <!date^1392734382^{date}|x> <https://evil.example|click> "
    "@channel @here @everyone @alice (@here) x:@here #general &lt;!channel&gt; *bold* _it_ `code`"
)
SLACK_SYNTAX = re.compile(r"<\s*[!@#]")
# An @ that starts a word and is not broken by a zero-width space: Slack could read a mention.
WORD_MENTION = re.compile(rf"(?<![\w.+-])@(?!{ZWSP})")


def hostile_job(index: int) -> JobRecord:
    job = sample_job(uid=f"uid-{index}")
    text_fields = {
        f.name: f"{f.name}-{index} {MENTIONS}"
        for f in fields(JobRecord)
        if f.name not in ("uid", "cluster") and f.type in ("str", "str | None")
    }
    return replace(job, **text_fields)  # type: ignore[arg-type]


def hostile_advice() -> list[Recommendation]:
    return [
        replace(r, message=f"{r.message} {MENTIONS}", field_path=MENTIONS) for r in sample_recommendations()
    ]


def hostile_digest() -> Any:
    # Short owners: they also label the chart, whose alt text names them.
    owner, other = "alice <!here> @channel <@U0ALICE>", "@here"
    rows = DigestRows(
        totals=TeamTotals(jobs=3, succeeded=2, failed=1, gpu_minutes=750.0, used_gpu_minutes=300.0),
        people=(PersonRow(owner, 2, 600.0, 210.0, 240.0), PersonRow(other, 1, 150.0, 90.0, 0.0)),
        daily=(DailyRow(owner, 0, 360.0, 60.0), DailyRow(other, 4, 150.0, 90.0)),
        top_waste=(WasteRow("c", "u1", MENTIONS, MENTIONS, owner, 240.0, "idle_gpu", "warning", MENTIONS),),
        queue_seconds_sorted=(30.0,),
    )
    return build_digest(
        "face <!channel> @here", "2026-W48", "UTC", rows, TeamTotals(jobs=2, gpu_minutes=600.0)
    )


def hostile_nudge() -> NudgeView:
    found: IdleFinding = finding()
    gpus = tuple(replace(g, gpu=MENTIONS, model=MENTIONS, host=MENTIONS) for g in found.idle)
    hostile = replace(
        found,
        namespace=f"ns {MENTIONS}",
        pod=f"pod {MENTIONS}",
        node=MENTIONS,
        workload_kind="workspace",
        workload_name=MENTIONS,
        platform="coder",
        platform_user=MENTIONS,
        workspace_name=MENTIONS,
        owner=MENTIONS,
        cluster=MENTIONS,
        idle=gpus,
    )
    return NudgeView.from_payload({"nudge": finding_to_payload(hostile)})


def strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        # slack-sdk sends blocks and file lists as JSON text in form-encoded calls.
        if value[:1] in "[{":
            try:
                yield from strings(json.loads(value))
                return
            except ValueError:
                pass
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from strings(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from strings(item)


def text_objects(value: Any) -> Iterator[dict[str, Any]]:
    if isinstance(value, str) and value[:1] in "[{":
        try:
            value = json.loads(value)
        except ValueError:
            return
    if isinstance(value, dict):
        if value.get("type") in ("mrkdwn", "plain_text") and "text" in value:
            yield value
        for item in value.values():
            yield from text_objects(item)
    elif isinstance(value, list):
        for item in value:
            yield from text_objects(item)


@pytest.fixture
async def sender(slack_api: tuple[FakeSlack, str]) -> AsyncIterator[SlackSender]:
    sender = SlackSender(SLACK_TOKEN, slack_api[1], timeout=5.0)
    yield sender
    await sender.aclose()


async def test_cluster_data_cannot_mention_anyone_in_slack(
    slack_api: tuple[FakeSlack, str], sender: SlackSender
) -> None:
    fake, _ = slack_api
    renderer = Renderer(
        dashboard_url="https://gpu.example.org", log_url_template="https://logs/{{ name | urlencode }}"
    )
    views = [SummaryView.from_records(hostile_job(i), sample_usage(), hostile_advice()) for i in range(3)]
    digest = hostile_digest()
    messages = [
        renderer.render_summary(Channel.SLACK, views[0]),
        renderer.render_group(Channel.SLACK, views),
        DigestRenderer(dashboard_url="https://gpu.example.org").message(
            Channel.SLACK, digest, render_chart(digest)
        ),
        renderer.render_nudge(Channel.SLACK, hostile_nudge()),
    ]
    assert all(isinstance(m, SlackMessage) for m in messages)
    assert isinstance(messages[2], SlackMessage) and messages[2].images, "the digest's chart is uploaded too"

    for message in messages:
        await sender.send(Recipient(slack_user_id="U0BOB"), message)
        await sender.send(Recipient(slack_channel="#face-gpu"), message)

    assert len(fake.posted()) == 8
    assert fake.calls_to("files.getUploadURLExternal"), "the chart's alt text reached the fake"
    received = [c.params for c in fake.calls]
    objects = [o for params in received for o in text_objects(params)]
    assert len(objects) >= 8
    assert all(o.get("verbatim") is True for o in objects), [o for o in objects if not o.get("verbatim")][:1]
    texts = [s for params in received for s in strings(params)]
    # The values did arrive (escaped), so the checks below looked at them.
    assert sum("subteam^S0TEAM" in s for s in texts) >= 8
    for text in texts:
        assert not SLACK_SYNTAX.search(text), text[:300]
        assert not WORD_MENTION.search(text), text[:300]
