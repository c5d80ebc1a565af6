"""The service's own Prometheus metrics, defined once and served by the API's `/metrics`.

Defined here, at the top of the package, because both the service (which increments them) and
the API (which serves them) need the same objects, and neither may import the other. Every metric
lives on the CollectorRegistry passed in, never on prometheus-client's global one, so that tests
and several service instances in one process do not collide.
"""

from __future__ import annotations

from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

NAMESPACE = "inno_notify"

# Seconds: from sub-millisecond local queries to Prometheus's own 2-minute query timeout.
QUERY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0)
# Seconds from an object's change in Kubernetes to its record in the database.
LAG_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 900.0)
API_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)


@dataclass(frozen=True, slots=True)
class Telemetry:
    """The metric objects; build them with `Telemetry.create(registry)`."""

    registry: CollectorRegistry
    watch_events: Counter
    watch_restarts: Counter
    ingest_lag: Histogram
    ingest_objects: Counter
    outbox_depth: Gauge
    sends: Counter
    prometheus_query_seconds: Histogram
    jobs_summarized: Counter
    api_request_seconds: Histogram
    rejected_objects: Counter
    rejected_values: Counter
    leader: Gauge
    leader_changes: Counter
    leader_term: Gauge
    live_rounds: Counter
    nudges: Counter

    @classmethod
    def create(cls, registry: CollectorRegistry) -> Telemetry:
        return cls(
            registry=registry,
            watch_events=Counter(
                "watch_events",
                "Kubernetes watch events received, by resource (jobs, pods, workloads, events) and "
                "event type (ADDED, MODIFIED, DELETED, BOOKMARK).",
                ["resource", "type"],
                namespace=NAMESPACE,
                registry=registry,
            ),
            watch_restarts=Counter(
                "watch_restarts",
                "Watch streams started again, by resource and why (gone: 410 Gone relist, timeout: "
                "silent stream, error: connection or API error).",
                ["resource", "reason"],
                namespace=NAMESPACE,
                registry=registry,
            ),
            ingest_lag=Histogram(
                "ingest_lag_seconds",
                "Seconds from a watch event's arrival to its record being committed.",
                buckets=LAG_BUCKETS,
                namespace=NAMESPACE,
                registry=registry,
            ),
            ingest_objects=Counter(
                "ingest_objects",
                "Objects the ingestion pipeline took (parsed) or passed over because the store holds "
                "them as they are (unchanged: a start's first relist).",
                ["outcome"],
                namespace=NAMESPACE,
                registry=registry,
            ),
            outbox_depth=Gauge(
                "outbox_depth",
                "Notifications in the outbox, by delivery status (pending, sent, failed).",
                ["status"],
                namespace=NAMESPACE,
                registry=registry,
            ),
            sends=Counter(
                "sends",
                "Send attempts, by channel and outcome (sent, retry, failed; found_sent: rows a takeover "
                "found already delivered).",
                ["channel", "outcome"],
                namespace=NAMESPACE,
                registry=registry,
            ),
            prometheus_query_seconds=Histogram(
                "prometheus_query_seconds",
                'Latency of usage collection against Prometheus: metric="round" is one batched round, '
                "all metrics of all jobs due together.",
                ["metric"],
                buckets=QUERY_BUCKETS,
                namespace=NAMESPACE,
                registry=registry,
            ),
            jobs_summarized=Counter(
                "jobs_summarized",
                "Finished jobs whose summary was planned, by outcome (summarized, silent, missing: "
                "summarized with figures missing after giving up on Prometheus).",
                ["outcome"],
                namespace=NAMESPACE,
                registry=registry,
            ),
            api_request_seconds=Histogram(
                "api_request_seconds",
                "REST API request latency, by route template, method and status code.",
                ["route", "method", "status"],
                buckets=API_BUCKETS,
                namespace=NAMESPACE,
                registry=registry,
            ),
            rejected_objects=Counter(
                "rejected_objects",
                "Objects read from the cluster and set aside instead of recorded, by resource (Job, Pod, "
                "Event, Workload) and reason (wrong_type, missing_field, out_of_range, bad_time, "
                "bad_quantity, bad_key, malformed, unstorable, internal_error; for watch lines "
                "invalid_json, not_an_object, line_too_long, unknown_type).",
                ["resource", "reason"],
                namespace=NAMESPACE,
                registry=registry,
            ),
            rejected_values=Counter(
                "rejected_values",
                "Values dropped from objects that were recorded without them, by resource, field "
                "(owner, completion_index) and reason (not_one_address, out_of_range).",
                ["resource", "field", "reason"],
                namespace=NAMESPACE,
                registry=registry,
            ),
            leader=Gauge(
                "leader",
                "1 while this replica leads (watches, measures, sends), else 0. Without election "
                "(SQLite, ha.enabled: false) the one instance leads.",
                namespace=NAMESPACE,
                registry=registry,
            ),
            leader_changes=Counter(
                "leader_changes",
                "Changes of this replica's leadership, by change (acquired; lost: the lease could not "
                "be renewed or was taken; released: handed over on shutdown).",
                ["change"],
                namespace=NAMESPACE,
                registry=registry,
            ),
            leader_term=Gauge(
                "leader_term",
                "The leadership term this replica leads in (0 while it does not lead); it grows with "
                "every acquisition, in whichever replica.",
                namespace=NAMESPACE,
                registry=registry,
            ),
            live_rounds=Counter(
                "live_rounds",
                "Rounds of the live idle check, by outcome (ok, quiet: in live.quiet_hours, failed: "
                "Prometheus or the database did not answer).",
                ["outcome"],
                namespace=NAMESPACE,
                registry=registry,
            ),
            nudges=Counter(
                "nudges",
                "Pods whose owner was nudged about idle GPUs (one per pod and nudge, whatever the "
                "number of channels).",
                namespace=NAMESPACE,
                registry=registry,
            ),
        )
