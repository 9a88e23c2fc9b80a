"""Random bad input to every public function and module: the only exceptions that escape are a
TypeError or ValueError whose message names the argument, and a refused call changes nothing.

Each public name of the package (found from the package itself, :mod:`public_api`) has a valid
call below, or is named in ``NOT_CALLED`` with the reason. Hypothesis picks one argument and
replaces it with a wrong value of a kind that suits it (a wrong type, a bool for an int, a
negative, zero or huge size, NaN or infinity, a tensor of another dtype, on the meta device, of
another shape...). The call must then either work (some replacements are valid: ``None`` for an
optional argument, 0 for a count) or raise ``TypeError``/``ValueError`` naming the argument it
got wrong. A deep ``RuntimeError``, an ``IndexError``, an ``AttributeError`` or a hang is a
failure. A refused call must leave what it was given as it was: a model's training mode and
weights, a cache's contents, and torch's global random state.
"""

from __future__ import annotations

import copy
import datetime
import math
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import attention
from attention import (
    ablation,
    dates,
    flex,
    functional,
    head_view,
    masks,
    measure,
    recipes,
    search,
    text,
    tiled,
    training,
    viz,
)
from attention import data as sentiment_data
from attention.cache import KVCache
from attention.config import DecoderConfig, register_attention
from attention.decoder import CausalSelfAttention, DecoderBlock
from attention.distributed import (
    all_gather_attention,
    bytes_formula,
    gather_sequence,
    ring_attention,
    shard_sequence,
    ulysses_attention,
)
from attention.language_model import DecoderLM, sampling_distribution
from attention.latent import LatentCache, MultiHeadLatentAttention
from attention.linear_attention import LinearAttention, RecurrentState, elu_feature_map
from attention.paged import PagedKVCache
from attention.positions import (
    PositionalEncoding,
    RotaryEmbedding,
    alibi_bias,
    alibi_slopes,
)
from attention.repro import claim, default_device, num_threads, seed_everything
from attention.seq2seq import Seq2SeqTransformer
from attention.serving import Request, request_mix
from attention.tiled import tiled_attention

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import public_api  # noqa: E402  (tests/public_api.py: the public names, from the package)


