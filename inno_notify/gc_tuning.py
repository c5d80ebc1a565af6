"""Garbage-collector thresholds for a process that turns megabytes of JSON into dicts.

CPython starts a young-generation collection every 700 net allocations of container objects, and
an older one every 10 of those. Parsing one LIST page of 500 pods makes about 300,000 containers,
so with the defaults a page triggers hundreds of collections, and the older ones walk everything
the process holds (every imported module, the ingest queue's objects): measured on this project's
machines, a page cost three times the CPU of its parse alone. Almost none of it is cyclic garbage
(parsed JSON is freed by reference counting), so collecting far less often keeps memory the same
and gives the CPU back. docs/scale.md has the measurements.
"""

from __future__ import annotations

import gc

# Young collections every 50,000 net container allocations instead of 700; older ones as before
# in proportion (every 20 young ones, every 20 of those).
THRESHOLDS = (50_000, 20, 20)


def tune_for_ingest() -> None:
    """Sets the thresholds for this process (`serve` calls it first; benchmarks of the pipeline too)."""
    gc.set_threshold(*THRESHOLDS)
