"""batch/v1 Job: a run of its own, unless a watched run controls it (a JobSet's child Job, an
MPIJob's launcher, a RayJob's submitter): then it is a `Link` and its pods are that run's."""

from __future__ import annotations

from ..model import JobRecord
from ..parsing.config import ParseConfig
from ..parsing.fields import JsonObject, SetAside, key, mapping
from ..parsing.job import parse_job
from ..parsing.ownership import owned_by
from .spec import Link

__all__ = ["parse_batch_job"]


def parse_batch_job(obj: JsonObject, cfg: ParseConfig, notes: list[SetAside]) -> JobRecord | Link:
    metadata = mapping(obj, "metadata")
    parent = owned_by(metadata, cfg.owner_kinds) if cfg.owner_kinds else None
    if parent is not None:
        uid = key(metadata, "uid")
        if uid is not None:
            return Link(uid, parent)
    return parse_job(obj, cfg, notes)
