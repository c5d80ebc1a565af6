"""With SQLite, one `serve` per database file: a second one refuses to start with one line.

SQLite is the embedded default for a quick start, not a database several replicas share, so no
leader is elected there (docs/ha.md). Two `serve` processes on one file would both watch, measure
and send. An exclusive lock on `<database file>.lock`, held for the life of the process, keeps the
second one out; the kernel drops it when the process ends however it ends, so no stale lock
survives a crash. (flock locks work between processes of one host, which is where one SQLite file
can be shared anyway.)
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path

_SQLITE_PREFIXES = ("sqlite+aiosqlite:///", "sqlite:///")


class AlreadyServing(RuntimeError):
    """Another process serves the same SQLite file."""


def sqlite_file(database_url: str) -> Path | None:
    """The database file of a SQLite URL; None for an in-memory database or another dialect."""
    for prefix in _SQLITE_PREFIXES:
        if database_url.startswith(prefix):
            path = database_url[len(prefix) :].split("?", 1)[0]
            return Path(path) if path and path != ":memory:" else None
    return None


@contextlib.contextmanager
def single_instance(database_url: str) -> Iterator[Path | None]:
    """Holds the lock of the SQLite file for the block (yields the lock file, None when there is
    nothing to lock); raises AlreadyServing when another process holds it."""
    database = sqlite_file(database_url)
    if database is None:
        yield None
        return
    lock = database.with_name(database.name + ".lock")
    fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip()
            raise AlreadyServing(
                f"another inno-notify serve{f' (pid {holder})' if holder else ''} is running on {database} "
                f"(it holds {lock}); with SQLite one instance runs at a time: use Postgres for "
                "several replicas (docs/ha.md)"
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        yield lock
    finally:
        os.close(fd)  # closing the descriptor releases the lock
