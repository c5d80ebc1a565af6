"""adapters/db layer of inno-notify (see DESIGN.md)."""
