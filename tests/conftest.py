"""Shared pytest configuration: each support module below is a plugin owning one kind of fixture."""

from pathlib import Path

import pytest

pytest_plugins = ["tests.db_support"]

SHARED_FIXTURES = Path(__file__).resolve().parents[2] / "shared" / "fixtures"


@pytest.fixture(scope="session")
def shared_fixtures() -> Path:
    """Real captures from ../shared/fixtures (read-only)."""
    if not SHARED_FIXTURES.is_dir():
        pytest.fail(f"shared fixtures not found at {SHARED_FIXTURES}")
    return SHARED_FIXTURES
