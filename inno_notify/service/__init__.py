"""Orchestration: moves data between adapters and applies domain decisions."""
