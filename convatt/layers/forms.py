"""Which form each part of the attention computes, chosen in one place; and the one module of
`convatt.layers` that asks for the backend, XLA compilation or the device.

A modification has one definition (its formula, in its sublayer's module); some have several
forms that compute the same values to float rounding in other operations: a faster one, or one
that keeps less for the backward pass. `AttentionForms` names the form of each part. A layer
takes one of two sets, by its class (`ModifiedAttention.choose_forms`):

- `published_forms`: the operations the tagger's published results came from, on every backend
  and device. The tagger's `SelfAttention` takes them, so that every variant trains the same
  bits (tests/test_layers_tagger_computation.py is the guard).
- `drop_in_forms`: `MultiHeadAttention`'s, the fastest or leanest form for the backend, the
  device and the compilation the call is traced under (each field's docstring says where which
  pays; the measurements are in docs/speed.md). Whether the code runs as one XLA program is only
  known while tracing, so the set is resolved when a call is traced (its `AttentionContext`
  carries it), never at import or when the layer is built.

The rows of the table and the sublayers receive these forms; none of them asks the environment.
"""

from __future__ import annotations

import contextlib
import functools
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal

import keras


@dataclass(frozen=True)
class AttentionForms:
    """The form of each part of the attention (all compute the same values to float rounding).

    Attributes:
        scores: `Q K^T / sqrt(d)` as "scale_product" (the product in float32, then scaled) or
            "scale_queries" (the queries scaled in their dtype first, Keras' order: XLA on a CPU
            then keeps no scaled copy of the product's gradient as a whole matrix).
        softmax: "autodiff" (`masked_softmax` and autodiff's gradient) or "from_output" (its
            gradient from the output alone, `convatt.layers.core.softmax`: one attention matrix
            fewer kept for the backward pass). A block recomputed in the backward pass takes
            its own form whatever this says (`attention_softmax`).
        bias_batch_sum: how a score bias's gradient is summed over the batch: "autodiff",
            "product" (`ones(b) @ upstream`: JAX on a CPU, where XLA's reduction over the
            leading axis is slow) or "additions" (one example after another, which TensorFlow's
            XLA on a CPU fuses into the optimizer's update; needs the batch size when traced).
        shaw: Shaw et al.'s terms from "gathered" `(q, k, d)` tables or by "skewed" products
            with the `2k + 1` embeddings (under XLA only: without it every reshape and pad of
            the skews runs alone as a copy; needs the lengths when traced).
        shaw_gradient: the skews' gradient: "transposed" (each skew's transpose, on a CPU:
            autodiff's kept more attention matrices there) or "autodiff" (on a GPU or TPU).
        talking_heads: the heads' mixing by an "einsum" or a "batched" matrix product per example
            (XLA moved the heads last and back for the einsum, a copy each way).
        talking_heads_gradient: the batched mixing's kernel gradient: "autodiff", or
            "per_example" plain matrix products (a step TensorFlow's XLA compiles whole on a CPU,
            where the batched product ran slower at long lengths; needs the batch size when
            traced). In the XLA island, whose backward is TensorFlow's gradient of the compiled
            forward, autodiff's ran faster at every length.
        conv2d: +Conv2d (and Multi-Token Attention's convolution) as one "depthwise" convolution,
            or as a "stencil" of shifted multiply-adds with its own gradient (one fused pass under
            XLA, and less kept for the backward pass).
        conv2d_kernel_gradient: the stencil's kernel gradient: "tapped" (a sum per tap: a GPU or
            TPU, where the slice fuses into the reduction), "row_summed" (sums along the keys:
            TensorFlow on a CPU) or "convolved" (one depthwise convolution: JAX on a CPU, whose
            code copies each slice before reducing it); None with the depthwise form.
        chunked_sums: long sums along the keys taken in chunks (`convatt.layers._utils.chunk_sums`):
            under XLA, which then fuses a product into the sum instead of writing it out.
        anchored: a backward pass's recomputation of a forward value waits for the gradient
            (`depends_on_gradient`): under JAX, whose XLA would otherwise keep the value from the
            forward pass (TensorFlow runs each op as written).
    """

    scores: Literal["scale_product", "scale_queries"]
    softmax: Literal["autodiff", "from_output"]
    bias_batch_sum: Literal["autodiff", "product", "additions"]
    shaw: Literal["gathered", "skewed"]
    shaw_gradient: Literal["autodiff", "transposed"]
    talking_heads: Literal["einsum", "batched"]
    talking_heads_gradient: Literal["autodiff", "per_example"]
    conv2d: Literal["depthwise", "stencil"]
    conv2d_kernel_gradient: Literal["tapped", "row_summed", "convolved"] | None
    chunked_sums: bool
    anchored: bool


