"""KerasHub's cached decoding with convatt's attention: the decoder's cache arguments and a
KerasHub causal LM's `generate()` (greedy = the argmax of whole-prefix runs; sampling)."""

import keras
import numpy as np
import pytest

keras_hub = pytest.importorskip("keras_hub")

from float_order import assert_clear_choices  # noqa: E402
from keras import ops  # noqa: E402

from convatt.layers.keras_hub_blocks import TransformerDecoder  # noqa: E402

D, LENGTH, VOCAB, ENCODER = 16, 6, 11, 5
DECODER_OPTIONS = {
    "plain": {},
    "conv2d_pre_alibi": {
        "attention_conv": "2d", "conv_before_softmax": True, "conv_kernel_size": (2, 3), "alibi": True,
    },
    "conv1d_temp_talking_shaw": {
        "attention_conv": "1d", "max_len": LENGTH, "temperature": True, "talking_heads": True,
        "relative_position_representation": 2,
    },
}  # fmt: skip
CROSS_OPTIONS = {  # the cross-attention's, beside the self-attention's of DECODER_OPTIONS
    "plain": {"attention_conv": "2d", "conv_kernel_size": (3, 3), "alibi": True},
    "conv2d_pre_alibi": {
        "attention_conv": "2d", "conv_before_softmax": True, "conv_kernel_size": (2, 3), "relative_bias": True,
        "position_interaction": True, "max_len": LENGTH,
    },
    "conv1d_temp_talking_shaw": {
        "attention_conv": "1d", "max_len": LENGTH, "relative_position_representation": 1, "temperature": True,
        "talking_heads": True,
    },
}  # fmt: skip
FAST_BUILD = {"kernel_initializer": "zeros"}  # randomised after (JAX compiles a random draw per shape)


def _randomised(layer, seed=0):
    rng = np.random.default_rng(seed)
    for weight in layer.weights:
        weight.assign(rng.normal(0.0, 0.3, weight.shape).astype("float32"))
    return layer


def _index(i: int):
    """A step's position as a tensor, as in KerasHub's compiled `generate` (every step one shape)."""
    return ops.convert_to_tensor(i, "int32")


@pytest.fixture(scope="module")
def decoder_input() -> np.ndarray:
    return np.random.default_rng(1).normal(size=(2, LENGTH, D)).astype("float32")


def test_the_decoder_one_token_at_a_time_equals_the_whole_sequence(decoder_input):
    """A decoder without cross-attention (its self-attention's options also in the tests below)."""
    x = decoder_input
    decoder = TransformerDecoder(32, num_heads=2, attention_options=DECODER_OPTIONS["conv2d_pre_alibi"], **FAST_BUILD)
    decoder.build(x.shape)
    whole = ops.convert_to_numpy(_randomised(decoder)(x))
    cache = ops.zeros(decoder.self_attention_cache_shape(2, LENGTH))
    for i in range(LENGTH):
        step, cache = decoder(x[:, i : i + 1], self_attention_cache=cache, self_attention_cache_update_index=_index(i))
        np.testing.assert_allclose(ops.convert_to_numpy(step)[:, 0], whole[:, i], atol=1e-5, err_msg=f"pos {i}")


@pytest.fixture(scope="module")
def encoder_input():
    """An encoder's output and its padding (the second example's last two keys are pads)."""
    padding = np.ones((2, ENCODER), bool)
    padding[1, 3:] = False
    return np.random.default_rng(3).normal(size=(2, ENCODER, D)).astype("float32"), padding


@pytest.fixture(scope="module")
def encoder_decoders(decoder_input, encoder_input) -> dict:
    """A built, randomised decoder with cross-attention for each of CROSS_OPTIONS."""
    decoders = {}
    for name, cross in CROSS_OPTIONS.items():
        options = {"attention_options": DECODER_OPTIONS[name], "cross_attention_options": cross}
        decoder = TransformerDecoder(32, num_heads=2, **options, **FAST_BUILD)
        decoder.build(decoder_input.shape, encoder_input[0].shape)
        decoders[name] = _randomised(decoder, seed=5)
    return decoders


