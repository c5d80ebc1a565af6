"""inno-notify: per-job GPU usage summaries and right-sizing advice for Kubernetes GPU clusters."""

__version__ = "0.1.0"