@dataclass
class Call:
    """A valid call ``fn(**args)``; ``names`` say how a message may name each argument."""

    fn: Callable
    args: dict
    names: dict = field(default_factory=dict)
    allowed: tuple = ()  # other exceptions a wrong value may legitimately raise
    #: What the call works on (a model, a cache), made afresh for each call and passed to
    #: ``fn`` first: a refused call must leave it as it was.
    subject: Callable | None = None
    covers: tuple = ()  # the public names it calls, when its name does not say


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
            lambda m, **kw: m(**kw),
            {"x": torch.randn(1, 3, 8), "need_weights": True},
            subject=_attn,
        ),
        "MultiHeadLatentAttention": Call(
            MultiHeadLatentAttention,
            {"embed_dim": 8, "num_heads": 2, "latent_dim": 4, "rope_dim": 2, "max_len": 8},
        ),
        "MultiHeadLatentAttention.forward": Call(
            lambda m, **kw: m(**kw),
            {"x": torch.randn(1, 3, 8), "need_weights": True},
            subject=lambda: MultiHeadLatentAttention(8, 2, latent_dim=4, rope_dim=2, max_len=8),
        ),
        "LatentCache": Call(
            LatentCache,
            {"num_layers": 2, "batch_size": 1, "latent_dim": 4, "rope_dim": 2, "max_len": 6},
        ),
        "LinearAttention": Call(LinearAttention, {"embed_dim": 8, "num_heads": 2, "bias": True}),
        "LinearAttention.forward": Call(
            lambda m, **kw: m(**kw),
            {"x": torch.randn(1, 3, 8), "need_weights": True},
            subject=lambda: LinearAttention(8, 2),
        ),
        "RecurrentState": Call(
            RecurrentState, {"num_layers": 2, "batch_size": 1, "num_heads": 2, "head_dim": 4}
        ),
        "elu_feature_map": Call(elu_feature_map, {"x": torch.randn(2, 3)}),
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
            lambda m, **kw: m(**kw),
            {"x": torch.randn(1, 3, 8), "need_weights": False},
            subject=lambda: DecoderBlock(_attn(), 16),
        ),
        "DecoderLM.forward": Call(
            lambda m, **kw: m(**kw), {"tokens": _tokens(2, 3), "need_weights": True}, subject=_lm
        ),
        "DecoderLM.generate": Call(
            lambda m, **kw: m.generate(**kw),
            {
                "prompt": _tokens(1, 2),
                "max_new_tokens": 2,
                "use_cache": True,
                "temperature": 1.0,
                "top_k": 3,
                "top_p": 0.9,
                "generator": torch.Generator(),
            },
            subject=_lm,
        ),  # fmt: skip
        "DecoderLM.forward, cached": Call(
            torch.no_grad()(lambda m, cache, **kw: m(**kw, cache=cache)),  # a cache keeps no graph
            {"tokens": _tokens(2, 2), "need_weights": False},
            subject=lambda: (lambda m: (m, m.new_cache(2)))(_lm()),
        ),
        "DecoderLM.new_cache": Call(
            lambda m, **kw: m.new_cache(**kw),
            {"batch_size": 2, "window": 4, "sinks": 1},
            subject=lambda: _lm("rotary"),
        ),
        "PagedKVCache": Call(
            PagedKVCache,
            {
                "num_layers": 2,
                "num_blocks": 4,
                "block_size": 2,
                "num_kv_heads": 1,
                "head_dim": 4,
                "max_len": 8,
                "dtype": torch.float32,
            },
        ),  # fmt: skip
        "Request": Call(Request, {"prompt": _tokens(3), "max_new_tokens": 2}),
        "request_mix": Call(
            request_mix,
            {
                "text": _tokens(50),
                "n": 3,
                "max_len": 16,
                "prompt_median": 4.0,
                "output_median": 3.0,
                "sigma": 0.5,
                "seed": 1,
            },
        ),  # fmt: skip
        "register_attention": Call(  # the name's own function again: registers nothing new
            register_attention, {"name": "causal", "build": CausalSelfAttention.from_config}
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
            lambda cache, **kw: cache.update(**kw),
            {"layer": 0, "key": torch.randn(1, 1, 2, 2), "value": torch.randn(1, 1, 2, 2)},
            subject=lambda: KVCache(1, batch_size=1, num_kv_heads=1, head_dim=2, max_len=4),
        ),
        "Seq2SeqTransformer.generate": Call(
            lambda m, **kw: m.generate(**kw),
            {
                "src": _tokens(2, 4),
                "max_new_tokens": 3,
                "bos_id": 1,
                "eos_id": 2,
                "beam_size": 2,
                "length_penalty": 1.0,
            },
            subject=_seq2seq,
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
        "masks.sliding_window": Call(masks.sliding_window, {"window": 2}),
        "masks.document": Call(masks.document, {"doc_ids": torch.tensor([0, 0, 1])}),
        "masks.prefix_lm": Call(masks.prefix_lm, {"prefix": 2}),
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
        # the site's head views
        **{
            name: Call(
                fn,
                {
                    **({"name": "bad-input"} if name == "save_head_view" else {}),
                    "tokens": ["a", "b"],
                    "weights": torch.full((1, 2, 2, 3), 1 / 3),  # (layers, H, L, S)
                    "key_tokens": ["x", "y", "z"],
                },
                # weights of another size no longer fit the labels
                names={"weights": ("tokens", "key_tokens")},
            )
            for name, fn in (
                ("head_view_data", head_view.head_view_data),
                ("save_head_view", head_view.save_head_view),
            )
        },
        # reproducibility
        "seed_everything": Call(seed_everything, {"seed": 3}),
        "claim": Call(
            claim,
            {"name": "x", "value": 0.5, "above": 0.1, "below": 0.9},
            allowed=(AssertionError,),  # a wrong value makes the claim false: that is its job
        ),
        "num_threads": Call(lambda **kw: num_threads(**kw).__enter__(), {"n": 1}),
    }