def _cached_decoding(decoder, x, memory, padding, prompt: int) -> list[np.ndarray]:
    """The outputs of a prompt of `prompt` tokens at 0, then a token a step, as KerasHub's BART:
    the cross-attention cache written by the prompt and reused as it is (a step's one dropped).
    The prompt's position is KerasHub's int 0; a prompt of one token's a tensor, as the steps'."""
    arguments = {"encoder_padding_mask": padding}
    cache = ops.zeros(decoder.self_attention_cache_shape(2, LENGTH))
    written = ops.zeros(decoder.cross_attention_cache_shape(2, ENCODER))
    start = _index(0) if prompt == 1 else 0
    head, cache, written = decoder(x[:, :prompt], memory, self_attention_cache=cache,
                                   self_attention_cache_update_index=start, cross_attention_cache=written,
                                   cross_attention_cache_update_index=0, **arguments)  # fmt: skip
    outputs = list(ops.convert_to_numpy(head).transpose(1, 0, 2))
    for i in range(prompt, LENGTH):
        step, cache, reused = decoder(x[:, i : i + 1], memory, self_attention_cache=cache,
                                      self_attention_cache_update_index=_index(i), cross_attention_cache=written,
                                      cross_attention_cache_update_index=None, **arguments)  # fmt: skip
        np.testing.assert_array_equal(ops.convert_to_numpy(reused), ops.convert_to_numpy(written))
        outputs.append(ops.convert_to_numpy(step)[:, 0])
    return outputs


@pytest.mark.parametrize("name", list(CROSS_OPTIONS))
def test_the_decoder_with_cross_attention_cached_equals_the_whole_sequence(
    name, encoder_decoders, decoder_input, encoder_input
):
    """Cached self- and cross-attention (convolutions, +P, +R, ALiBi, Shaw, temperature, talking
    heads; the encoder padded): a token at a time, and a prompt at once then steps."""
    decoder, (memory, padding) = encoder_decoders[name], encoder_input
    whole = ops.convert_to_numpy(decoder(decoder_input, memory, encoder_padding_mask=padding))
    for prompt in (1, 3):
        for i, step in enumerate(_cached_decoding(decoder, decoder_input, memory, padding, prompt)):
            np.testing.assert_allclose(step, whole[:, i], atol=1e-5, err_msg=f"prompt {prompt}, pos {i}")


def test_the_cache_shapes_and_a_cross_attention_cache_without_the_decoder_position(encoder_decoders, encoder_input):
    decoder, memory = encoder_decoders["conv2d_pre_alibi"], encoder_input[0]
    assert decoder.cross_attention_cache_shape(2, ENCODER) == (2, 2, ENCODER, 2, 8)  # KerasHub's (BART makes it)
    assert decoder.self_attention_cache_shape(2, LENGTH) == (2, 4, LENGTH, 2, 8)  # k, v, q; the cross-attention's q
    x, cross = memory[:, :1], ops.zeros(decoder.cross_attention_cache_shape(2, ENCODER))
    arguments = {"cross_attention_cache": cross, "cross_attention_cache_update_index": 0}
    cache = ops.zeros(decoder.self_attention_cache_shape(2, LENGTH))
    with pytest.raises(ValueError, match="needs the decoder position; pass self_attention_cache_update_index"):
        decoder(x, memory, self_attention_cache=cache, self_attention_cache_update_index=None, **arguments)
    keras_hubs = ops.zeros((2, 3, LENGTH, 2, 8))  # the self-attention's slots, no room for the cross queries
    with pytest.raises(ValueError, match="self_attention_cache has 4 slots"):
        decoder(x, memory, self_attention_cache=keras_hubs, self_attention_cache_update_index=0, **arguments)
    too_long = ops.zeros(decoder.self_attention_cache_shape(2, LENGTH + 1))
    with pytest.raises(ValueError, match=f"max_len={LENGTH}"):
        decoder(x, memory, self_attention_cache=too_long, self_attention_cache_update_index=0, **arguments)


