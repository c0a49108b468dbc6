#!/usr/bin/env bash
# Start the Ray head node of a raypipe cluster. Run on the head machine, then
# cluster/start_worker.sh HEAD_IP on every other machine.
#   NUM_GPUS defaults to what Ray detects; RAY_PORT to 6379.
set -euo pipefail
args=(--head --port="${RAY_PORT:-6379}" --dashboard-host=0.0.0.0)
[ -n "${NUM_GPUS:-}" ] && args+=(--num-gpus="$NUM_GPUS")
ray start "${args[@]}"
echo "head started; on each worker node run: cluster/start_worker.sh $(hostname -I | awk '{print $1}')" >&2
