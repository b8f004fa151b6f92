"""Times Shaw et al.'s terms (k=16) with each gradient form of the distance skews (JAX).

`spread_by_distance` and `sum_by_distance` (convatt/layers/relative_position_representation.py)
take each other as their custom gradient on a CPU (less memory there) and autodiff's on a GPU or
TPU (faster there). This builds the training step of `MultiHeadAttention(relative_position_
representation=16)` with each form, whatever the device, beside Keras' layer, and prints each
step's median time, its ratio to Keras' and XLA's temporary memory, in float32 and
mixed_bfloat16, causal and bidirectional. Usage:

    KERAS_BACKEND=jax python experiments/shaw_gradient_forms.py [LENGTH (1024)] [BATCH (16)]
"""

from __future__ import annotations

import sys
from dataclasses import replace

import keras
import numpy as np
from keras import ops

from convatt.layers import MultiHeadAttention
from convatt.layers.forms import drop_in_forms
from convatt.speed.attention_bench.steps import layer_step, median_times

FORMS = {"custom gradient (CPU form)": False, "autodiff (accelerator form)": True}


def steps(x, policy: str, causal: bool) -> dict:
    shape = dict(num_heads=4, key_dim=32, dtype=policy)
    compiled = {"Keras' layer": layer_step(keras.layers.MultiHeadAttention(**shape), x, causal)}
    for name, accelerator in FORMS.items():
        layer = MultiHeadAttention(**shape, relative_position_representation=16)
        gradient = "autodiff" if accelerator else "transposed"  # the forms resolved when traced
        layer.choose_forms = lambda gradient=gradient: replace(drop_in_forms(), shaw_gradient=gradient)
        compiled[name] = layer_step(layer, x, causal)
    return compiled


def main() -> None:
    length = int(sys.argv[1]) if len(sys.argv) > 1 else 1024
    batch = int(sys.argv[2]) if len(sys.argv) > 2 else 16
    x = ops.convert_to_tensor(np.random.default_rng(0).normal(size=(batch, length, 128)).astype("float32"))
    print(f"device {keras.distribution.list_devices()[0]}, length {length}, batch {batch}, 4 heads x 32, median of 20")
    for policy in ("float32", "mixed_bfloat16"):
        for causal in (True, False):
            compiled = steps(x, policy, causal)
            times = median_times(compiled, repeats=20, warmup=3)
            for name, seconds in times.items():
                ratio, memory = seconds / times["Keras' layer"], compiled[name].temp_bytes / 2**20
                mask = "causal" if causal else "bidirectional"
                print(f"{policy:15s} {mask:13s} {name:28s} {1000 * seconds:7.3f} ms {ratio:5.2f}x {memory:8.1f} MiB")


if __name__ == "__main__":
    main()
