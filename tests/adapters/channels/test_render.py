"""The renderer: per-channel templates, limits, overrides, the sandbox, and inert cluster values."""

from __future__ import annotations

import re
from collections.abc import Callable
from html.parser import HTMLParser
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from inno_notify.adapters.channels.base import (
    SLACK_MAX_BLOCKS,
    SLACK_MAX_SECTION_CHARS,
    TELEGRAM_MAX_CHARS,
    InlineImage,
    MailMessage,
    SlackMessage,
    TelegramMessage,
)
from inno_notify.adapters.channels.markup import TRUNCATION_MARKER, ZWSP, escape_mrkdwn, truncate_html
from inno_notify.adapters.channels.render import Renderer, RenderError
from inno_notify.adapters.channels.views import SummaryView
from inno_notify.domain.model import (
    Channel,
    JobStatus,
    Recommendation,
    RecommendationKind,
    Severity,
    Unit,
)
from tests.adapters.channels.conftest import sample_job, sample_recommendations, sample_usage

TELEGRAM_TAGS = {"b", "strong", "i", "em", "u", "ins", "s", "strike", "del", "a", "code", "pre", "blockquote"}
INJECTIONS = [
    "<b>",
    "</b>",
    "<!channel>",
    "<@U123>",
    "*_[]()~`",
    "{{ 7*7 }}",
    "&amp;",
    "<a href='x'>",
    "|",
    "&",
]


class Parsed(HTMLParser):
    """Tags (name and attribute names) and the text a reader sees."""

    def __init__(self, source: str) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, str, tuple[str, ...]]] = []
        self.text: list[str] = []
        self.feed(source)
        self.close()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(("start", tag, tuple(sorted(name for name, _ in attrs))))

    def handle_endtag(self, tag: str) -> None:
        self.tags.append(("end", tag, ()))

    def handle_data(self, data: str) -> None:
        self.text.append(data)

    @property
    def visible(self) -> str:
        return "".join(self.text)


def balanced(tags: list[tuple[str, str, tuple[str, ...]]]) -> bool:
    stack: list[str] = []
    for kind, name, _ in tags:
        if kind == "start":
            stack.append(name)
        elif not stack or stack.pop() != name:
            return False
    return not stack


def view(**job_changes: object) -> SummaryView:
    return SummaryView.from_records(sample_job(**job_changes), sample_usage(), sample_recommendations())


@pytest.fixture(scope="module")
def renderer() -> Renderer:
    return Renderer(
        dashboard_url="https://gpu.example.org/",
        log_url_template="https://grafana.example.org/explore"
        "?ns={{ namespace }}&job={{ name }}&from={{ started_ms }}",
    )


def test_telegram_summary_shows_every_figure_and_the_links(renderer: Renderer) -> None:
    message = renderer.render_summary(Channel.TELEGRAM, view())

    assert isinstance(message, TelegramMessage)
    parsed = Parsed(message.html)
    for figure in [
        "3 h 12 min",
        "2 min",
        "110 / 240 GPU-min",
        "42.5 GiB of 64 GiB",
        "n/a (no samples)",
        "137 (OOMKilled)",
        "failed (BackoffLimitExceeded)",
        "2 of 4 GPUs stayed idle: request 2.",
    ]:
        assert figure in parsed.visible
    assert (
        'href="https://grafana.example.org/explore?ns=face-research&amp;job=train-resnet-7&amp;from='
        in message.html
    )
    assert 'href="https://gpu.example.org/jobs/face-research/train-resnet-7?uid=0b7c5a8e-' in message.html
    assert {name for _, name, _ in parsed.tags} <= TELEGRAM_TAGS
    assert balanced(parsed.tags)


def test_slack_summary_has_blocks_and_a_text_fallback(renderer: Renderer) -> None:
    message = renderer.render_summary(Channel.SLACK, view())

    assert isinstance(message, SlackMessage)
    assert message.text == ":x: *face-research/train-resnet-7* — failed (BackoffLimitExceeded)"
    body = "\n".join(b["text"]["text"] for b in message.blocks)
    assert "*Peak RAM:* 42.5 GiB of 64 GiB" in body
    assert "|Logs>" in body and "<https://gpu.example.org/jobs/face-research/train-resnet-7?uid=" in body


