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
    masks,
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


# --- the mask_mods are the predicates of attention.masks -----------------------------------


@pytest.mark.parametrize("offset", [0, 3])
def test_mask_mods_wrap_the_masks_predicates_with_the_offset(offset):
    b, h = torch.tensor(0), torch.tensor(1)  # unused by every mask_mod here
    q, k = torch.arange(4)[:, None], torch.arange(4 + offset)
    assert torch.equal(flex.causal(b, h, q, k), masks.causal(q, k))
    expected = masks.sliding_window(2)(q + offset, k)
    assert torch.equal(flex.sliding_window(2, offset=offset)(b, h, q, k), expected)
    assert torch.equal(flex.prefix_lm(2)(b, h, q, k), masks.prefix_lm(2)(q, k))
    doc_ids = torch.tensor([0, 0, 1, 1, 1, 2, 2])
    same = masks.document(doc_ids)(q, k)
    assert torch.equal(flex.document(doc_ids=doc_ids)(b, h, q, k), same)
    assert torch.equal(flex.document(doc_ids=doc_ids, causal=True)(b, h, q, k), same & (k <= q))


# --- hardening ------------------------------------------------------------------------------


def test_document_mask_mod_says_how_many_tokens_it_covers():
    # A mask_mod cannot know the shape it will be used on: it says what it covers, and a
    # longer sequence ends in torch's IndexError, as its docstring says.
    mask_mod = flex.document([2, 2])
    assert mask_mod.length == 4
    assert flex.document(doc_ids=torch.zeros(3, 5, dtype=torch.long)).length == 5
    with pytest.raises(IndexError):
        _grid(mask_mod, 8, 8)


@pytest.mark.parametrize(
    "build, error, match",
    [
        (lambda: flex.softcap(math.inf), ValueError, r"cap must be finite; got inf"),
        (lambda: flex.softcap(math.nan), ValueError, r"cap must be finite; got nan"),
        (lambda: flex.softcap(True), TypeError, r"cap must be a float; got bool"),
        (
            lambda: flex.document(torch.tensor([2, 1], dtype=torch.uint8)),
            TypeError,
            r"lengths must be an int64 or int32 tensor; got torch.uint8",
        ),
        (
            lambda: flex.document(torch.tensor([2, 1], device="meta")),
            ValueError,
            r"lengths must hold values; got a tensor on the meta device",
        ),
        (lambda: flex.document([2, True]), TypeError, r"lengths must hold ints, not bools"),
        (
            lambda: flex.document(doc_ids=torch.tensor([0, 1], dtype=torch.uint8)),
            TypeError,
            r"doc_ids must be an int64 or int32 tensor; got torch.uint8",
        ),
        (
            lambda: flex.document(doc_ids=torch.tensor([0, 1], device="meta")),
            ValueError,
            r"doc_ids must hold values",
        ),
        (
            lambda: flex.document([1], device="bogus"),
            ValueError,
            r"device must name a device such as 'cpu'; got 'bogus'",
        ),
        (
            lambda: flex.document([1], device=torch.float32),
            TypeError,
            r"device must be a torch.device or a str; got torch.float32",
        ),
        (lambda: flex.sliding_window(2**70), ValueError, r"window must fit in int64"),
        (lambda: flex.sliding_window(2, offset=2**64), ValueError, r"offset must fit in int64"),
        (lambda: flex.prefix_lm(True), TypeError, r"prefix must be an int; got bool"),
        (lambda: flex.alibi(2, offset=2**64), ValueError, r"offset must fit in int64"),
    ],
)
def test_bad_input_refused_when_the_mod_is_built(build, error, match):
    with pytest.raises(error, match=match):
        build()
