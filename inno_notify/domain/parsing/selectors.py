"""Kubernetes label selectors, as written for `kubectl -l`: which pods are interactive workspaces.

`live.workspace_selectors` names the long-running pods (Coder workspaces, JupyterHub servers) the
live check watches besides Jobs and bare GPU pods. A selector is a comma-separated list of
requirements, all of which must hold (the grammar of k8s.io/apimachinery `labels.Parse`):

- ``key`` (the label exists) and ``!key`` (it does not);
- ``key=value``, ``key==value``, ``key!=value`` (a missing label is "not equal");
- ``key in (a, b)``, ``key notin (a, b)`` (``notin`` also holds when the label is missing).

Values may be empty (``key=`` matches an empty label, as JupyterHub writes the default server's
name). The selectors come from the configuration, not from the cluster; the labels they are
matched against come from the cluster and are only compared, never interpreted.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

__all__ = ["LabelSelector", "Requirement", "SelectorError", "parse_selector", "parse_selectors"]

# A label key: an optional DNS-subdomain prefix and a name of up to 63 characters.
_KEY = r"(?:[a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?"
_VALUE = r"(?:[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?"
_EXISTS = re.compile(rf"(?P<neg>!?)\s*(?P<key>{_KEY})")
_EQUALITY = re.compile(rf"(?P<key>{_KEY})\s*(?P<op>==|!=|=)\s*(?P<value>{_VALUE})")
_SET = re.compile(rf"(?P<key>{_KEY})\s+(?P<op>in|notin)\s*\((?P<values>[^()]*)\)")


class SelectorError(ValueError):
    """A selector that does not follow the grammar; the message names the offending part."""


@dataclass(frozen=True, slots=True)
class Requirement:
    """One requirement: ``op`` is one of exists, !exists, =, !=, in, notin."""

    key: str
    op: str
    values: frozenset[str] = frozenset()

    def matches(self, labels: Mapping[str, object]) -> bool:
        value = labels.get(self.key)
        present = isinstance(value, str)
        if self.op == "exists":
            return present
        if self.op == "!exists":
            return not present
        if self.op in ("=", "in"):
            return present and value in self.values
        # "!=" and "notin": a missing label is not equal to anything.
        return not present or value not in self.values


@dataclass(frozen=True, slots=True)
class LabelSelector:
    """A parsed selector; ``text`` is what was written, for logs and docs."""

    text: str
    requirements: tuple[Requirement, ...]

    def matches(self, labels: Mapping[str, object]) -> bool:
        return all(r.matches(labels) for r in self.requirements)


def _split(text: str) -> list[str]:
    """Splits at the commas that are not inside ``in (…)`` parentheses."""
    parts, depth, current = [], 0, ""
    for char in text:
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
            if depth < 0:
                raise SelectorError(f"unbalanced ')' in {text!r}")
        if char == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += char
    if depth:
        raise SelectorError(f"unbalanced '(' in {text!r}")
    parts.append(current)
    return parts


def _requirement(part: str, text: str) -> Requirement:
    part = part.strip()
    if (match := _SET.fullmatch(part)) is not None:
        values = [v.strip() for v in match["values"].split(",")]
        if not all(re.fullmatch(_VALUE, v) for v in values):
            raise SelectorError(f"bad value in {part!r} of {text!r}")
        return Requirement(match["key"], match["op"], frozenset(values))
    if (match := _EQUALITY.fullmatch(part)) is not None:
        op = "!=" if match["op"] == "!=" else "="
        return Requirement(match["key"], op, frozenset({match["value"]}))
    if (match := _EXISTS.fullmatch(part)) is not None:
        return Requirement(match["key"], "!exists" if match["neg"] else "exists")
    raise SelectorError(f"not a label selector requirement: {part!r} in {text!r}")


def parse_selector(text: str) -> LabelSelector:
    """Parses one selector; raises SelectorError. An empty selector is refused: it would match
    every GPU pod, which is what the Job and bare-pod paths are for."""
    if not text.strip():
        raise SelectorError("an empty selector would match every pod")
    return LabelSelector(text, tuple(_requirement(part, text) for part in _split(text)))


def parse_selectors(texts: Sequence[str]) -> tuple[LabelSelector, ...]:
    return tuple(parse_selector(text) for text in texts)
