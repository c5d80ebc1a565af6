#!/usr/bin/env bash
# Smoke run of `inno-notify agent` on a real GPU (docs/agent.md).
#
# Needs: Linux with an NVIDIA driver (nvidia-smi works), python3 >= 3.11, curl, and PyPI for the
# package and PyTorch (installed into a fresh virtual environment under $WORK; nothing else is
# installed). On a machine without PyPI, point PYTHON at an interpreter that already has torch and
# set SKIP_INSTALL=1: the package is then imported from this checkout.
#
# What it does: starts a small CUDA workload (PyTorch matmuls holding about 1.5 GiB), reads NVML
# once through the agent's sampler (per-process memory and SM utilization of the workload), runs
# `inno-notify agent` with pods: none for a few samples, prints /metrics and /healthz, stops the
# agent with SIGTERM and checks that it exits 0. Prints name=value lines, then the metrics.
#
#   bench/agent_smoke.sh                # WORK=/tmp/... PORT=19401 SECONDS_RUN=20
set -euo pipefail

REPO=$(cd "$(dirname "$0")/.." && pwd)
WORK=${WORK:-$(mktemp -d /tmp/inno-agent-smoke.XXXXXX)}
PORT=${PORT:-19401}
SECONDS_RUN=${SECONDS_RUN:-20}
PYTHON=${PYTHON:-python3}
SKIP_INSTALL=${SKIP_INSTALL:-0}

workload_pid=""
agent_pid=""
cleanup() {
  # Only what this script started, by process id.
  [ -n "$agent_pid" ] && kill "$agent_pid" 2>/dev/null || true
  [ -n "$workload_pid" ] && kill "$workload_pid" 2>/dev/null || true
}
trap cleanup EXIT

echo "work_dir=$WORK"
nvidia-smi --query-gpu=index,name,uuid,driver_version,mig.mode.current --format=csv,noheader \
  | sed 's/^/gpu=/'

if [ "$SKIP_INSTALL" = "1" ]; then
  PY="$PYTHON"
  export PYTHONPATH="$REPO${PYTHONPATH:+:$PYTHONPATH}"
  AGENT=("$PY" -m inno_notify agent)
else
  "$PYTHON" -m venv "$WORK/venv"
  "$WORK/venv/bin/pip" install --quiet --upgrade pip
  t0=$(date +%s)
  "$WORK/venv/bin/pip" install --quiet "$REPO" torch
  echo "install_seconds=$(( $(date +%s) - t0 ))"
  PY="$WORK/venv/bin/python"
  AGENT=("$WORK/venv/bin/inno-notify" agent)
fi
"$PY" -c 'import torch; print(f"torch={torch.__version__} cuda={torch.version.cuda} available={torch.cuda.is_available()}")'

# The CUDA workload: about 1.5 GiB held, matmuls with pauses (partial utilization).
"$PY" - "$WORK/workload.ready" "$((SECONDS_RUN + 60))" <<'EOF' &
import os, sys, time
import torch

ready, seconds = sys.argv[1], float(sys.argv[2])
x = torch.randn(8192, 8192, device="cuda")
held = torch.empty(int(1.25 * 2**30) // 4, device="cuda")
with open(ready, "w") as out:
    out.write(str(os.getpid()))
end = time.time() + seconds
while time.time() < end:
    (x @ x).sum().item()
    time.sleep(0.02)
EOF
workload_pid=$!
for _ in $(seq 1 300); do [ -s "$WORK/workload.ready" ] && break; sleep 0.2; done
[ -s "$WORK/workload.ready" ] || { echo "workload_started=0"; exit 1; }
echo "workload_pid=$workload_pid"
sleep 3

# NVML through the agent's own sampler: what it reads of the workload.
"$PY" - "$workload_pid" <<'EOF'
import sys, time
from pathlib import Path

import pynvml

from inno_notify.adapters.nvml import NvmlSampler, read_cgroups

pid = int(sys.argv[1])
sampler = NvmlSampler(pynvml, first_window_seconds=5)
sampler.sample()
time.sleep(3)
reading = sampler.sample()
sampler.close()
print(f"nvml_up={int(reading.nvml_up)}")
print(f"devices={len(reading.devices)}")
for device in reading.devices:
    print(
        f"device={device.gpu_uuid} index={device.index} model={device.model!r} mig_profile={device.mig_profile} "
        f"util_percent={device.util_percent} memory_used_bytes={device.memory_used_bytes} "
        f"memory_total_bytes={device.memory_total_bytes} processes={len(device.processes or ())}"
    )
    for process in device.processes or ():
        mine = " (workload)" if process.pid == pid else ""
        print(f"process={process.pid} memory_bytes={process.memory_bytes} sm_util_percent={process.sm_util_percent}{mine}")
for gap in reading.gaps:
    print(f"gap={gap.figure} reason={gap.reason.value} gpu={gap.gpu_uuid or 'node'}")
seen = [p for d in reading.devices for p in d.processes or () if p.pid == pid]
print(f"workload_seen={int(bool(seen))}")
if seen:
    print(f"workload_memory_bytes={seen[0].memory_bytes}")
    print(f"workload_sm_util_percent={seen[0].sm_util_percent}")
print(f"workload_cgroup={read_cgroups(Path('/proc'), [pid]).get(pid)}")
EOF

# The agent itself.
INNO_NOTIFY_AGENT__PODS=none \
INNO_NOTIFY_AGENT__LISTEN="127.0.0.1:$PORT" \
INNO_NOTIFY_AGENT__INTERVAL_SECONDS=2 \
  "${AGENT[@]}" 2>"$WORK/agent.log" &
agent_pid=$!
for _ in $(seq 1 100); do curl -fsS "http://127.0.0.1:$PORT/healthz" >/dev/null 2>&1 && break; sleep 0.2; done
sleep "$SECONDS_RUN"
echo "healthz=$(curl -sS -o /dev/null -w '%{http_code}' "http://127.0.0.1:$PORT/healthz")"
curl -fsS "http://127.0.0.1:$PORT/metrics" >"$WORK/metrics.txt"
echo "agent_rss_kib=$(awk '/VmRSS/ {print $2}' "/proc/$agent_pid/status")"
kill -TERM "$agent_pid"
set +e
wait "$agent_pid"
echo "agent_exit_code=$?"
set -e
agent_pid=""
echo "metrics_lines=$(grep -c '^inno_notify_' "$WORK/metrics.txt")"
echo "--- /metrics (inno_notify_* samples)"
grep '^inno_notify_' "$WORK/metrics.txt"
echo "--- agent log"
cat "$WORK/agent.log"
