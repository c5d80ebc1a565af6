"""An aiohttp transport for python-telegram-bot's `Bot`, instead of its default httpx one.

PTB lets the caller supply the object that performs HTTP requests (`telegram.request.BaseRequest`);
everything above it — building the Bot API call, parsing the answer, raising `RetryAfter`,
`Forbidden`, `BadRequest` from the status and body — stays PTB's. Measured with bench/dispatch.py,
one `send_message` cost 3.3–3.5 ms of CPU in httpx/httpcore (which polls every pooled connection on
each request) against about 1 ms through aiohttp, which the service already uses: that difference is
what lets the dispatcher pass 500 messages/s. Like PTB's own transport it never retries; the
dispatcher alone does. Unlike it, a request also has a finite total timeout.
"""

from __future__ import annotations

import aiohttp
from telegram._utils.defaultvalue import DefaultValue
from telegram._utils.types import ODVInput
from telegram.error import NetworkError, TimedOut
from telegram.request import BaseRequest, RequestData


class AiohttpRequest(BaseRequest):
    """`BaseRequest` over one aiohttp session with a bounded connection pool."""

    def __init__(self, *, timeout: float = 10.0, pool_size: int = 16) -> None:
        self._timeout = timeout
        self._pool_size = pool_size
        self._session: aiohttp.ClientSession | None = None

    @property
    def read_timeout(self) -> float | None:
        return self._timeout

    async def initialize(self) -> None:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=self._pool_size),
                headers={"User-Agent": self.USER_AGENT},
            )

    async def shutdown(self) -> None:
        if self._session is not None and not self._session.closed:
            await self._session.close()
        self._session = None

    async def do_request(
        self,
        url: str,
        method: str,
        request_data: RequestData | None = None,
        read_timeout: ODVInput[float] = BaseRequest.DEFAULT_NONE,
        write_timeout: ODVInput[float] = BaseRequest.DEFAULT_NONE,
        connect_timeout: ODVInput[float] = BaseRequest.DEFAULT_NONE,
        pool_timeout: ODVInput[float] = BaseRequest.DEFAULT_NONE,
    ) -> tuple[int, bytes]:
        await self.initialize()
        assert self._session is not None  # initialize() just made it
        form: aiohttp.FormData | None = None
        if request_data is not None:
            form = aiohttp.FormData()
            for name, value in (request_data.json_parameters or {}).items():
                form.add_field(name, value)
            for name, part in (request_data.multipart_data or {}).items():
                # PTB's parts are (filename, content, mime type).
                filename, content, mime = part[0], part[1], part[2] if len(part) > 2 else None
                form.add_field(name, content, filename=filename, content_type=mime)
        connect = _seconds(connect_timeout, self._timeout)
        read = _seconds(read_timeout, self._timeout)
        write = _seconds(write_timeout, self._timeout)
        # Per-read limits alone let a server that trickles its answer hold a send forever: the
        # whole request gets the sum of its phases' limits (a phase PTB leaves open counts as ours).
        total = sum(self._timeout if phase is None else phase for phase in (connect, read, write))
        timeout = aiohttp.ClientTimeout(total=total, connect=connect, sock_read=read)
        try:
            async with self._session.request(method, url, data=form, timeout=timeout) as response:
                return response.status, await response.read()
        except TimeoutError as exc:
            raise TimedOut from exc
        except aiohttp.ClientError as exc:
            raise NetworkError(f"aiohttp.{type(exc).__name__}: {exc}") from exc


def _seconds(value: ODVInput[float], default: float) -> float | None:
    # PTB passes DEFAULT_NONE (a DefaultValue) when the call named no timeout.
    if isinstance(value, DefaultValue):
        return default
    return value
