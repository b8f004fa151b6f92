"""Times the forms of the 2-d convolutions' kernel gradient on this machine's first device (JAX).

The gradient of a per-head stencil's kernel over an attention matrix is, per tap, the sum of a
shifted slice of the padded input times the output's gradient. This times, at one shape, the
forms `convatt.layers.attention_conv2d` has (`tapped`: one reduction per tap, the GPU/TPU path;
`convolved`: one depthwise convolution, the CPU path), one reduction over all taps stacked
(`stacked`), and a single tap (`one tap`: the two matrices read once, the floor of any form that
reads them), and prints each one's median time and its ratio to `one tap`. Usage:

    KERAS_BACKEND=jax python experiments/kernel_gradient_forms.py [--batch 16] [--heads 4]
        [--length 1024] [--repeats 20]
"""

from __future__ import annotations

import argparse

import jax
import numpy as np
from keras import ops

from convatt.layers._utils import query_tap_offsets
from convatt.layers.attention_conv2d import (
    _col_offsets,
    _end,
    _padding,
    convolved_kernel_gradient,
    tapped_kernel_gradient,
)
from convatt.speed.attention_bench.steps import CompiledStep, median_times

KERNELS = {"+Conv2d (3x3)": (3, 3, False), "MTA (2x9, causal rows)": (2, 9, True)}


def stacked_kernel_gradient(x, upstream, row_offsets, col_offsets, row_scales):
    """All taps' shifted slices stacked, then one multiply-and-sum (no row scales)."""
    (top, bottom), (left, right) = _padding(row_offsets), _padding(col_offsets)
    padded = ops.pad(x, [[0, 0], [0, 0], [top, bottom], [left, right]])
    slices = [
        padded[:, :, top + r : _end(bottom - r), left + c : _end(right - c)] for r in row_offsets for c in col_offsets
    ]
    sums = ops.einsum("tbhqk,bhqk->ht", ops.stack(slices, axis=0), upstream)
    return ops.reshape(sums, (x.shape[1], len(row_offsets), len(col_offsets)))


def one_tap(x, upstream, row_offsets, col_offsets, row_scales):
    return ops.sum(x * upstream, axis=(0, 2, 3))


def compiled_step(function, x, upstream, offsets) -> CompiledStep:
    compiled = jax.jit(lambda x, u: function(x, u, *offsets)).lower(x, upstream).compile()
    return CompiledStep(lambda: jax.block_until_ready(compiled(x, upstream)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--length", type=int, default=1024)
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    shape = (args.batch, args.heads, args.length, args.length)
    x, upstream = (jax.device_put(rng.normal(size=shape).astype("float32")) for _ in range(2))
    forms = {"one tap": one_tap, "tapped": tapped_kernel_gradient, "stacked": stacked_kernel_gradient}
    forms["convolved"] = convolved_kernel_gradient
    print(f"device {jax.devices()[0]}, shape {shape}, float32, median of {args.repeats} (interleaved)")
    for name, (rows, cols, causal) in KERNELS.items():
        offsets = (query_tap_offsets(rows, causal), _col_offsets(cols), [None] * rows)
        reference = np.asarray(tapped_kernel_gradient(x, upstream, *offsets))
        for form in ("stacked", "convolved"):
            value = np.asarray(forms[form](x, upstream, *offsets))
            np.testing.assert_allclose(value, reference, rtol=1e-3, atol=1e-2 * np.sqrt(x.size), err_msg=form)
        steps = {form: compiled_step(function, x, upstream, offsets) for form, function in forms.items()}
        seconds = median_times(steps, args.repeats, warmup=1)
        for form, time in seconds.items():
            print(f"{name:24s} {form:10s} {1000 * time:9.3f} ms  {time / seconds['one tap']:6.2f}x one tap", flush=True)


if __name__ == "__main__":
    main()
