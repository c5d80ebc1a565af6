"""The family of a job: the name its repeated runs share, so right-sizing can compare them.

``train-resnet-7f9c2`` and ``train-resnet-x8k2p`` are two runs of ``train-resnet``. A family is taken,
in order, from the ``inno-notify/family`` label or annotation; from ``metadata.generateName`` when the
name was generated from it (exact, no guessing); else from the name with one generated suffix removed.
A suffix counts as generated when it is

- 5 characters of ``[a-z0-9]``, not all digits, that contain a digit, or contain no vowel
  (Kubernetes' own random alphabet ``bcdfghjklmnpqrstvwxz2456789`` has none), or are all hex
  letters (``abcde``); so
  ``-7f9c2``, ``-x8kzp`` and ``-abcde`` go while ``-model`` and ``-large`` stay;
- a CronJob's scheduled time in minutes since the epoch (8 or more digits: ``-29707813``);
- a short git SHA, 7 to 12 hex characters with both a digit and a letter (``-4f6f9f6``).

Names that only look generated are kept whole: a wrong split would merge unrelated jobs, a missed
split only leaves a family of one.
"""

from __future__ import annotations

import re

__all__ = ["family_from_name", "job_family"]

_RANDOM5 = re.compile(r"[a-z0-9]{5}")
_CRON = re.compile(r"\d{8,}")
_GIT_SHA = re.compile(r"(?=[0-9a-f]*[a-f])(?=[0-9a-f]*\d)[0-9a-f]{7,12}")
_VOWELS = frozenset("aeiouy")
_HEX_LETTERS = frozenset("abcdef")


def _generated(token: str) -> bool:
    if _RANDOM5.fullmatch(token):
        letters = {c for c in token if c.isalpha()}
        if not letters:
            return False  # "-10000" is a step count or a size, not a random suffix
        has_digit = any(c.isdigit() for c in token)
        return has_digit or not letters & _VOWELS or letters <= _HEX_LETTERS
    return bool(_CRON.fullmatch(token) or _GIT_SHA.fullmatch(token))


def family_from_name(name: str) -> str:
    stem, sep, last = name.rpartition("-")
    if sep and stem and _generated(last):
        return stem
    return name


def job_family(name: str | None, generate_name: str | None, label: str | None) -> str | None:
    if label:
        return label
    if generate_name and (not name or name.startswith(generate_name)):
        stem = generate_name.rstrip("-.")
        if stem:
            return stem
    if name:
        return family_from_name(name)
    return None
