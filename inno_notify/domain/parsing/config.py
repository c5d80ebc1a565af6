"""What the parsers need to know about the installation, passed in rather than read from settings.

The domain may not import :mod:`inno_notify.settings`; the composition root builds one
:class:`ParseConfig` from the settings (``cluster``, ``accounting.gpu_resources``,
``directory.owner_keys``, ``directory.teams[].namespaces``, ``directory.default_team``,
``live.workspace_selectors``, the directory's users) and hands it to every parse call.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from .selectors import LabelSelector

__all__ = ["DEFAULT_GPU_RESOURCES", "DEFAULT_OWNER_KEYS", "ParseConfig"]

DEFAULT_GPU_RESOURCES: Mapping[str, float] = MappingProxyType({"nvidia.com/gpu": 1.0})
DEFAULT_OWNER_KEYS: tuple[str, ...] = ("inno-notify/owner",)


@dataclass(frozen=True, slots=True)
class ParseConfig:
    """Installation facts used to turn Kubernetes objects into records.

        ``gpu_resources`` maps an extended resource name to the GPU-equivalents one unit of it is worth
        (CONTRACT.md §4: a pod's GPU-equivalents are the sum of ``limits[resource] × factor``). Resources
        not listed count as 0 GPUs. Typical entries:

        - whole GPUs: ``{"nvidia.com/gpu": 1.0}`` (the default);
        - MIG slices, by compute slices out of 7 on an A100/H100: ``"nvidia.com/mig-1g.10gb": 1/7``,
          ``"nvidia.com/mig-3g.40gb": 3/7``, ``"nvidia.com/mig-7g.80gb": 1.0`` (with the device plugin's
          "mixed" strategy; with the "single" strategy slices appear as ``nvidia.com/gpu`` and the factor
          of that name should be set to the slice's share);
        - time-sliced GPUs renamed by the device plugin (``renameByDefault: true``) with 4 replicas per
          GPU: ``"nvidia.com/gpu.shared": 0.25``.

        ``owner_keys`` are the annotation/label keys holding the owner's e-mail, tried in order on each
        object (see :mod:`.annotations`). ``namespace_teams`` maps a namespace to its team, used when a job
        names no team itself; ``default_team`` is the last resort. ``mlflow_url`` is the MLflow UI that
        an ``inno-notify/mlflow-run-id`` annotation links to (see :mod:`inno_notify.domain.links`).

        ``workspace_selectors`` pick the pods that are interactive workspaces (``live.workspace_selectors``,
        see :mod:`.workspace`); ``user_aliases`` maps a lower-case e-mail or unambiguous local part of
        the directory's users to their e-mail, so that a platform's user name finds its owner
        (:func:`.workspace.directory_aliases` builds it). ``owner_kinds`` are the controllers that make
        an object part of a watched workload (:mod:`.ownership`). ``namespace_owners`` maps a namespace to
    the owner it names (a Kubeflow profile namespace's ``owner`` annotation), used when the run and its
    pod templates name none.
    """

    cluster: str = "default"
    gpu_resources: Mapping[str, float] = field(default_factory=lambda: DEFAULT_GPU_RESOURCES)
    owner_keys: tuple[str, ...] = DEFAULT_OWNER_KEYS
    namespace_teams: Mapping[str, str] = field(default_factory=dict)
    default_team: str | None = None
    mlflow_url: str | None = None
    workspace_selectors: tuple[LabelSelector, ...] = ()
    user_aliases: Mapping[str, str] = field(default_factory=dict)
    # Controllers ("group/Kind", domain.kinds.owner_key) whose objects and pods belong to a watched
    # workload kind: the training kinds found served, and the objects between them and their pods.
    owner_kinds: frozenset[str] = frozenset()
    # The owner a namespace names (a Kubeflow profile's `owner` annotation), the last place a
    # run's owner is looked for; kept current by the watch (ClusterWatcher's namespace owners).
    namespace_owners: Mapping[str, str] = field(default_factory=dict)
