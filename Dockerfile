# The inno-notify image: `inno-notify serve` as a non-root user on a read-only root filesystem.
#
# Two stages: the first builds the package's wheel and installs it with its dependencies into a
# virtual environment; the second copies only that environment onto a clean base, so no compiler,
# source tree or pip cache ships. The base is a build argument: the public slim Python image by
# default; on a machine without a registry, any Debian-based image with python3 and python3-venv
# (deploy/image/README.md shows one made with mmdebstrap).
#
# Writable at run time: only /tmp (mount an emptyDir there; the manifests in deploy/kustomize do)
# and whatever volume holds a SQLite database. Kubernetes probes the service on probes.listen
# (/healthz, /readyz), so the image has no HEALTHCHECK.

ARG BASE_IMAGE=docker.io/library/python:3.12-slim-bookworm

FROM ${BASE_IMAGE} AS build
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1
WORKDIR /src
COPY pyproject.toml README.md ./
COPY inno_notify/ inno_notify/
RUN python3 -m venv /opt/inno-notify \
 && /opt/inno-notify/bin/pip install --no-cache-dir --upgrade pip \
 && /opt/inno-notify/bin/pip wheel --no-cache-dir --no-deps --wheel-dir /wheels . \
 && /opt/inno-notify/bin/pip install --no-cache-dir --compile /wheels/inno_notify-*.whl \
 && /opt/inno-notify/bin/pip uninstall --yes pip setuptools \
 && /opt/inno-notify/bin/inno-notify version

FROM ${BASE_IMAGE}
ARG VERSION=0.1.0
LABEL org.opencontainers.image.title="inno-notify" \
      org.opencontainers.image.description="Per-job GPU usage summaries and right-sizing advice for Kubernetes GPU clusters" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.version="${VERSION}"
COPY --from=build /opt/inno-notify /opt/inno-notify
# A numeric user (runAsNonRoot can check it) that owns nothing in the image: the code is read-only
# to the service even where the root filesystem is not. /tmp is the working directory, so the
# relative paths of the defaults (the demo's output, a quick-start SQLite file) land on the one
# writable volume.
ENV PATH=/opt/inno-notify/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    HOME=/tmp
WORKDIR /tmp
USER 10001:10001
EXPOSE 8081 8080
ENTRYPOINT ["inno-notify"]
CMD ["serve"]
