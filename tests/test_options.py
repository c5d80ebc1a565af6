"""Options objects derived from the settings: every setting an options field names exists and fits."""

from __future__ import annotations

import dataclasses
import typing

import pytest
from pydantic import TypeAdapter

from inno_notify.options import derive, setting_at, setting_paths
from inno_notify.service.dispatcher import DispatchOptions
from inno_notify.service.ingest import IngestOptions
from inno_notify.service.leadership import Timings
from inno_notify.service.live_check import LiveOptions
from inno_notify.service.usage import CollectorOptions
from inno_notify.service.workflow_tracking import WorkflowOptions
from inno_notify.settings import Settings

# Every options type the runtime derives (runtime/builders.py, runtime/pipeline.py).
DERIVED = [IngestOptions, CollectorOptions, WorkflowOptions, LiveOptions, DispatchOptions, Timings]


@pytest.mark.parametrize("options", DERIVED, ids=lambda t: t.__name__)
def test_every_named_setting_exists_and_fits_its_field(options: type) -> None:
    paths = setting_paths(options)
    assert paths, f"{options.__name__} names no setting"
    hints = typing.get_type_hints(options)
    settings = Settings.model_validate({})
    for name, path in paths.items():
        value = setting_at(settings, path)
        # Strict: the setting's value is of the field's type as it is, nothing converted.
        assert TypeAdapter(hints[name]).validate_python(value, strict=True) == value, path


@pytest.mark.parametrize(
    ("options", "config", "field", "expected"),
    [
        (IngestOptions, {"kubernetes": {"catch_up_seconds": 7}}, "catch_up_seconds", 7.0),
        (IngestOptions, {"kubernetes": {"namespaces": ["a", "b"]}}, "namespaces", ("a", "b")),
        (CollectorOptions, {"cluster": "east"}, "cluster", "east"),
        (CollectorOptions, {"rightsizing": {"idle_gpu_util_percent": 9}}, "idle_util_percent", 9.0),
        (WorkflowOptions, {"workflows": {"airflow_quiet_seconds": 42}}, "airflow_quiet_seconds", 42.0),
        (LiveOptions, {"live": {"repeat_hours": 3}}, "repeat_hours", 3.0),
        (DispatchOptions, {"notify": {"group_wait_seconds": 5}}, "group_wait_seconds", 5.0),
        (Timings, {"ha": {"lease_seconds": 30, "renew_deadline_seconds": 20}}, "lease_seconds", 30.0),
    ],
)
def test_derived_options_carry_the_configured_value(
    options: type, config: dict[str, object], field: str, expected: object
) -> None:
    derived: object = derive(options, Settings.model_validate(config))
    assert getattr(derived, field) == expected


def test_what_no_setting_holds_is_given_and_the_rest_keeps_its_default() -> None:
    derived = derive(CollectorOptions, Settings.model_validate({}), poll_seconds=0.5)
    assert derived.poll_seconds == 0.5
    assert derived.batch_size == dataclasses.fields(CollectorOptions)[3].default