def test_slack_text_objects_are_verbatim_and_emoji_codes_stay_whole(renderer: Renderer) -> None:
    """Slack parses no mention or link out of the text; the template's own emoji codes are not
    values, so the escaping that fences underscores leaves them alone."""
    for message in (
        renderer.render_summary(Channel.SLACK, view(status=JobStatus.SUCCEEDED, reason=None)),
        renderer.render_group(Channel.SLACK, [view(status=JobStatus.SUCCEEDED, reason=None), view()]),
    ):
        assert isinstance(message, SlackMessage)
        assert all(b["text"]["verbatim"] is True for b in message.blocks if b["type"] == "section")
        body = "\n".join(b["text"]["text"] for b in message.blocks)
        assert ":white_check_mark:" in body


def test_email_summary_has_subject_text_html_footer_and_images(renderer: Renderer) -> None:
    image = InlineImage(cid="chart-1@inno", png=b"\x89PNG")
    message = renderer.render_summary(Channel.EMAIL, view(), images=[image])

    assert isinstance(message, MailMessage)
    assert message.subject == "[inno-notify] face-research/train-resnet-7 failed (BackoffLimitExceeded)"
    assert "Peak RAM:         42.5 GiB of 64 GiB" in message.text
    assert "inno-notify/notify: never" in message.text
    assert "inno-notify/notify: never" in Parsed(message.html).visible
    assert 'src="cid:chart-1@inno"' in message.html
    assert message.images == (image,)


def many_views(count: int) -> list[SummaryView]:
    return [view(name=f"sweep-lr-{i:04d}-with-a-rather-long-name") for i in range(count)]


def test_a_big_group_fits_telegram_without_breaking_html(renderer: Renderer) -> None:
    message = renderer.render_group(Channel.TELEGRAM, many_views(300))

    assert isinstance(message, TelegramMessage)
    assert len(message.html) <= TELEGRAM_MAX_CHARS
    assert message.html.endswith(TRUNCATION_MARKER)
    parsed = Parsed(message.html)
    assert balanced(parsed.tags)
    assert "300 jobs finished" in parsed.visible


def test_a_big_group_fits_slack_limits(renderer: Renderer) -> None:
    message = renderer.render_group(Channel.SLACK, many_views(1000))

    assert isinstance(message, SlackMessage)
    assert len(message.blocks) <= SLACK_MAX_BLOCKS
    assert all(
        len(b["text"]["text"]) <= SLACK_MAX_SECTION_CHARS for b in message.blocks if b["type"] == "section"
    )
    assert message.text == "*1000 jobs finished* — 0 succeeded, 1000 failed"


def test_a_small_group_is_a_table_with_totals(renderer: Renderer) -> None:
    message = renderer.render_group(Channel.EMAIL, many_views(3))

    assert isinstance(message, MailMessage)
    assert message.subject == "[inno-notify] 3 jobs finished: 0 succeeded, 3 failed"
    assert "Total GPU (used/held): 331 / 720 GPU-min" in message.text
    assert Parsed(message.html).tags.count(("start", "tr", ())) == 4
    # A sweep repeats the same advice: each recommendation once.
    assert message.text.count("2 of 4 GPUs stayed idle") == 1


@pytest.mark.parametrize(
    ("source", "limit", "expected"),
    [
        ("<b>short</b>", 100, "<b>short</b>"),
        (
            "<b>" + "x" * 50 + "</b>",
            30,
            "<b>" + "x" * (30 - 7 - len(TRUNCATION_MARKER)) + "</b>" + TRUNCATION_MARKER,
        ),
        ("a&amp;b&amp;c" + "z" * 40, 22, "a&amp;b" + TRUNCATION_MARKER),
        ('<a href="https://x/y">link text</a>' + "z" * 40, 40, TRUNCATION_MARKER),
    ],
    ids=["fits", "closes-open-tag", "keeps-entities-whole", "drops-a-tag-that-cannot-close"],
)
def test_truncate_html(source: str, limit: int, expected: str) -> None:
    result = truncate_html(source, limit)
    assert result == expected
    assert len(result) <= limit


def test_overrides_come_from_the_template_dir_and_the_rest_from_the_package(tmp_path: Path) -> None:
    (tmp_path / "telegram").mkdir()
    (tmp_path / "telegram" / "job_summary.html.j2").write_text(
        "Custom: <b>{{ job.job_ref }}</b> {{ job.runtime }}"
    )
    renderer = Renderer(template_dir=tmp_path)

    telegram = renderer.render_summary(Channel.TELEGRAM, view(name="<i>x</i>"))
    slack = renderer.render_summary(Channel.SLACK, view())

    assert telegram == TelegramMessage("Custom: <b>face-research/&lt;i&gt;x&lt;/i&gt;</b> 3 h 12 min")
    assert isinstance(slack, SlackMessage) and "*Peak RAM:*" in slack.blocks[0]["text"]["text"]


