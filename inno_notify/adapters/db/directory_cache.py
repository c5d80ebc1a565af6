"""The directory as the store holds it now, read whole only when it changed.

Everything that routes a message (the planner of job summaries, the API's pipeline messages)
needs every user and team, and who turned e-mail off; reading them whole for each message costs
more than the message. The store keeps a directory version that every write of a user, team or
preference moves in the same transaction, on any replica (issue 29: a link, relink, mute, stop or
edit applies to the very next message planned). So a reader asks the version, one primary-key
read, before each use, and reads the directory again only when it moved: never stale, never on a
timer.

Concurrent readers that find a new version wait for one read instead of each making their own.
"""

from __future__ import annotations

import asyncio

from inno_notify.adapters.db.directory_repository import DirectoryRepository
from inno_notify.domain.routing import Directory

__all__ = ["CachedDirectory", "Directory"]


class CachedDirectory:
    """Users (by lower-case e-mail), teams (by name) and who turned e-mail off, read through the
    directory version."""

    def __init__(self, repository: DirectoryRepository) -> None:
        self._repository = repository
        self._directory = Directory({}, {})
        self._version: str | None = None
        self._loading = asyncio.Lock()
        self.loads = 0  # whole reads of the directory (tests read it)

    async def current(self) -> Directory:
        """The directory as it stands in the store now (the mappings are shared: read only)."""
        # The version is read before the directory: a change that commits in between is in what is
        # read and moves the version past the one kept, so it costs one more read, never a stale one.
        version = await self._repository.version()
        if version != self._version:
            async with self._loading:
                if version != self._version:  # else another caller read it while this one waited
                    self._directory = await self._repository.snapshot()
                    self._version = version
                    self.loads += 1
        return self._directory
