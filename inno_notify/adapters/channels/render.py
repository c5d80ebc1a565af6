"""Turns summary and nudge views into the message each channel sends, through Jinja2 templates.

One template per channel and kind (`telegram/job_summary.html.j2`, `slack/group_summary.mrkdwn.j2`,
`email/job_summary.{subject,txt,html}.j2`, `*/idle_nudge.*`, ...). A directory named in the configuration may
override any of them by the same relative path; the rest come from `inno_notify/templates`.
Templates may come from users, so every environment is a `SandboxedEnvironment` and undefined
names are errors instead of empty strings.

Each channel's markup has its own environment:
- Telegram HTML and e-mail HTML: HTML autoescape.
- Slack mrkdwn: no HTML escaping; every printed value goes through `escape_mrkdwn` (finalize).
  Block Kit blocks are built here in Python from the rendered mrkdwn, not in a JSON template, so a
  template can never produce invalid JSON or blocks over Slack's limits: paragraphs (split at
  blank lines) are packed into section blocks of at most 3000 characters, a paragraph `---` is a
  divider, at most 50 blocks, and the first paragraph is the `text` fallback. Every text object is
  `verbatim`, so Slack does not turn words of a value into mentions or links (markup.py).
- E-mail plain text and subjects: no escaping (nothing interprets them).
- Mattermost Markdown: Slack's templates (each `mattermost/{kind}.md.j2` includes its Slack twin,
  so a deployment can override either), rendered with Markdown's escaping (`escape_markdown`) and
  `[label](url)` links, their `*bold*` made `**bold**` (markup.mrkdwn_to_markdown).
- The webhook: the e-mail's subject and plain text, and the context's views as JSON (webhook_views).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import jinja2
from jinja2.sandbox import SandboxedEnvironment

from inno_notify.adapters.channels.base import (
    MATTERMOST_MAX_CHARS,
    SLACK_MAX_BLOCKS,
    SLACK_MAX_SECTION_CHARS,
    SLACK_MAX_TEXT_CHARS,
    TELEGRAM_MAX_CHARS,
    ChannelError,
    InlineImage,
    MailMessage,
    MattermostMessage,
    RenderedMessage,
    SlackMessage,
    TelegramMessage,
    WebhookMessage,
    WebLink,
)
from inno_notify.adapters.channels.markup import (
    TRUNCATION_MARKER,
    cut_mrkdwn,
    cut_text,
    escape_markdown,
    escape_mrkdwn,
    markdown_link,
    mrkdwn_link,
    mrkdwn_to_markdown,
    truncate_html,
)
from inno_notify.adapters.channels.message_views import PipelineView, ServingView, WorkflowView
from inno_notify.adapters.channels.nudge_views import NudgeListView, NudgeView
from inno_notify.adapters.channels.reply_views import BotReplyView, channel_names
from inno_notify.adapters.channels.views import RecommendationView, SummaryView, group_totals
from inno_notify.adapters.channels.webhook_views import webhook_message
from inno_notify.domain.bot_replies import Reply, decode_reply
from inno_notify.domain.messages import PipelineMessage, decode_pipeline, decode_serving, decode_workflow
from inno_notify.domain.model import Channel, NotificationKind
from inno_notify.domain.page_links import PageLinks
from inno_notify.domain.rightsizing.sweeps import SweepRun, advice_per_family
from inno_notify.domain.serving import ServingNotice
from inno_notify.domain.workflows import WorkflowSummary

BUILTIN_TEMPLATES = Path(__file__).resolve().parents[2] / "templates"
JOB_SUMMARY = "job_summary"
GROUP_SUMMARY = "group_summary"
BOT_REPLY = NotificationKind.BOT_REPLY.value
IDLE_NUDGE = NotificationKind.IDLE_NUDGE.value
# The chats a person gives commands in (domain.chat_commands), each with a `bot_reply` template.
REPLY_CHANNELS = (Channel.TELEGRAM, Channel.SLACK, Channel.MATTERMOST)
# Messages whose content travels in the outbox row (domain.messages, domain.live), one template set
# each.
PAYLOAD_KINDS = (
    NotificationKind.WORKFLOW_SUMMARY.value,
    NotificationKind.MODEL_SERVING.value,
    NotificationKind.PIPELINE_EVENT.value,
    IDLE_NUDGE,
)
GROUP_RECOMMENDATIONS = 3
# The footer line of every message to a person, linking their own page (`with_personal_page`).
PERSONAL_PAGE = "_personal_page"
# Job pages a grouped summary links by name (the HTML e-mail links every job in its table).
GROUP_PAGES_SHOWN = 10

_TEMPLATE_FILES: dict[Channel, tuple[str, ...]] = {
    Channel.TELEGRAM: ("telegram/{kind}.html.j2",),
    Channel.SLACK: ("slack/{kind}.mrkdwn.j2",),
    Channel.EMAIL: ("email/{kind}.subject.j2", "email/{kind}.txt.j2", "email/{kind}.html.j2"),
    # Slack's templates, included by these and rendered as Markdown (Templates, markup.py).
    Channel.MATTERMOST: ("mattermost/{kind}.md.j2",),
    # The webhook's title and text are the e-mail's subject and plain text (webhook_views).
    Channel.WEBHOOK: ("email/{kind}.subject.j2", "email/{kind}.txt.j2"),
}


class RenderError(ChannelError):
    """A template that does not compile or fails while rendering: sending again will not help."""

    def __init__(self, message: str) -> None:
        super().__init__(message, retryable=False)


@contextmanager
def template_errors(what: str) -> Iterator[None]:
    """A template of `what` (a page, the digest) that is missing, broken or fails inside the block,
    as RenderError("`what`: the template's own message")."""
    try:
        yield
    except jinja2.TemplateError as exc:
        raise RenderError(f"{what}: {exc.message or type(exc).__name__}") from None


@dataclass(frozen=True, slots=True)
class GroupItem:
    """One row of a grouped summary: the job and its own links."""

    job: SummaryView
    log_url: str | None
    dashboard_url: str | None
    grafana_url: str | None = None


class Templates:
    """The template files of a deployment (`template_dir`, when set) over the built-in ones, each
    loaded into the environment its markup needs (module docstring): `slack/*` mrkdwn, `*.html.j2`
    HTML, the rest text. Every renderer of messages and pages loads through one."""

    def __init__(self, template_dir: Path | None = None) -> None:
        dirs = [str(template_dir)] if template_dir is not None else []
        loader = jinja2.FileSystemLoader([*dirs, str(BUILTIN_TEMPLATES)])
        self._html = _environment(loader, autoescape=True)
        self._text = _environment(loader, autoescape=False)
        self._mrkdwn = _environment(loader, autoescape=False, finalize=escape_mrkdwn)
        self._mrkdwn.filters["link"] = mrkdwn_link
        # Mattermost: Slack's templates with Markdown's escaping and links (markup.escape_markdown).
        self._markdown = _environment(loader, autoescape=False, finalize=escape_markdown)
        self._markdown.filters["link"] = markdown_link

    def get(self, name: str) -> jinja2.Template:
        """Template `name`, compiled; raises jinja2.TemplateError when it is missing or broken."""
        environment = (
            self._markdown
            if name.startswith("mattermost/")
            else self._mrkdwn
            if name.startswith("slack/")
            else self._html
            if name.endswith(".html.j2")
            else self._text
        )
        return environment.get_template(name)

    def render(self, names: Sequence[str], context: Mapping[str, Any]) -> list[str]:
        """Templates `names` rendered with `context`; raises jinja2.TemplateError."""
        return [self.get(name).render(context) for name in names]


class Renderer:
    """Renders summaries for every channel; build one at startup and share it.

    Page links (`dashboard_url` in the templates) come from `links`: signed and expiring when it has
    a key (domain.links), counted from `clock` at rendering. `dashboard_url` alone is the older
    spelling: plain links under that base URL. `log_url_template` and `grafana_url_template` are
    Jinja2 (sandboxed) given the job's namespace, name, uid, pods, nodes and time range
    (`link_variables`).
    """

    def __init__(
        self,
        template_dir: Path | None = None,
        dashboard_url: str | None = None,
        log_url_template: str | None = None,
        *,
        links: PageLinks | None = None,
        grafana_url_template: str | None = None,
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        self._links = links if links is not None else PageLinks(dashboard_url)
        self._clock = clock or _utc_now
        self._templates = Templates(template_dir)
        self._log_url: jinja2.Template | None = None
        self._grafana_url: jinja2.Template | None = None
        try:
            links_env = _environment(jinja2.DictLoader({}), autoescape=False)
            if log_url_template:
                self._log_url = links_env.from_string(log_url_template)
            if grafana_url_template:
                self._grafana_url = links_env.from_string(grafana_url_template)
            # Compiling every template now makes a broken override fail at startup (and in
            # `inno-notify check`), not at the first send.
            for channel in Channel:
                for kind in (JOB_SUMMARY, GROUP_SUMMARY, *PAYLOAD_KINDS):
                    for name in self._names(channel, kind):
                        self._templates.get(name)
            for channel in REPLY_CHANNELS:
                for name in self._names(channel, BOT_REPLY):
                    self._templates.get(name)
            for channel in (Channel.TELEGRAM, Channel.SLACK, Channel.EMAIL, Channel.MATTERMOST):
                for name in self._names(channel, PERSONAL_PAGE)[-2:]:
                    self._templates.get(name)
        except jinja2.TemplateError as exc:
            raise RenderError(_describe(exc)) from None

    def render_summary(
        self,
        channel: Channel | str,
        view: SummaryView,
        *,
        images: Sequence[InlineImage] = (),
        telegram_link: str | None = None,
    ) -> RenderedMessage:
        """The summary of one finished job for `channel`; `telegram_link` is the deep link that
        connects the recipient's Telegram chat, for a recipient who has none (e-mail and Slack)."""
        context = {
            "job": view,
            "log_url": self.log_url(view),
            "grafana_url": self.grafana_url(view),
            "dashboard_url": self.job_dashboard_url(view),
            "images": tuple(images),
            "telegram_link": telegram_link,
        }
        return self._render(Channel(channel), JOB_SUMMARY, context, images)

    def render_group(
        self,
        channel: Channel | str,
        views: Sequence[SummaryView],
        *,
        images: Sequence[InlineImage] = (),
        telegram_link: str | None = None,
    ) -> RenderedMessage:
        """One message for several jobs: a compact table and totals."""
        items = [GroupItem(v, self.log_url(v), self.job_dashboard_url(v), self.grafana_url(v)) for v in views]
        context = {
            "items": items,
            "totals": group_totals(views),
            "recommendations": _distinct_recommendations(views, GROUP_RECOMMENDATIONS),
            # Each job links its own page (a page for the group as a whole does not exist).
            "pages_shown": GROUP_PAGES_SHOWN,
            "images": tuple(images),
            "telegram_link": telegram_link,
        }
        return self._render(Channel(channel), GROUP_SUMMARY, context, images)

    def render_nudge(self, channel: Channel | str, view: NudgeView | NudgeListView) -> RenderedMessage:
        """A nudge about a person's running pods whose GPUs idle (the live check's findings)."""
        nudges = NudgeListView((view,)) if isinstance(view, NudgeView) else view
        return self._render(Channel(channel), IDLE_NUDGE, {"nudges": nudges}, ())

    def render_workflow(
        self, channel: Channel | str, summary: WorkflowSummary, *, telegram_link: str | None = None
    ) -> RenderedMessage:
        """The summary of one finished workflow (all its steps) for `channel`."""
        context = {
            "workflow": WorkflowView.of(summary),
            "dashboard_url": self._links.workflow(
                summary.namespace, summary.name, summary.uid, self._clock()
            ),
            "telegram_link": telegram_link,
        }
        return self._render(Channel(channel), NotificationKind.WORKFLOW_SUMMARY.value, context, ())

    def render_serving(self, channel: Channel | str, notice: ServingNotice) -> RenderedMessage:
        """The "model is serving" message for `channel`."""
        context = {"model": ServingView.of(notice)}
        return self._render(Channel(channel), NotificationKind.MODEL_SERVING.value, context, ())

    def render_pipeline(self, channel: Channel | str, message: PipelineMessage) -> RenderedMessage:
        """A pipeline's own message for `channel`, escaped like everything else."""
        return self.render_pipelines(channel, (message,))

    def render_pipelines(
        self, channel: Channel | str, messages: Sequence[PipelineMessage]
    ) -> RenderedMessage:
        """Pipeline messages to one recipient within the group wait, as one message, oldest first
        (`message` in the templates is the first, `messages` all of them)."""
        views = [PipelineView.of(m) for m in messages]
        context = {"message": views[0], "messages": views}
        return self._render(Channel(channel), NotificationKind.PIPELINE_EVENT.value, context, ())

    def render_payloads(
        self, channel: Channel | str, kind: NotificationKind, payloads: Sequence[Mapping[str, Any]]
    ) -> RenderedMessage:
        """One message for several rows of a kind the dispatcher groups and renders from the payload
        (pipeline messages); ValueError when a payload is not one."""
        if kind is not NotificationKind.PIPELINE_EVENT:
            raise ValueError(f"{kind.value} messages are not grouped")
        return self.render_pipelines(channel, [decode_pipeline(p) for p in payloads])

    def render_reply(self, reply: Reply, channel: Channel = Channel.TELEGRAM) -> RenderedMessage:
        """The answer to a person's chat command on `channel` (a Telegram chat, the Slack app, the
        Mattermost slash command). `chat` names the chat in the words of the Slack templates, which
        Mattermost's include."""
        if channel not in REPLY_CHANNELS:
            raise ValueError(f"a bot reply goes to {', '.join(c.value for c in REPLY_CHANNELS)} only")
        chat = channel_names((channel.value,))
        return self._render(channel, BOT_REPLY, {"r": BotReplyView.of(reply), "chat": chat}, ())

    def render_payload(
        self,
        channel: Channel | str,
        kind: NotificationKind,
        payload: Mapping[str, Any],
        *,
        telegram_link: str | None = None,
    ) -> RenderedMessage:
        """A message of one of the PAYLOAD_KINDS (or a bot reply) from its outbox payload;
        ValueError when the payload is not one (no later attempt can render it)."""
        if kind is NotificationKind.BOT_REPLY:
            return self.render_reply(decode_reply(payload), Channel(channel))
        if kind is NotificationKind.WORKFLOW_SUMMARY:
            return self.render_workflow(channel, decode_workflow(payload), telegram_link=telegram_link)
        if kind is NotificationKind.MODEL_SERVING:
            return self.render_serving(channel, decode_serving(payload))
        if kind is NotificationKind.PIPELINE_EVENT:
            return self.render_pipeline(channel, decode_pipeline(payload))
        if kind is NotificationKind.IDLE_NUDGE:
            return self.render_nudge(channel, NudgeListView.from_payload(payload))
        raise ValueError(f"{kind.value} messages are not rendered from their payload")

    def with_personal_page(self, message: RenderedMessage, url: str) -> RenderedMessage:
        """`message` with the footer line that links its recipient's own page (GET /me): the one
        place that line is made, for every kind of message, from `{channel}/_personal_page.*.j2`."""
        context = {"url": url}
        try:
            if isinstance(message, TelegramMessage):
                (footer,) = self._templates.render(self._names(Channel.TELEGRAM, PERSONAL_PAGE), context)
                footer = footer.strip()
                body = truncate_html(message.html, TELEGRAM_MAX_CHARS - len(footer) - 2)
                return replace(message, html=f"{body}\n\n{footer}")
            if isinstance(message, SlackMessage):
                (footer,) = self._templates.render(self._names(Channel.SLACK, PERSONAL_PAGE), context)
                block = {
                    "type": "context",
                    "elements": [{"type": "mrkdwn", "text": footer.strip(), "verbatim": True}],
                }
                blocks = message.blocks[: SLACK_MAX_BLOCKS - 1]
                return replace(message, blocks=(*blocks, block))
            if isinstance(message, MattermostMessage):
                (footer,) = self._templates.render(self._names(Channel.MATTERMOST, PERSONAL_PAGE), context)
                footer = mrkdwn_to_markdown(footer.strip())
                body = cut_text(message.markdown, MATTERMOST_MAX_CHARS - len(footer) - 2)
                return replace(message, markdown=f"{body}\n\n{footer}")
            if isinstance(message, WebhookMessage):
                page = WebLink("personal_page", "Your runs and notification settings", url)
                return replace(message, links=(*message.links, page))
            text, html = self._templates.render(self._names(Channel.EMAIL, PERSONAL_PAGE)[1:], context)
        except jinja2.TemplateError as exc:
            raise RenderError(_describe(exc)) from None
        end = message.html.lower().rfind("</body>")
        html = message.html + html if end < 0 else message.html[:end] + html + message.html[end:]
        return replace(message, text=f"{message.text.rstrip()}\n\n{text.strip()}\n", html=html)

    def log_url(self, view: SummaryView) -> str | None:
        """The job's log link from `notify.log_url_template`; None without one or if not http(s)."""
        return self._template_url(self._log_url, view, "log_url_template")

    def grafana_url(self, view: SummaryView) -> str | None:
        """The job's Grafana link from `links.grafana_url_template`; None without one or if not http(s)."""
        return self._template_url(self._grafana_url, view, "grafana_url_template")

    def job_dashboard_url(self, view: SummaryView) -> str | None:
        """The job's page, `{public_url}/jobs/{namespace}/{name}?uid={uid}` (signed and expiring when
        links have a key); None without a public URL."""
        return self._links.job(view.namespace, view.name, view.uid, self._clock())

    def _template_url(self, template: jinja2.Template | None, view: SummaryView, setting: str) -> str | None:
        if template is None:
            return None
        try:
            url = template.render(**link_variables(view)).strip()
        except jinja2.TemplateError as exc:
            raise RenderError(f"{setting}: {_describe(exc)}") from None
        return url if _is_web_url(url) else None

    def _render(
        self, channel: Channel, kind: str, context: Mapping[str, Any], images: Sequence[InlineImage]
    ) -> RenderedMessage:
        names = self._names(channel, kind)
        try:
            parts = self._templates.render(names, context)
        except jinja2.TemplateError as exc:
            raise RenderError(_describe(exc)) from None
        if channel is Channel.TELEGRAM:
            return TelegramMessage(truncate_html(parts[0].strip()), images=tuple(images))
        if channel is Channel.SLACK:
            return replace(slack_message(parts[0]), images=tuple(images))
        if channel is Channel.WEBHOOK:
            return webhook_message(kind, parts[0], parts[1], context)
        if channel is Channel.MATTERMOST:
            return mattermost_message(parts[0])
        subject, text, html = parts
        return MailMessage(
            subject=" ".join(subject.split()), text=text.strip() + "\n", html=html, images=tuple(images)
        )

    @staticmethod
    def _names(channel: Channel, kind: str) -> list[str]:
        return [pattern.format(kind=kind) for pattern in _TEMPLATE_FILES[channel]]


