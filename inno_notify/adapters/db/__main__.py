"""`python -m inno_notify.adapters.db`: migrate a database, or autogenerate the next revision."""

from __future__ import annotations

import argparse
import asyncio
import sys

from inno_notify.adapters.db.migrate import migrate, new_revision


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m inno_notify.adapters.db")
    sub = parser.add_subparsers(dest="command", required=True)
    up = sub.add_parser("upgrade", help="migrate a database to head")
    up.add_argument("url")
    rev = sub.add_parser("revision", help="autogenerate the next revision from tables.py")
    rev.add_argument("-m", "--message", required=True)
    rev.add_argument("--url", default=None, help="database to diff against (default: a temp SQLite file)")
    args = parser.parse_args(argv)
    if args.command == "upgrade":
        applied = asyncio.run(migrate(args.url))
        print("applied: " + (", ".join(applied) if applied else "nothing (already at head)"))
    else:
        asyncio.run(new_revision(args.message, args.url))
    return 0


if __name__ == "__main__":
    sys.exit(main())
