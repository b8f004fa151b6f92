"""Byte identity of the attention layers against a frozen copy of convatt (a pure refactor's check).

Runs a fixed set of layers with fixed weights and inputs under one copy of the package, saves
their outputs and gradients as .npy files, and compares two such runs byte for byte:

- `MultiHeadAttention` with each row's `example` options of the modification table (and a few
  more: +Conv, Multi-Token Attention's convolution of the scores, the circulant +R, every
  modification at once), causal and bidirectional, with padding masks, as the whole matrix,
  in blocks of queries (`query_block`) and decoded token by token with a cache: outputs and the
  gradients of a fixed weighted sum for every weight and both inputs;
- the tagger's `SelfAttention` with the same options (outputs and gradients);

under TensorFlow in a `tf.function` with `jit_compile=True` and with `jit_compile=False`, and
under JAX (`jax.jit`). The copies run in separate processes (each its own `PYTHONPATH`).

    # both copies, compared (the frozen one's files are kept in --cache and reused):
    KERAS_BACKEND=tensorflow python experiments/byte_identity.py check --frozen /work/frozen-e94d55a
    KERAS_BACKEND=jax python experiments/byte_identity.py check --frozen /work/frozen-e94d55a
    # one copy's files (what `check` runs in each process):
    PYTHONPATH=<copy> python experiments/byte_identity.py run OUT_DIR
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import zlib
from pathlib import Path

import numpy as np

B, T, FEATURES, HEADS, KEY_DIM, BLOCK = 2, 8, 6, 2, 4, 3
EXTRA_OPTIONS = {
    "conv1d": {"attention_conv": "1d"},
    "mta": {"attention_conv": "2d", "conv_kernel_size": (2, 5), "conv_before_softmax": True},
    "conv2d-causal-taps": {"attention_conv": "2d", "conv_causal": True},
    "circulant": {"relative_bias": True, "relative_bias_parameterization": "circulant"},
    "all": {
        "temperature": True,
        "position_interaction": True,
        "relative_bias": True,
        "relative_position_representation": 2,
        "alibi": True,
        "attention_conv": "2d",
        "talking_heads": True,
    },
}


def option_sets() -> dict[str, dict]:
    """{name: options}: each table row's `example` (one per option set), then `EXTRA_OPTIONS`."""
    try:
        from convatt.layers.core.modifications import MODIFICATIONS
    except ImportError:  # the copy before the core had a subpackage
        from convatt.layers.modifications import MODIFICATIONS
    sets = {}
    for row in MODIFICATIONS:
        options = row.example_options()
        if options not in sets.values():
            sets[row.name] = options
    return {**sets, **EXTRA_OPTIONS}


def _array(name: str, shape) -> np.ndarray:
    return np.random.default_rng(zlib.crc32(name.encode())).uniform(-0.7, 0.7, size=tuple(shape)).astype("float32")


def _inputs():
    x = _array("x", (B, T, FEATURES))
    padding = np.ones((B, T), bool)
    padding[1, T - 3 :] = False  # the second example's last 3 tokens are padding
    return x, padding


def _set_weights(layer) -> None:
    for weight in layer.weights:
        weight.assign(_array(weight.path, weight.shape))


def _gradients(function, weights: list, *arrays):
    """`[output, d sum(output * pattern) / d each weight and array]` as NumPy, compiled by the
    backend (`JIT` from the environment: "xla" or "graph" under TensorFlow)."""
    import keras

    if keras.backend.backend() == "jax":
        import jax

        def loss(ws, *xs):
            out = function(ws, *xs)
            return keras.ops.sum(out * _array("pattern", out.shape)), out

        (_, out), (d_weights, *d_arrays) = jax.jit(jax.value_and_grad(loss, argnums=(0, 1, 2), has_aux=True))(
            weights, *arrays
        )
        return _numpy(out, *d_weights, *d_arrays)
    import tensorflow as tf

    def step(ws, *xs):
        with tf.GradientTape() as tape:
            tape.watch([ws, xs])
            out = function(ws, *xs)
            total = tf.reduce_sum(out * _array("pattern", out.shape))
        return out, tape.gradient(total, [ws, list(xs)])

    jit = os.environ.get("JIT", "xla") == "xla"
    out, (d_weights, d_arrays) = tf.function(step, jit_compile=jit)(weights, *arrays)
    return _numpy(out, *d_weights, *d_arrays)