def mattermost_message(rendered: str) -> MattermostMessage:
    """A Mattermost post from a Slack template rendered as Markdown: its bold made Markdown's, cut
    to the longest post Mattermost takes."""
    return MattermostMessage(cut_text(mrkdwn_to_markdown(rendered.strip()), MATTERMOST_MAX_CHARS))


def slack_message(mrkdwn: str) -> SlackMessage:
    """Block Kit sections from rendered mrkdwn, within Slack's block and length limits."""
    paragraphs = [p.strip("\n") for p in re.split(r"\n[ \t]*\n", mrkdwn.strip()) if p.strip()]
    blocks: list[dict[str, Any]] = []
    pending = ""
    for paragraph in paragraphs:
        if paragraph.strip() == "---":
            if pending:
                blocks.extend(_sections(pending))
                pending = ""
            blocks.append({"type": "divider"})
            continue
        candidate = f"{pending}\n\n{paragraph}" if pending else paragraph
        if len(candidate) <= SLACK_MAX_SECTION_CHARS:
            pending = candidate
        else:
            if pending:
                blocks.extend(_sections(pending))
            pending = paragraph
    if pending:
        blocks.extend(_sections(pending))
    if len(blocks) > SLACK_MAX_BLOCKS:
        blocks = [*blocks[: SLACK_MAX_BLOCKS - 1], *_sections(TRUNCATION_MARKER.strip())]
    fallback = cut_mrkdwn(paragraphs[0] if paragraphs else "", SLACK_MAX_TEXT_CHARS)[0]
    return SlackMessage(text=fallback, blocks=tuple(blocks))


