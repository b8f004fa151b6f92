"""KerasHub's cached decoding with convatt's attention: the decoder's cache arguments and a
KerasHub causal LM's `generate()` (greedy = the argmax of whole-prefix runs; sampling)."""

import keras
import numpy as np
import pytest

keras_hub = pytest.importorskip("keras_hub")

from keras import ops  # noqa: E402

from convatt.layers.keras_hub_blocks import TransformerDecoder  # noqa: E402

D, LENGTH, VOCAB = 16, 8, 11
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


def _randomised(layer, seed=0):
    rng = np.random.default_rng(seed)
    for weight in layer.weights:
        weight.assign(rng.normal(0.0, 0.3, weight.shape).astype("float32"))
    return layer


@pytest.mark.parametrize("name", list(DECODER_OPTIONS))
def test_the_decoder_one_token_at_a_time_equals_the_whole_sequence(name):
    x = np.random.default_rng(1).normal(size=(2, LENGTH, D)).astype("float32")
    decoder = TransformerDecoder(32, num_heads=2, attention_options=DECODER_OPTIONS[name])
    decoder(x)
    whole = ops.convert_to_numpy(_randomised(decoder)(x))
    cache = ops.zeros(decoder.self_attention_cache_shape(2, LENGTH))
    for i in range(LENGTH):
        step, cache = decoder(x[:, i : i + 1], self_attention_cache=cache, self_attention_cache_update_index=i)
        np.testing.assert_allclose(ops.convert_to_numpy(step)[:, 0], whole[:, i], atol=1e-5, err_msg=f"pos {i}")


def test_the_cross_attention_cache_with_an_encoder():
    x, memory = (np.random.default_rng(s).normal(size=(2, n, D)).astype("float32") for s, n in ((2, LENGTH), (3, 5)))
    decoder = TransformerDecoder(
        32, num_heads=2, attention_options={"attention_conv": "2d"}, cross_attention_options={"temperature": True}
    )
    decoder(x, memory)
    whole = ops.convert_to_numpy(_randomised(decoder)(x, memory))
    cache = ops.zeros(decoder.self_attention_cache_shape(2, LENGTH))
    cross = ops.zeros(decoder.cross_attention_cache_shape(2, 5))
    for i in range(LENGTH):
        step, cache, cross = decoder(
            x[:, i : i + 1], memory, self_attention_cache=cache, self_attention_cache_update_index=i,
            cross_attention_cache=cross, cross_attention_cache_update_index=0 if i == 0 else None,
        )  # fmt: skip
        np.testing.assert_allclose(ops.convert_to_numpy(step)[:, 0], whole[:, i], atol=1e-5, err_msg=f"pos {i}")


def test_a_cross_attention_cache_is_refused_where_it_needs_the_decoder_position():
    x, memory = np.zeros((2, 4, D), "float32"), np.zeros((2, 3, D), "float32")
    decoder = TransformerDecoder(32, num_heads=2, cross_attention_options={"attention_conv": "2d"})
    decoder(x, memory)
    cache, cross = ops.zeros(decoder.self_attention_cache_shape(2, 4)), ops.zeros((2, 3, 3, 2, 8))
    with pytest.raises(ValueError, match="cannot serve attention_conv"):
        decoder(x[:, :1], memory, self_attention_cache=cache, self_attention_cache_update_index=0,
                cross_attention_cache=cross, cross_attention_cache_update_index=0)  # fmt: skip


class TinyCausalLM(keras_hub.models.CausalLM):
    """A KerasHub causal LM of convatt decoder blocks: `call` on whole sequences,
    `call_with_cache` a token at a time, `generate_step` as KerasHub's GPT-2."""

    def __init__(self, attention_options: dict, **kwargs):
        super().__init__(**kwargs)
        self.embedding = keras.layers.Embedding(VOCAB, D)
        self.positions = keras_hub.layers.PositionEmbedding(LENGTH)
        self.blocks = [TransformerDecoder(32, num_heads=2, attention_options=attention_options) for _ in range(2)]
        self.head = keras.layers.Dense(VOCAB)

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
        tokens[:, i] = ops.convert_to_numpy(model(tokens))[:, i - 1].argmax(-1)
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
