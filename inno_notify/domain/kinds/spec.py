"""What a workload kind module answers, and nothing more (the way Kueue's jobframework `GenericJob`
is one small interface every integration implements, KEP-369).

A kind module turns one object of its kind into either a workload record (a run: identity, owner
and team, outcome and end, attempts, replica roles) or a `Link` (an object that belongs to a run
without being one: a JobSet's child Job, an MPIJob's launcher Job, a RayJob's RayCluster). Which pods
are a run's is not the module's question: pods name their controller (domain.parsing.ownership),
and links lead from it to the run. The pipeline never names a kind; the watch set, the RBAC rules,
readiness and the simulated API server are derived from the registry (domain.kinds).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..model import JobRecord, WorkloadKind
from ..parsing.config import ParseConfig
from ..parsing.fields import JsonObject, SetAside

__all__ = ["LINK_DEPTH", "KindSpec", "Link", "Parser", "owner_key"]

# Links lead from a pod's controller to its run in at most this many steps (Pod → Job → JobSet → a
# run above it); a cycle of hand-written owner references ends there.
LINK_DEPTH = 4


@dataclass(frozen=True, slots=True)
class Link:
    """An object that belongs to the run `parent_uid` without being a run of its own: its pods are
    the run's pods."""

    uid: str
    parent_uid: str


Parser = Callable[[JsonObject, ParseConfig, list[SetAside]], "JobRecord | Link | None"]


def owner_key(group: str, kind: str) -> str:
    """How a controller is named in `ParseConfig.owner_kinds`: "kubeflow.org/PyTorchJob"."""
    return f"{group}/{kind}"


@dataclass(frozen=True, slots=True)
class KindSpec:
    """One watched kind: its API (group, versions preferred first, plural), how to parse it, what it
    is stored as (None: it is only ever a `Link`, like a RayCluster), and the `workloads.kinds` key
    that turns it on."""

    kind: str
    group: str
    versions: tuple[str, ...]
    plural: str
    parse: Parser
    stored: WorkloadKind | None
    setting: str

    @property
    def owner_key(self) -> str:
        return owner_key(self.group, self.kind)