def _sections(text: str) -> list[dict[str, Any]]:
    return [
        # verbatim: Slack parses the text as written, without turning words into links or mentions.
        {"type": "section", "text": {"type": "mrkdwn", "text": piece, "verbatim": True}}
        for piece in cut_mrkdwn(text, SLACK_MAX_SECTION_CHARS)
    ]


def _environment(
    loader: jinja2.BaseLoader, *, autoescape: bool, finalize: Callable[[Any], Any] | None = None
) -> SandboxedEnvironment:
    return SandboxedEnvironment(
        loader=loader,
        autoescape=autoescape,
        finalize=finalize,
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=False,
        # The templates are read once, at startup (an override in `template_dir` too): no file
        # check on every message.
        auto_reload=False,
    )


def _distinct_recommendations(views: Sequence[SummaryView], limit: int) -> list[RecommendationView]:
    """The group's advice, once per family (domain.rightsizing.sweeps: "For the 7 runs of
    sweep-lr: …"), most severe first; views made without their advice give their messages, each once."""
    if any(view.advice for view in views):
        runs = [SweepRun(view.name, view.family, view.advice) for view in views]
        return [
            RecommendationView(
                a.recommendation.severity.value, a.recommendation.message, a.recommendation.field_path
            )
            for a in advice_per_family(runs)[:limit]
        ]
    seen: dict[str, RecommendationView] = {}
    for view in views:
        for rec in view.recommendations:
            seen.setdefault(rec.message, rec)
    return list(seen.values())[:limit]


