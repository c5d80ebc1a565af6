"""The settings as the domain's values: the directory's users and teams, and the parser's config.

The directory sections (`directory.users[]`, `directory.teams[]`) carry exactly the domain's
`DirectoryUser` and `Team` fields, so they are converted in one place, by name; the parser's
configuration (`ParseConfig`) is derived from the same converted teams and users: the builders of
what the settings configure start here. The runtime, the
demo and `inno-notify digest` all seed the store and parse through these.
"""

from __future__ import annotations

from inno_notify.adapters.db import Store
from inno_notify.domain.model import DirectoryUser, Team
from inno_notify.domain.parsing import ParseConfig, directory_aliases, parse_selectors
from inno_notify.settings import Settings


def directory(settings: Settings) -> tuple[list[DirectoryUser], list[Team]]:
    """The configured users and teams as domain values (their settings keys are the fields)."""
    users = [DirectoryUser(**entry.model_dump()) for entry in settings.directory.users]
    teams = [Team(**entry.model_dump()) for entry in settings.directory.teams]
    return users, teams


def parse_config(settings: Settings) -> ParseConfig:
    users, teams = directory(settings)
    return ParseConfig(
        cluster=settings.cluster,
        gpu_resources=dict(settings.accounting.gpu_resources),
        owner_keys=settings.directory.owner_keys,
        namespace_teams={ns: team.name for team in teams for ns in team.namespaces},
        default_team=settings.directory.default_team,
        mlflow_url=settings.workflows.mlflow_url,
        workspace_selectors=parse_selectors(settings.live.workspace_selectors),
        user_aliases=directory_aliases(user.email for user in users),
    )


async def seed_directory(store: Store, settings: Settings) -> None:
    """The configured directory is written to the store, where the API can extend it."""
    users, teams = directory(settings)
    await store.directory.upsert_users(users)
    if teams:
        await store.directory.replace_teams(teams)