class TinyCausalLM(keras_hub.models.CausalLM):
    """A KerasHub causal LM of convatt decoder blocks: `call` on whole sequences,
    `call_with_cache` a token at a time, `generate_step` as KerasHub's GPT-2."""

    def __init__(self, attention_options: dict, **kwargs):
        super().__init__(**kwargs)
        self.embedding = keras.layers.Embedding(VOCAB, D, embeddings_initializer="zeros")
        self.positions = keras_hub.layers.PositionEmbedding(LENGTH, initializer="zeros")
        self.blocks = [TransformerDecoder(32, 2, attention_options=attention_options, **FAST_BUILD) for _ in range(2)]
        self.head = keras.layers.Dense(VOCAB, kernel_initializer="zeros")

    def call(self, token_ids):
        x = self.embedding(token_ids)
        x = x + self.positions(x)
        for block in self.blocks:
            x = block(x)
        return self.head(x)

    def call_with_cache(self, token_ids, cache, index):
        x = self.embedding(token_ids)
        x = x + self.positions(x, start_index=index)
        caches = []
        for i, block in enumerate(self.blocks):
            x, next_cache = block(x, self_attention_cache=cache[:, i], self_attention_cache_update_index=index)
            caches.append(next_cache)
        return self.head(x), x, ops.stack(caches, axis=1)

    def generate_step(self, inputs, stop_token_ids=None):
        token_ids, padding_mask = inputs["token_ids"], inputs["padding_mask"]
        batch, length = ops.shape(token_ids)
        shape = self.blocks[0].self_attention_cache_shape(batch, length)
        cache = ops.zeros((batch, len(self.blocks), *shape[1:]), dtype=self.compute_dtype)
        _, hidden, cache = self.call_with_cache(token_ids, cache, 0)

        def next(prompt, cache, index):
            token = ops.slice(prompt, [0, index - 1], [batch, 1])
            logits, hidden, cache = self.call_with_cache(token, cache, index - 1)
            return ops.squeeze(logits, 1), ops.squeeze(hidden, 1), cache

        index = ops.min(ops.sum(ops.cast(padding_mask, "int32"), axis=-1))
        token_ids = self.sampler(next=next, prompt=token_ids, cache=cache, index=index, mask=padding_mask,
                                 hidden_states=hidden, model=self)  # fmt: skip
        return {"token_ids": token_ids, "padding_mask": ops.ones_like(padding_mask, dtype="bool")}


def _greedy_without_cache(model, prompt: np.ndarray, prompt_len: int) -> np.ndarray:
    tokens = prompt.copy()
    for i in range(prompt_len, LENGTH):
        logits = ops.convert_to_numpy(model(tokens))[:, i - 1]
        assert_clear_choices(logits)  # so that the cached run's ids may be compared exactly
        tokens[:, i] = logits.argmax(-1)
    return tokens


@pytest.mark.parametrize("name", ["plain", "conv1d_temp_talking_shaw"])
def test_generate_greedy_equals_whole_prefix_decoding_and_sampling_runs(name):
    model = TinyCausalLM(DECODER_OPTIONS[name])
    prompt_len = 3
    prompt = np.zeros((2, LENGTH), "int32")
    prompt[:, :prompt_len] = [[1, 2, 3], [4, 5, 6]]
    model(prompt)
    _randomised(model, seed=4)
    padding = np.arange(LENGTH)[None].repeat(2, 0) < prompt_len
    model.compile(sampler="greedy")
    greedy = model.generate({"token_ids": prompt, "padding_mask": padding}, stop_token_ids=None)["token_ids"]
    np.testing.assert_array_equal(greedy, _greedy_without_cache(model, prompt, prompt_len))
    model.compile(sampler=keras_hub.samplers.TopKSampler(k=3, seed=0))
    sampled = model.generate({"token_ids": prompt, "padding_mask": padding}, stop_token_ids=None)["token_ids"]
    assert sampled.shape == (2, LENGTH) and (sampled[:, :prompt_len] == prompt[:, :prompt_len]).all()
    assert ((sampled >= 0) & (sampled < VOCAB)).all()