def _mse(model, batch):
    x, y = batch
    return torch.nn.functional.mse_loss(model(x), y), {}


def _classifier():
    vocab = len(sentiment_data.VOCAB)
    return attention.AttentionClassifier(vocab, 2, embed_dim=8, num_heads=2, num_layers=1,
                                         max_len=12, dropout=0.0)  # fmt: skip


def _table(tokens):
    """log p(next | last token) of a fixed table over 5 tokens: a model for the searches."""
    table = torch.arange(25.0).view(5, 5).sin().log_softmax(-1)
    return table[tokens[:, -1]]


def _training_calls() -> dict[str, Call]:
    xy = [(torch.randn(4, 2), torch.randn(4, 1))]
    sentences, labels = sentiment_data.make_dataset(8)
    return {
        "train": Call(
            lambda m, **kw: training.train(m, xy * 2, **kw),  # the batches' form is the caller's
            {
                "loss_fn": _mse,
                "steps": 2,
                "lr": 0.1,
                "weight_decay": 0.01,
                "threads": 1,
                "after_step": print,
            },
            subject=lambda: torch.nn.Linear(2, 1),
        ),  # fmt: skip
        "train_classifier": Call(
            lambda m, **kw: training.train_classifier(m, **kw),
            {
                "tokens": sentences,
                "labels": labels,
                "epochs": 1,
                "batch_size": 4,
                "lr": 0.01,
                "weight_decay": 0.01,
                "val": (sentences[:2], labels[:2]),
                "seed": 1,
            },
            subject=_classifier,
        ),  # fmt: skip
        "train_lm": Call(
            lambda m, **kw: training.train_lm(m, **kw),
            {
                "tokens": _tokens(4, 4),
                "steps": 1,
                "batch_size": 2,
                "lr": 0.01,
                "weight_decay": 0.0,
                "seed": 1,
            },
            subject=_lm,
        ),  # fmt: skip
        "accuracy": Call(
            lambda m, **kw: training.accuracy(m, **kw),
            {"tokens": sentences, "labels": labels},
            subject=_classifier,
        ),  # fmt: skip
        "token_losses": Call(
            training.token_losses,
            {"logits": torch.randn(2, 3, 7), "tokens": _tokens(2, 3)},
            names={"logits": ("tokens",)},  # logits over no token: no id fits
        ),
        "next_token_losses": Call(
            lambda m, **kw: training.next_token_losses(m, **kw),
            {"tokens": _tokens(2, 3)},
            subject=_lm,
        ),  # fmt: skip
        "count_parameters": Call(training.count_parameters, {"module": torch.nn.Linear(2, 1)}),
        "format_history": Call(
            training.format_history,
            {
                "history": [{"step": 1, "loss": 0.5, "acc": 0.9, "seconds": 0.1}],
                "every": 1,
                "keys": ("acc",),
            },
        ),  # fmt: skip
        # recipes: each trains once per process and arguments, here for a step or an epoch
        "fit_sentiment_classifier": Call(
            recipes.fit_sentiment_classifier, {"seed": 1, "epochs": 1}
        ),
        "fit_repeat_model": Call(
            recipes.fit_repeat_model,
            {
                "seed": 1,
                "num_heads": 2,
                "num_kv_heads": 1,
                "steps": 1,
                "min_period": 4,
                "batch_size": 2,
                "lr": 0.01,
            },
        ),  # fmt: skip
        "fit_char_lm": Call(
            recipes.fit_char_lm,
            {"seed": 1, "steps": 1, "batch_size": 2, "lr": 0.01, "eval_every": 1},
        ),  # fmt: skip
        "fit_date_model": Call(
            recipes.fit_date_model, {"seed": 1, "steps": 1, "batch_size": 2, "lr": 0.01}
        ),
        "trained_once": Call(recipes.trained_once, {"recipe": lambda: None}),
        # the data of the pages
        "make_dataset": Call(
            sentiment_data.make_dataset, {"n": 4, "seed": 1, "min_len": 3, "max_len": 6}
        ),
        "encode": Call(sentiment_data.encode, {"sentence": "the movie was good", "length": 6}),
        "decode": Call(sentiment_data.decode, {"ids": sentiment_data.encode("the movie was good")}),
        "make_repeated_sequences": Call(
            sentiment_data.make_repeated_sequences,
            {"num": 2, "length": 4, "vocab_size": 8, "seed": 1, "min_period": 4},
        ),  # fmt: skip
        "write_date": Call(
            dates.write_date, {"date": datetime.date(2021, 3, 3), "format": "{d} {Month} {yyyy}"}
        ),
        "split_dates": Call(dates.split_dates, {"held_out": 0.2, "seed": 1}),
        "make_dates": Call(
            dates.make_dates, {"n": 2, "split": "held_out", "seed": 1, "formats": dates.FORMATS}
        ),
        "encode_sources": Call(dates.encode_sources, {"texts": ["3 May 21", "21"], "length": 9}),
        "encode_targets": Call(dates.encode_targets, {"texts": ["2021-05-03", "1999-12-31"]}),
        "decode_target": Call(dates.decode_target, {"ids": torch.tensor([1, 6, 4, 2, 0])}),
        "CharTokenizer": Call(text.CharTokenizer, {"text": "abc"}),
        "CharTokenizer.encode": Call(
            lambda **kw: text.CharTokenizer("abc").encode(**kw),
            {"text": "abd", "errors": "replace"},
        ),
        "CharTokenizer.decode": Call(
            lambda **kw: text.CharTokenizer("abc").decode(**kw), {"ids": torch.tensor([1, 2, 0])}
        ),
        "split_by_position": Call(
            text.split_by_position, {"tokens": torch.arange(10), "val_fraction": 0.2}
        ),
        "random_windows": Call(
            lambda **kw: next(text.random_windows(**kw)),
            {"tokens": torch.arange(10), "length": 4, "batch_size": 2, "seed": 1},
        ),  # fmt: skip
        "windows": Call(text.windows, {"tokens": torch.arange(10), "length": 4, "step": 2}),
        # measuring
        "compare": Call(
            measure.compare,
            {"cases": {"f": lambda: None}, "rounds": 1, "min_run_time": 0.001, "device": "cpu"},
        ),  # fmt: skip
        "time_it": Call(
            measure.time_it,
            {"fn": lambda: None, "rounds": 1, "min_run_time": 0.001, "device": "cpu"},
        ),  # fmt: skip
        "round_ratios": Call(
            measure.round_ratios,
            {
                "candidate": measure.Timing(2.0, 0.1, 2, (2.0, 2.2)),
                "baseline": measure.Timing(1.0, 0.1, 2, (1.0, 1.1)),
            },
        ),  # fmt: skip
        "peak_memory": Call(measure.peak_memory, {"fn": lambda: torch.ones(4), "device": "cpu"}),
        "device_description": Call(
            measure.device_description, {"device": "cpu", "dtype": torch.float32}
        ),
    }


