"""DecoderLM: cached and uncached logits and generation agree, sampling (temperature, top-k,
top-p) is what it says, and bad input is refused."""

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from attention.language_model import sampling_distribution

from .helpers import DECODER_SIZES, assert_close
from .helpers import small_lm as _lm

E, H, N, L = DECODER_SIZES


@pytest.mark.parametrize("positions", ["learned", "sinusoidal", "rotary", "alibi", "none"])
@pytest.mark.parametrize("num_kv_heads", [4, 1])
@torch.no_grad()
def test_lm_logits_with_a_cache_equal_the_full_pass_token_by_token(positions, num_kv_heads):
    model = _lm(positions, num_kv_heads, window=4 if positions == "rotary" else None)
    tokens = torch.randint(11, (N, 9))
    full, full_weights = model(tokens, need_weights=True)
    cache = model.new_cache(N)
    logits, weights = model(tokens[:, :5], cache=cache, need_weights=True)
    assert_close(logits, full[:, :5])
    for t in range(5, 9):
        logits, weights = model(tokens[:, t : t + 1], cache=cache, need_weights=True)
        assert_close(logits, full[:, t : t + 1])
        for w, fw in zip(weights, full_weights, strict=True):
            assert_close(w, fw[:, :, t : t + 1, : t + 1])
    assert cache.length == 9


@pytest.mark.parametrize("positions", ["learned", "sinusoidal", "rotary", "alibi", "none"])
def test_generation_with_and_without_the_cache_gives_the_same_tokens(positions):
    torch.manual_seed(1)
    model = _lm(positions, 2, dtype=torch.float32, window=3 if positions == "alibi" else None)
    prompt = torch.randint(11, (3, 4))
    cached = model.generate(prompt, 8)
    assert cached.shape == (3, 12) and torch.equal(cached[:, :4], prompt)
    assert torch.equal(cached, model.generate(prompt, 8, use_cache=False))
    # Greedy: each new token is the argmax of the full pass over the tokens before it.
    logits, _ = model(cached[:, :-1])
    assert torch.equal(logits[:, 3:].argmax(-1), cached[:, 4:])


def test_sampling_is_reproducible_from_the_generator_and_top_k_1_is_greedy():
    model = _lm(dtype=torch.float32)
    prompt = torch.randint(11, (4, 2))

    def sample(seed, **kwargs):
        g = torch.Generator().manual_seed(seed)
        return model.generate(prompt, 9, temperature=1.0, generator=g, **kwargs)

    assert torch.equal(sample(0), sample(0))
    assert torch.equal(sample(0, use_cache=False), sample(0))
    assert not torch.equal(sample(0), sample(1))
    assert torch.equal(sample(3, top_k=1), model.generate(prompt, 9))
    top_2 = sample(5, top_k=2)
    logits, _ = model(top_2[:, :-1])
    ranks = (logits[:, 1:] > logits[:, 1:].gather(-1, top_2[:, 2:, None])).sum(-1)
    assert (ranks < 2).all()  # every sampled token is one of the 2 most likely


def test_generate_restores_the_training_mode():
    model = _lm(dtype=torch.float32).train()
    model.generate(torch.zeros(1, 1, dtype=torch.long), 2)
    assert model.training


def test_output_head_is_not_tied_and_sizes_follow_the_key_value_heads():
    model = _lm(num_kv_heads=1)
    assert model.head.weight.data_ptr() != model.embedding.weight.data_ptr()
    attn = model.blocks[0].self_attn
    assert attn.k_proj.weight.shape == (attn.head_dim, E) and attn.num_kv_heads == 1
    cache = model.new_cache(3)
    assert cache.nbytes == 2 * 2 * 3 * 1 * 12 * attn.head_dim * 8


def test_lm_gradients_reach_every_parameter():
    model = _lm("rotary", 2).train()
    logits, _ = model(torch.randint(11, (2, 6)))
    logits.sum().backward()
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in model.parameters())


