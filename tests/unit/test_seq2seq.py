"""TransformerDecoderBlock and Seq2SeqTransformer against nn.TransformerDecoderLayer and
nn.Transformer with copied weights; greedy and beam-search generation; every bad input.

Masks for torch are built here in torch's polarity (True = blocked), without the package's
converters. The scores of generated outputs are recomputed here by teacher forcing, in a plain
loop, rather than trusted to the bookkeeping of the search.
"""

import itertools
import math

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

from attention import KVCache, TransformerBlock, causal_mask, padding_mask
from attention.block import TransformerDecoderBlock
from attention.search import beam_search
from attention.seq2seq import Seq2SeqTransformer

from .helpers import assert_close, check_module_gradients, randn

N, E, H, FFN = 3, 16, 4, 32
L, S = 5, 6
PAD, BOS, EOS = 0, 1, 2


def _lengths(S):
    """Padding lengths for S keys: one full sequence, one short, one in between."""
    return [S, 2, max(S - 1, 1)]


def _blocked_keys(lengths, S):
    """torch's key_padding_mask (True = blocked) for these lengths: (N, S)."""
    return torch.arange(S) >= torch.tensor(lengths)[:, None]


def _blocked_causal(L):
    """torch's causal attn_mask (True = blocked): (L, L)."""
    return torch.ones(L, L, dtype=torch.bool).triu(1)


def _torch_weights(layer, x, memory, tgt_mask, memory_key_padding_mask):
    """The per-head weights of torch's layer, replayed through its own submodules (the layer
    asks its attentions for no weights); also its output, to check that the replay is exact."""
    pre = layer.norm_first
    h = layer.norm1(x) if pre else x
    out, self_weights = layer.self_attn(h, h, h, attn_mask=tgt_mask, average_attn_weights=False)
    x = x + out if pre else layer.norm1(x + out)
    h = layer.norm2(x) if pre else x
    out, cross_weights = layer.multihead_attn(
        h, memory, memory, key_padding_mask=memory_key_padding_mask, average_attn_weights=False
    )
    x = x + out if pre else layer.norm2(x + out)
    x = x + layer._ff_block(layer.norm3(x)) if pre else layer.norm3(x + layer._ff_block(x))
    return x, self_weights, cross_weights


# --- the decoder block ----------------------------------------------------------------------


@pytest.mark.parametrize("mask_case", ["none", "causal", "padded memory", "both"])
@pytest.mark.parametrize("norm_first", [False, True], ids=["post-LN", "pre-LN"])
def test_decoder_block_matches_torch_in_eval_mode(norm_first, mask_case, dtype):
    layer = nn.TransformerDecoderLayer(
        E, H, FFN, dropout=0.1, batch_first=True, norm_first=norm_first, dtype=dtype
    ).eval()
    block = TransformerDecoderBlock.from_torch(layer)
    assert not block.training
    x, memory = torch.randn(N, L, E, dtype=dtype), torch.randn(N, S, E, dtype=dtype)
    causal = mask_case in ("causal", "both")
    padded = mask_case in ("padded memory", "both")
    mask, tgt_mask = (causal_mask(L), _blocked_causal(L)) if causal else (None, None)
    memory_mask, blocked = (
        (padding_mask(_lengths(S), S), _blocked_keys(_lengths(S), S)) if padded else (None, None)
    )
    expected = layer(x, memory, tgt_mask=tgt_mask, memory_key_padding_mask=blocked)
    replayed, self_weights, cross_weights = _torch_weights(layer, x, memory, tgt_mask, blocked)
    assert_close(replayed, expected)

    out, weights = block(x, memory, mask=mask, memory_mask=memory_mask)
    assert weights is None
    assert_close(out, expected)
    out, (ours_self, ours_cross) = block(
        x, memory, mask=mask, memory_mask=memory_mask, need_weights=True
    )
    assert_close(out, expected)
    assert_close(ours_self, self_weights)
    assert_close(ours_cross, cross_weights)
    if padded:  # the padded memory gets weight 0 from every query of every head
        assert (ours_cross[1, :, :, 2:] == 0).all()


