"""adapters/kube layer of inno-notify (see DESIGN.md)."""
