#!/usr/bin/env bash
# Run one command on a free GPU slot: CUDA_VISIBLE_DEVICES is set to that slot's GPU.
#
#   GPUS="0 1 2 3" experiments/gpu_slot.sh convatt train ...
#
# Slot i (the i-th word of GPUS) is busy while a process holds an flock on
# $GPU_LOCK_DIR/slot<i>.lock. This script takes the first free slot, sets
# CUDA_VISIBLE_DEVICES to its GPU and execs the command, which inherits the lock
# and so holds the slot until it exits (crashed or killed commands free it too:
# the kernel drops the lock with the process). When every slot is busy it waits.
# List a GPU twice (GPUS="0 0 1 1") to run two jobs on each. The Makefile uses it
# when GPUS is set: `make -j 4 ptb-all GPUS="0 1 2 3"`. Slots are shared by every
# make started by the same user, so two grids started side by side share the GPUs.
# With GPUS empty or unset the command just runs.
set -euo pipefail

if [ $# -eq 0 ]; then
    echo "usage: GPUS=\"0 1\" $0 COMMAND [ARGS...]" >&2
    exit 2
fi
read -r -a gpus <<< "${GPUS:-}"
if [ ${#gpus[@]} -eq 0 ]; then
    exec "$@"
fi
lock_dir=${GPU_LOCK_DIR:-${TMPDIR:-/tmp}/convatt-gpu-slots-$(id -u)}
mkdir -p "$lock_dir"
while :; do
    for i in "${!gpus[@]}"; do
        exec {fd}>>"$lock_dir/slot$i.lock"
        if flock -n "$fd"; then
            export CUDA_VISIBLE_DEVICES=${gpus[$i]}
            echo "gpu_slot: slot $i, CUDA_VISIBLE_DEVICES=$CUDA_VISIBLE_DEVICES" >&2
            exec "$@"
        fi
        exec {fd}>&-
    done
    sleep "${GPU_SLOT_WAIT:-5}"
done
