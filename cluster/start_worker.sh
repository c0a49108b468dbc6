#!/usr/bin/env bash
# Join this machine to a raypipe Ray cluster: cluster/start_worker.sh HEAD_IP [PORT]
set -euo pipefail
head="${1:?usage: cluster/start_worker.sh HEAD_IP [PORT]}"
args=(--address="$head:${2:-6379}")
[ -n "${NUM_GPUS:-}" ] && args+=(--num-gpus="$NUM_GPUS")
ray start "${args[@]}"