def _model_calls() -> dict[str, Call]:
    qkv = {n: torch.randn(1, 2, 4, 4) for n in ("query", "key", "value")}
    x = torch.randn(1, 3, 8)
    search_options = {"max_new_tokens": 3, "bos_id": 0, "eos_id": 1, "pad_id": 4,
                      "length_penalty": 1.0}  # fmt: skip
    return {
        # search and the encoder-decoder
        "greedy_search": Call(
            search.greedy_search, {"next_log_probs": _table, "batch_size": 2, **search_options}
        ),
        "beam_search": Call(
            search.beam_search,
            {
                "next_log_probs": _table,
                "batch_size": 2,
                "beam_size": 2,
                **search_options,
                "reorder": print,
            },
        ),  # fmt: skip
        "Seq2SeqTransformer": Call(
            Seq2SeqTransformer,
            {
                "src_vocab_size": 7,
                "tgt_vocab_size": 7,
                "embed_dim": 8,
                "num_heads": 2,
                "num_encoder_layers": 1,
                "num_decoder_layers": 1,
                "ffn_dim": 8,
                "max_len": 6,
                "dropout": 0.1,
                "pad_id": 0,
                "norm_first": True,
                "layer_norm_eps": 1e-5,
                "bias": False,
                "dtype": torch.float32,
            },
        ),  # fmt: skip
        "Seq2SeqTransformer.forward": Call(
            lambda m, **kw: m(**kw),
            {
                "src": _tokens(2, 4),
                "tgt": _tokens(2, 3),
                "src_lengths": [4, 2],
                "need_weights": True,
            },
            subject=_seq2seq,
        ),  # fmt: skip
        "Seq2SeqTransformer.encode": Call(
            lambda m, **kw: m.encode(**kw),
            {"src": _tokens(2, 4), "src_lengths": [4, 2]},
            names={"src": ("src_lengths",)},  # an empty src is shorter than the lengths
            subject=_seq2seq,
        ),  # fmt: skip
        # the kernel and its tiles
        "scaled_dot_product_attention": Call(
            functional.scaled_dot_product_attention,
            {
                **qkv,
                "mask": masks.causal_mask(4),
                "bias": torch.zeros(4, 4),
                "dropout_p": 0.0,
                "scale": 0.5,
                "enable_gqa": True,
            },
        ),  # fmt: skip
        "accumulation_dtype": Call(functional.accumulation_dtype, {"dtype": torch.float16}),
        "blockwise_attention": Call(
            tiled.blockwise_attention, {**qkv, "tile_list": tiled.tiles(4, 4, 2, 2), "scale": 0.5}
        ),
        "tiles": Call(
            tiled.tiles,
            {
                "L": 4,
                "S": 4,
                "q_block": 2,
                "k_block": 2,
                "q_pos": torch.arange(4),
                "k_pos": torch.arange(4),
            },
            names={"L": ("q_pos",), "S": ("k_pos",)},  # positions of another length
        ),  # fmt: skip
        # modules
        "SelfAttention": Call(attention.SelfAttention, {"embed_dim": 8, "bias": True}),
        "SelfAttention.forward": Call(
            lambda m, **kw: m(**kw),
            {"x": x, "mask": masks.causal_mask(3)},
            subject=lambda: attention.SelfAttention(8),
        ),
        "MultiHeadAttention": Call(
            attention.MultiHeadAttention, {"embed_dim": 8, "num_heads": 2, "dropout": 0.1}
        ),
        "FusedMultiHeadAttention.forward": Call(
            lambda m, **kw: m(**kw),
            {"query": x, "key": x, "value": x, "mask": masks.causal_mask(3), "need_weights": False},
            subject=lambda: attention.FusedMultiHeadAttention(8, 2),
        ),  # fmt: skip
        "FeedForward": Call(attention.FeedForward, {"embed_dim": 8, "ffn_dim": 16}),
        "TransformerBlock": Call(
            attention.TransformerBlock,
            {
                "embed_dim": 8,
                "num_heads": 2,
                "ffn_dim": 16,
                "dropout": 0.1,
                "norm_first": True,
                "layer_norm_eps": 1e-5,
            },
        ),  # fmt: skip
        "TransformerBlock.forward": Call(
            lambda m, **kw: m(**kw),
            {"x": x, "mask": masks.causal_mask(3), "need_weights": True},
            subject=lambda: attention.TransformerBlock(8, 2, ffn_dim=16).eval(),
        ),  # fmt: skip
        "TransformerDecoderBlock": Call(
            attention.TransformerDecoderBlock,
            {"embed_dim": 8, "num_heads": 2, "ffn_dim": 16, "dropout": 0.1},
        ),  # fmt: skip
        "AttentionClassifier": Call(
            attention.AttentionClassifier,
            {
                "vocab_size": 10,
                "num_classes": 2,
                "embed_dim": 8,
                "num_heads": 2,
                "num_layers": 1,
                "max_len": 6,
            },
        ),  # fmt: skip
        "AttentionClassifier.forward": Call(
            lambda m, **kw: m(**kw),
            {"tokens": _tokens(2, 5), "need_weights": True},
            subject=_classifier,
        ),  # fmt: skip
        "default_device": Call(default_device, {}),
        # switching heads off
        "head_ablated": Call(
            lambda **kw: ablation.head_ablated(**kw).__enter__(),
            {"attn": _attn(), "head": 1, "replacement": torch.zeros(4)},
        ),  # fmt: skip
        "mean_head_outputs": Call(
            lambda m, tokens: ablation.mean_head_outputs(m, m.blocks[0].self_attn, tokens),
            {"tokens": _tokens(2, 3)},
            subject=_lm,
        ),  # fmt: skip
    }


