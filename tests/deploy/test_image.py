"""The container image: hadolint on the Dockerfile (always), and, opt-in, the image itself built
and run as the manifests run it: user 10001, read-only root filesystem, only /tmp writable.

Building takes minutes (a Debian base made with mmdebstrap, then every dependency from PyPI), so
the build test runs only with INNO_NOTIFY_TEST_IMAGE=1 (`make image-test`) and skips, saying why,
where the machine cannot build or run containers.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import tomllib
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from inno_notify import __version__

from .support import DEPLOY, ROOT, venv_tool

IMAGE = "localhost/inno-notify:test"
UID = 10001


def test_dockerfile_passes_hadolint() -> None:
    result = subprocess.run(
        [str(venv_tool("hadolint")), "--failure-threshold", "info", str(ROOT / "Dockerfile")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_dockerfile_runs_serve_as_a_numeric_non_root_user() -> None:
    lines = [
        line.strip()
        for line in (ROOT / "Dockerfile").read_text(encoding="utf-8").splitlines()
        if line.strip() and not line.lstrip().startswith("#")
    ]
    instructions = [line.split()[0] for line in lines if line.split()[0].isupper()]
    assert instructions.count("FROM") == 2, "multi-stage: build, then a clean runtime stage"
    assert "HEALTHCHECK" not in instructions, "Kubernetes probes the service; no HEALTHCHECK"
    assert f"USER {UID}:{UID}" in lines
    assert 'ENTRYPOINT ["inno-notify"]' in lines and 'CMD ["serve"]' in lines
    assert lines.index(f"USER {UID}:{UID}") > max(
        i for i, line in enumerate(lines) if line.startswith("FROM")
    )
    ignored = (ROOT / ".dockerignore").read_text(encoding="utf-8").splitlines()
    assert ignored[ignored.index("*") :][:4] == ["*", "!pyproject.toml", "!README.md", "!inno_notify/"]


PLOTTING = ("numpy", "matplotlib", "fontTools")


def test_the_service_needs_no_plotting_library() -> None:
    """Every chart is drawn with Pillow: numpy, matplotlib and fontTools are neither dependencies nor
    imported, by any module or by the service started and drawing both kinds of chart."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    required = {re.split(r"[<>=!~\[; ]", dep, maxsplit=1)[0].lower() for dep in project["dependencies"]}
    assert not required & {name.lower() for name in PLOTTING}
    pattern = re.compile(rf"^\s*(?:import|from)\s+({'|'.join(PLOTTING)})\b", re.MULTILINE)
    importing = [
        str(path.relative_to(ROOT))
        for path in (ROOT / "inno_notify").rglob("*.py")
        if pattern.search(path.read_text(encoding="utf-8"))
    ]
    assert importing == []
    script = """
import sys
import inno_notify.cli, inno_notify.runtime
from inno_notify.adapters.channels.digest_chart import render_chart
from inno_notify.domain.digest import DailyRow, DigestRows, PersonRow, TeamTotals, build_digest
rows = DigestRows(TeamTotals(jobs=1, gpu_minutes=600.0, used_gpu_minutes=300.0),
                  people=(PersonRow("a@x", 1, 600.0, 300.0, 0.0),), daily=(DailyRow("a@x", 2, 600.0, 300.0),))
assert render_chart(build_digest("t", "2026-W48", "UTC", rows)).startswith(b"\\x89PNG")
print(sorted({name.split(".")[0] for name in sys.modules} & {"numpy", "matplotlib", "fontTools"}))
"""
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


# --- opt-in: build and run the image -----------------------------------------------------------------


def _why_no_containers() -> str | None:
    if os.environ.get("INNO_NOTIFY_TEST_IMAGE") != "1":
        return "building the image takes minutes: set INNO_NOTIFY_TEST_IMAGE=1 (or run `make image-test`)"
    missing = [
        tool for tool in ("mmdebstrap", "podman", "buildah", "unshare", "chroot") if not shutil.which(tool)
    ]
    if missing:
        tools = ", ".join(missing)
        return f"cannot build containers here: {tools} not installed (`make image-test` installs them)"
    if os.geteuid() != 0:
        return "building with buildah's chroot isolation and mounting the image need root"
    probe = subprocess.run(
        ["unshare", "-m", "--propagation", "private", "true"], capture_output=True, text=True
    )
    if probe.returncode != 0:
        return f"cannot make a mount namespace here: {probe.stderr.strip()}"
    return None


@pytest.fixture(scope="module")
def rootfs() -> Iterator[Path]:
    """The built image's root filesystem (buildah mount of a working container)."""
    reason = _why_no_containers()
    if reason is not None:
        pytest.skip(reason)
    build = subprocess.run(
        [str(DEPLOY / "image" / "build-local.sh"), IMAGE], capture_output=True, text=True, timeout=1800
    )
    assert build.returncode == 0, build.stdout + build.stderr
    print(build.stdout.strip())  # "built …" and "image_bytes=N", shown with -s
    container = subprocess.run(["buildah", "from", IMAGE], capture_output=True, text=True, check=True)
    name = container.stdout.strip()
    try:
        mounted = subprocess.run(["buildah", "mount", name], capture_output=True, text=True, check=True)
        yield Path(mounted.stdout.strip())
    finally:
        subprocess.run(["buildah", "umount", name], capture_output=True)
        subprocess.run(["buildah", "rm", name], capture_output=True)


def _run_readonly(
    rootfs: Path, mountpoint: Path, *command: str, env: dict[str, str] | None = None
) -> list[str]:
    mountpoint.mkdir(exist_ok=True)
    return [
        "unshare", "-m", "--propagation", "private",
        str(DEPLOY / "image" / "run-readonly.sh"), str(rootfs), str(mountpoint), *command,
    ]  # fmt: skip


def _clean_env(extra: dict[str, str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("INNO_NOTIFY_")}
    env.update(extra)
    return env


# An operator pulls the image onto every node the pod may land on: it stays lean (issue 30: 547 MiB
# with numpy and matplotlib for one chart, whose environment alone was 356 MB).
MAX_IMAGE_BYTES = 350_000_000
MAX_ENV_BYTES = 200_000_000


@pytest.mark.image
def test_image_and_its_environment_stay_lean(rootfs: Path) -> None:
    inspected = subprocess.run(
        ["podman", "image", "inspect", "--format", "{{.Size}}", IMAGE],
        capture_output=True,
        text=True,
        check=True,
    )
    image_bytes = int(inspected.stdout.strip())
    env = rootfs / "opt" / "inno-notify"
    env_bytes = sum(p.lstat().st_size for p in env.rglob("*") if p.is_file() and not p.is_symlink())
    print(f"image_bytes={image_bytes}")
    print(f"env_bytes={env_bytes}")
    site = next(env.glob("lib/python3*/site-packages"))
    assert not [name for name in ("numpy", "matplotlib", "fontTools") if (site / name).exists()]
    assert env_bytes <= MAX_ENV_BYTES
    assert image_bytes <= MAX_IMAGE_BYTES


@pytest.mark.image
def test_image_config_is_what_kubernetes_expects(rootfs: Path) -> None:
    inspected = subprocess.run(
        ["podman", "image", "inspect", IMAGE], capture_output=True, text=True, check=True
    )
    config = json.loads(inspected.stdout)[0]["Config"]
    assert config["User"] == f"{UID}:{UID}"
    assert config["Entrypoint"] == ["inno-notify"] and config["Cmd"] == ["serve"]
    assert "Healthcheck" not in config
    assert config["WorkingDir"] == "/tmp"


@pytest.mark.image
def test_version_as_non_root_on_a_read_only_root(rootfs: Path, tmp_path: Path) -> None:
    script = (
        "id -u; inno-notify version; "
        "touch /opt/inno-notify/probe 2>&1 || true; touch /etc/probe 2>&1 || true; "
        "touch /tmp/probe && echo tmp-writable"
    )
    result = subprocess.run(
        _run_readonly(rootfs, tmp_path / "root", "sh", "-c", script),
        capture_output=True, text=True, timeout=120, env=_clean_env({}),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == str(UID)
    assert lines[1] == f"inno-notify {__version__}"
    assert "Read-only file system" in lines[2] and "Read-only file system" in lines[3]
    assert lines[4] == "tmp-writable"


@pytest.mark.image
def test_demo_runs_in_the_image(rootfs: Path, tmp_path: Path) -> None:
    result = subprocess.run(
        _run_readonly(rootfs, tmp_path / "root", "inno-notify", "demo", "--jobs", "6", "--speed", "2000"),
        capture_output=True, text=True, timeout=300, env=_clean_env({}),
    )  # fmt: skip
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "weekly digest" in result.stdout
    assert "Traceback" not in result.stdout + result.stderr


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.mark.image
def test_serve_answers_its_probes_in_the_image(rootfs: Path, tmp_path: Path) -> None:
    port = _free_port()
    proc = subprocess.Popen(
        _run_readonly(rootfs, tmp_path / "root", "inno-notify", "serve"),
        env=_clean_env({"INNO_NOTIFY_PROBES__LISTEN": f"127.0.0.1:{port}", "INNO_NOTIFY_LOG_FORMAT": "json"}),
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        answers: dict[str, tuple[int, str]] = {}  # path -> (status, body)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and len(answers) < 3:
            for path in ("/healthz", "/readyz", "/metrics"):
                try:
                    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=2) as response:
                        answers[path] = (response.status, response.read().decode())
                except urllib.error.HTTPError as error:
                    answers[path] = (error.code, error.read().decode())
                except OSError:
                    time.sleep(0.2)
        # No cluster here: serve runs, and readiness says why it is not ready.
        assert {path: status for path, (status, _) in answers.items()} == {
            "/healthz": 200, "/readyz": 503, "/metrics": 200,
        }  # fmt: skip
        assert json.loads(answers["/readyz"][1])["checks"]["kubernetes_configured"] is False
        assert "inno_notify_outbox_depth" in answers["/metrics"][1]
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.stderr is not None
    log = proc.stderr.read().splitlines()
    assert log and all(json.loads(line)["level"] for line in log), "log_format json: one object per line"
