"""adapters/prometheus layer of inno-notify (see DESIGN.md)."""
