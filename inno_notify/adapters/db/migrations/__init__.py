"""Alembic migrations of the store's schema (run through inno_notify.adapters.db.migrate)."""
