"""Client configuration per CONTRACT.md §2: explicit kubeconfig, else in-cluster, else $KUBECONFIG."""

from __future__ import annotations

import json
from pathlib import Path

import certifi
import pytest
from kubernetes_asyncio.client import BatchV1Api

from inno_notify.adapters.kube import KubeConfigError, load_api_client
from inno_notify.sim.kube_api import SimKubeServer
from inno_notify.sim.kube_store import JOBS
from tests.adapters.kube.support import job


@pytest.fixture
def service_account(tmp_path: Path) -> dict[str, str]:
    """An in-cluster environment: the service host variables and a mounted token and CA."""
    token = tmp_path / "token"
    token.write_text("in-cluster-token")
    return {
        "KUBERNETES_SERVICE_HOST": "10.96.0.1",
        "KUBERNETES_SERVICE_PORT": "443",
        "token_file": str(token),
        "cert_file": certifi.where(),  # any valid PEM bundle stands in for the cluster CA
    }


async def test_explicit_kubeconfig_reaches_the_server(sim: SimKubeServer, tmp_path: Path) -> None:
    sim.create(JOBS, job("a"))
    client = await load_api_client(sim.kubeconfig(tmp_path / "kc"), environ={})
    try:
        jobs = await BatchV1Api(client).list_job_for_all_namespaces()
    finally:
        await client.close()
    assert client.configuration.host == sim.url
    assert [j.metadata.name for j in jobs.items] == ["a"]


async def test_kubeconfig_env_is_used_when_no_file_is_configured(sim: SimKubeServer, tmp_path: Path) -> None:
    path = sim.kubeconfig(tmp_path / "kc")
    client = await load_api_client(None, environ={"KUBECONFIG": str(path)})
    await client.close()
    assert client.configuration.host == sim.url


async def test_context_selects_the_cluster(tmp_path: Path) -> None:
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": "one", "cluster": {"server": "http://127.0.0.1:1111"}},
            {"name": "two", "cluster": {"server": "http://127.0.0.1:2222"}},
        ],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [
            {"name": "first", "context": {"cluster": "one", "user": "u"}},
            {"name": "second", "context": {"cluster": "two", "user": "u"}},
        ],
        "current-context": "first",
    }
    path = tmp_path / "kc"
    path.write_text(json.dumps(config))
    hosts = {}
    for context in (None, "second"):
        client = await load_api_client(path, context, environ={})
        await client.close()
        hosts[context] = client.configuration.host
    assert hosts == {None: "http://127.0.0.1:1111", "second": "http://127.0.0.1:2222"}


async def test_in_cluster_config_wins_when_no_file_is_configured(
    service_account: dict[str, str], sim: SimKubeServer, tmp_path: Path
) -> None:
    token_file, cert_file = service_account.pop("token_file"), service_account.pop("cert_file")
    environ = {**service_account, "KUBECONFIG": str(sim.kubeconfig(tmp_path / "kc"))}
    client = await load_api_client(None, environ=environ, token_file=token_file, cert_file=cert_file)
    await client.close()
    assert client.configuration.host == "https://10.96.0.1:443"
    assert client.configuration.api_key["BearerToken"] == "Bearer in-cluster-token"


async def test_explicit_kubeconfig_wins_over_in_cluster(
    service_account: dict[str, str], sim: SimKubeServer, tmp_path: Path
) -> None:
    token_file, cert_file = service_account.pop("token_file"), service_account.pop("cert_file")
    path = sim.kubeconfig(tmp_path / "kc")
    client = await load_api_client(path, environ=service_account, token_file=token_file, cert_file=cert_file)
    await client.close()
    assert client.configuration.host == sim.url


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "kubeconfig not found"),
        ("{}", "invalid Kubernetes configuration"),
        ('{"contexts": [], "current-context": "nope"}', "invalid Kubernetes configuration"),
    ],
)
async def test_unusable_configuration_is_one_line_error(
    tmp_path: Path, content: str | None, message: str
) -> None:
    path = tmp_path / "kc"
    if content is not None:
        path.write_text(content)
    with pytest.raises(KubeConfigError) as caught:
        await load_api_client(path, environ={})
    assert str(caught.value).startswith(message)
    assert "\n" not in str(caught.value)