@pytest.mark.parametrize("norm_first", [False, True], ids=["post-LN", "pre-LN"])
def test_decoder_block_matches_torch_in_train_mode_without_dropout(norm_first, dtype):
    layer = nn.TransformerDecoderLayer(
        E, H, FFN, dropout=0.0, batch_first=True, norm_first=norm_first, dtype=dtype
    ).train()
    block = TransformerDecoderBlock.from_torch(layer)
    assert block.training and block.cross_attn.training
    x, memory = torch.randn(N, L, E, dtype=dtype), torch.randn(N, S, E, dtype=dtype)
    blocked = _blocked_keys(_lengths(S), S)
    expected = layer(x, memory, tgt_mask=_blocked_causal(L), memory_key_padding_mask=blocked)
    out, _ = block(x, memory, mask=causal_mask(L), memory_mask=padding_mask(_lengths(S), S))
    assert_close(out, expected)


@pytest.mark.parametrize("batch_first", [True, False], ids=["batch-first", "sequence-first"])
@pytest.mark.parametrize("training", [True, False], ids=["train", "eval"])
@pytest.mark.parametrize("bias", [True, False], ids=["bias", "no-bias"])
@pytest.mark.parametrize("norm_first", [False, True], ids=["post-LN", "pre-LN"])
def test_decoder_block_from_torch_keeps_options(norm_first, bias, training, batch_first):
    layer = nn.TransformerDecoderLayer(
        E,
        H,
        FFN,
        dropout=0.2,
        batch_first=batch_first,
        norm_first=norm_first,
        bias=bias,
        layer_norm_eps=1e-3,
        dtype=torch.float64,
    ).train(training)
    block = TransformerDecoderBlock.from_torch(layer)
    assert all(m.training == training for m in block.modules())
    assert block.norm_first == norm_first
    assert block.norm1.eps == block.norm2.eps == block.norm3.eps == 1e-3
    assert block.self_attn.dropout == block.cross_attn.dropout == 0.2
    assert block.dropout1.p == block.dropout2.p == block.dropout3.p == block.ffn.dropout.p == 0.2
    assert {p.dtype for p in block.parameters()} == {torch.float64}
    assert sum(p.numel() for p in block.parameters()) == sum(p.numel() for p in layer.parameters())
    x, memory = randn(2, 4, E), randn(2, 3, E)
    expected = (
        layer.eval()(x, memory)
        if batch_first
        else layer.eval()(x.transpose(0, 1), memory.transpose(0, 1)).transpose(0, 1)
    )
    assert_close(block.eval()(x, memory)[0], expected)


@pytest.mark.parametrize("activation", ["relu", F.relu, torch.relu, nn.ReLU()])
def test_decoder_block_from_torch_accepts_every_spelling_of_relu(activation):
    layer = nn.TransformerDecoderLayer(
        E, H, FFN, activation=activation, batch_first=True, dtype=torch.float64
    ).eval()
    x, memory = randn(2, 4, E), randn(2, 3, E)
    assert_close(TransformerDecoderBlock.from_torch(layer)(x, memory)[0], layer(x, memory))


def test_decoder_block_from_torch_refuses_other_activations_and_types():
    layer = nn.TransformerDecoderLayer(E, H, FFN, activation="gelu", batch_first=True)
    with pytest.raises(ValueError, match=r"relu.*(?i:gelu)"):
        TransformerDecoderBlock.from_torch(layer)
    encoder_layer = nn.TransformerEncoderLayer(E, H, FFN, batch_first=True)
    with pytest.raises(TypeError, match="nn.TransformerDecoderLayer; got TransformerEncoderLayer"):
        TransformerDecoderBlock.from_torch(encoder_layer)


def test_decoder_block_with_a_cache_equals_the_block_on_the_whole_target():
    block = TransformerDecoderBlock(E, H, ffn_dim=FFN, dtype=torch.float64).eval()
    x, memory = randn(N, L, E), randn(N, S, E)
    memory_mask = padding_mask(_lengths(S), S)
    expected, _ = block(x, memory, mask=causal_mask(L), memory_mask=memory_mask)
    cache = KVCache(
        1, batch_size=N, num_kv_heads=H, head_dim=E // H, max_len=L, dtype=torch.float64
    )
    keys_values = block.cross_kv(memory)
    with torch.no_grad():
        steps = [
            block(
                x[:, t : t + 1],
                keys_values,
                mask=causal_mask(1, t + 1),
                memory_mask=memory_mask,
                cache=cache,
            )[0]
            for t in range(L)
        ]
    assert_close(torch.cat(steps, dim=1), expected)


def test_decoder_block_gradients():
    block = TransformerDecoderBlock(4, 2, ffn_dim=8, dropout=0.0, dtype=torch.float64)
    x, memory = randn(2, 3, 4), randn(2, 4, 4)
    check_module_gradients(
        block,
        x,
        memory,
        mask=causal_mask(3),
        memory_mask=padding_mask([4, 2], 4),
        need_weights=True,
        gradgrad=False,
    )


