"""SelfAttention: one head scaled by the embedding size, as a one-head nn.MultiheadAttention."""

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from attention import (
    SelfAttention,
    causal_mask,
)

from .helpers import assert_close, randn

N, E, H = 3, 16, 4


def test_self_attention_is_one_head_scaled_by_the_embedding_size():
    attn = SelfAttention(E, bias=True, dtype=torch.float64)
    x, mask = randn(2, 5, E), causal_mask(5)
    q, k, v = attn.q_proj(x), attn.k_proj(x), attn.v_proj(x)
    out, weights = attn(x, mask)
    assert_close(out, F.scaled_dot_product_attention(q, k, v, attn_mask=mask))
    scores = (q @ k.transpose(-2, -1) / math.sqrt(E)).masked_fill(~mask, -torch.inf)
    assert_close(weights, scores.softmax(dim=-1))


def test_self_attention_matches_a_one_head_torch_module_before_its_output_projection():
    torch_mha = nn.MultiheadAttention(E, 1, bias=False, batch_first=True, dtype=torch.float64)
    with torch.no_grad():
        torch_mha.out_proj.weight.copy_(torch.eye(E))
    attn = SelfAttention(E, dtype=torch.float64)
    with torch.no_grad():
        for proj, w in zip((attn.q_proj, attn.k_proj, attn.v_proj),
                           torch_mha.in_proj_weight.chunk(3), strict=True):  # fmt: skip
            proj.weight.copy_(w)
    x = randn(2, 5, E)
    expected, expected_weights = torch_mha(x, x, x, attn_mask=~causal_mask(5))
    out, weights = attn(x, causal_mask(5))
    assert_close(out, expected)
    assert_close(weights, expected_weights)


def test_a_bad_dtype_or_device_is_refused_by_name():
    # Both failed inside nn.Linear with torch's own words, naming neither argument.
    with pytest.raises(TypeError, match=r"dtype must be a floating-point dtype"):
        SelfAttention(16, dtype=torch.int32)
    with pytest.raises(ValueError, match=r"device must name a device such as 'cpu'"):
        SelfAttention(16, device="bogus")