PUBLISHED = AttentionForms(
    scores="scale_product",
    softmax="autodiff",
    bias_batch_sum="autodiff",
    shaw="gathered",
    shaw_gradient="autodiff",
    talking_heads="einsum",
    talking_heads_gradient="autodiff",
    conv2d="depthwise",
    conv2d_kernel_gradient=None,
    chunked_sums=False,
    anchored=False,
)
"""The operations the tagger's published results came from: the same on every backend and device."""


def published_forms() -> AttentionForms:
    """`PUBLISHED` (the tagger's `SelfAttention`)."""
    return PUBLISHED


def drop_in_forms() -> AttentionForms:
    """`MultiHeadAttention`'s forms for the backend, device and compilation of the code being
    traced now (call it while tracing: XLA compilation is known only then)."""
    backend, accelerator, xla = keras.backend.backend(), on_accelerator(), compiled_by_xla()
    tensorflow_xla_on_cpu = backend == "tensorflow" and xla and not accelerator
    whole_step_xla_on_cpu = tensorflow_xla_on_cpu and not getattr(_ISLAND, "tracing", False)
    return AttentionForms(
        scores="scale_queries",
        softmax="from_output",
        bias_batch_sum=_bias_batch_sum(backend, accelerator, xla),
        shaw="skewed" if xla else "gathered",
        shaw_gradient="autodiff" if accelerator else "transposed",
        talking_heads="batched",
        talking_heads_gradient="per_example" if whole_step_xla_on_cpu else "autodiff",
        conv2d="stencil",
        conv2d_kernel_gradient="tapped" if accelerator else "row_summed" if backend == "tensorflow" else "convolved",
        chunked_sums=xla,
        anchored=backend == "jax",
    )


def _bias_batch_sum(backend: str, accelerator: bool, xla: bool) -> str:
    """On a CPU: the product under JAX, the additions under TensorFlow's XLA; else autodiff's
    (a GPU or TPU, and TensorFlow without XLA, sum as fast themselves)."""
    if accelerator:
        return "autodiff"
    if backend == "jax":
        return "product"
    return "additions" if xla else "autodiff"


@functools.cache
def on_accelerator() -> bool:
    """Whether the backend computes on a GPU or TPU (Keras lists those first)."""
    return not keras.distribution.list_devices()[0].lower().startswith("cpu")


def compiled_by_xla() -> bool:
    """Whether the code being traced runs as one XLA program: always under JAX (jitted or op by
    op, each op an XLA computation), under TensorFlow inside a `tf.function(jit_compile=True)`
    (Keras' `fit` with `jit_compile=True`), not in TensorFlow's graphs without XLA or eagerly,
    where every reshape, pad and slice runs alone as a copy."""
    backend = keras.backend.backend()
    if backend != "tensorflow":
        return backend == "jax"
    import tensorflow as tf  # the backend's own question: is an XLA context around this trace

    return tf.__internal__.get_enclosing_xla_context() is not None


_ISLAND = threading.local()
"""`tracing`: whether the XLA island's forward is being traced on this thread (`tracing_island`)."""


@contextlib.contextmanager
def tracing_island() -> Iterator[None]:
    """While `convatt.layers.core.xla_island` traces its forward: XLA compiles the core alone
    there, not a whole step, and `drop_in_forms` takes the island's forms."""
    before = getattr(_ISLAND, "tracing", False)
    _ISLAND.tracing = True
    try:
        yield
    finally:
        _ISLAND.tracing = before


def compile_core(training, symbolic_or_stateless: bool) -> bool:
    """Whether `MultiHeadAttention` runs its modified core as an XLA program of its own (an XLA
    island, `convatt.layers.core.xla_island`): TensorFlow tracing a graph (`fit`, `predict`, a
    `tf.function`; not an eager call, which would compile a program for each new layer and shape
    it meets, once) outside any XLA program, with real variables (not a symbolic trace or a
    stateless call, where the variables' values are tensors of the caller's trace: Keras' scopes,
    `symbolic_or_stateless` from `convatt.layers._keras_compat`), `training` a Python value.
    The island's trace resolves `drop_in_forms` inside XLA: XLA's forms."""
    if keras.backend.backend() != "tensorflow" or compiled_by_xla():
        return False
    import tensorflow as tf  # the backend's own question: is a graph being traced

    if tf.executing_eagerly() or symbolic_or_stateless:
        return False
    return training is None or isinstance(training, bool)


def lengths_known_when_traced() -> bool:
    """Whether every length is known when tracing (JAX and PyTorch trace static shapes); not in
    TensorFlow's graphs, which may be traced for any length."""
    return keras.backend.backend() != "tensorflow"


def backend_remat(function):
    """The backend's own recomputation in the backward pass (what `keras.remat`, Keras 3.9+,
    wraps): `jax.checkpoint` under JAX, `tf.recompute_grad` under TensorFlow."""
    if keras.backend.backend() == "jax":
        import jax

        return jax.checkpoint(function)
    import tensorflow as tf

    return tf.recompute_grad(function)
