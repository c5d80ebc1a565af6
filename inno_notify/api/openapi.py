"""The OpenAPI 3.1 document of the REST API, served at /api/v1/openapi.json.

Written by hand next to serialize.py (the shapes it describes) and params.py (the rules it
states); tests validate every response the suite sees against it, and schemathesis fuzzes the
running app from it, so the document cannot quietly drift from what the endpoints do.
"""

from __future__ import annotations

from typing import Any

from inno_notify.api import params
from inno_notify.domain.model import (
    DeliveryStatus,
    JobStatus,
    MissingReason,
    RecommendationKind,
    Severity,
    Unit,
)

Schema = dict[str, Any]

# JSON Schema (ECMA-262) spelling of params.SAFE_TEXT: no NUL byte, which no database stores.
SAFE_PATTERN = "^[^\\x00]*$"
EMAIL_PATTERN = "^[^@/\\x00\\x09-\\x0d\\x20]{1,64}@[^@/\\x00\\x09-\\x0d\\x20]{1,189}$"


def ref(name: str) -> Schema:
    return {"$ref": f"#/components/schemas/{name}"}


def nullable(schema: Schema) -> Schema:
    if "type" in schema:
        kind = schema["type"]
        return {**schema, "type": [*(kind if isinstance(kind, list) else [kind]), "null"]}
    return {"anyOf": [schema, {"type": "null"}]}


def obj(properties: dict[str, Schema], *, optional: tuple[str, ...] = ()) -> Schema:
    return {
        "type": "object",
        "properties": properties,
        "required": [k for k in properties if k not in optional],
        "additionalProperties": False,
    }


def enum(kind: type[Any]) -> Schema:
    return {"type": "string", "enum": [m.value for m in kind]}


NUMBER: Schema = {"type": "number"}
INTEGER: Schema = {"type": "integer"}
STRING: Schema = {"type": "string"}
TIME: Schema = {"type": "string", "format": "date-time"}


def page(item: str) -> Schema:
    return obj(
        {
            "items": {"type": "array", "items": ref(item)},
            "next_cursor": {
                "type": ["string", "null"],
                "description": "Pass as ?cursor= for the next page; null on the last page.",
            },
        }
    )