# --- the whole model against nn.Transformer ---------------------------------------------------


def _model(seed=0, *, norm_first=False, dtype=torch.float64, V=7, dropout=0.1, **kwargs):
    """A small model of E = 16 and H = 4, in eval mode, with a sharpened head (so that the
    hypotheses of a search differ clearly and EOS comes early now and then)."""
    torch.manual_seed(seed)
    model = Seq2SeqTransformer(
        9,
        V,
        embed_dim=E,
        num_heads=H,
        num_encoder_layers=2,
        num_decoder_layers=2,
        ffn_dim=FFN,
        max_len=10,
        dropout=dropout,
        norm_first=norm_first,
        dtype=dtype,
        **kwargs,
    ).eval()
    with torch.no_grad():
        model.head.weight.mul_(4.0)
    return model


def _sources(seed=0, N=N, S=S):
    """Source ids in [3, 9) padded with PAD after _lengths(S), and those lengths."""
    lengths = _lengths(S)[:N]
    generator = torch.Generator(torch.get_default_device()).manual_seed(seed)
    src = torch.randint(3, 9, (N, S), generator=generator)
    return src.masked_fill(_blocked_keys(lengths, S), PAD), lengths


def _torch_transformer(model, norm_first, dtype):
    """nn.Transformer holding the weights of ``model``'s encoder and decoder."""
    transformer = nn.Transformer(
        E,
        H,
        len(model.encoder),
        len(model.decoder),
        FFN,
        batch_first=True,
        norm_first=norm_first,
        dtype=dtype,
    ).eval()
    with torch.no_grad():
        for ours, theirs in zip(model.encoder, transformer.encoder.layers, strict=True):
            ours.load_state_dict(TransformerBlock.from_torch(theirs).state_dict())
        for ours, theirs in zip(model.decoder, transformer.decoder.layers, strict=True):
            ours.load_state_dict(TransformerDecoderBlock.from_torch(theirs).state_dict())
        model.encoder_norm.load_state_dict(transformer.encoder.norm.state_dict())
        model.decoder_norm.load_state_dict(transformer.decoder.norm.state_dict())
    return transformer


@pytest.mark.filterwarnings("ignore:enable_nested_tensor is True")
@pytest.mark.parametrize("norm_first", [False, True], ids=["post-LN", "pre-LN"])
def test_model_matches_torch_transformer(norm_first, dtype):
    model = _model(norm_first=norm_first, dtype=dtype)
    transformer = _torch_transformer(model, norm_first, dtype)
    src, lengths = _sources()
    tgt = torch.randint(1, 7, (N, L))
    # The embeddings and the head, by hand around torch's encoder-decoder.
    positions = model.positions.pe.to(dtype)
    src_x = model.src_embedding(src) * math.sqrt(E) + positions[:S]  # (N, S, E)
    tgt_x = model.tgt_embedding(tgt) * math.sqrt(E) + positions[:L]  # (N, L, E)
    blocked = _blocked_keys(lengths, S)
    expected = model.head(
        transformer(
            src_x,
            tgt_x,
            tgt_mask=_blocked_causal(L),
            src_key_padding_mask=blocked,
            memory_key_padding_mask=blocked,
        )
    )  # (N, L, V)
    for src_lengths in (None, lengths, torch.tensor(lengths, dtype=torch.int32)):
        logits, weights = model(src, tgt, src_lengths=src_lengths)
        assert weights is None
        assert_close(logits, expected)
    logits, weights = model(src, tgt, need_weights=True)
    assert_close(logits, expected)
    assert [w.shape for w in weights.encoder] == [(N, H, S, S)] * 2
    assert [w.shape for w in weights.decoder] == [(N, H, L, L)] * 2
    assert [w.shape for w in weights.cross] == [(N, H, L, S)] * 2
    for cross in weights.cross:
        assert_close(cross.sum(-1), torch.ones(N, H, L, dtype=dtype))
        assert (cross.masked_select(blocked[:, None, None, :]) == 0).all()
    for decoder in weights.decoder:
        assert (decoder.masked_select(_blocked_causal(L)) == 0).all()


