"""adapters/channels layer of inno-notify (see DESIGN.md)."""
