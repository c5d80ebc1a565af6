"""Kubernetes objects (plain JSON dicts, as the API returns them) turned into domain records.

Everything here is pure: no I/O, no clock, stdlib only. The kube adapter hands raw dicts to these
functions; the pipeline stores what they return. Each module owns one kind of object or one rule.
"""

from __future__ import annotations

from .annotations import OwnerIntent, read_intent
from .bare_pod import parse_bare_gpu_pod
from .config import ParseConfig
from .events import KEPT_REASONS, event_count, relevant_event
from .family import family_from_name, job_family
from .fields import ParseError, SetAside, identity
from .job import parse_job
from .merge import apply_pods_to_job, merge_job, merge_kueue
from .outcome import decide_exit
from .pod import parse_pod
from .quantities import QuantityError, parse_quantity
from .selectors import LabelSelector, SelectorError, parse_selector, parse_selectors
from .workload import parse_workload
from .workspace import WorkspaceIdentity, directory_aliases, parse_workspace_pod, workspace_identity

__all__ = [
    "KEPT_REASONS",
    "LabelSelector",
    "OwnerIntent",
    "ParseConfig",
    "ParseError",
    "QuantityError",
    "SelectorError",
    "SetAside",
    "WorkspaceIdentity",
    "apply_pods_to_job",
    "decide_exit",
    "directory_aliases",
    "event_count",
    "family_from_name",
    "identity",
    "job_family",
    "merge_job",
    "merge_kueue",
    "parse_bare_gpu_pod",
    "parse_job",
    "parse_pod",
    "parse_quantity",
    "parse_selector",
    "parse_selectors",
    "parse_workload",
    "parse_workspace_pod",
    "read_intent",
    "relevant_event",
    "workspace_identity",
]