SCHEMAS: dict[str, Schema] = {
    "Error": obj({"error": obj({"code": STRING, "message": STRING})}),
    "Requested": obj(
        {
            "gpus": {**NUMBER, "description": "GPU-equivalents per pod."},
            "cpu_cores": nullable({**NUMBER, "description": "CPU cores requested per pod."}),
            "memory_bytes": nullable({**INTEGER, "description": "Memory requested per pod, bytes."}),
        }
    ),
    "MissingFigure": obj({"figure": STRING, "reason": enum(MissingReason)}),
    "Usage": obj(
        {
            "gpu_minutes": nullable(NUMBER),
            "used_gpu_minutes": nullable(NUMBER),
            "gpus_idle": nullable(INTEGER),
            "gpu_util_mean_percent": nullable(NUMBER),
            "gpu_memory_peak_bytes": nullable(INTEGER),
            "memory_peak_bytes": nullable(INTEGER),
            "cpu_cores_p95": nullable(NUMBER),
            "missing": {"type": "array", "items": ref("MissingFigure")},
        }
    ),
    "Recommendation": obj(
        {
            "kind": enum(RecommendationKind),
            "severity": enum(Severity),
            "current": {"type": ["number", "string", "null"]},
            "suggested": {"type": ["number", "string"]},
            "unit": enum(Unit),
            "waste_gpu_minutes": NUMBER,
            "message": STRING,
        }
    ),
    "Job": obj(
        {
            "uid": STRING,
            "cluster": STRING,
            "namespace": STRING,
            "name": STRING,
            "owner": nullable(STRING),
            "team": nullable(STRING),
            "status": enum(JobStatus),
            "reason": nullable(STRING),
            "exit_code": nullable(INTEGER),
            "exit_reason": nullable(STRING),
            "created_at": nullable(TIME),
            "started_at": nullable(TIME),
            "finished_at": nullable(TIME),
            "queue_seconds": nullable(NUMBER),
            "runtime_seconds": nullable(NUMBER),
            "requested": ref("Requested"),
            "usage": {
                "anyOf": [ref("Usage"), {"type": "null"}],
                "description": "null until the job's usage has been collected.",
            },
            "recommendations": {"type": "array", "items": ref("Recommendation")},
        }
    ),
    "JobPage": page("Job"),
    "UsageGroup": obj(
        {
            "group": {**nullable(STRING), "description": "The team, owner or namespace; null: none known."},
            "jobs": {**INTEGER, "description": "Jobs that finished in the window."},
            "measured_jobs": {**INTEGER, "description": "Of those, jobs whose GPU-minutes were measured."},
            "gpu_minutes": nullable(NUMBER),
            "used_gpu_minutes": nullable(NUMBER),
            "idle_gpu_minutes": nullable(NUMBER),
            "memory_jobs": {**INTEGER, "description": "Jobs with both a memory request and a measured peak."},
            "memory_requested_bytes": {
                **nullable(INTEGER),
                "description": "Sum over memory_jobs of the per-pod request × parallelism.",
            },
            "memory_peak_bytes": {
                **nullable(INTEGER),
                "description": "Sum over memory_jobs of the per-pod peak × parallelism.",
            },
        }
    ),
    "UsageReport": obj(
        {
            "group_by": {"type": "string", "enum": ["team", "owner", "namespace"]},
            "since": nullable(TIME),
            "until": nullable(TIME),
            "computed_at": {**TIME, "description": "When these figures were computed (cached ≤ 30 s)."},
            "groups": {"type": "array", "items": ref("UsageGroup")},
        }
    ),
    "JobRecommendation": obj(
        {
            "id": INTEGER,
            "job": obj(
                {
                    "cluster": STRING,
                    "uid": STRING,
                    "namespace": STRING,
                    "name": STRING,
                    "owner": nullable(STRING),
                    "team": nullable(STRING),
                    "finished_at": nullable(TIME),
                }
            ),
            "kind": enum(RecommendationKind),
            "severity": enum(Severity),
            "current": {"type": ["number", "string", "null"]},
            "suggested": {"type": ["number", "string"]},
            "unit": enum(Unit),
            "waste_gpu_minutes": NUMBER,
            "waste_gib_hours": NUMBER,
            "waste_core_hours": NUMBER,
            "message": STRING,
            "field_path": nullable(STRING),
        }
    ),
    "RecommendationPage": page("JobRecommendation"),
    "Notification": obj(
        {
            "id": INTEGER,
            "kind": {"type": "string", "enum": ["job_summary", "digest", "idle_nudge"]},
            "channel": {"type": "string", "enum": ["telegram", "slack", "email"]},
            "recipient": STRING,
            "status": enum(DeliveryStatus),
            "cluster": nullable(STRING),
            "job_uid": nullable(STRING),
            "group_key": nullable(STRING),
            "created_at": TIME,
            "due_at": TIME,
            "next_attempt_at": nullable(TIME),
            "attempts": INTEGER,
            "last_error": nullable(STRING),
            "provider_message_id": nullable(STRING),
            "sent_at": nullable(TIME),
        }
    ),
    "NotificationPage": page("Notification"),
    "User": obj(
        {
            "email": STRING,
            "name": nullable(STRING),
            "slack_user_id": nullable(STRING),
            "telegram_chat_id": nullable(INTEGER),
            "channels": {
                "type": "array",
                "items": {"type": "string", "enum": ["telegram", "slack", "email"]},
            },
        }
    ),
    "UserBody": obj(
        {
            "email": {
                **nullable({"type": "string", "pattern": EMAIL_PATTERN}),
                "description": "Must match the path.",
            },
            "name": nullable({"type": "string", "maxLength": 200, "pattern": SAFE_PATTERN}),
            "slack_user_id": nullable({"type": "string", "maxLength": 64, "pattern": SAFE_PATTERN}),
            "telegram_chat_id": nullable({"type": "integer", "minimum": -(2**63), "maximum": 2**63 - 1}),
            "channels": {
                "type": "array",
                "items": {"type": "string", "enum": ["telegram", "slack", "email"]},
                "default": ["email"],
            },
        },
        optional=("email", "name", "slack_user_id", "telegram_chat_id", "channels"),
    ),
    "UserPage": page("User"),
    "EventBody": {
        **obj(
            {
                "to": {
                    "type": "string",
                    "maxLength": 254,
                    "pattern": EMAIL_PATTERN,
                    "description": "One person's e-mail: their directory channels, else e-mail.",
                },
                "team": {
                    "type": "string",
                    "pattern": "^[^\\x00]{1,253}$",
                    "description": "A team: its Slack channel where it has one, else its leads.",
                },
                "title": {"type": "string", "minLength": 1, "maxLength": 200, "pattern": SAFE_PATTERN},
                "text": {"type": "string", "maxLength": 4000, "pattern": SAFE_PATTERN},
                "links": {
                    "type": "array",
                    "maxItems": 10,
                    "items": obj(
                        {
                            "title": {
                                "type": "string",
                                "minLength": 1,
                                "maxLength": 200,
                                "pattern": SAFE_PATTERN,
                            },
                            "url": {
                                "type": "string",
                                "maxLength": 2048,
                                "pattern": "^https?://[!#$%&()*+,\\-./0-9:;=?@A-Z\\[\\]_a-z~]+$",
                            },
                        }
                    ),
                },
                "key": {
                    "type": "string",
                    "pattern": "^[A-Za-z0-9._:/+@=-]{1,200}$",
                    "description": "The message is sent once per key: the same key again sends nothing.",
                },
            },
            optional=("to", "team", "text", "links", "key"),
        ),
        "oneOf": [{"required": ["to"]}, {"required": ["team"]}],
    },
    "EventAccepted": obj(
        {
            "id": INTEGER,
            "key": STRING,
            "recipients": {
                "type": "array",
                "items": obj(
                    {
                        "recipient": STRING,
                        "channel": {"type": "string", "enum": ["telegram", "slack", "email"]},
                    }
                ),
            },
            "duplicate": {
                "type": "boolean",
                "description": "True when the key was posted before: nothing new was sent.",
            },
        }
    ),
    "Digest": {"type": "object", "description": "The team's weekly digest, as built by domain.digest."},
    "Health": obj({"status": {"type": "string", "enum": ["ok"]}}),
    "Readiness": obj(
        {
            "ready": {"type": "boolean"},
            "checks": {"type": "object", "additionalProperties": {"type": "boolean"}},
            "not_ready": {"type": "array", "items": {"type": "string"}, "description": "Checks that failed."},
        }
    ),
}