CALLS = {**_calls(), **_training_calls(), **_model_calls()}


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
        wrong = ["a", [1.5], [True, 1], [-1], [2**70], [None]]
        numbers = all(isinstance(v, (int, float)) for v in value)
        return [*wrong, torch.tensor(value).float()] if numbers else wrong
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


def _state(subject) -> list:
    """What a refused call must leave as it was: every module's training mode and every tensor
    of the subject (weights, buffers, a cache's keys and values), and its other attributes."""
    if isinstance(subject, torch.nn.Module):
        modes = [m.training for m in subject.modules()]
        return [modes, {k: v.clone() for k, v in subject.state_dict().items()}]
    return [copy.deepcopy(vars(subject))] if hasattr(subject, "__dict__") else [subject]


def _same(a, b) -> bool:
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.shape == b.shape and (
            a.device.type == "meta" or torch.equal(a, b) or bool((a.isnan() & b.isnan()).all())
        )  # fmt: skip
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return a == b or a is b


def _run(call: Call, args: dict):
    """``call.fn(**args)``, first given its subject, made afresh. A refused call must leave the
    subject and torch's global random state as they were."""
    subject = () if call.subject is None else call.subject()
    subject = subject if isinstance(subject, tuple) else (subject,)  # a model and its cache
    before, rng = [_state(s) for s in subject], torch.get_rng_state()
    try:
        return call.fn(*subject, **args)
    except (TypeError, ValueError):
        assert _same([_state(s) for s in subject], before), "refused, but changed its subject"
        assert torch.equal(torch.get_rng_state(), rng), "refused, but drew random numbers"
        raise