def test_padding_and_lengths_are_never_attended_to():
    model = _model()
    src, lengths = _sources()
    tgt = torch.randint(1, 7, (N, L))
    expected, _ = model(src, tgt)
    # Other tokens under the padding change nothing when src_lengths says where it starts.
    noisy = torch.where(_blocked_keys(lengths, S), torch.randint(3, 9, (N, S)), src)
    assert_close(model(noisy, tgt, src_lengths=lengths)[0], expected)
    # Nor does more padding.
    longer = torch.cat([src, torch.zeros(N, 3, dtype=src.dtype)], dim=1)
    assert_close(model(longer, tgt)[0], expected)
    # A source with no real token gives finite logits, and a generation.
    empty = torch.zeros(1, S, dtype=torch.long)
    assert model(empty, tgt[:1])[0].isfinite().all()
    assert model.generate(empty, 4, bos_id=BOS, eos_id=EOS, beam_size=2)[0, 0] == BOS


def test_decode_with_a_cache_equals_decode_on_the_whole_target():
    model = _model()
    src, _ = _sources()
    tgt = torch.randint(1, 7, (N, L))
    memory, memory_mask = model.encode(src)
    expected, _ = model(src, tgt)
    assert_close(model.decode(tgt, memory, memory_mask)[0], expected)
    cache, keys_values = model.new_cache(N), model.cross_kv(memory)
    with torch.no_grad():
        steps = [
            model.decode(tgt[:, t : t + 1], keys_values, memory_mask, cache=cache)[0]
            for t in range(L)
        ]
    assert cache.length == L
    assert_close(torch.cat(steps, dim=1), expected)


# --- generation -------------------------------------------------------------------------------


def _reference_scores(model, src, out, alpha):
    """The score of each output, by teacher forcing and a plain loop: the sum of the generated
    tokens' log-probabilities (EOS included) over length ** alpha."""
    with torch.no_grad():
        logits, _ = model(src, out[:, :-1])
    log_probs = logits.log_softmax(-1).gather(2, out[:, 1:, None])[..., 0]  # (N, T - 1)
    scores = []
    for n, generated in enumerate(out[:, 1:].tolist()):
        end = generated.index(EOS) + 1 if EOS in generated else len(generated)
        scores.append(log_probs[n, :end].sum() / end**alpha)
    return torch.stack(scores)


def _check_layout(out, max_new_tokens):
    """BOS first, PAD only after EOS (and everywhere after it), as wide as the longest."""
    assert (out[:, 0] == BOS).all() and out.shape[1] <= 1 + max_new_tokens
    lengths = []
    for row in out[:, 1:].tolist():
        end = row.index(EOS) + 1 if EOS in row else len(row)
        assert PAD not in row[:end] and set(row[end:]) <= {PAD}
        lengths.append(end)
    assert 1 + max(lengths) == out.shape[1]


@pytest.mark.parametrize("beam_size", [1, 3])
@pytest.mark.parametrize("seed", range(3))
def test_generate_with_and_without_cache(seed, beam_size):
    model = _model(seed, norm_first=seed == 1)
    src, lengths = _sources(seed)
    alpha = [1.0, 0.0, 0.6][seed]
    kwargs = {
        "bos_id": BOS,
        "eos_id": EOS,
        "beam_size": beam_size,
        "length_penalty": alpha,
        "return_scores": True,
    }
    out, scores = model.generate(src, 8, src_lengths=lengths, **kwargs)
    uncached, uncached_scores = model.generate(
        src, 8, src_lengths=lengths, use_cache=False, **kwargs
    )
    assert torch.equal(out, uncached)
    assert_close(uncached_scores, scores)
    assert_close(scores, _reference_scores(model, src, out, alpha))
    _check_layout(out, 8)


def test_beam_search_of_one_beam_is_greedy():
    # generate() runs greedy search for beam_size=1; beam search is called here directly.
    for seed in range(4):
        model = _model(seed)
        src, _ = _sources(seed)
        greedy, greedy_scores = model.generate(src, 8, bos_id=BOS, eos_id=EOS, return_scores=True)
        with torch.no_grad():
            memory, memory_mask = model.encode(src)
            keys_values = model.cross_kv(memory)

            def next_log_probs(tokens, model=model, keys_values=keys_values, mask=memory_mask):
                logits, _ = model.decode(tokens, keys_values, mask)
                log_probs = logits[:, -1].log_softmax(-1)
                log_probs[:, PAD] = -math.inf  # as generate() does
                return log_probs

            beam, beam_scores = beam_search(
                next_log_probs, len(src), 1, max_new_tokens=8, bos_id=BOS, eos_id=EOS,
                pad_id=PAD,
            )  # fmt: skip
        assert torch.equal(beam, greedy)
        assert_close(beam_scores, greedy_scores)


