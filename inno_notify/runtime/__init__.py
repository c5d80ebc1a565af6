"""Composition root: builds the adapters from the settings and runs the service's parts together.

`serve` runs every component in one TaskGroup until SIGTERM/SIGINT, then asks them to stop and
waits for them (graceful: in-flight sends finish). Its parts are of two kinds:

- every replica: the REST API, the probes, the outbox-depth sampler, and the leadership loop;
- leader only (`term.LeaderTerm`): watchers and ingestion, usage collection, dispatch, the digest
  scheduler, the Telegram bot's update polling (or its webhook's registration), built afresh for
  each term (watchers list afresh) and stopped when the term ends.

With leader election (`ha.enabled`; auto: on Postgres) the leadership loop is service.leadership's
Elector, and the store's leader-only writes are fenced by the term (adapters/db/leases.py).
Without it (SQLite, or `ha.enabled: false`) this instance leads from the start; with SQLite a
second `serve` on the same file refuses to start (service.single_instance).

One module a job: `builders` (settings → adapters, shared with the one-shot commands),
`pipeline` (the leader's pipeline, shared with the demo), `term` (one leader term), `serve` (the
process: resources on one exit stack, the components in one TaskGroup). This package only
composes: what the parts do lives in service/ and adapters/.
"""

from inno_notify.runtime.builders import (
    Component,
    build_chart_drawer,
    build_charts,
    build_digest_accounting,
    build_digest_renderer,
    build_dispatcher,
    build_job_page_renderer,
    build_renderer,
    build_senders,
    configured_channels,
    election_enabled,
    election_timings,
    page_links,
    service_store,
    utc_now,
)
from inno_notify.runtime.pipeline import Pipeline, build_pipeline, build_workflows, watch_component
from inno_notify.runtime.serve import api_component, serve

__all__ = [
    "Component",
    "Pipeline",
    "api_component",
    "build_chart_drawer",
    "build_charts",
    "build_digest_accounting",
    "build_digest_renderer",
    "build_dispatcher",
    "build_job_page_renderer",
    "build_pipeline",
    "build_renderer",
    "build_senders",
    "build_workflows",
    "configured_channels",
    "election_enabled",
    "election_timings",
    "page_links",
    "serve",
    "service_store",
    "utc_now",
    "watch_component",
]
