#!/usr/bin/env bash
# `convatt bench --attention` on a GPU under JAX, in one call: mixed_bfloat16 first (where Keras'
# flash path, cuDNN's fused attention, runs: a reference row), then float32 (Keras' XLA path).
# Each writes its table (.md), its figures (.csv) and its stderr (.log) to OUT_DIR, with the
# GPU and the versions in gpu.txt. Usage: experiments/gpu_attention.sh OUT_DIR
# Environment: PYTHON (python3), BATCH (16), LENGTHS ("256 1024 2048"), REPEATS (20),
# TIMEOUT (seconds per precision, 240), CASES (the bench's --cases; every case if unset).
set -u
out=${1:?usage: experiments/gpu_attention.sh OUT_DIR}
python=${PYTHON:-python3}
export KERAS_BACKEND=jax XLA_PYTHON_CLIENT_PREALLOCATE=false PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,memory.total,clocks.sm,clocks.max.sm,driver_version --format=csv > "$out/gpu.txt"
$python -c "import jax, keras; print('jax', jax.__version__, 'keras', keras.__version__, jax.devices())" >> "$out/gpu.txt"
# shellcheck disable=SC2086  # LENGTHS is a list of words
bench=($python -m convatt bench --attention --batch-size "${BATCH:-16}" --lengths ${LENGTHS:-256 1024 2048}
       --repeats "${REPEATS:-20}" --warmup 3 ${CASES:+--cases $CASES})
for precision in mixed_bfloat16 float32; do
    timeout "${TIMEOUT:-240}" "${bench[@]}" --precision "$precision" --out "$out/attention-gpu-$precision.csv" \
        > "$out/attention-gpu-$precision.md" 2> "$out/attention-gpu-$precision.log"
    echo "$precision: exit $?"
done
