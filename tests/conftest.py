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
