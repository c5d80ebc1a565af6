"""Shared pytest configuration: each support module below is a plugin owning one kind of fixture."""

from pathlib import Path

import pytest

pytest_plugins = ["tests.db_support"]

CAPTURES = Path(__file__).resolve().parent / "fixtures"


@pytest.fixture(scope="session")
def captures() -> Path:
    """Real captures from clusters and upstream projects, with their sources in tests/fixtures/README.md."""
    if not CAPTURES.is_dir():
        pytest.fail(f"captures not found at {CAPTURES}")
    return CAPTURES


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The tests marked `slow` run first, in their order, then the rest in theirs: with the tests
    spread over workers (`make test`), a long test started last would keep one worker busy alone
    while the other has finished; started first, the many short ones even the workers out after."""
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)