def _numpy(*tensors) -> list[np.ndarray]:
    """The tensors as NumPy (a sparse gradient, TensorFlow's `IndexedSlices` of a gathered table,
    made dense); an empty array for a gradient that is None (an input not read)."""
    arrays = []
    for t in tensors:
        if hasattr(t, "indices") and hasattr(t, "dense_shape"):
            import tensorflow as tf

            t = tf.convert_to_tensor(t)
        arrays.append(np.zeros(0, "float32") if t is None else np.asarray(t))
    return arrays


def _mha_cases(name: str, options: dict):
    """{case: [arrays]} of `MultiHeadAttention` with `options`: whole, blocked, cached."""
    import keras

    from convatt.layers import MultiHeadAttention

    x, padding = _inputs()
    kv = _array("kv", (B, T, FEATURES))
    cases = {}
    calls = {
        "causal-padded": dict(use_causal_mask=True, value_mask=padding, self_attention=True),
        "bidirectional-padded": dict(query_mask=padding, value_mask=padding, self_attention=True),
        "cross-keypadded": dict(query_mask=np.ones((B, T), bool), value_mask=padding),
        "bidirectional": dict(),
    }
    for block in (None, BLOCK):
        layer = MultiHeadAttention(HEADS, KEY_DIM, max_len=T, query_block=block, **options)
        layer.build((B, T, FEATURES), (B, T, FEATURES))
        _set_weights(layer)
        weights = [keras.ops.convert_to_tensor(w) for w in layer.trainable_variables]
        for call, kwargs in calls.items():
            if block and call == "bidirectional":
                continue
            value = kv if call.startswith("cross") else x

            def function(ws, q, v, kwargs=kwargs, layer=layer):
                return layer.stateless_call(ws, [v.value for v in layer.non_trainable_variables], q, v, **kwargs)[0]

            cases[f"mha-{name}-{'blocked' if block else 'whole'}-{call}"] = _gradients(function, weights, x, value)
    cases[f"mha-{name}-cached"] = _decoded(layer, x)
    return cases


def _decoded(layer, x):
    """The outputs of decoding `x` one token at a time with a cache, each step compiled."""
    import keras

    def step(token, cache, index):
        return layer(token, token, cache=cache, cache_update_index=index, use_causal_mask=True)

    if keras.backend.backend() == "jax":
        import jax

        compiled = jax.jit(step)
    else:
        import tensorflow as tf

        compiled = tf.function(step, jit_compile=os.environ.get("JIT", "xla") == "xla")
    cache, outputs = layer.empty_cache(B, T), []
    for i in range(T):
        out, cache = compiled(x[:, i : i + 1], cache, keras.ops.convert_to_tensor(np.int32(i)))
        outputs.append(np.asarray(out))
    return [np.concatenate(outputs, axis=1), np.asarray(cache)]


def _tagger_cases(name: str, options: dict):
    """{case: [arrays]} of the tagger's `SelfAttention` with `options` (causal and not, masked)."""
    import keras

    from convatt.layers import SelfAttention

    x, padding = _inputs()
    layer = SelfAttention(HEADS, KEY_DIM, max_len=T, **options)
    layer.build((B, T, FEATURES))
    _set_weights(layer)
    weights = [keras.ops.convert_to_tensor(w) for w in layer.trainable_variables]
    cases = {}
    for call, kwargs in {"plain": {}, "masked-causal": dict(mask=padding, use_causal_mask=True)}.items():

        def function(ws, inputs, unused, kwargs=kwargs):
            return layer.stateless_call(ws, [v.value for v in layer.non_trainable_variables], inputs, **kwargs)[0]

        cases[f"tagger-{name}-{call}"] = _gradients(function, weights, x, x)
    return cases


