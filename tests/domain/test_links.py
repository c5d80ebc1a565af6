"""Links from values anyone writes: only plain web URLs, MLflow runs by URL or by id."""

from __future__ import annotations

import pytest

from inno_notify.domain.links import link, mlflow_links, web_url
from inno_notify.domain.model import Link


@pytest.mark.parametrize(
    ("value", "ok"),
    [
        ("https://mlflow.example.org/#/experiments/1/runs/abc", True),
        ("http://10.0.0.5:5000/x?a=1&b=2", True),
        ("javascript:alert(1)", False),
        ("data:text/html,<b>", False),
        ("https://", False),
        ("ftp://example.org/x", False),
        ("https://example.org/a b", False),
        ("https://example.org/\n<!channel>", False),
        ("https://example.org/x|evil", False),
        ('https://example.org/"onmouseover=x', False),
        ("https://exämple.org/", False),
        ("https://example.org/" + "x" * 3000, False),
        (42, False),
    ],
)
def test_web_url(value: object, ok: bool) -> None:
    assert (web_url(value) is not None) is ok


def test_link_titles_are_collapsed_and_capped() -> None:
    assert link("  Model\n card \x00 ", "https://x.example/") == Link("Model card", "https://x.example/")
    assert link("", "https://x.example/") == Link("https://x.example/", "https://x.example/")
    made = link("t" * 500, "https://x.example/")
    assert made is not None and len(made.title) == 200
    assert link("t", "javascript:x") is None


@pytest.mark.parametrize(
    ("annotations", "base", "expected"),
    [
        (
            {"inno-notify/mlflow-run-url": "https://ml.example/#/runs/ab12"},
            None,
            "https://ml.example/#/runs/ab12",
        ),
        ({"inno-notify/mlflow-run-id": "ab12"}, "https://ml.example", "https://ml.example/#/runs/ab12"),
        (
            {"inno-notify/mlflow-run-id": "ab12", "inno-notify/mlflow-experiment-id": "7"},
            "https://ml.example/",
            "https://ml.example/#/experiments/7/runs/ab12",
        ),
        ({"inno-notify/mlflow-run-id": "ab12"}, None, None),
        ({"inno-notify/mlflow-run-id": "../../admin"}, "https://ml.example", None),
        ({"inno-notify/mlflow-run-url": "javascript:x"}, None, None),
        ({}, "https://ml.example", None),
    ],
)
def test_mlflow_links(annotations: dict[str, str], base: str | None, expected: str | None) -> None:
    found = mlflow_links((annotations,), base)
    assert [link.url for link in found] == ([expected] if expected else [])
