"""The kubelet's own pod list (``GET https://<node>:10250/pods``), for ``agent.pods: kubelet``.

The kubelet answers with a PodList of the pods bound to its node, authenticating the caller's
bearer token with the API server and authorizing ``/pods`` as ``get`` on ``nodes/proxy`` (a grant
that also covers exec and attach through the kubelet: the agent's default is the API server).
The token is read from its file on every request, because projected service account tokens are
rotated in place. The serving certificate is often signed by the kubelet itself, not the cluster
CA: give its CA, or switch verification off knowingly.
"""

from __future__ import annotations

import ssl
from pathlib import Path
from typing import Any

import aiohttp
import orjson

from inno_notify.adapters.kube.protocol import KubeApiError

# A node holds at most a few hundred pods; a list beyond this is not the kubelet's.
MAX_BODY_BYTES = 64 * 1024 * 1024


def kubelet_ssl(ca_file: str | None, *, verify: bool) -> ssl.SSLContext | bool:
    """TLS for the kubelet: the CA bundle given (else the system's), or no verification at all."""
    if not verify:
        return False
    return ssl.create_default_context(cafile=ca_file)


class KubeletPods:
    """``await KubeletPods(url, token_file).list_pods()`` -> the pod objects as dicts."""

    def __init__(
        self,
        url: str,
        token_file: str | None,
        *,
        ssl_context: ssl.SSLContext | bool = True,
        timeout_seconds: float = 10.0,
    ) -> None:
        self.url = url.rstrip("/")
        self.token_file = token_file
        self._ssl = ssl_context
        self._timeout = aiohttp.ClientTimeout(total=timeout_seconds)
        self._session: aiohttp.ClientSession | None = None

    def _headers(self) -> dict[str, str]:
        headers = {"Accept": "application/json"}
        if self.token_file:
            token = Path(self.token_file).read_text(encoding="utf-8").strip()
            headers["Authorization"] = f"Bearer {token}"
        return headers

    async def list_pods(self) -> list[dict[str, Any]]:
        if self._session is None:
            self._session = aiohttp.ClientSession(timeout=self._timeout)
        async with self._session.get(f"{self.url}/pods", headers=self._headers(), ssl=self._ssl) as response:
            body = await response.content.read(MAX_BODY_BYTES + 1)
            if response.status != 200:
                raise KubeApiError.from_status(response.status, body)
        if len(body) > MAX_BODY_BYTES:
            raise KubeApiError(502, "TooLarge", "the kubelet's pod list is larger than expected")
        document = orjson.loads(body)
        items = document.get("items") if isinstance(document, dict) else None
        if not isinstance(items, list):
            raise KubeApiError(502, "BadResponse", "no items in the kubelet's pod list")
        return [item for item in items if isinstance(item, dict)]

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None