def _text_param(name: str, where: str = "query", description: str = "") -> Schema:
    return {
        "name": name,
        "in": where,
        "required": where == "path",
        "description": description,
        "schema": {"type": "string", "minLength": 1, "maxLength": params.MAX_TEXT, "pattern": SAFE_PATTERN},
    }


def _param(name: str, schema: Schema, description: str) -> Schema:
    return {"name": name, "in": "query", "required": False, "description": description, "schema": schema}


LIMIT = _param(
    "limit",
    {"type": "integer", "minimum": 1, "maximum": params.MAX_LIMIT, "default": params.DEFAULT_LIMIT},
    "Page size.",
)
CURSOR = _param(
    "cursor", {"type": "string", "pattern": "^[A-Za-z0-9_-]{1,1000}$"}, "next_cursor of the previous page."
)
SINCE = _param(
    "since", TIME, "RFC 3339; only jobs that finished (or, unfinished, were created) at or after it."
)
UNTIL = _param("until", TIME, "RFC 3339; only jobs that finished (or were created) before it.")


def _json(schema: Schema, description: str) -> Schema:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


ERROR = _json(
    ref("Error"),
    "An error: 400 bad parameter, 401 no valid token, 403 role, 404 not found, …; 503 `timeout` (the "
    "request ran past its time limit) or `busy` (too many reports computing), with Retry-After.",
)


def _op(
    summary: str,
    ok: dict[str, Schema],
    parameters: list[Schema] | None = None,
    *,
    open_: bool = False,
    body: Schema | None = None,
    tag: str = "jobs",
) -> Schema:
    op: Schema = {
        "summary": summary,
        "tags": [tag],
        "parameters": parameters or [],
        "responses": {**ok, "default": ERROR},
    }
    if open_:
        op["security"] = []
    if body is not None:
        op["requestBody"] = body
    return op


EMAIL_PARAM = {
    "name": "email",
    "in": "path",
    "required": True,
    "schema": {"type": "string", "pattern": EMAIL_PATTERN},
}