def _every_output(max_new_tokens, V):
    """Every output the search may write: BOS, then tokens other than PAD and EOS, then EOS
    (or no EOS at max_new_tokens); padded with PAD."""
    words = [t for t in range(V) if t not in (PAD, EOS)]
    outputs = []
    for length in range(max_new_tokens + 1):
        for body in itertools.product(words, repeat=length):
            end = [EOS] if length < max_new_tokens else []
            row = [BOS, *body, *end]
            outputs.append(row + [PAD] * (1 + max_new_tokens - len(row)))
    return torch.tensor(outputs)


@settings(max_examples=8, deadline=None)
@given(seed=st.integers(0, 2**16), alpha=st.sampled_from([0.0, 0.5, 1.0, 2.0]))
def test_a_beam_that_keeps_every_hypothesis_finds_the_best_output(seed, alpha):
    # Beam search is a heuristic: a beam of 2 or 3 can end below greedy decoding (an early
    # choice of greedy decoding may lead to confident tokens that the beam dropped). What holds
    # is that a beam wide enough to keep every hypothesis (here 40, the most candidates of a
    # step being 9 x 4 at the last) finds the output of best score, found here by brute force,
    # and so never scores below greedy decoding.
    model = _model(seed, norm_first=seed % 2 == 1, V=5)
    src, _ = _sources(seed, N=2)
    kwargs = {"bos_id": BOS, "eos_id": EOS, "length_penalty": alpha, "return_scores": True}
    beam, beam_scores = model.generate(src, 3, beam_size=40, **kwargs)
    greedy, greedy_scores = model.generate(src, 3, **kwargs)
    outputs = _every_output(3, V=5)  # (40, 4)
    for n in range(2):
        scores = _reference_scores(model, src[n].expand(len(outputs), -1), outputs, alpha)
        best = scores.argmax()
        assert_close(beam_scores[n], scores[best])
        assert torch.equal(beam[n], outputs[best][: beam.shape[1]])
        assert greedy_scores[n] <= beam_scores[n] + 1e-12
    _check_layout(beam, 3)
    _check_layout(greedy, 3)


@pytest.mark.parametrize("beam_size", [1, 3])
def test_encoder_and_cross_attention_keys_and_values_run_once_per_source(beam_size):
    model = _model()
    src, _ = _sources()
    calls = {"encoder": [], "cross": [], "self": []}
    hooks = [
        model.encoder[0].register_forward_hook(
            lambda m, args, out: calls["encoder"].append(args[0].shape)
        )
    ]
    for block in model.decoder:
        for proj in (block.cross_attn.k_proj, block.cross_attn.v_proj):
            hooks.append(
                proj.register_forward_hook(
                    lambda m, args, out: calls["cross"].append(args[0].shape)
                )
            )
        hooks.append(
            block.self_attn.k_proj.register_forward_hook(
                lambda m, args, out: calls["self"].append(args[0].shape)
            )
        )
    try:
        out = model.generate(src, 8, bos_id=BOS, eos_id=EOS, beam_size=beam_size)
    finally:
        for hook in hooks:
            hook.remove()
    assert calls["encoder"] == [(N, S, E)]
    assert calls["cross"] == [(N, S, E)] * 4  # keys and values of 2 layers, on N rows: once
    # With the cache, each step's self-attention projects only the newest token of each beam.
    steps = len(calls["self"]) // 2
    assert out.shape[1] - 1 <= steps <= 8
    assert calls["self"] == [(N * beam_size, 1, E)] * (2 * steps)


@pytest.mark.parametrize("beam_size", [1, 3])
def test_generation_stops_at_eos_and_never_writes_padding(beam_size):
    model = _model()
    src, _ = _sources()
    with torch.no_grad():
        model.head.bias[EOS] = 100.0  # EOS first
    out = model.generate(src, 8, bos_id=BOS, eos_id=EOS, beam_size=beam_size)
    assert out.tolist() == [[BOS, EOS]] * N
    with torch.no_grad():
        model.head.bias[EOS], model.head.bias[PAD] = 0.0, 100.0  # PAD most likely, never written
    out = model.generate(src, 8, bos_id=BOS, eos_id=EOS, beam_size=beam_size)
    _check_layout(out, 8)
    out = model.generate(src, 8, bos_id=BOS, eos_id=PAD, beam_size=beam_size)  # PAD ends
    assert out.tolist() == [[BOS, PAD]] * N