@pytest.mark.parametrize(
    "template",
    [
        "{{ job.__class__.__mro__[1].__subclasses__() }}",
        "{{ ''.__class__.__mro__[1].__subclasses__() }}",
        "{{ job.from_records.__globals__ }}",
        "{{ no_such_name }}",
    ],
)
def test_user_templates_run_in_the_sandbox(tmp_path: Path, template: str) -> None:
    (tmp_path / "email").mkdir()
    (tmp_path / "email" / "job_summary.txt.j2").write_text(template)
    renderer = Renderer(template_dir=tmp_path)

    with pytest.raises(RenderError) as caught:
        renderer.render_summary(Channel.EMAIL, view())
    assert not caught.value.retryable
    assert (
        "subclasses" not in caught.value.message.replace(template, "") or "<class" not in caught.value.message
    )


def test_a_template_that_does_not_compile_fails_at_startup(tmp_path: Path) -> None:
    (tmp_path / "slack").mkdir()
    (tmp_path / "slack" / "group_summary.mrkdwn.j2").write_text("{% for x in %}")
    with pytest.raises(RenderError, match=r"slack/group_summary.mrkdwn.j2, line 1"):
        Renderer(template_dir=tmp_path)


def test_log_url_template_gets_the_job_identity_and_times() -> None:
    job = sample_job()
    assert job.started_at is not None and job.finished_at is not None
    renderer = Renderer(
        log_url_template="https://logs/{{ namespace }}/{{ name }}?uid={{ uid }}&from={{ started_ms }}"
        "&to={{ finished_ms }}&day={{ started.date() }}"
    )

    assert renderer.log_url(view()) == (
        f"https://logs/{job.namespace}/{job.name}?uid={job.uid}"
        f"&from={int(job.started_at.timestamp() * 1000)}&to={int(job.finished_at.timestamp() * 1000)}"
        f"&day={job.started_at.date()}"
    )


@pytest.mark.parametrize("template", ["javascript:alert({{ name }})", "  ", "https://logs/{{ name }} x"])
def test_a_log_url_that_is_not_a_web_link_is_dropped(template: str) -> None:
    assert Renderer(log_url_template=template).log_url(view()) is None


def test_without_links_configured_no_link_is_shown() -> None:
    message = Renderer().render_summary(Channel.TELEGRAM, view())
    assert isinstance(message, TelegramMessage) and "<a " not in message.html


# Cluster-supplied text: injections mixed with arbitrary printable text (no line breaks, which only
# reflow a message), short enough that nothing is truncated.
payloads = (
    st.lists(
        st.one_of(
            st.sampled_from(INJECTIONS),
            st.text(st.characters(blacklist_categories=("Cs", "Cc", "Zl", "Zp")), max_size=12),
        ),
        min_size=1,
        max_size=8,
    )
    .map("".join)
    .filter(bool)
)


def for_any_payload(test: Callable[[str], None]) -> Callable[[], None]:
    """The property `test(payload)`, tried with 60 payloads (rendering is slow for Hypothesis's
    health check, and for its deadline on a busy machine)."""
    examples = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    return examples(given(payload=payloads)(test))


# A message to a channel with a value in every cluster-supplied field.
Render = Callable[[Channel, str], object]


def assert_inert_html(render: Render, payload: str, *shown: str) -> None:
    """In Telegram and e-mail HTML, a message made with the payload has the tags it has with a
    harmless value (the payload added no markup), and a reader sees each of `shown`."""
    for channel in (Channel.TELEGRAM, Channel.EMAIL):
        benign, hostile = render(channel, "x"), render(channel, payload)
        assert isinstance(benign, (TelegramMessage, MailMessage))
        assert isinstance(hostile, (TelegramMessage, MailMessage))
        parsed_hostile = Parsed(hostile.html)
        assert parsed_hostile.tags == Parsed(benign.html).tags
        for text in shown:
            assert text in parsed_hostile.visible


def inert_mrkdwn(render: Render, payload: str) -> tuple[str, str]:
    """Checks that no mention, channel ping or link can come from the payload in the Slack message
    (its < and > are entities: the message links what it links with a harmless value) and that it
    shows as namespace/name; returns the message's text and the payload as escaped for mrkdwn."""
    benign, hostile = render(Channel.SLACK, "x"), render(Channel.SLACK, payload)
    assert isinstance(benign, SlackMessage) and isinstance(hostile, SlackMessage)
    text = "\n\n".join(b["text"]["text"] for b in hostile.blocks)
    safe = escape_mrkdwn(payload)
    assert "<" not in safe and ">" not in safe
    assert text.count("<") == "\n\n".join(b["text"]["text"] for b in benign.blocks).count("<")
    assert f"{safe}/{safe}" in text
    return text, safe


