"""The OpenAPI 3.1 document of the REST API, served at /api/v1/openapi.json, derived from the code.

Nothing in it is written by hand twice: the paths are the endpoint table (routes.py), each
operation's parameters and body its inputs dataclass (params.py), and the components the
resources (resources.py, errors.Error) as pydantic describes them
(`TypeAdapter.json_schemas`, one pass, so a shared part such as an enum is one component). The API
tests check every response they see against this document and schemathesis fuzzes the running app
from it, so it cannot drift from what the endpoints do.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from typing import Any

import orjson
from pydantic import TypeAdapter
from pydantic.json_schema import GenerateJsonSchema, JsonSchemaMode

from inno_notify.api import routes
from inno_notify.api.errors import Error
from inno_notify.api.params import Inputs, Nothing

Schema = dict[str, Any]
COMPONENTS = "#/components/schemas/"


class _Generator(GenerateJsonSchema):
    """pydantic's JSON Schema, without a title on every property (the name says it)."""

    def field_title_should_be_set(self, schema: Any) -> bool:
        return False


def _not_null(schema: Schema) -> Schema:
    """A parameter's schema (a new dict) without pydantic's `| None` branch: an absent parameter is
    the None."""
    branches = schema.get("anyOf")
    if branches is None or {"type": "null"} not in branches:
        return dict(schema)
    rest = [b for b in branches if b != {"type": "null"}]
    outer = {k: v for k, v in schema.items() if k != "anyOf" and not (k == "default" and v is None)}
    return {**rest[0], **outer} if len(rest) == 1 else {**outer, "anyOf": rest}


def _operation(
    endpoint: routes.Endpoint[Any], schemas: dict[Any, Schema], components: dict[str, Schema]
) -> Schema:
    parameters: list[Schema] = []
    body: Schema | None = None
    if endpoint.inputs is not Nothing:
        properties = components[schemas[endpoint.inputs]["$ref"].removeprefix(COMPONENTS)]["properties"]
        inputs = Inputs(endpoint.inputs, endpoint.path)
        for param in inputs.params:
            schema = _not_null(properties[param.name])
            description = schema.pop("description", "")
            if param.later_than is not None:
                description = f"{description} Must be later than {param.later_than}.".strip()
            where = "path" if param.in_path else "query"
            parameters.append(
                {
                    "name": param.name,
                    "in": where,
                    "required": param.in_path or param.required,
                    "description": description,
                    "schema": schema,
                }
            )
        if inputs.body is not None:
            schema = _not_null(properties[inputs.body.name])
            body = {"required": True, "content": {media: {"schema": schema} for media in inputs.body.media}}
    responses: Schema = {}
    for status, reply in endpoint.replies.items():
        content: Schema = {}
        if reply.resource is not None:
            content["application/json"] = {"schema": schemas[reply.resource]}
        for media in reply.media:
            content[media] = {"schema": {"type": "string"}}
        responses[str(status)] = {
            "description": reply.description,
            **({"content": content} if content else {}),
        }
    responses["default"] = {
        "description": "An error; its code says which.",
        "content": {"application/json": {"schema": schemas[Error]}},
    }
    operation: Schema = {"summary": endpoint.summary, "tags": [endpoint.tag]}
    if endpoint.open:
        operation["security"] = []
    else:
        operation["description"] = f"Roles: {', '.join(sorted(endpoint.allowed))}."
    operation["parameters"] = parameters
    if body is not None:
        operation["requestBody"] = body
    operation["responses"] = responses
    return operation


def _types(endpoints: Iterable[routes.Endpoint[Any]]) -> dict[Any, JsonSchemaMode]:
    """Every type the document describes, once: resources as serialized, inputs as validated."""
    types: dict[Any, JsonSchemaMode] = {Error: "serialization"}
    for endpoint in endpoints:
        for reply in endpoint.replies.values():
            if reply.resource is not None:
                types[reply.resource] = "serialization"
        if endpoint.inputs is not Nothing:
            types[endpoint.inputs] = "validation"
    return types


def build(endpoints: tuple[routes.Endpoint[Any], ...] | None = None) -> Schema:
    """The whole document of `endpoints` (default: the API's), a fresh dict each call."""
    if endpoints is None:
        return orjson.loads(encoded())  # type: ignore[no-any-return]
    return _build(endpoints)


@functools.cache
def encoded() -> bytes:
    """The API's document as served, built once: pydantic takes a fraction of a second over it."""
    return orjson.dumps(_build(routes.ENDPOINTS))


def _build(endpoints: tuple[routes.Endpoint[Any], ...]) -> Schema:
    types = _types(endpoints)
    found, top = TypeAdapter.json_schemas(
        [(kind, mode, TypeAdapter(kind)) for kind, mode in types.items()],
        ref_template=COMPONENTS + "{model}",
        schema_generator=_Generator,
    )
    schemas = {kind: schema for (kind, _), schema in found.items()}
    components: dict[str, Schema] = dict(top.get("$defs", {}))
    paths: dict[str, Schema] = {}
    for endpoint in endpoints:
        paths.setdefault(endpoint.path, {})[endpoint.method.lower()] = _operation(
            endpoint, schemas, components
        )
    for kind, mode in types.items():  # an endpoint's inputs are its parameters, not a component
        if mode == "validation":
            components.pop(schemas[kind]["$ref"].removeprefix(COMPONENTS), None)
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "inno-notify admin API",
            "version": "1",
            "description": "Jobs, usage, recommendations, deliveries and the directory (CONTRACT.md §5). "
            "Every /api/v1 path needs `Authorization: Bearer TOKEN`; viewers may only read, and a pipeline "
            "token may only post pipeline events. The job and team pages (/jobs/…, /teams/…, HTML) open "
            "with the signed link a message carried (exp, sig) or a viewer or admin token; the one-click "
            "unsubscribe (/unsubscribe) with the signed link of an e-mail or an admin token.",
        },
        "components": {
            "schemas": dict(sorted(components.items())),
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
        "security": [{"bearer": []}],
        "paths": paths,
    }