@pytest.mark.parametrize("name", sorted(CALLS))
def test_the_valid_call_works(name):
    call = CALLS[name]
    _run(call, call.args)


#: The calls that train a model when the wrong value happens to be valid: fewer examples, so
#: that the fuzz stays a few seconds.
TRAINING = {"train", "train_classifier", "train_lm", "accuracy", "fit_sentiment_classifier",
            "fit_repeat_model", "fit_char_lm", "fit_date_model"}  # fmt: skip


def _refused_by_name(name: str, data) -> None:
    call = CALLS[name]
    if not call.args:
        return  # nothing to get wrong
    argument = data.draw(st.sampled_from(sorted(call.args)), label="argument")
    wrong = data.draw(st.sampled_from(_wrong_values(call.args[argument])), label="wrong value")
    args = {**call.args, argument: wrong}
    try:
        _run(call, args)
    except (TypeError, ValueError) as error:
        names = (argument, *call.names.get(argument, ()))
        assert _mentions(str(error), names), (
            f"{name}({argument}={wrong!r}) raised {type(error).__name__} without naming "
            f"{argument!r}: {error}"
        )
    except call.allowed:
        pass
    # Anything else escapes and fails the test, with its traceback.


@pytest.mark.parametrize("name", sorted(set(CALLS) - TRAINING))
@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_a_wrong_argument_is_refused_by_name(name, data):
    _refused_by_name(name, data)


