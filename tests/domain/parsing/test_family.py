"""Family names: generated suffixes go, meaningful names stay."""

from __future__ import annotations

import pytest

from inno_notify.domain.parsing.family import family_from_name, job_family

NAMES = [
    ("train-resnet-7f9c2", "train-resnet"),  # 5 random characters with digits
    ("sweep-lr-0.01-abcde", "sweep-lr-0.01"),  # all hex letters
    ("train-resnet-x8kzp", "train-resnet"),  # Kubernetes' random alphabet has no vowels
    ("e2e-cronjob-29707813", "e2e-cronjob"),  # CronJob schedule in minutes
    ("finetune-whisper-29707800", "finetune-whisper"),
    ("ml-job-online-filtering-6-4f6f9f6", "ml-job-online-filtering-6"),  # short git SHA
    ("train-model", "train-model"),  # a word, not a suffix
    ("bert-large", "bert-large"),
    ("train-bs-10000", "train-bs-10000"),  # a number, not a suffix
    ("eval-imagenet-nightly", "eval-imagenet-nightly"),
    ("resnet50", "resnet50"),  # nothing to split
    ("worker1", "worker1"),
    ("-7f9c2", "-7f9c2"),  # no stem left: keep the name
    ("job-deadbeef", "job-deadbeef"),  # 8 hex letters without a digit: a word-like token
    ("run-1a2b3c4d5e", "run"),  # 10-character hex SHA
]


@pytest.mark.parametrize(("name", "family"), NAMES)
def test_family_from_name(name: str, family: str) -> None:
    assert family_from_name(name) == family


JOBS = [
    # (name, generateName, label) -> family
    (("train-resnet-7f9c2", None, "resnet-imagenet"), "resnet-imagenet"),
    (("sweep-lr-0.01-k9x2p", "sweep-lr-0.01-", None), "sweep-lr-0.01"),
    (("exp-model-large", "exp-model-", None), "exp-model"),  # generateName is exact, no guessing
    ((None, "hpo-", None), "hpo"),
    (("nightly-eval", "other-", None), "nightly-eval"),  # generateName not a prefix: ignored
    (("train-model", None, None), "train-model"),
    ((None, None, None), None),
]


@pytest.mark.parametrize(("args", "family"), JOBS)
def test_job_family(args: tuple[str | None, str | None, str | None], family: str | None) -> None:
    assert job_family(*args) == family