def build() -> Schema:
    """The whole document (a fresh dict each call)."""
    user_ok = _json(ref("User"), "The user.")
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "inno-notify admin API",
            "version": "1",
            "description": "Jobs, usage, recommendations, deliveries and the directory (CONTRACT.md §5). "
            "Every /api/v1 path needs `Authorization: Bearer TOKEN`; viewers may only read.",
        },
        "components": {
            "schemas": SCHEMAS,
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
        "security": [{"bearer": []}],
        "paths": {
            "/api/v1/jobs": {
                "get": _op(
                    "Jobs, newest finish (else creation) first",
                    {"200": _json(ref("JobPage"), "A page of jobs.")},
                    [
                        _text_param("namespace"),
                        _text_param("owner"),
                        _text_param("team"),
                        _param("status", enum(JobStatus), "Lifecycle state."),
                        SINCE,
                        UNTIL,
                        LIMIT,
                        CURSOR,
                    ],
                )
            },
            "/api/v1/jobs/{namespace}/{name}": {
                "get": _op(
                    "The newest job of that name, or the one with ?uid=",
                    {"200": _json(ref("Job"), "The job.")},
                    [_text_param("namespace", "path"), _text_param("name", "path"), _text_param("uid")],
                )
            },
            "/api/v1/usage": {
                "get": _op(
                    "GPU-minutes, used and idle GPU-minutes, memory requested vs peak, per group",
                    {
                        "200": {
                            "description": "Per group, most GPU-minutes first (Accept: text/csv for CSV).",
                            "content": {
                                "application/json": {"schema": ref("UsageReport")},
                                "text/csv": {"schema": {"type": "string"}},
                            },
                        }
                    },
                    [
                        _param(
                            "group_by",
                            {"type": "string", "enum": ["team", "owner", "namespace"], "default": "team"},
                            "What to group by.",
                        ),
                        _param("since", TIME, "RFC 3339; jobs that finished at or after it."),
                        _param("until", TIME, "RFC 3339; jobs that finished before it."),
                    ],
                    tag="usage",
                )
            },
            "/api/v1/recommendations": {
                "get": _op(
                    "Open recommendations (no newer run of the family yet), largest waste first",
                    {"200": _json(ref("RecommendationPage"), "A page of recommendations.")},
                    [
                        _text_param("team"),
                        _text_param("owner"),
                        _param("since", TIME, "RFC 3339; of jobs that finished at or after it."),
                        LIMIT,
                        CURSOR,
                    ],
                    tag="usage",
                )
            },
            "/api/v1/notifications": {
                "get": _op(
                    "The delivery log, newest first",
                    {"200": _json(ref("NotificationPage"), "A page of notifications.")},
                    [_param("status", enum(DeliveryStatus), "Delivery status."), LIMIT, CURSOR],
                    tag="notifications",
                )
            },
            "/api/v1/notifications/{id}/retry": {
                "post": _op(
                    "Re-queue a failed notification (admin); 409 unless it failed",
                    {"200": _json(ref("Notification"), "The notification, pending again.")},
                    [
                        {
                            "name": "id",
                            "in": "path",
                            "required": True,
                            "schema": {"type": "integer", "minimum": 1, "maximum": 2**63 - 1},
                        }
                    ],
                    tag="notifications",
                )
            },
            "/api/v1/digests/{team}": {
                "get": _op(
                    "A team's weekly digest (Accept: text/html for the page a lead reads)",
                    {
                        "200": {
                            "description": "The digest.",
                            "content": {
                                "application/json": {"schema": ref("Digest")},
                                "text/html": {"schema": {"type": "string"}},
                            },
                        }
                    },
                    [
                        _text_param("team", "path"),
                        _param(
                            "week",
                            {"type": "string", "pattern": "^[0-9]{4}-W(0[1-9]|[1-4][0-9]|5[0-3])$"},
                            "ISO week like 2026-W48; default: the last complete week.",
                        ),
                    ],
                    tag="digests",
                )
            },
            "/api/v1/users": {
                "get": _op(
                    "The directory, by e-mail",
                    {"200": _json(ref("UserPage"), "A page of users.")},
                    [LIMIT, CURSOR],
                    tag="directory",
                )
            },
            "/api/v1/users/{email}": {
                "get": _op("One user", {"200": user_ok}, [EMAIL_PARAM], tag="directory"),
                "put": _op(
                    "Create (201) or replace (200) a user (admin)",
                    {"200": user_ok, "201": _json(ref("User"), "The user, created.")},
                    [EMAIL_PARAM],
                    body={"required": True, "content": {"application/json": {"schema": ref("UserBody")}}},
                    tag="directory",
                ),
                "delete": _op(
                    "Remove a user (admin)",
                    {"204": {"description": "Removed."}},
                    [EMAIL_PARAM],
                    tag="directory",
                ),
            },
            "/api/v1/events": {
                "post": _op(
                    "Send a pipeline's message, once per key (roles admin and pipeline)",
                    {
                        "202": _json(
                            ref("EventAccepted"),
                            "Routed and queued (or, for a key seen before, nothing new).",
                        )
                    },
                    body={"required": True, "content": {"application/json": {"schema": ref("EventBody")}}},
                    tag="pipelines",
                )
            },
            "/api/v1/openapi.json": {
                "get": _op(
                    "This document",
                    {"200": _json({"type": "object"}, "The OpenAPI 3.1 document.")},
                    tag="operations",
                )
            },
            "/healthz": {
                "get": _op("Liveness", {"200": _json(ref("Health"), "Alive.")}, open_=True, tag="operations")
            },
            "/readyz": {
                "get": _op(
                    "Readiness: database reachable, watchers synced, dispatcher alive",
                    {
                        "200": _json(ref("Readiness"), "Ready."),
                        "503": _json(ref("Readiness"), "Not ready; checks says what is not."),
                    },
                    open_=True,
                    tag="operations",
                )
            },
            "/metrics": {
                "get": _op(
                    "The service's own Prometheus metrics",
                    {
                        "200": {
                            "description": "Prometheus text exposition.",
                            "content": {"text/plain": {"schema": {"type": "string"}}},
                        }
                    },
                    open_=True,
                    tag="operations",
                )
            },
        },
    }
