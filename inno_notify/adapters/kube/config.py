"""Builds the kubernetes-asyncio client from the `kubernetes:` settings (CONTRACT.md §2).

The rule the operator relies on: an explicit kubeconfig wins; otherwise the in-cluster service
account when we run in a pod; otherwise $KUBECONFIG or ~/.kube/config. A configuration we
cannot load is reported as one `KubeConfigError` line, never a traceback.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from kubernetes_asyncio import config as kube_config
from kubernetes_asyncio.client import ApiClient, Configuration
from kubernetes_asyncio.config.config_exception import ConfigException
from kubernetes_asyncio.config.incluster_config import (
    SERVICE_CERT_FILENAME,
    SERVICE_HOST_ENV_NAME,
    SERVICE_TOKEN_FILENAME,
)


class KubeConfigError(Exception):
    """No usable Kubernetes client configuration."""


def in_cluster(environ: Mapping[str, str], token_file: str = SERVICE_TOKEN_FILENAME) -> bool:
    return bool(environ.get(SERVICE_HOST_ENV_NAME)) and os.path.isfile(token_file)


def default_kubeconfig(environ: Mapping[str, str]) -> str:
    # Read at call time: kubernetes-asyncio's own default froze $KUBECONFIG at import.
    return environ.get("KUBECONFIG") or str(Path.home() / ".kube" / "config")


def _existing_kubeconfig(kubeconfig: str | Path | None, environ: Mapping[str, str]) -> str:
    path = str(kubeconfig) if kubeconfig is not None else default_kubeconfig(environ)
    # $KUBECONFIG may list several files; the loader merges those that exist.
    if not any(os.path.isfile(p) for p in path.split(os.pathsep) if p):
        raise KubeConfigError(f"kubeconfig not found: {path}")
    return path


async def load_api_client(
    kubeconfig: str | Path | None = None,
    context: str | None = None,
    *,
    environ: Mapping[str, str] | None = None,
    token_file: str = SERVICE_TOKEN_FILENAME,
    cert_file: str = SERVICE_CERT_FILENAME,
) -> ApiClient:
    """An ApiClient for the configured cluster; the caller closes it (`await client.close()`)."""
    env = dict(os.environ if environ is None else environ)
    try:
        if kubeconfig is None and in_cluster(env, token_file):
            configuration = Configuration()
            kube_config.load_incluster_config(  # type: ignore[no-untyped-call]
                client_configuration=configuration,
                token_filename=token_file,
                cert_filename=cert_file,
                environ=env,
            )
            return ApiClient(configuration=configuration)
        path = _existing_kubeconfig(kubeconfig, env)
        client: ApiClient = await kube_config.new_client_from_config(
            config_file=path, context=context, persist_config=False
        )
        return client
    except ConfigException as exc:
        raise KubeConfigError(f"invalid Kubernetes configuration: {exc}") from exc