def run(out_dir: Path, only: str | None = None) -> int:
    """Save every case's arrays under `out_dir` (`<case>.<i>.npy`); the number of cases."""
    out_dir.mkdir(parents=True, exist_ok=True)
    count = 0
    for name, options in option_sets().items():
        if only and only not in name:
            continue
        for case, arrays in {**_mha_cases(name, options), **_tagger_cases(name, options)}.items():
            for i, array in enumerate(arrays):
                np.save(out_dir / f"{case}.{i}.npy", array)
            count += 1
        print(f"{name}: done", flush=True)
    return count


def compare(a: Path, b: Path) -> list[str]:
    """The files of `a` and `b` whose arrays differ in a byte (or in dtype, shape, presence)."""
    names = sorted({p.name for p in a.glob("*.npy")} | {p.name for p in b.glob("*.npy")})
    differ = []
    for name in names:
        if not (a / name).exists() or not (b / name).exists():
            differ.append(f"{name}: only in one")
            continue
        x, y = _load(a / name), _load(b / name)
        if x.dtype != y.dtype or x.shape != y.shape or x.tobytes() != y.tobytes():
            worst = np.abs(x.astype("float64") - y.astype("float64")).max() if x.shape == y.shape else "shape"
            differ.append(f"{name}: differs (max abs {worst})")
    return differ


def _load(path: Path) -> np.ndarray:
    """An array saved by `run`; a sparse gradient that an earlier version saved as an object
    (TensorFlow's `IndexedSlices`) made dense, as `_numpy` makes it now."""
    array = np.load(path, allow_pickle=True)
    return _numpy(array.item())[0] if array.dtype == object else array


def _run_copy(copy: Path, out_dir: Path, jit: str, only: str | None) -> None:
    env = {**os.environ, "PYTHONPATH": str(copy), "JIT": jit}
    command = [sys.executable, str(Path(__file__).resolve()), "run", str(out_dir)] + (["--only", only] if only else [])
    subprocess.run(command, env=env, check=True, cwd=copy)


def check(frozen: Path, mine: Path, cache: Path, only: str | None) -> int:
    """Run both copies (the frozen one's files reused from `cache`), compare; 1 where any differ."""
    backend = os.environ.get("KERAS_BACKEND", "tensorflow")
    failed = False
    for jit in ("xla", "graph") if backend == "tensorflow" else ("xla",):
        # layers are named by a counter, and the weights drawn by their paths: a subset (`only`)
        # is compared with the frozen copy's run of the same subset
        label = f"{backend}-{jit}" + (f"-{only}" if only else "")
        frozen_dir = cache / f"frozen-{frozen.resolve().name}-{label}"  # a cache per frozen copy
        mine_dir = cache / f"mine-{label}"
        if not any(frozen_dir.glob("*.npy")):
            _run_copy(frozen, frozen_dir, jit, only)
        for old in mine_dir.glob("*.npy"):
            old.unlink()
        _run_copy(mine, mine_dir, jit, only)
        differ = compare(frozen_dir, mine_dir)
        files = len(list(mine_dir.glob("*.npy")))
        listed = "".join(f"\n  {d}" for d in differ)
        print(f"{mine_dir.name}: {files} arrays, {len(differ)} differ{listed}", flush=True)
        failed = failed or bool(differ) or files == 0
    return int(failed)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    run_parser = sub.add_parser("run")
    run_parser.add_argument("out_dir", type=Path)
    run_parser.add_argument("--only")
    check_parser = sub.add_parser("check")
    check_parser.add_argument("--frozen", type=Path, required=True)
    check_parser.add_argument("--mine", type=Path, default=Path(__file__).resolve().parents[1])
    check_parser.add_argument("--cache", type=Path, default=Path("/tmp/convatt-byte-identity"))
    check_parser.add_argument("--only", help="only the option sets whose name contains this")
    args = parser.parse_args()
    if args.command == "run":
        print(f"{run(args.out_dir, args.only)} cases", flush=True)
        return 0
    return check(args.frozen, args.mine, args.cache, args.only)


if __name__ == "__main__":
    sys.exit(main())
