"""The ways views build a response: JSON (orjson, RFC 3339 times), or CSV for the exports.

The reports that come as JSON or CSV (usage, trends, budgets, adoption) negotiate, write their
rows and name the download the same way, so a change to one (a formula-safe cell, the line ending)
is a change to all.
"""

from __future__ import annotations

import csv as csv_module
import io
from collections.abc import Iterable, Sequence
from typing import Any

from aiohttp import web

from inno_notify.api.errors import ApiError
from inno_notify.api.negotiate import preferred
from inno_notify.api.serialize import dumps

JSON_OR_CSV = ("application/json", "text/csv")
# A cell starting with one of these is a formula to a spreadsheet; owners and namespaces come from
# cluster objects, so a crafted annotation must not run in an admin's spreadsheet.
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def json(document: object, status: int = 200) -> web.Response:
    return web.Response(status=status, body=dumps(document), content_type="application/json")


def negotiated(request: web.Request, offered: Sequence[str], what: str) -> str:
    """The offered media type the request's Accept ranks highest; 406 when it takes none.

    `what` begins the error, as in "usage is available" (then " as application/json or text/csv").
    """
    media = preferred(request.headers.get("Accept"), offered)
    if media is None:
        raise ApiError(406, "not_acceptable", f"{what} as {' or '.join(offered)}")
    return media


def csv_cell(value: Any) -> Any:
    """A CSV cell: empty for null, and text a spreadsheet would run as a formula quoted."""
    if value is None:
        return ""
    if isinstance(value, str) and value.startswith(_FORMULA_START):
        return "'" + value
    return value


def csv_table(header: Sequence[str], rows: Iterable[Sequence[Any]]) -> bytes:
    """A CSV document (RFC 4180 line ends): the header, then each row's cells made safe."""
    out = io.StringIO()
    writer = csv_module.writer(out, lineterminator="\r\n")
    writer.writerow(header)
    writer.writerows([csv_cell(v) for v in row] for row in rows)
    return out.getvalue().encode()


def csv_download(body: bytes, filename: str) -> web.Response:
    """A CSV document as a download named `filename`."""
    return web.Response(
        body=body,
        content_type="text/csv",
        charset="utf-8",
        headers={"Content-Disposition": f'attachment; filename="{filename}"'},
    )
