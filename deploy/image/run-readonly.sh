#!/bin/sh
# Runs a command in an image's root filesystem the way the Kubernetes manifests run the service:
# as user 10001:10001, on a read-only root (a read-only bind mount), with only /tmp writable (a
# tmpfs, like the manifests' emptyDir), in a mount namespace of its own. podman run does not work
# on the build machines (crun may not set rlimits there); this is what does.
#
#   unshare -m --propagation private deploy/image/run-readonly.sh ROOTFS MOUNTPOINT CMD [ARG...]
#
# ROOTFS is `buildah mount CONTAINER`; MOUNTPOINT an empty directory. The environment is the
# image's (PATH, HOME, PYTHON*) plus every INNO_NOTIFY_* variable of the caller.
# The network is the host's: the container's own network isolation is not reproduced.
set -eu
rootfs=$1
ro=$2
shift 2
mount --bind "$rootfs" "$ro"
mount -o remount,bind,ro "$ro"
mount -t tmpfs -o size=256m,mode=1777 tmpfs "$ro/tmp"
mount -t proc proc "$ro/proc"
mount --rbind /dev "$ro/dev"
set -- PATH=/opt/inno-notify/bin:/usr/bin:/bin HOME=/tmp PYTHONDONTWRITEBYTECODE=1 \
  PYTHONUNBUFFERED=1 $(env | grep '^INNO_NOTIFY_' || true) \
  sh -c 'cd /tmp && exec "$@"' sh "$@"
exec chroot --userspec=10001:10001 "$ro" /usr/bin/env -i "$@"