def test_bad_tokens_are_refused():
    model = _lm(dtype=torch.float32)
    with pytest.raises(
        TypeError, match=r"tokens must be an int64 or int32 tensor of ids; got torch.float32"
    ):
        model(torch.zeros(1, 3))
    with pytest.raises(ValueError, match=r"tokens must be 2-D \(N, L\); got shape \(3,\)"):
        model(torch.zeros(3, dtype=torch.long))
    with pytest.raises(ValueError, match=r"ids must lie in \[0, vocab_size=11\).*max 11"):
        model(torch.tensor([[1, 11]]))
    with pytest.raises(ValueError, match=r"tokens length 13 is longer than max_len=12"):
        model(torch.zeros(1, 13, dtype=torch.long))
    with pytest.raises(TypeError, match=r"prompt must be an int64 or int32 tensor"):
        model.generate(torch.zeros(1, 3), 2)


def test_bad_generation_arguments_are_refused():
    model = _lm(dtype=torch.float32)
    prompt = torch.zeros(1, 5, dtype=torch.long)
    with pytest.raises(ValueError, match=r"prompt length 5 \+ max_new_tokens 8 exceeds max_len"):
        model.generate(prompt, 8)
    with pytest.raises(ValueError, match=r"temperature must be a positive finite number; got -1"):
        model.generate(prompt, 2, temperature=-1.0)
    with pytest.raises(ValueError, match=r"top_k must be at least 1; got 0"):
        model.generate(prompt, 2, temperature=1.0, top_k=0)
    with pytest.raises(ValueError, match=r"prompt must hold at least one token"):
        model.generate(prompt[:, :0], 2)


# --- sampling --------------------------------------------------------------------------------


