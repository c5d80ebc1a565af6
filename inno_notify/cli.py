"""The `inno-notify` command line (CONTRACT.md §1).

Each subcommand loads the settings once and hands them to the code that does the work. Bad
configuration always ends the same way: one line on stderr and exit code 2, no traceback.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
import typing
from collections.abc import Callable, Mapping, Sequence

from inno_notify import __version__
from inno_notify.logs import configure_logging, secret_values
from inno_notify.settings import (
    ENV_PREFIX,
    ConfigError,
    LogLevel,
    Settings,
    load_settings,
    resolve_config_path,
)

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_BAD_CONFIG = 2

log = logging.getLogger("inno_notify")


def _add_config(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--config", metavar="FILE", help="YAML configuration (default: $INNO_NOTIFY_CONFIG, else built-in)"
    )


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="inno-notify",
        description="Per-job GPU usage summaries and right-sizing advice for Kubernetes GPU clusters.",
    )
    parser.add_argument(
        "--log-level",
        type=str.upper,
        choices=typing.get_args(LogLevel),
        help="overrides log_level for this run (default: the configuration's, else INFO)",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    serve = sub.add_parser("serve", help="run the service until SIGTERM/SIGINT")
    _add_config(serve)
    migrate = sub.add_parser("migrate", help="bring the database schema to the newest revision")
    _add_config(migrate)
    check = sub.add_parser("check", help="validate the configuration and reach every dependency")
    _add_config(check)
    agent = sub.add_parser("agent", help="the optional NVML node agent")
    _add_config(agent)

    demo = sub.add_parser("demo", help="a self-contained run on a simulated GPU cluster")
    demo.add_argument("--jobs", type=int, default=24, help="number of jobs to simulate")
    demo.add_argument("--speed", type=float, default=400.0, help="simulated seconds per real second")
    demo.add_argument("--out", metavar="DIR", help="folder for the database and rendered e-mails")

    digest = sub.add_parser("digest", help="build one team's weekly digest")
    _add_config(digest)
    digest.add_argument("--team", required=True)
    digest.add_argument("--week", help="ISO week like 2026-W48 (default: the last complete week)")
    out = digest.add_mutually_exclusive_group()
    out.add_argument("--send", action="store_true", help="send it through the team's channels")
    out.add_argument("--format", choices=("text", "html", "json"), default="text")

    send = sub.add_parser("send", help="post a pipeline message to a running service (POST /api/v1/events)")
    send.add_argument(
        "--api", required=True, metavar="URL", help="the service's API root, e.g. http://inno-notify:8080"
    )
    send.add_argument(
        "--token-file", required=True, metavar="F", help="file holding a pipeline (or admin) token"
    )
    whom = send.add_mutually_exclusive_group(required=True)
    whom.add_argument("--to", metavar="EMAIL", help="one person (their directory channels, else e-mail)")
    whom.add_argument("--team", metavar="TEAM", help="a team (its Slack channel, else its leads)")
    send.add_argument("--title", required=True, metavar="T")
    send.add_argument("--text", metavar="T", help="the message's text; - reads it from standard input")
    send.add_argument(
        "--link", action="append", default=[], metavar="TITLE=URL", help="a link to show (repeatable)"
    )
    send.add_argument("--key", metavar="K", help="sent once per key: a retried task sends nothing again")

    sub.add_parser("version", help="print the version")
    return parser


def _settings(args: argparse.Namespace) -> Settings:
    path = resolve_config_path(getattr(args, "config", None), os.environ)
    settings = load_settings(path, os.environ)
    # Now the configured level, format and the secrets to mask are known.
    configure_logging(args.log_level or settings.log_level, settings.log_format, secret_values(settings))
    from inno_notify.domain.live import parse_quiet_hours
    from inno_notify.domain.parsing import parse_selectors

    # Selectors and quiet hours follow the domain's grammar, which the settings cannot import.
    try:
        parse_selectors(settings.live.workspace_selectors)
        if settings.live.quiet_hours is not None:
            parse_quiet_hours(settings.live.quiet_hours, settings.live.timezone)
    except ValueError as exc:
        raise ConfigError(f"{path or 'built-in defaults'}: live: {exc}") from None
    return settings


def _cmd_version(args: argparse.Namespace) -> int:
    print(f"inno-notify {__version__}")
    return EXIT_OK


def _cmd_migrate(args: argparse.Namespace) -> int:
    settings = _settings(args)
    from inno_notify.adapters.db.migrate import migrate

    applied = asyncio.run(migrate(settings.database_url))
    if applied:
        print(f"applied {len(applied)} revision(s): {', '.join(applied)}")
    else:
        print("database schema is up to date")
    return EXIT_OK


def _cmd_check(args: argparse.Namespace) -> int:
    settings = _settings(args)
    from inno_notify.commands.check import check_dependencies

    results = asyncio.run(check_dependencies(settings))
    for result in results:
        print(f"{'ok' if result.ok else 'fail'} {result.name} {result.detail}")
    return EXIT_OK if all(r.ok for r in results) else EXIT_FAILED


def _cmd_serve(args: argparse.Namespace) -> int:
    # Before anything slow (settings, the service's imports): a SIGTERM from here on is a graceful
    # stop, whatever start-up is doing (service/stopping.py).
    from inno_notify.service.stopping import StopSignal

    stop = StopSignal()
    stop.install()
    settings = _settings(args)
    from inno_notify.gc_tuning import tune_for_ingest
    from inno_notify.runtime import serve

    tune_for_ingest()
    asyncio.run(serve(settings, stop))
    return EXIT_OK


def _cmd_agent(args: argparse.Namespace) -> int:
    settings = _settings(args)
    from inno_notify.agent import check_agent_settings, run_agent

    check_agent_settings(settings.agent)
    asyncio.run(run_agent(settings))
    return EXIT_OK


def _cmd_digest(args: argparse.Namespace) -> int:
    settings = _settings(args)
    from inno_notify.commands.digest import digest_command
    from inno_notify.domain.weeks import NotAWeek, parse_week
    from inno_notify.service.digest_pages import UnknownTeam

    try:
        if args.week is not None:
            parse_week(args.week)
    except NotAWeek:
        raise ConfigError(f"digest: --week must look like 2026-W48, got {args.week!r}") from None
    except ValueError as exc:
        raise ConfigError(f"digest: --week: {exc}") from None
    try:
        print(asyncio.run(digest_command(settings, args.team, args.week, args.format, args.send)))
    except UnknownTeam as exc:
        print(f"inno-notify: digest: {exc}", file=sys.stderr)
        return EXIT_FAILED
    return EXIT_OK


def _cmd_demo(args: argparse.Namespace) -> int:
    from pathlib import Path

    from inno_notify.demo import DEFAULT_OUT, run_demo

    if args.jobs < 1 or args.speed <= 0:
        raise ConfigError("demo: --jobs must be at least 1 and --speed above 0")
    asyncio.run(run_demo(args.jobs, args.speed, Path(args.out) if args.out else DEFAULT_OUT))
    return EXIT_OK


def _cmd_send(args: argparse.Namespace) -> int:
    from inno_notify.send import Refused, UsageError, event_body, post_event, read_token

    try:
        text = sys.stdin.read() if args.text == "-" else args.text
        body = event_body(
            to=args.to, team=args.team, title=args.title, text=text, links=args.link, key=args.key
        )
        token = read_token(args.token_file)
        accepted = post_event(args.api, token, body)
    except UsageError as exc:
        print(f"inno-notify: send: {exc}", file=sys.stderr)
        return EXIT_BAD_CONFIG
    except Refused as exc:
        print(f"inno-notify: send: refused: {exc}", file=sys.stderr)
        return EXIT_FAILED
    recipients = ", ".join(f"{r.get('recipient')} ({r.get('channel')})" for r in accepted.recipients)
    what = "already sent under this key" if accepted.duplicate else "accepted"
    print(f"event {accepted.id} {what}: {recipients}")
    return EXIT_OK


COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "version": _cmd_version,
    "migrate": _cmd_migrate,
    "check": _cmd_check,
    "serve": _cmd_serve,
    "demo": _cmd_demo,
    "digest": _cmd_digest,
    "agent": _cmd_agent,
    "send": _cmd_send,
}


def _early_logging(args: argparse.Namespace, env: Mapping[str, str]) -> None:
    """Logging before (or without: demo, version) the settings: the same environment variables,
    checked the same way, so that `INNO_NOTIFY_LOG_LEVEL` means one thing for every command."""
    level = (args.log_level or env.get(f"{ENV_PREFIX}LOG_LEVEL") or "INFO").upper()
    fmt = env.get(f"{ENV_PREFIX}LOG_FORMAT") or "text"
    if level not in typing.get_args(LogLevel):
        raise ConfigError(
            f"environment variable {ENV_PREFIX}LOG_LEVEL: not a log level: {level!r} "
            f"(one of {', '.join(typing.get_args(LogLevel))})"
        )
    if fmt not in ("text", "json"):
        raise ConfigError(f"environment variable {ENV_PREFIX}LOG_FORMAT: must be text or json, not {fmt!r}")
    configure_logging(level, fmt)


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        _early_logging(args, os.environ)
        return COMMANDS[args.command](args)
    except ConfigError as exc:
        print(f"inno-notify: configuration error: {exc}", file=sys.stderr)
        return EXIT_BAD_CONFIG
    except KeyboardInterrupt:
        return 130
    except Exception as exc:
        # An unreachable database or cluster is an operational failure, not a bug: one line, exit 1;
        # the traceback stays available with --log-level DEBUG.
        log.debug("%s failed", args.command, exc_info=True)
        reason = " ".join(str(exc).split())[:300] or type(exc).__name__
        print(f"inno-notify: {args.command} failed: {reason}", file=sys.stderr)
        return EXIT_FAILED
