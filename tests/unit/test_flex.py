"""FlexAttention mask_mods and score_mods against the package's bool masks and additive biases.

FlexAttention runs eagerly here (unfused, float64 on the CPU), which is what makes an exact
comparison possible; the warning it gives for running without torch.compile is expected.
"""

import math
import subprocess
import sys
import warnings

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from attention import (
    alibi_bias,
    causal_mask,
    document_mask,
    flex,
    prefix_lm_mask,
    scaled_dot_product_attention,
    sliding_window_mask,
)

from .helpers import assert_close, randn

flex_attention_module = pytest.importorskip("torch.nn.attention.flex_attention")


def _grid(mod, L, S, N=1, H=1):
    """Evaluate a mask_mod on broadcast index grids: the whole (N, H, L, S) mask at once."""
    b = torch.arange(N)[:, None, None, None]
    h = torch.arange(H)[None, :, None, None]
    q_idx, kv_idx = torch.arange(L)[:, None], torch.arange(S)
    return mod(b, h, q_idx, kv_idx).expand(N, H, L, S)


def _flex(q, k, v, mask_mod=None, score_mod=None):
    """Eager flex_attention with the block mask of ``mask_mod`` (without the compile warning)."""
    N, H, L, _ = q.shape
    S = k.shape[-2]
    block_mask = None
    if mask_mod is not None:
        block_mask = flex_attention_module.create_block_mask(
            mask_mod, N, H, L, S, device="cpu", BLOCK_SIZE=8
        )
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r"flex_attention called without torch.compile")
        return flex_attention_module.flex_attention(
            q, k, v, score_mod=score_mod, block_mask=block_mask
        )


def _qkv(N, H, L, S, D=4):
    return randn(N, H, L, D), randn(N, H, S, D), randn(N, H, S, D)


def test_importing_flex_does_not_import_flex_attention():
    code = "import sys, attention.flex; print('torch.nn.attention.flex_attention' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


# --- mask_mods as masks: the same entries as the bool masks ---------------------------------


def _cases():
    return [
        ("causal", flex.causal, causal_mask(9), 9, 9),
        ("window", flex.sliding_window(3), sliding_window_mask(9, 3), 9, 9),
        ("window-offset", flex.sliding_window(4, offset=6), sliding_window_mask(5, 4, 11), 5, 11),
        ("causal-offset", flex.sliding_window(11, offset=6), causal_mask(5, 11), 5, 11),
        ("document", flex.document([3, 4, 2]), document_mask([3, 4, 2]), 9, 9),
        (
            "document-causal",
            flex.document([3, 0, 4, 2], causal=True),
            document_mask([3, 0, 4, 2], causal=True),
            9,
            9,
        ),
        (
            "doc-ids",
            flex.document(doc_ids=torch.tensor([0, 0, 1, 1, 1, 2, 2, 2, 2])),
            document_mask([2, 3, 4]),
            9,
            9,
        ),
        ("prefix", flex.prefix_lm(4), prefix_lm_mask(9, 4), 9, 9),
    ]


CASES = _cases()


@pytest.mark.parametrize("name, mask_mod, mask, L, S", CASES, ids=[c[0] for c in CASES])
def test_mask_mod_broadcast_equals_the_bool_mask(name, mask_mod, mask, L, S):
    assert torch.equal(_grid(mask_mod, L, S)[0, 0], mask)


@pytest.mark.parametrize("name, mask_mod, mask, L, S", CASES, ids=[c[0] for c in CASES])
def test_mask_mod_through_torch_create_mask_equals_the_bool_mask(name, mask_mod, mask, L, S):
    made = flex_attention_module.create_mask(mask_mod, 1, 1, L, S, device="cpu")
    assert torch.equal(made[0, 0], mask)


@pytest.mark.parametrize("name, mask_mod, mask, L, S", CASES, ids=[c[0] for c in CASES])
def test_flex_attention_with_mask_mod_equals_sdpa_with_the_bool_mask(name, mask_mod, mask, L, S):
    q, k, v = _qkv(2, 2, L, S)
    expected, _ = scaled_dot_product_attention(q, k, v, mask)
    assert_close(_flex(q, k, v, mask_mod=mask_mod), expected)


@settings(max_examples=30, deadline=None)
@given(L=st.integers(1, 12), extra=st.integers(0, 6), window=st.integers(1, 14), prefix=st.data())
def test_mask_mods_equal_the_masks_for_any_size(L, extra, window, prefix):
    S = L + extra
    mask = _grid(flex.sliding_window(window, offset=S - L), L, S)[0, 0]
    assert torch.equal(mask, sliding_window_mask(L, window, S))
    p = prefix.draw(st.integers(0, L))
    assert torch.equal(_grid(flex.prefix_lm(p), L, L)[0, 0], prefix_lm_mask(L, p))


def test_document_ids_are_moved_to_the_requested_device():
    mask_mod = flex.document([2, 3], device="meta")
    q_idx, kv_idx = torch.arange(5, device="meta")[:, None], torch.arange(5, device="meta")
    assert mask_mod(0, 0, q_idx, kv_idx).device.type == "meta"


