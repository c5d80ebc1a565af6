"""What the webhook gets of each kind: the e-mail's subject as its title, the e-mail's plain text
without its footer, the links the templates print, and the views the other channels render from,
as JSON that any receiver can read back (values as they came: no markup escaping)."""

from __future__ import annotations

import json

import orjson

from inno_notify.adapters.channels.base import MailMessage, WebhookMessage
from inno_notify.adapters.channels.nudge_views import NudgeListView
from inno_notify.adapters.channels.render import Renderer
from inno_notify.adapters.channels.webhook import body
from inno_notify.adapters.channels.webhook_views import without_footer
from inno_notify.domain.model import Channel, NotificationKind
from tests.adapters.channels.test_message_render import notice, pipeline, workflow
from tests.adapters.channels.test_render import view

RENDERER = Renderer(
    dashboard_url="https://gpu.example.org/",
    log_url_template="https://grafana.example.org/explore?ns={{ namespace }}&job={{ name }}",
)
HOSTILE = "<b>*@here*</b> & `x`"


def webhook(message: object) -> WebhookMessage:
    assert isinstance(message, WebhookMessage)
    # Every body is JSON as is, and reads back the same.
    document = body(message)
    assert json.loads(orjson.dumps(document)) == json.loads(json.dumps(document))
    return message


def test_a_summary_is_the_mails_subject_and_text_with_its_job_and_links() -> None:
    summary = view(name=f"train{HOSTILE}")
    mail = RENDERER.render_summary(Channel.EMAIL, summary)
    message = webhook(RENDERER.render_summary(Channel.WEBHOOK, summary))

    assert isinstance(mail, MailMessage)
    assert message.kind == "job_summary"
    assert message.title == mail.subject
    assert message.text == without_footer(mail.text)
    assert "annotation inno-notify/owner" in mail.text and "inno-notify/owner" not in message.text
    # Values as the cluster wrote them: JSON needs no markup escaping.
    assert message.data["job"]["name"] == f"train{HOSTILE}"
    assert HOSTILE in message.text
    # (a log link with a space in it is no URL: none)
    plain = webhook(RENDERER.render_summary(Channel.WEBHOOK, view()))
    assert [link.rel for link in plain.links] == ["page", "logs"]
    assert plain.links[1].url.startswith("https://grafana.example.org/explore?ns=")


def test_a_group_lists_its_jobs_with_their_totals() -> None:
    message = webhook(
        RENDERER.render_group(Channel.WEBHOOK, [view(uid="u1", name="a"), view(uid="u2", name="b")])
    )
    assert message.kind == "group_summary"
    assert [item["job"]["name"] for item in message.data["items"]] == ["a", "b"]
    assert message.data["items"][0]["dashboard_url"].startswith("https://gpu.example.org/")
    assert message.data["totals"]["jobs"] == 2


def test_workflows_models_pipeline_messages_and_nudges() -> None:
    flow = webhook(RENDERER.render_workflow(Channel.WEBHOOK, workflow()))
    assert flow.kind == "workflow_summary" and flow.data["workflow"]["ref"] == "face-research/train-pipeline"
    assert {"rel": "link", "title": "MLflow run", "url": "https://mlflow.example.org/#/runs/ab12"} in body(
        flow
    )["links"]
    model = webhook(RENDERER.render_serving(Channel.WEBHOOK, notice()))
    assert model.kind == "model_serving" and model.data["model"]["url"] == "https://resnet-serve.example.org"
    events = webhook(RENDERER.render_pipelines(Channel.WEBHOOK, [pipeline(), pipeline(" 2")]))
    assert [m["title"] for m in events.data["messages"]] == [
        "Training finished, model in prod",
        "Training finished, model in prod 2",
    ]
    nudge = webhook(RENDERER.render_nudge(Channel.WEBHOOK, NudgeListView(())))
    assert nudge.kind == NotificationKind.IDLE_NUDGE.value and nudge.data["nudges"]["items"] == []


def test_a_text_without_a_footer_stays_whole() -> None:
    assert without_footer("line\n\n-- not a footer\n") == "line\n\n-- not a footer"
    assert without_footer("a\n--\nfoot\n--\nlast footer") == "a\n--\nfoot"
