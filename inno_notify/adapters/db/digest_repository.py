"""The weekly team digest, aggregated by the database (digest_queries.py).

`Store.digest`: one read transaction per digest, so its figures are consistent with each other.
"""

from __future__ import annotations

from inno_notify.adapters.db import digest_queries
from inno_notify.adapters.db.transactions import Repository, reads


class DigestRepository(Repository):
    """Teams' weekly digests."""

    # A team's digest of ISO `week` in zone `tz`, aggregated by the database.
    team_digest = reads(digest_queries.load_digest)
