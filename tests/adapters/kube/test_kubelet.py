"""The kubelet's /pods over real HTTPS from a local server: bearer token re-read per request, TLS
verified against the CA given (or knowingly not), errors as KubeApiError."""

from __future__ import annotations

import shutil
import ssl
import subprocess
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web

from inno_notify.adapters.kube import KubeApiError
from inno_notify.adapters.kube.kubelet import KubeletPods, kubelet_ssl

POD = {"metadata": {"uid": "u1", "namespace": "ns", "name": "p"}}


@dataclass
class FakeKubelet:
    url: str
    ca_file: Path
    tokens: list[str]
    answer: tuple[int, object]


def _self_signed(directory: Path) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1 signed by itself, as kubeadm's kubelets serve by default."""
    cert, key = directory / "kubelet.crt", directory / "kubelet.key"
    subprocess.run(
        [
            "openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
            "-subj", "/CN=gpu-node-1@1700000000", "-addext", "subjectAltName=IP:127.0.0.1",
            "-keyout", str(key), "-out", str(cert),
        ],
        check=True,
        capture_output=True,
    )  # fmt: skip
    return cert, key


@pytest.fixture
async def kubelet(tmp_path: Path) -> AsyncIterator[FakeKubelet]:
    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed")
    cert, key = _self_signed(tmp_path)
    fake = FakeKubelet("", cert, [], (200, {"kind": "PodList", "items": [POD, "junk"]}))

    async def pods(request: web.Request) -> web.Response:
        fake.tokens.append(request.headers.get("Authorization", ""))
        status, body = fake.answer
        return web.json_response(body, status=status)

    app = web.Application()
    app.router.add_get("/pods", pods)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    server_tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_tls.load_cert_chain(cert, key)
    await web.TCPSite(runner, "127.0.0.1", 0, ssl_context=server_tls).start()
    fake.url = f"https://127.0.0.1:{runner.addresses[0][1]}"
    yield fake
    await runner.cleanup()


async def test_pods_with_a_rotating_token(kubelet: FakeKubelet, tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("first\n")
    client = KubeletPods(
        kubelet.url + "/", str(token), ssl_context=kubelet_ssl(str(kubelet.ca_file), verify=True)
    )
    try:
        assert await client.list_pods() == [POD]
        token.write_text("second")  # the kubelet rotated the projected token in place
        assert await client.list_pods() == [POD]
    finally:
        await client.close()
    assert kubelet.tokens == ["Bearer first", "Bearer second"]


async def test_an_unknown_certificate_is_refused_unless_verification_is_off(
    kubelet: FakeKubelet, tmp_path: Path
) -> None:
    client = KubeletPods(kubelet.url, None, ssl_context=kubelet_ssl(None, verify=True))
    try:
        with pytest.raises(aiohttp.ClientConnectorCertificateError):
            await client.list_pods()
    finally:
        await client.close()
    insecure = KubeletPods(kubelet.url, None, ssl_context=kubelet_ssl(None, verify=False))
    try:
        assert await insecure.list_pods() == [POD]
    finally:
        await insecure.close()


@pytest.mark.parametrize(
    ("answer", "status"),
    [
        ((401, {"kind": "Status", "code": 401, "reason": "Unauthorized", "message": "no"}), 401),
        ((403, {"kind": "Status", "reason": "Forbidden", "message": "nodes/proxy"}), 403),
        ((200, {"kind": "PodList"}), 502),
        ((200, ["not", "a", "list"]), 502),
    ],
    ids=["unauthorized", "forbidden", "no-items", "not-an-object"],
)
async def test_refusals_and_odd_answers(
    kubelet: FakeKubelet, answer: tuple[int, object], status: int
) -> None:
    kubelet.answer = answer
    client = KubeletPods(kubelet.url, None, ssl_context=kubelet_ssl(str(kubelet.ca_file), verify=True))
    try:
        with pytest.raises(KubeApiError) as caught:
            await client.list_pods()
    finally:
        await client.close()
    assert caught.value.status == status