def test_generate_restores_the_training_mode_also_on_error():
    model = _model().train()
    src, _ = _sources()
    model.generate(src, 3, bos_id=BOS, eos_id=EOS, beam_size=2)
    assert all(m.training for m in model.modules())

    def fail(module, args, out):
        assert not module.training  # generation runs in eval mode
        raise RuntimeError("stop")

    hook = model.decoder[1].register_forward_hook(fail)
    try:
        for beam_size in (1, 2):
            with pytest.raises(RuntimeError, match="stop"):
                model.generate(src, 3, bos_id=BOS, eos_id=EOS, beam_size=beam_size)
            assert all(m.training for m in model.modules())
    finally:
        hook.remove()
    assert model.eval().generate(src[:0], 3, bos_id=BOS, eos_id=EOS).shape == (0, 1)
    assert not model.training


@pytest.mark.parametrize("beam_size", [1, 3])
@pytest.mark.parametrize("alpha", [-50.0, 1000.0])
def test_a_length_penalty_whose_scores_leave_the_dtype_is_refused(beam_size, alpha):
    # -50 returned BOS alone scored -inf (beam) or tokens scored -inf (greedy); 1000 raised
    # OverflowError from Python's t ** 1000: the scores of float32 have no room for either.
    model = _model(dtype=torch.float32).train()
    src, _ = _sources()
    kwargs = {"bos_id": BOS, "eos_id": EOS, "beam_size": beam_size, "length_penalty": alpha}
    with pytest.raises(ValueError, match=r"length_penalty=.* out of torch.float32's range"):
        model.generate(src, model.max_len - 1, **kwargs)
    assert model.training
    _, scores = model.generate(src, model.max_len - 1, **{**kwargs, "length_penalty": 2.0},
                               return_scores=True)  # fmt: skip
    assert scores.isfinite().all() and (scores < 0).all()


# --- bad inputs -------------------------------------------------------------------------------


