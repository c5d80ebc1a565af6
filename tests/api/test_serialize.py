"""Each serializer returns exactly its resource's fields, as the document describes them.

Several serializers copy a record's attributes of the resource's field names (`serialize.same_names`):
a field added to a resource that its record lacks fails here, by name, rather than as a 500.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

import orjson
import pytest

from inno_notify.adapters.db.recommendation_queries import JobRecommendation
from inno_notify.adapters.db.usage_queries import UsageFigures, UsageGroup
from inno_notify.api import openapi, resources, serialize
from tests.adapters.db.records import T0, notification, recommendations, user

from .support import schema_errors

USAGE_GROUP = UsageGroup("face", UsageFigures(3, 2, 120.0, 60.0, 30.0, 1, 16 * 2**30, 4 * 2**30))
ADVICE = JobRecommendation(7, "default", "job-1", "ns", "train", None, "face", T0, recommendations()[0])

CASES: list[tuple[str, Callable[[Any], Any], Any, Any]] = [
    ("Notification", serialize.notification, replace(notification(), id=3), resources.Notification),
    ("User", serialize.user, user(channels=("email", "slack")), resources.User),
    ("Recommendation", serialize.recommendation, recommendations()[0], resources.Recommendation),
    ("JobRecommendation", serialize.job_recommendation, ADVICE, resources.JobRecommendation),
    ("UsageGroup", serialize.usage_group, USAGE_GROUP, resources.UsageGroup),
]


@pytest.mark.parametrize(("name", "to_resource", "record", "resource"), CASES, ids=[c[0] for c in CASES])
def test_a_serializer_gives_its_resource(
    name: str, to_resource: Callable[[Any], Any], record: Any, resource: Any
) -> None:
    served = orjson.loads(serialize.dumps(to_resource(record)))
    assert set(served) == set(resource.__annotations__)
    assert schema_errors(openapi.build(), {"$ref": f"#/components/schemas/{name}"}, served) == []


def test_a_field_the_record_lacks_is_named() -> None:
    class WithNickname(resources.Notification):
        nickname: str

    with pytest.raises(AttributeError, match="nickname"):
        serialize.same_names(WithNickname, replace(notification(), id=3))