def _epoch_ms(moment: datetime | None) -> int | None:
    return None if moment is None else int(moment.timestamp() * 1000)


_UNSAFE_IN_REGEX = re.compile(r"[^A-Za-z0-9_-]")
# Logs and metrics a little before the start and after the end: start-up lines, the last scrape.
LINK_MARGIN = timedelta(minutes=5)


def link_variables(view: SummaryView) -> dict[str, Any]:
    """What `log_url_template` and `grafana_url_template` are given (docs/channels.md lists them)."""
    start = view.started_at - LINK_MARGIN if view.started_at is not None else None
    end = view.finished_at + LINK_MARGIN if view.finished_at is not None else None
    return {
        "cluster": view.cluster,
        "namespace": view.namespace,
        "name": view.name,
        "uid": view.uid,
        "started": view.started_at,
        "finished": view.finished_at,
        "started_ms": _epoch_ms(view.started_at),
        "finished_ms": _epoch_ms(view.finished_at),
        "pods": list(view.pods),
        # For a regex matcher between double quotes in PromQL or LogQL: `pod=~"{{ pod_regex }}"`.
        "pod_regex": "|".join(_UNSAFE_IN_REGEX.sub(lambda m: "\\\\" + m.group(), p) for p in view.pods),
        "nodes": list(view.nodes),
        "node": view.nodes[0] if view.nodes else None,
        "start": _epoch_ms(start),
        "end": _epoch_ms(end),
    }


def _utc_now() -> datetime:
    return datetime.now(UTC)


def _is_web_url(url: str) -> bool:
    return url.startswith(("https://", "http://")) and not any(c.isspace() for c in url)


def _describe(exc: jinja2.TemplateError) -> str:
    where = ""
    if isinstance(exc, jinja2.TemplateSyntaxError):
        where = f" ({exc.name or 'template'}, line {exc.lineno})"
    return f"template error{where}: {exc.message or type(exc).__name__}"
