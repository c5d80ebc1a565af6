"""Options objects whose fields are settings: each field names its setting once, the composition root derives.

A service's options (how it batches, retries, which cluster it serves) mix settings with tuning
nobody configures. Copying the settings into them field by field in the composition root meant
one more place per setting to keep in step, and a setting renamed in one place but not the other
went unnoticed. Instead an options field says which setting it is (`from_setting("prometheus.
give_up_after_seconds", 1800.0)`: the default is the options' own, for tests and benchmarks that
build options by hand) and `derive` fills every such field from the settings; what no setting
holds (a poll interval the caller picks, a parsed value) is given. A test walks every options
type the runtime derives and checks that each path names a setting of a fitting type.

This module knows the settings only as an object with attributes: it sits beside them, below the
services that declare options, and imports nothing of ours.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, TypeVar

T = TypeVar("T")
# The key of a field's metadata holding its setting's dotted path.
SETTING = "inno_notify.setting"


def from_setting(path: str, default: T) -> T:
    """A dataclass field holding the setting at `path` (dotted, from the top of the settings)."""
    return dataclasses.field(default=default, metadata={SETTING: path})


def setting_paths(options: type) -> dict[str, str]:
    """The fields of an options dataclass that are settings, with their paths."""
    return {f.name: f.metadata[SETTING] for f in dataclasses.fields(options) if SETTING in f.metadata}


def setting_at(settings: object, path: str) -> Any:
    return functools.reduce(getattr, path.split("."), settings)


def derive(options: type[T], settings: object, **given: Any) -> T:
    """`options` with every setting field read from `settings`, and `given` as given."""
    values = {name: setting_at(settings, path) for name, path in setting_paths(options).items()}
    return options(**(values | given))
