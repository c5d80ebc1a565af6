"""`inno-notify check`: reaches every configured dependency once and says what answered.

The database, the Kubernetes API server, Prometheus and each configured channel get one request,
each bounded by CHECK_TIMEOUT_SECONDS, all at once. The adapters come from the same builders
`serve` uses (runtime), so what `check` reaches is what the service would. No message quotes a
password: database errors are redacted with the URL's own secrets before they are cut.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from dataclasses import dataclass

from inno_notify.adapters.kube import KubeConfigError, load_api_client
from inno_notify.adapters.prometheus import build_meter
from inno_notify.runtime import build_senders, service_store
from inno_notify.settings import Settings, redact_secrets_of_url

CHECK_TIMEOUT_SECONDS = 10.0


@dataclass(frozen=True, slots=True)
class CheckResult:
    name: str
    ok: bool
    detail: str


def _one_line(exc: BaseException) -> str:
    text_ = " ".join(str(exc).split()) or type(exc).__name__
    return text_[:300]


async def check_database(settings: Settings) -> CheckResult:
    where = settings.database_url_redacted
    try:
        store = service_store(settings)
    except Exception as exc:  # an unusable URL
        return CheckResult("database", False, f"{where}: {_database_error(exc, settings)}")
    try:
        await store.ping()
        return CheckResult("database", True, where)
    except Exception as exc:  # any failure to reach it is the answer we report
        return CheckResult("database", False, f"{where}: {_database_error(exc, settings)}")
    finally:
        await store.close()


def _database_error(exc: BaseException, settings: Settings) -> str:
    # A message may quote the URL, or name a host that holds the rest of a password with an `@`:
    # redact before cutting, so that no cut leaves a password's beginning behind.
    text_ = " ".join(redact_secrets_of_url(str(exc), settings.database_url).split())
    return text_[:300] or type(exc).__name__


async def _check_kubernetes(settings: Settings) -> CheckResult:
    try:
        api = await load_api_client(settings.kubernetes.kubeconfig, settings.kubernetes.context)
    except KubeConfigError as exc:
        return CheckResult("kubernetes", False, _one_line(exc))
    try:
        host = api.configuration.host
        response = await api.call_api("/version", "GET", _preload_content=False, _request_timeout=10)
        body = await response.json()
        return CheckResult("kubernetes", True, f"{host} {body.get('gitVersion', '')}".strip())
    except Exception as exc:
        return CheckResult("kubernetes", False, _one_line(exc))
    finally:
        await api.close()


async def _check_prometheus(settings: Settings) -> CheckResult:
    meter = build_meter(settings.prometheus)
    try:
        await meter.client.query("vector(1)")
        return CheckResult("prometheus", True, settings.prometheus.url)
    except Exception as exc:
        return CheckResult("prometheus", False, f"{settings.prometheus.url}: {_one_line(exc)}")
    finally:
        meter.client.close()


async def _check_channels(settings: Settings) -> list[CheckResult]:
    results = []
    for name, sender in build_senders(settings).items():
        try:
            detail = await sender.check()  # type: ignore[attr-defined]
            results.append(CheckResult(name, True, str(detail)))
        except Exception as exc:
            results.append(CheckResult(name, False, _one_line(exc)))
        finally:
            await sender.aclose()
    return results


async def check_dependencies(settings: Settings) -> list[CheckResult]:
    """Reaches every configured dependency once; one result per dependency."""

    async def bounded(name: str, check: Awaitable[CheckResult | list[CheckResult]]) -> list[CheckResult]:
        try:
            result = await asyncio.wait_for(check, CHECK_TIMEOUT_SECONDS)
        except TimeoutError:
            return [CheckResult(name, False, f"no answer within {CHECK_TIMEOUT_SECONDS:.0f} s")]
        return result if isinstance(result, list) else [result]

    groups = await asyncio.gather(
        bounded("database", check_database(settings)),
        bounded("kubernetes", _check_kubernetes(settings)),
        bounded("prometheus", _check_prometheus(settings)),
        bounded("channels", _check_channels(settings)),
    )
    return [result for group in groups for result in group]
