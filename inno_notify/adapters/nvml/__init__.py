"""adapters/nvml layer of inno-notify (see DESIGN.md)."""
