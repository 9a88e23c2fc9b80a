"""Random bad input to every public function and module of the newer modules: the only
exceptions that escape are a TypeError or ValueError whose message names the argument.

Each public name has a valid call below. Hypothesis picks one argument and replaces it with a
wrong value of a kind that suits it (a wrong type, a bool for an int, a negative, zero or huge
size, NaN or infinity, a tensor of another dtype, on the meta device, of another shape...). The
call must then either work (some replacements are valid: ``None`` for an optional argument, 0
for a count) or raise ``TypeError``/``ValueError`` naming the argument it got wrong. A deep
``RuntimeError``, an ``IndexError``, an ``AttributeError`` or a hang is a failure.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field

import pytest
import torch
import torch.distributed as dist
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import attention
from attention import flex, masks, viz
from attention.cache import KVCache
from attention.decoder import CausalSelfAttention, DecoderBlock, DecoderConfig
from attention.distributed import (
    all_gather_attention,
    bytes_formula,
    gather_sequence,
    ring_attention,
    shard_sequence,
    ulysses_attention,
)
from attention.language_model import DecoderLM, sampling_distribution
from attention.positions import PositionalEncoding, RotaryEmbedding, alibi_bias, alibi_slopes
from attention.repro import claim, num_threads, seed_everything
from attention.seq2seq import Seq2SeqTransformer
from attention.tiled import tiled_attention


@dataclass
class Call:
    """A valid call ``fn(**args)``; ``names`` say how a message may name each argument."""

    fn: Callable
    args: dict
    names: dict = field(default_factory=dict)
    allowed: tuple = ()  # other exceptions a wrong value may legitimately raise


def _tokens(*shape, high=7):
    return torch.randint(high, shape)


def _lm(positions="learned"):
    return DecoderLM(
        7, embed_dim=8, num_heads=2, num_layers=1, max_len=6, positions=positions
    ).eval()


def _seq2seq():
    return Seq2SeqTransformer(
        7, 7, embed_dim=8, num_heads=2, num_encoder_layers=1, num_decoder_layers=1, ffn_dim=8,
        max_len=6, dropout=0.0,
    ).eval()  # fmt: skip


def _attn():
    return CausalSelfAttention(8, 2, num_kv_heads=1).eval()


def _calls() -> dict[str, Call]:
    qkv = {n: torch.randn(1, 2, 4, 4) for n in ("query", "key", "value")}
    return {
        # decoder, cache, language model
        "CausalSelfAttention": Call(
            CausalSelfAttention,
            {
                "embed_dim": 8,
                "num_heads": 2,
                "num_kv_heads": 1,
                "rotary": True,
                "window": 2,
                "max_len": 8,
                "bias": False,
                "dropout": 0.0,
                "dtype": torch.float32,
            },
        ),  # fmt: skip
        "CausalSelfAttention.forward": Call(
            lambda **kw: _attn()(**kw), {"x": torch.randn(1, 3, 8), "need_weights": True}
        ),
        "DecoderConfig": Call(
            DecoderConfig,
            {
                "vocab_size": 7,
                "embed_dim": 8,
                "num_heads": 2,
                "num_layers": 1,
                "max_len": 6,
                "num_kv_heads": 1,
                "ffn_dim": 16,
                "dropout": 0.1,
                "positions": "rotary",
                "window": 3,
                "bias": False,
            },
        ),  # fmt: skip
        "DecoderBlock": Call(DecoderBlock, {"self_attn": _attn(), "ffn_dim": 16, "dropout": 0.0}),
        "DecoderBlock.forward": Call(
            lambda **kw: DecoderBlock(_attn(), 16)(**kw),
            {"x": torch.randn(1, 3, 8), "need_weights": False},
        ),
        "DecoderLM.forward": Call(
            lambda **kw: _lm()(**kw), {"tokens": _tokens(2, 3), "need_weights": True}
        ),
        "DecoderLM.generate": Call(
            lambda **kw: _lm().generate(**kw),
            {
                "prompt": _tokens(1, 2),
                "max_new_tokens": 2,
                "use_cache": True,
                "temperature": 1.0,
                "top_k": 3,
                "top_p": 0.9,
                "generator": torch.Generator(),
            },
        ),  # fmt: skip
        "DecoderLM.new_cache": Call(
            lambda **kw: _lm("rotary").new_cache(**kw), {"batch_size": 2, "window": 4, "sinks": 1}
        ),
        "sampling_distribution": Call(
            sampling_distribution,
            {"logits": torch.randn(2, 5), "temperature": 0.7, "top_k": 3, "top_p": 0.8},
        ),
        "KVCache": Call(
            KVCache,
            {
                "num_layers": 1,
                "batch_size": 1,
                "num_kv_heads": 1,
                "head_dim": 2,
                "max_len": 4,
                "dtype": torch.float32,
            },
        ),  # fmt: skip
        "KVCache.update": Call(
            lambda **kw: KVCache(1, batch_size=1, num_kv_heads=1, head_dim=2, max_len=4).update(
                **kw
            ),
            {"layer": 0, "key": torch.randn(1, 1, 2, 2), "value": torch.randn(1, 1, 2, 2)},
        ),
        "Seq2SeqTransformer.generate": Call(
            lambda **kw: _seq2seq().generate(**kw),
            {
                "src": _tokens(2, 4),
                "max_new_tokens": 3,
                "bos_id": 1,
                "eos_id": 2,
                "beam_size": 2,
                "length_penalty": 1.0,
            },
        ),  # fmt: skip
        # positions
        "PositionalEncoding": Call(PositionalEncoding, {"embed_dim": 8, "max_len": 6}),
        "PositionalEncoding.forward": Call(
            lambda **kw: PositionalEncoding(8, 6)(**kw), {"x": torch.randn(1, 3, 8)}
        ),
        "RotaryEmbedding": Call(RotaryEmbedding, {"head_dim": 4, "base": 100.0, "max_len": 8}),
        "RotaryEmbedding.forward": Call(
            lambda **kw: RotaryEmbedding(4, max_len=8)(**kw),
            {"x": torch.randn(1, 2, 3, 4), "offset": 1},
        ),
        "RotaryEmbedding.angles": Call(
            lambda **kw: RotaryEmbedding(4, max_len=8).angles(**kw),
            {"L": 3, "offset": 1, "dtype": torch.float64},
        ),
        "alibi_slopes": Call(alibi_slopes, {"num_heads": 4}),
        "alibi_bias": Call(alibi_bias, {"num_heads": 2, "L": 3, "S": 4, "dtype": torch.float32}),
        # masks
        "causal_mask": Call(masks.causal_mask, {"L": 3, "S": 4}),
        "sliding_window_mask": Call(masks.sliding_window_mask, {"L": 3, "window": 2, "S": 4}),
        "document_mask": Call(masks.document_mask, {"lengths": [2, 1], "causal": True}),
        "prefix_lm_mask": Call(masks.prefix_lm_mask, {"L": 4, "prefix": 2}),
        "padding_mask": Call(masks.padding_mask, {"lengths": [2, 1], "S": 3}),
        "sliding_window": Call(masks.sliding_window, {"window": 2}),
        "document": Call(masks.document, {"doc_ids": torch.tensor([0, 0, 1])}),
        "prefix_lm": Call(masks.prefix_lm, {"prefix": 2}),
        "to_torch_attn_mask": Call(masks.to_torch_attn_mask, {"mask": masks.causal_mask(3)}),
        "from_torch_masks": Call(
            masks.from_torch_masks,
            {"attn_mask": ~masks.causal_mask(3), "key_padding_mask": torch.zeros(2, 3).bool()},
        ),
        # flex
        "flex.sliding_window": Call(flex.sliding_window, {"window": 2, "offset": 1}),
        "flex.document": Call(flex.document, {"lengths": [2, 1], "causal": True}),
        "flex.prefix_lm": Call(flex.prefix_lm, {"prefix": 2}),
        "flex.alibi": Call(flex.alibi, {"num_heads": 2, "offset": 1}),
        "flex.softcap": Call(flex.softcap, {"cap": 5.0}),
        # distributed, on a process group of one rank
        "shard_sequence": Call(
            shard_sequence, {"x": torch.randn(8, 2), "rank": 1, "world_size": 2, "zigzag": True}
        ),
        "gather_sequence": Call(gather_sequence, {"x": torch.randn(4, 2), "zigzag": True}),
        "bytes_formula": Call(
            bytes_formula, {"strategy": "ring", "world_size": 4, "shard_bytes": 1000}
        ),
        **{
            name: Call(fn, {**qkv, "causal": True, "zigzag": True})
            for name, fn in (
                ("ring_attention", ring_attention),
                ("all_gather_attention", all_gather_attention),
                ("ulysses_attention", ulysses_attention),
            )  # fmt: skip
        },
        # the kernel's tiled path
        "tiled_attention": Call(
            tiled_attention, {**qkv, "causal": True, "scale": 0.5, "block_size": 2}
        ),
        # figures
        "plot_attention": Call(
            viz.plot_attention,
            {"weights": torch.rand(2, 3, 3), "x_tokens": ["a", "b", "c"], "vmax": 1.0},
            names={"weights": ("x_tokens",)},  # weights of another size no longer fit the labels
        ),
        "plot_matrix": Call(
            viz.plot_matrix,
            {"matrix": torch.rand(2, 3), "x_labels": ["a", "b", "c"], "vmax": 2.0},
            names={"matrix": ("x_labels",)},
        ),
        "plot_mask": Call(viz.plot_mask, {"mask": masks.causal_mask(3), "title": "causal"}),
        "plot_blocks": Call(viz.plot_blocks, {"owners": [[0, -1], [0, 1]], "title": "pool"}),
        # reproducibility
        "seed_everything": Call(seed_everything, {"seed": 3}),
        "claim": Call(
            claim,
            {"name": "x", "value": 0.5, "above": 0.1, "below": 0.9},
            allowed=(AssertionError,),  # a wrong value makes the claim false: that is its job
        ),
        "num_threads": Call(lambda **kw: num_threads(**kw).__enter__(), {"n": 1}),
    }


CALLS = _calls()


def _wrong_values(value) -> list:
    """Wrong values of kinds that suit ``value``."""
    common = ["a", object(), [1.5]]
    if isinstance(value, bool):
        return [*common, "no", 1, 0.5]
    if isinstance(value, int):
        return [*common, True, 1.5, -1, 0, 2**70, float("nan")]
    if isinstance(value, float):
        return [*common, True, float("nan"), float("inf"), -1.0, 0.0, 1e300]
    if isinstance(value, str):
        return [5, None, "bogus", ""]
    if isinstance(value, torch.dtype):
        return ["float32", torch.long, torch.bool, 5]
    if isinstance(value, torch.Tensor):
        wrong = [
            "a",
            value.tolist() if value.numel() < 8 else None,
            value.to("meta"),
            value.to(torch.complex64),
            value.flatten(),
            value[None],
            value[..., :0],
        ]
        if value.is_floating_point():
            wrong += [value.long(), value.bool(), value.double(), value.half(), value * math.nan]
        elif value.dtype == torch.bool:
            wrong += [value.long(), value.float(), value.to(torch.uint8)]
        else:
            wrong += [value.float(), value.to(torch.int16), value - 100, value + 100]
        if value.dim():
            wrong.append(value[..., :-1])
        return wrong
    if isinstance(value, list) and all(isinstance(v, str) for v in value):  # labels
        return [5, "abc", value[:-1], [*value, "extra"], torch.arange(len(value))]
    if isinstance(value, list):
        return ["a", [1.5], [True, 1], [-1], [2**70], [None], torch.tensor(value).float()]
    return ["a", 5, None]


def _mentions(message: str, names: tuple[str, ...]) -> bool:
    return any(re.search(rf"(?<![\w.]){re.escape(n)}(?![\w])", message) for n in names)


@pytest.fixture(scope="module", autouse=True)
def _one_rank_group():
    """A process group of one rank, for the distributed functions."""
    if dist.is_initialized():
        yield
        return
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        yield
    finally:
        dist.destroy_process_group()


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    import matplotlib.pyplot as plt

    plt.close("all")


@pytest.mark.parametrize("name", sorted(CALLS))
def test_the_valid_call_works(name):
    call = CALLS[name]
    call.fn(**call.args)


@pytest.mark.parametrize("name", sorted(CALLS))
@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_a_wrong_argument_is_refused_by_name(name, data):
    call = CALLS[name]
    argument = data.draw(st.sampled_from(sorted(call.args)), label="argument")
    wrong = data.draw(st.sampled_from(_wrong_values(call.args[argument])), label="wrong value")
    args = {**call.args, argument: wrong}
    try:
        call.fn(**args)
    except (TypeError, ValueError) as error:
        names = (argument, *call.names.get(argument, ()))
        assert _mentions(str(error), names), (
            f"{name}({argument}={wrong!r}) raised {type(error).__name__} without naming "
            f"{argument!r}: {error}"
        )
    except call.allowed:
        pass
    # Anything else escapes and fails the test, with its traceback.


def test_every_public_name_of_the_newer_modules_has_a_call():
    covered = {name.split(".")[-1] if name.startswith("flex.") else name for name in CALLS}
    expected = {
        *masks.__all__, *flex.__all__, *viz.__all__, "shard_sequence", "gather_sequence",
        "bytes_formula", "ring_attention", "all_gather_attention", "ulysses_attention",
        "CausalSelfAttention", "DecoderBlock", "DecoderConfig", "KVCache", "PositionalEncoding",
        "RotaryEmbedding", "alibi_bias", "alibi_slopes", "sampling_distribution",
        "seed_everything", "claim", "num_threads", "tiled_attention",
    }  # fmt: skip
    # Predicates that run inside FlexAttention's tracing take index tensors and check nothing;
    # mask_legend takes no argument; count_work, spawn and run_cases have their own tests.
    unchecked = {"causal", "mask_legend", "to_torch_key_padding_mask"}
    missing = expected - covered - unchecked
    assert not missing, f"no bad-input call for {sorted(missing)}"
    assert attention.__all__  # the package imports