def injected(payload: str) -> SummaryView:
    recommendation = Recommendation(
        kind=RecommendationKind.GPU_COUNT,
        severity=Severity.WARNING,
        current=4,
        suggested=2,
        unit=Unit.GPUS,
        message=f"job {payload} idled",
        waste_gpu_minutes=1.0,
        field_path=payload,
    )
    job = sample_job(name=payload, namespace=payload, reason=payload, exit_reason=payload, cluster=payload)
    return SummaryView.from_records(job, sample_usage(), [recommendation])


INERT = Renderer(
    dashboard_url="https://gpu.example.org", log_url_template="https://logs/{{ name | urlencode }}"
)


def summary(channel: Channel, payload: str) -> object:
    return INERT.render_summary(channel, injected(payload))


@for_any_payload
def test_cluster_values_are_inert_in_html(payload: str) -> None:
    assert_inert_html(summary, payload, f"{payload}/{payload}", f"job {payload} idled")


@for_any_payload
def test_cluster_values_are_inert_in_slack_mrkdwn(payload: str) -> None:
    safe = inert_mrkdwn(summary, payload)[1]
    # Formatting characters are fenced by zero-width spaces so they cannot pair up.
    stripped = safe
    for char in "*_~`":
        stripped = stripped.replace(f"{ZWSP}{char}{ZWSP}", "")
    assert not set("*_~`") & set(stripped)
    # A word-initial @ (a typed mention) is followed by a zero-width space.
    assert not re.search(f"(?<![\\w.+-])@(?!{ZWSP})", safe)
    # Nothing was lost: undoing the fences, the mention breaks and the three entities gives the
    # value back.
    for char in "*_~`":
        safe = safe.replace(f"{ZWSP}{char}{ZWSP}", char)
    safe = safe.replace(f"@{ZWSP}", "@")
    assert safe.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&") == payload


@for_any_payload
def test_cluster_values_are_literal_in_the_plain_text_mail(payload: str) -> None:
    message = INERT.render_summary(Channel.EMAIL, injected(payload))
    assert isinstance(message, MailMessage)
    for line in (
        f"/{payload} — failed ({payload})\nCluster: {payload}\n",
        f"Exit code:        137 ({payload})\n",
        f"  * job {payload} idled\n",
    ):
        assert line in message.text
    assert "\n" not in message.subject and "\r" not in message.subject
    if "{{ 7*7 }}" in payload:
        assert "{{ 7*7 }}" in message.text


def test_a_sweeps_advice_is_stated_once_per_family_in_every_channel(renderer: Renderer) -> None:
    """Three runs of sweep-lr, each advised a slightly different CPU request: one line for the
    family at the p95 of the three (8, 8.5, 9 → 8.95 → 9 cores), not three lines without names."""

    def run(i: int, suggested: float) -> SummaryView:
        advice = Recommendation(
            RecommendationKind.CPU, Severity.WARNING, 32, suggested, Unit.CORES,
            f"CPU p95 of run {i}: set cpu: 32 → {suggested}.", waste_core_hours=20.0,
            field_path='resources.requests["cpu"]',
        )  # fmt: skip
        job = sample_job(name=f"sweep-lr-{i}", uid=f"uid-{i}", family="sweep-lr")
        return SummaryView.from_records(job, sample_usage(), [advice])

    views = [run(0, 8.0), run(1, 8.5), run(2, 9.0)]
    line = 'For the 3 runs of sweep-lr: set resources.requests["cpu"]: 32 → 9.'
    mail = renderer.render_group(Channel.EMAIL, views)
    assert isinstance(mail, MailMessage)
    assert mail.text.count(line) == 1 and "CPU p95 of run" not in mail.text
    assert "For the 3 runs of sweep-lr: set resources.requests[&#34;cpu&#34;]: 32 → 9." in mail.html
    telegram = renderer.render_group(Channel.TELEGRAM, views)
    assert isinstance(telegram, TelegramMessage)
    assert Parsed(telegram.html).visible.count(line) == 1 and "CPU p95 of run" not in telegram.html
    slack = renderer.render_group(Channel.SLACK, views)
    assert isinstance(slack, SlackMessage)
    text = str(slack.blocks)
    assert text.count("For the 3 runs of sweep-lr") == 1 and "CPU p95 of run" not in text
