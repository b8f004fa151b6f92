"""What the talking heads' own operations cost under TensorFlow on a CPU, against Keras' layer.

The talking heads add two mixings of the heads, `(heads x heads)` over every (query, key) pair:
one of the scores before the softmax and one of the weights after it. In a training step they
also add each mixing's gradient and each kernel's gradient. Those are six passes over whole
attention matrices that Keras' attention does not make. This script times them alone, as one
XLA program, in both forms of the kernels' gradient: as fast as XLA runs them.
It times Keras' layer's training step under Keras' defaults (no XLA on a CPU) and
`MultiHeadAttention(talking_heads=True)`'s in the same process, interleaved, and prints each
over Keras' step. The first ratio is a floor under the second's excess over 1.

    KERAS_BACKEND=tensorflow python experiments/talking_heads_floor.py [--length 1024] [--repeats 7]
"""

from __future__ import annotations

import argparse
import os

os.environ.setdefault("KERAS_BACKEND", "tensorflow")

import keras  # noqa: E402
import numpy as np  # noqa: E402

from convatt.speed.attention_bench.settings import AttentionSettings  # noqa: E402
from convatt.speed.attention_bench.steps import CompiledStep, _inputs, layer_step, median_times  # noqa: E402


def mixings_step(batch: int, heads: int, length: int, rng: np.random.Generator, gradient: str) -> CompiledStep:
    """The two mixings, forward and backward (the maps' and both kernels' gradients), one XLA program;
    `gradient`: the kernels' gradient form (`AttentionForms.talking_heads_gradient`)."""
    import tensorflow as tf

    from convatt.layers.talking_heads import mix_heads

    maps, upstream = (tf.constant(rng.normal(size=(batch, heads, length, length)), tf.float32) for _ in range(2))
    kernels = [tf.Variable(np.eye(heads, dtype="float32")) for _ in range(2)]

    @tf.function(jit_compile=True)
    def step():
        with tf.GradientTape() as tape:
            tape.watch(maps)
            mixed = mix_heads(mix_heads(maps, kernels[0], gradient), kernels[1], gradient)
        return tape.gradient(mixed, [maps, *kernels], output_gradients=upstream)

    def run() -> None:  # the maps' gradient stays a tensor (an output of the program), the kernels' are read
        for gradient in step()[1:]:
            gradient.numpy()

    return CompiledStep(run)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--length", type=int, default=1024)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--causal", action=argparse.BooleanOptionalAction, default=True)
    args = parser.parse_args()
    from convatt.layers import MultiHeadAttention

    settings = AttentionSettings()
    rng, x, shape = _inputs(settings, args.length)
    steps = {
        "Keras' layer": layer_step(keras.layers.MultiHeadAttention(**shape), x, args.causal, jit_compile=False),
        "talking heads (layer)": layer_step(
            MultiHeadAttention(**shape, talking_heads=True, max_len=args.length), x, args.causal, jit_compile=False
        ),
        **{
            f"the mixings alone ({gradient})": mixings_step(
                settings.batch_size, settings.num_heads, args.length, rng, gradient
            )
            for gradient in ("per_example", "autodiff")
        },
    }
    times = median_times(steps, args.repeats, warmup=1)
    keras_ms = times["Keras' layer"] * 1e3
    print(
        f"length {args.length}, {'causal' if args.causal else 'bidirectional'}, batch {settings.batch_size}, "
        f"{settings.num_heads} heads x {settings.key_dim}, median of {args.repeats}"
    )
    for name, seconds in times.items():
        print(f"  {name:26s} {seconds * 1e3:7.1f} ms  {seconds * 1e3 / keras_ms:5.2f} of Keras' step")


if __name__ == "__main__":
    main()