@pytest.mark.parametrize("name", sorted(TRAINING))
@settings(max_examples=8, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_a_wrong_argument_of_a_training_call_is_refused_by_name(name, data):
    _refused_by_name(name, data)


PUBLIC = public_api.public_names()

#: Public names with no call above, and why.
NOT_CALLED = {
    # Predicates that run inside FlexAttention's tracing take index tensors and check nothing.
    "masks.causal": "a predicate of index tensors, traced by FlexAttention",
    "flex.causal": "a predicate of index tensors, traced by FlexAttention",
    "mask_legend": "takes no argument",
    "python_docs": "takes no argument",
    "count_work": "a context manager of no argument",
    "spawn": "starts processes: tests/unit/test_distributed.py",
    "run_cases": "runs on every rank of a group: tests/unit/test_distributed.py",
    "command_worker": "the worker of python -m attention.distributed: test_distributed.py",
    "to_torch_key_padding_mask": "refuses by its own rules: tests/unit/test_masks.py",
    # The steps inside the loops, which their callers check once: checking every tile (or
    # every traced call) would cost more than the step.
    "attention_block": "a step of the blockwise loops (tiled, ring): its caller checks",
    "merge_blocks": "a step of the blockwise loops (tiled, ring): its caller checks",
    "attention_block_backward": "a step of the blockwise backward: its caller checks",
    "split_heads": "a reshape inside MultiHeadAttention, which checks its input",
    "merge_heads": "a reshape inside MultiHeadAttention, which checks its input",
    "alibi_penalty": "runs on index tensors inside alibi_bias and FlexAttention's score_mod",
    # Records: named tuples and a frozen dataclass that hold what a function returned.
    "DateExample": "a record (NamedTuple) of what make_dates wrote",
    "Seq2SeqWeights": "a record (NamedTuple) of a model's attention weights",
    "Timing": "a record (dataclass) of what compare measured",
    # The scheduler runs a model over a paged cache: its own file refuses every bad request.
    "serve": "runs a model over requests: tests/unit/test_serving.py refuses bad requests",
    "sample_many": "runs a model: tests/unit/test_serving.py",
    "forward_rows": "one forward call inside serve: tests/unit/test_serving.py",
    "memory_use": "reads a ServeStats that serve made: tests/unit/test_serving.py",
    "ServeStats": "a record (dataclass) of what serve measured",
    # The decoding-state contract's base: every call reaches it through KVCache's (above).
    "DecodingState": "an abstract base: KVCache's calls check what it checks",
    # Calls that take seconds each: their own test files refuse every bad argument.
    "export_onnx": "traces a model through torch.export: tests/unit/test_export.py",
    "check_onnx": "runs ONNX Runtime on an exported file: tests/unit/test_export.py",
    "flash_attention": "runs in Triton's interpreter: tests/unit/test_flash_triton.py",
}


def _public_objects(key: str) -> set[int]:
    """The public objects a key of CALLS or NOT_CALLED names: ``name``, ``module.name`` or
    ``Class.method`` (which calls the class)."""
    target = key if any(n.endswith(f".{key}") for n in PUBLIC) else key.split(".")[0]
    found = {id(obj) for n, obj in PUBLIC.items() if n.endswith(f".{target}")}
    assert len(found) == 1, f"{key!r} names {len(found)} public objects: qualify it"
    return found


def test_every_public_name_has_a_call_or_a_reason():
    covered = set()
    for key in [*CALLS, *NOT_CALLED]:
        covered |= _public_objects(key)
    missing = sorted(
        name for name, obj in PUBLIC.items()
        if callable(obj) and id(obj) not in covered and not isinstance(obj, type(torch))
    )  # fmt: skip
    assert not missing, f"no bad-input call for {missing}"
    assert "attention.training.train" in PUBLIC and len(PUBLIC) > 100  # the derivation works


def test_the_modules_that_cannot_be_imported_here_say_why():
    # A module needing an optional dependency (triton) is left out with the reason, and only
    # such a module: public_api re-raises any other import error.
    skipped = public_api.skipped_modules()
    assert all("needs" in reason for reason in skipped.values()), skipped
    if skipped:
        pytest.skip(f"not covered here: {skipped}")
