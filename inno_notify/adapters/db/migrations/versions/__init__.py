"""Alembic revisions, oldest first by number."""