def _bad_calls():
    """{case: (method, changed arguments, error, message)}, made on the test's device."""
    ids, f64 = torch.long, torch.float64
    rolling = KVCache(2, batch_size=N, num_kv_heads=H, head_dim=E // H, window=4, dtype=f64)
    return {
        "src float": ("generate", {"src": torch.zeros(N, S)}, TypeError, "src must be an int64"),
        "src int16": ("generate", {"src": torch.zeros(N, S, dtype=torch.int16)}, TypeError, "src"),
        "src 1-D": ("generate", {"src": torch.zeros(S, dtype=ids)}, ValueError, "src must be 2-D"),
        "src list": ("generate", {"src": [[3, 4]]}, TypeError, "src must be a torch.Tensor"),
        "src id": ("generate", {"src": torch.full((N, S), 9)}, ValueError, "src ids must lie"),
        "src long": ("generate", {"src": torch.ones(N, 11, dtype=ids)}, ValueError, "src length"),
        "src device": (
            "generate",
            {"src": torch.ones(N, S, dtype=ids, device="meta")},
            ValueError,
            "src must be on the model's device",
        ),
        "lengths count": ("generate", {"src_lengths": [1, 2]}, ValueError, "src_lengths must hold"),
        "lengths range": ("generate", {"src_lengths": [1, 2, 7]}, ValueError, "src_lengths must"),
        "lengths negative": ("generate", {"src_lengths": [1, -1, 2]}, ValueError, "src_lengths"),
        "lengths float": ("generate", {"src_lengths": torch.ones(N)}, TypeError, "src_lengths"),
        "lengths bools": ("generate", {"src_lengths": [True, 1, 2]}, TypeError, "src_lengths"),
        "lengths 2-D": (
            "generate",
            {"src_lengths": torch.ones(N, 1, dtype=ids)},
            ValueError,
            "src_lengths",
        ),
        "max_new_tokens 0": ("generate", {"max_new_tokens": 0}, ValueError, "max_new_tokens"),
        "max_new_tokens 10": ("generate", {"max_new_tokens": 10}, ValueError, "max_new_tokens"),
        "max_new_tokens float": ("generate", {"max_new_tokens": 2.0}, TypeError, "max_new_tokens"),
        "bos_id range": ("generate", {"bos_id": 7}, ValueError, "bos_id must be in"),
        "bos_id bool": ("generate", {"bos_id": True}, TypeError, "bos_id"),
        "eos_id negative": ("generate", {"eos_id": -1}, ValueError, "eos_id"),
        "eos_id tensor": ("generate", {"eos_id": torch.tensor(2)}, TypeError, "eos_id"),
        "beam_size 0": ("generate", {"beam_size": 0}, ValueError, "beam_size must be at least 1"),
        "beam_size float": ("generate", {"beam_size": 2.5}, TypeError, "beam_size"),
        "length_penalty nan": (
            "generate",
            {"length_penalty": math.nan},
            ValueError,
            "length_penalty",
        ),
        "length_penalty str": ("generate", {"length_penalty": "1"}, TypeError, "length_penalty"),
        "use_cache": ("generate", {"use_cache": 1}, TypeError, "use_cache must be a bool"),
        "return_scores": ("generate", {"return_scores": "no"}, TypeError, "return_scores"),
        "tgt float": ("forward", {"tgt": torch.ones(N, L)}, TypeError, "tgt must be an int"),
        "tgt id": ("forward", {"tgt": torch.full((N, L), 7)}, ValueError, "tgt ids"),
        "tgt batch": (
            "forward",
            {"tgt": torch.ones(2, L, dtype=ids)},
            ValueError,
            "tgt must have src's batch size",
        ),
        "forward need_weights": ("forward", {"need_weights": None}, TypeError, "need_weights"),
        "forward lengths": ("forward", {"src_lengths": [9, 1, 1]}, ValueError, "src_lengths"),
        "encode src": ("encode", {"src": torch.ones(N, S)}, TypeError, "src must be an int64"),
        "encode lengths": ("encode", {"src_lengths": [1]}, ValueError, "src_lengths"),
        "memory type": ("decode", {"memory": "memory"}, TypeError, "memory must be a tensor"),
        "memory E": (
            "decode",
            {"memory": torch.zeros(N, S, 8, dtype=f64)},
            ValueError,
            "memory's last dimension",
        ),
        "memory dtype": (
            "decode",
            {"memory": torch.zeros(N, S, E)},
            TypeError,
            "memory must have the same dtype",
        ),
        "memory batch": (
            "decode",
            {"memory": torch.zeros(2, S, E, dtype=f64)},
            ValueError,
            "memory must have batch size 3",
        ),
        "memory layers": ("decode", {"memory": []}, TypeError, "memory must be a tensor"),
        "memory_mask float": (
            "decode",
            {"memory_mask": torch.ones(N, 1, 1, S)},
            TypeError,
            "memory_mask must be a bool tensor",
        ),
        "memory_mask shape": (
            "decode",
            {"memory_mask": torch.ones(N, 1, 1, 2, dtype=bool)},
            ValueError,
            "memory_mask of shape",
        ),
        "cache type": ("decode", {"cache": "cache"}, TypeError, "cache must be a KVCache"),
        "cache rolling": ("decode", {"cache": rolling}, ValueError, "window"),
        "cache full": ("decode", {"cache": "full"}, ValueError, "KVCache is full"),
        "cache batch": ("decode", {"cache": "batch"}, ValueError, "holds batch_size=2"),
        "decode need_weights": ("decode", {"need_weights": "yes"}, TypeError, "need_weights"),
    }


@pytest.mark.parametrize("case", list(_bad_calls()))
def test_bad_inputs_are_refused_before_any_arithmetic(case):
    method, changes, error, message = _bad_calls()[case]
    model = _model()
    src, lengths = _sources()
    tgt = torch.ones(N, L, dtype=torch.long)
    memory, memory_mask = model.encode(src)
    if changes.get("cache") in ("full", "batch"):  # made here, with the model
        full = changes["cache"] == "full"
        changes["cache"] = model.new_cache(N if full else 2)
        changes["cache"].length = 8 if full else 0
    arguments = {
        "generate": {"src": src, "max_new_tokens": 4, "bos_id": BOS, "eos_id": EOS},
        "forward": {"src": src, "tgt": tgt, "src_lengths": lengths},
        "encode": {"src": src, "src_lengths": lengths},
        "decode": {"tgt": tgt, "memory": memory, "memory_mask": memory_mask},
    }[method] | changes
    ran = []
    hooks = [model.src_embedding.register_forward_pre_hook(lambda m, a: ran.append(m))]
    hooks += [
        block.register_forward_pre_hook(lambda m, a: ran.append(m)) for block in model.decoder
    ]
    try:
        with pytest.raises(error, match=message):
            positional = [
                arguments.pop(name) for name in list(arguments)[: 1 + (method != "encode")]
            ]
            getattr(model, method)(*positional, **arguments)
    finally:
        for hook in hooks:
            hook.remove()
    assert ran == [], f"{case}: the model ran before the error"


def _bad_block_calls():
    """{case: (changed arguments, error, message)}, made on the test's device."""
    other_cache = KVCache(1, batch_size=N, num_kv_heads=2, head_dim=8, max_len=8)
    return {
        "x 2-D": ({"x": randn(L, E)}, ValueError, "x must be 3-D"),
        "x float32": ({"x": torch.randn(N, L, E)}, TypeError, "x must have the same dtype"),
        "memory E": ({"memory": randn(N, S, 8)}, ValueError, "memory's last dimension"),
        "memory batch": ({"memory": randn(2, S, E)}, ValueError, "memory must have batch"),
        "memory pair": ({"memory": (randn(N, H, S, 4),)}, TypeError, "memory must be a"),
        "memory pair shape": (
            {"memory": (randn(N, H, S, 4), randn(N, H, 2, 4))},
            ValueError,
            "memory keys and values must both have shape",
        ),
        "mask float": ({"mask": torch.ones(L, L)}, TypeError, "^mask must be a bool"),
        "mask shape": ({"mask": causal_mask(L, S)}, ValueError, "^mask of shape"),
        "memory_mask float": (
            {"memory_mask": torch.ones(N, 1, 1, S)},
            TypeError,
            "^memory_mask must be a bool.*use memory_mask.bool",
        ),
        "memory_mask shape": (
            {"memory_mask": padding_mask([1, 1], S)},
            ValueError,
            "^memory_mask of shape",
        ),
        "need_weights": ({"need_weights": 1}, TypeError, "need_weights must be a bool"),
        "layer": ({"layer": -1}, ValueError, "layer must be non-negative"),
        "cache heads": ({"cache": other_cache}, ValueError, "the cache holds 2 heads"),
        "cache type": ({"cache": {}}, TypeError, "cache must be a KVCache"),
    }


@pytest.mark.parametrize("case", list(_bad_block_calls()))
def test_bad_block_inputs_are_refused(case):
    changes, error, message = _bad_block_calls()[case]
    block = TransformerDecoderBlock(E, H, ffn_dim=FFN, dtype=torch.float64)
    arguments = {
        "x": randn(N, L, E),
        "memory": randn(N, S, E),
        "mask": causal_mask(L),
        "memory_mask": padding_mask(_lengths(S), S),
    } | changes
    ran = []
    hook = block.self_attn.q_proj.register_forward_pre_hook(lambda m, a: ran.append(m))
    with pytest.raises(error, match=message):
        block(arguments.pop("x"), arguments.pop("memory"), **arguments)
    hook.remove()
    assert ran == []


SMALL = {
    "embed_dim": E,
    "num_heads": H,
    "num_encoder_layers": 1,
    "num_decoder_layers": 1,
    "ffn_dim": 8,
    "max_len": 4,
}
CONSTRUCTOR_ERRORS = {
    "block heads": (lambda: TransformerDecoderBlock(10, 4), ValueError, "embed_dim must be"),
    "block eps": (
        lambda: TransformerDecoderBlock(E, H, layer_norm_eps=0.0),
        ValueError,
        "layer_norm_eps",
    ),
    "block norm_first": (
        lambda: TransformerDecoderBlock(E, H, norm_first="yes"),
        TypeError,
        "norm_first",
    ),
    "block dropout": (lambda: TransformerDecoderBlock(E, H, dropout=1.0), ValueError, "dropout"),
    "block dtype": (lambda: TransformerDecoderBlock(E, H, dtype=torch.long), TypeError, "dtype"),
    "pad_id": (lambda: Seq2SeqTransformer(5, 5, **SMALL, pad_id=5), ValueError, "pad_id must"),
    "vocab": (lambda: Seq2SeqTransformer(5, 0, **SMALL), ValueError, "tgt_vocab_size must"),
    "dropout": (lambda: Seq2SeqTransformer(5, 5, **SMALL, dropout=-0.1), ValueError, "dropout"),
    "layers": (
        lambda: Seq2SeqTransformer(5, 5, **SMALL | {"num_encoder_layers": 0}),
        ValueError,
        "num_encoder_layers",
    ),
    "max_len": (
        lambda: Seq2SeqTransformer(5, 5, **SMALL | {"max_len": True}),
        TypeError,
        "max_len",
    ),
    "heads": (
        lambda: Seq2SeqTransformer(5, 5, **SMALL | {"num_heads": 3}),
        ValueError,
        "embed_dim must be divisible",
    ),
}


@pytest.mark.parametrize("case", CONSTRUCTOR_ERRORS)
def test_bad_constructor_arguments_are_refused(case):
    make, error, message = CONSTRUCTOR_ERRORS[case]
    with pytest.raises(error, match=message):
        make()
