#!/usr/bin/env bash
# Builds the inno-notify image on a machine that reaches no image registry (only Debian's and
# PyPI's mirrors): the base root filesystem is made from Debian packages with mmdebstrap and
# imported with podman; buildah builds the repository's Dockerfile on it (chroot isolation, which
# needs no user namespaces). Elsewhere, `docker build .` or `buildah bud .` with the Dockerfile's
# default base does the same.
#
#   deploy/image/build-local.sh [TAG]     (default localhost/inno-notify:dev; run as root)
#
# Needs the Debian packages mmdebstrap, podman and buildah (`make image-test` installs them).
set -euo pipefail

repo=$(cd "$(dirname "$0")/../.." && pwd)
tag=${1:-localhost/inno-notify:dev}
work=${INNO_NOTIFY_IMAGE_WORK:-$repo/.image-build}
base=localhost/inno-notify-base:bookworm-slim
mkdir -p "$work"

# The base stands in for the public slim image, so it is made the way debian:bookworm-slim is:
# no manuals, documentation (but the copyrights) or translations, and merged /usr set up by
# mmdebstrap's hook rather than by the usrmerge package, which would bring perl (~47 MB).
if ! podman image exists "$base"; then
  echo "building the base $base with mmdebstrap (Debian bookworm, python3)"
  mmdebstrap --quiet --variant=minbase --include=python3,python3-venv \
    --hook-dir=/usr/share/mmdebstrap/hooks/merged-usr \
    --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-include=/usr/share/doc/*/copyright' \
    --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/info/*' \
    --dpkgopt='path-exclude=/usr/share/groff/*' --dpkgopt='path-exclude=/usr/share/lintian/*' \
    --dpkgopt='path-exclude=/usr/share/locale/*' --dpkgopt='path-include=/usr/share/locale/locale.alias' \
    bookworm "$work/base.tar"
  podman import --quiet "$work/base.tar" "$base" >/dev/null
  rm -f "$work/base.tar"
fi

# pip inside the build trusts the host's CA bundle, so that a machine behind a TLS-inspecting
# proxy can still reach PyPI; the mounts exist only while a RUN step runs, never in a layer.
volumes=()
if [ -r /etc/ssl/certs/ca-certificates.crt ]; then
  printf '[global]\ncert = /etc/pip-ca.crt\n' >"$work/pip.conf"
  volumes=(-v /etc/ssl/certs/ca-certificates.crt:/etc/pip-ca.crt:ro -v "$work/pip.conf:/etc/pip.conf:ro")
fi

buildah bud --quiet --isolation chroot --layers "${volumes[@]}" \
  --build-arg "BASE_IMAGE=$base" -t "$tag" "$repo" >/dev/null
echo "built $tag"
echo "image_bytes=$(podman image inspect --format '{{.Size}}' "$tag")"