@given(
    V=st.integers(1, 12),
    temperature=st.floats(0.05, 5.0),
    top_k=st.one_of(st.none(), st.integers(1, 14)),
    top_p=st.one_of(st.none(), st.floats(0.01, 1.0)),
    seed=st.integers(0, 1000),
)
def test_sampling_distribution_sums_to_one_over_the_kept_tokens(V, temperature, top_k, top_p, seed):
    logits = torch.randn(3, V, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    p = sampling_distribution(logits, temperature=temperature, top_k=top_k, top_p=top_p)
    assert_close(p.sum(-1), torch.ones(3, dtype=torch.float64))
    full = (logits / temperature).softmax(-1)  # (3, V)
    for row in range(3):
        # The kept tokens, worked out one by one: the top_k most likely, then of those the most
        # likely until they hold top_p of their probability.
        order = full[row].argsort(descending=True).tolist()
        kept = order[: top_k or V]
        if top_p is not None:
            mass, nucleus = full[row][kept].sum().item(), []
            for token in kept:
                if sum(full[row][nucleus].tolist()) < top_p * mass:
                    nucleus.append(token)
            kept = nucleus
        expected = torch.zeros(V, dtype=torch.float64)
        expected[kept] = full[row][kept] / full[row][kept].sum()
        assert_close(p[row], expected)


def test_top_p_one_and_top_k_all_change_nothing_and_temperature_zero_is_greedy():
    logits = torch.randn(4, 9)
    plain = sampling_distribution(logits)
    assert_close(sampling_distribution(logits, top_p=1.0), plain)
    assert_close(sampling_distribution(logits, top_k=9), plain)
    assert_close(sampling_distribution(logits, top_k=20, top_p=1.0), plain)
    assert_close(sampling_distribution(logits, top_k=1), torch.nn.functional.one_hot(
        logits.argmax(-1), 9).float())  # fmt: skip
    model = _lm(dtype=torch.float32)
    prompt = torch.randint(11, (2, 3))
    assert torch.equal(model.generate(prompt, 5), model.generate(prompt, 5, top_k=1, top_p=0.5))


def test_a_tiny_temperature_is_greedy_and_never_nan():
    logits = torch.tensor([[1.0, 3.0, 2.0]])
    p = sampling_distribution(logits, temperature=1e-300)
    assert torch.equal(p, torch.tensor([[0.0, 1.0, 0.0]]))
    model = _lm(dtype=torch.float32)
    prompt = torch.randint(11, (2, 3))
    g = torch.Generator().manual_seed(0)
    tiny = model.generate(prompt, 5, temperature=1e-300, generator=g)
    assert torch.equal(tiny, model.generate(prompt, 5))


def test_top_p_keeps_the_smallest_set_that_holds_p():
    logits = torch.log(torch.tensor([0.5, 0.3, 0.15, 0.05]))
    p = sampling_distribution(logits, top_p=0.8)  # 0.5 + 0.3 reaches 0.8
    assert_close(p, torch.tensor([0.625, 0.375, 0.0, 0.0]))
    p = sampling_distribution(logits, top_p=0.81)
    assert (p > 0).sum() == 3
    assert_close(sampling_distribution(logits, top_p=0.1), torch.tensor([1.0, 0, 0, 0]))


@pytest.mark.parametrize(
    "kwargs, error, message",
    [
        ({"temperature": float("nan")}, ValueError, r"temperature must be a positive finite"),
        ({"temperature": float("inf")}, ValueError, r"temperature must be a positive finite"),
        ({"temperature": -1.0}, ValueError, r"temperature must be a positive finite"),
        ({"temperature": "1"}, TypeError, r"temperature must be a float; got str"),
        ({"temperature": 1.0, "top_p": 0.0}, ValueError, r"top_p must be in \(0, 1\]; got 0.0"),
        ({"temperature": 1.0, "top_p": 1.5}, ValueError, r"top_p must be in \(0, 1\]; got 1.5"),
        ({"temperature": 1.0, "top_p": True}, TypeError, r"top_p must be a float"),
        ({"temperature": 1.0, "top_k": 0}, ValueError, r"top_k must be at least 1; got 0"),
        ({"use_cache": None}, TypeError, r"use_cache must be a bool; got NoneType"),
        ({"generator": 3}, TypeError, r"generator must be a torch.Generator; got int"),
    ],
)
def test_bad_sampling_settings_are_refused_and_the_mode_kept(kwargs, error, message):
    model = _lm(dtype=torch.float32).train()
    with pytest.raises(error, match=message):
        model.generate(torch.zeros(1, 2, dtype=torch.long), 2, **kwargs)
    assert model.training


def test_generate_restores_the_training_mode_when_it_fails():
    model = _lm(dtype=torch.float32).train()

    def fail(*args, **kwargs):
        raise RuntimeError("a failing step")

    model.head.register_forward_hook(fail)
    with pytest.raises(RuntimeError, match="a failing step"):
        model.generate(torch.zeros(1, 2, dtype=torch.long), 2)
    assert model.training


@pytest.mark.parametrize("use_cache", [True, False])
def test_an_empty_batch_generates_an_empty_batch(use_cache):
    model = _lm(dtype=torch.float32)
    out = model.generate(torch.zeros(0, 3, dtype=torch.long), 4, use_cache=use_cache)
    assert out.shape == (0, 7) and out.dtype == torch.long


@pytest.mark.parametrize("dtype", [torch.int16, torch.uint8, torch.int8, torch.bool, torch.float32])
def test_tokens_of_another_integer_type_are_refused(dtype):
    model = _lm(dtype=torch.float32)
    with pytest.raises(TypeError, match=r"tokens must be an int64 or int32 tensor of ids"):
        model(torch.zeros(1, 3, dtype=dtype))


def test_tokens_on_another_device_are_refused():
    model = _lm(dtype=torch.float32)
    with pytest.raises(ValueError, match=r"tokens must be on the model's device \(cpu\); got meta"):
        model(torch.zeros(1, 3, dtype=torch.long, device="meta"))
    with pytest.raises(TypeError, match=r"need_weights must be a bool; got str"):
        model(torch.zeros(1, 3, dtype=torch.long), need_weights="no")