def test_document_ids_per_batch_row():
    doc_ids = torch.tensor([[0, 0, 1, 1, 1], [0, 1, 1, 1, 1]])
    mask = _grid(flex.document(doc_ids=doc_ids), 5, 5, N=2)  # (N, 1, L, S)
    assert torch.equal(mask[0, 0], document_mask([2, 3]))
    assert torch.equal(mask[1, 0], document_mask([1, 4]))
    q, k, v = _qkv(2, 1, 5, 5)
    expected, _ = scaled_dot_product_attention(q, k, v, mask)
    assert_close(_flex(q, k, v, mask_mod=flex.document(doc_ids=doc_ids)), expected)


# --- score_mods: ALiBi as the additive bias, soft-capping as its formula ---------------------


@pytest.mark.parametrize("H, L, S", [(4, 9, 9), (3, 5, 11)])
def test_alibi_score_mod_equals_torch_sdpa_with_the_alibi_bias(H, L, S):
    q, k, v = _qkv(2, H, L, S)
    bias = alibi_bias(H, L, S, dtype=torch.float64)  # (H, L, S)
    blocked = torch.zeros(L, S, dtype=torch.float64).masked_fill(~causal_mask(L, S), -math.inf)
    expected = F.scaled_dot_product_attention(q, k, v, attn_mask=bias + blocked)
    mask_mod = flex.sliding_window(S, offset=S - L)  # causal, bottom-right aligned
    score_mod = flex.alibi(H, offset=S - L)
    assert_close(_flex(q, k, v, mask_mod=mask_mod, score_mod=score_mod), expected)
    h, q_idx, kv_idx = torch.arange(H)[:, None, None], torch.arange(L)[:, None], torch.arange(S)
    zeros = torch.zeros(H, L, S, dtype=torch.float64)
    assert_close(score_mod(zeros, 0, h, q_idx, kv_idx), bias)


def test_alibi_score_mod_keeps_the_score_dtype():
    score = torch.zeros(2, 3, 3, dtype=torch.float32)
    out = flex.alibi(2)(score, 0, torch.arange(2)[:, None, None], torch.arange(3)[:, None], 0)
    assert out.dtype == torch.float32


@pytest.mark.parametrize("cap", [0.5, 2.0, 50.0])
def test_softcap_score_mod_equals_softmax_of_capped_scores(cap):
    q, k, v = _qkv(2, 2, 7, 7)
    q = 4 * q  # large scores, so the cap matters
    scores = q @ k.mT / math.sqrt(q.shape[-1])  # (N, H, L, S)
    expected = (cap * torch.tanh(scores / cap)).softmax(-1) @ v  # (N, H, L, D)
    assert_close(_flex(q, k, v, score_mod=flex.softcap(cap)), expected)
    causal_expected = (cap * torch.tanh(scores / cap)).masked_fill(
        ~causal_mask(7), -math.inf
    ).softmax(-1) @ v
    out = _flex(q, k, v, mask_mod=flex.causal, score_mod=flex.softcap(cap))
    assert_close(out, causal_expected)


def test_softcap_bounds_the_scores():
    scores = torch.linspace(-1e3, 1e3, 101, dtype=torch.float64)
    capped = flex.softcap(5.0)(scores, 0, 0, 0, 0)
    assert capped.abs().max() <= 5.0 and (capped.diff() >= 0).all()


# --- bad input ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "build, error, match",
    [
        (lambda: flex.sliding_window(0), ValueError, r"window must be at least 1; got 0"),
        (lambda: flex.sliding_window(2.5), TypeError, r"window must be an int; got float"),
        (lambda: flex.sliding_window(2, offset=-1), ValueError, r"offset must be non-negative"),
        (lambda: flex.prefix_lm(-2), ValueError, r"prefix must be non-negative; got -2"),
        (lambda: flex.document(), ValueError, r"exactly one of lengths and doc_ids"),
        (
            lambda: flex.document([1], doc_ids=torch.zeros(1, dtype=torch.long)),
            ValueError,
            r"exactly one of lengths and doc_ids",
        ),
        (lambda: flex.document([1, -1]), ValueError, r"lengths must be non-negative"),
        (lambda: flex.document(doc_ids=[0, 1]), TypeError, r"doc_ids must be an integer torch"),
        (lambda: flex.document(doc_ids=torch.zeros(3)), TypeError, r"doc_ids must hold integers"),
        (
            lambda: flex.document(doc_ids=torch.zeros(1, 2, 3, dtype=torch.long)),
            ValueError,
            r"doc_ids must be \(L\) or \(N, L\); got shape \(1, 2, 3\)",
        ),
        (lambda: flex.document([1], causal="yes"), TypeError, r"causal must be a bool; got str"),
        (lambda: flex.alibi(0), ValueError, r"num_heads must be at least 1; got 0"),
        (lambda: flex.alibi(2, offset=-3), ValueError, r"offset must be non-negative; got -3"),
        (lambda: flex.softcap(0.0), ValueError, r"cap must be positive; got 0.0"),
        (lambda: flex.softcap("5"), TypeError, r"cap must be a float; got str"),
    ],
)
def test_bad_input(build, error, match):
    with pytest.raises(error, match=match):
        build()
