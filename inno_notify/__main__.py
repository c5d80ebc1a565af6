"""`python -m inno_notify` runs the same CLI as the `inno-notify` console script."""

from inno_notify.cli import main

raise SystemExit(main())
