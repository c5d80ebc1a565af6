"""Links a message may show, from values anyone can write: an annotation, a pipeline's POST.

A link ends up as `<a href="…">` in Telegram and e-mail and as `<url|title>` in Slack, so only a
plain web address is a link: `http` or `https`, a host, printable ASCII without spaces or quotes,
at most :data:`URL_MAX_CHARS` characters. Anything else (`javascript:`, `data:`, a URL with a line
break or a `|` that would end a Slack link early) is no link at all; titles are capped and shown
escaped by each channel.

MLflow: an owner links a job (or workflow, or InferenceService) to its MLflow run with an
annotation, either the run's URL (`inno-notify/mlflow-run-url`) or its id
(`inno-notify/mlflow-run-id`, with `inno-notify/mlflow-experiment-id` if known), which becomes a
link when the installation names its MLflow UI (`workflows.mlflow_url`): the UI's routes
`#/experiments/<experiment>/runs/<run>` and, without an experiment, `#/runs/<run>`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from urllib.parse import urlsplit

from inno_notify.domain.model import Link

__all__ = [
    "LINKS_MAX",
    "MLFLOW_EXPERIMENT_ID_KEY",
    "MLFLOW_RUN_ID_KEY",
    "MLFLOW_RUN_URL_KEY",
    "TITLE_MAX_CHARS",
    "URL_MAX_CHARS",
    "link",
    "mlflow_links",
    "web_url",
]

MLFLOW_RUN_URL_KEY = "inno-notify/mlflow-run-url"
MLFLOW_RUN_ID_KEY = "inno-notify/mlflow-run-id"
MLFLOW_EXPERIMENT_ID_KEY = "inno-notify/mlflow-experiment-id"
MLFLOW_TITLE = "MLflow run"

URL_MAX_CHARS = 2048
TITLE_MAX_CHARS = 200
# Links one message shows at most.
LINKS_MAX = 10

# Printable ASCII without space, quotes, angle brackets, backslash, backtick, braces or `|`.
_URL_CHARS = re.compile(r"[!#$%&()*+,\-./0-9:;=?@A-Z\[\]_a-z~]+")
_MLFLOW_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")


def web_url(value: object) -> str | None:
    """`value` if it is a plain http(s) URL with a host, else None."""
    if not isinstance(value, str) or not 0 < len(value) <= URL_MAX_CHARS:
        return None
    if not _URL_CHARS.fullmatch(value):
        return None
    try:
        parts = urlsplit(value)
    except ValueError:
        return None
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
        return None
    return value


def link(title: object, url: object) -> Link | None:
    """A link with a plain title (whitespace collapsed, capped), or None if the URL is no web URL."""
    checked = web_url(url)
    if checked is None:
        return None
    printable = "".join(c for c in title if c.isprintable() or c.isspace()) if isinstance(title, str) else ""
    text = " ".join(printable.split())[:TITLE_MAX_CHARS]
    return Link(text or checked[:TITLE_MAX_CHARS], checked)


def _first(layers: Sequence[Mapping[str, object]], key: str) -> str | None:
    for layer in layers:
        value = layer.get(key)
        if isinstance(value, str) and value.strip():
            return value.strip()
    return None


def mlflow_links(layers: Sequence[Mapping[str, object]], mlflow_url: str | None) -> tuple[Link, ...]:
    """The MLflow run link written on an object (annotations, then labels), if any."""
    url = _first(layers, MLFLOW_RUN_URL_KEY)
    if url is not None:
        found = link(MLFLOW_TITLE, url)
        if found is not None:
            return (found,)
    run = _first(layers, MLFLOW_RUN_ID_KEY)
    if run is None or mlflow_url is None or not _MLFLOW_ID.fullmatch(run):
        return ()
    experiment = _first(layers, MLFLOW_EXPERIMENT_ID_KEY)
    base = mlflow_url.rstrip("/")
    if experiment is not None and _MLFLOW_ID.fullmatch(experiment):
        target = f"{base}/#/experiments/{experiment}/runs/{run}"
    else:
        target = f"{base}/#/runs/{run}"
    found = link(MLFLOW_TITLE, target)
    return (found,) if found is not None else ()
