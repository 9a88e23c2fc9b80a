"""Sliding-window, packed-document and prefix-LM masks against loop-built references."""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import attention
from attention import (
    causal_mask,
    document_mask,
    masks,
    prefix_lm_mask,
    scaled_dot_product_attention,
    sliding_window_mask,
)

from .helpers import assert_close, randn


def _loop(L, S, allowed):
    """An (L, S) bool mask with ``allowed(i, j)`` in each entry, built one entry at a time."""
    return torch.tensor([[allowed(i, j) for j in range(S)] for i in range(L)], dtype=torch.bool)


def test_new_masks_are_exported():
    names = ("sliding_window_mask", "document_mask", "prefix_lm_mask")
    assert set(names) <= set(attention.__all__) & set(attention.masks.__all__)


# --- sliding_window_mask -------------------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(L=st.integers(0, 9), extra=st.integers(-3, 6), window=st.integers(1, 10))
def test_sliding_window_mask_matches_the_loop(L, extra, window):
    S = max(L + extra, 0)
    expected = _loop(L, S, lambda i, j: 0 <= (S - L + i) - j < window).reshape(L, S)
    mask = sliding_window_mask(L, window, S)
    assert mask.dtype == torch.bool and torch.equal(mask, expected)


@pytest.mark.parametrize("L, S", [(5, 5), (3, 7), (6, 4)])
def test_sliding_window_as_wide_as_the_keys_is_causal_and_each_row_sees_at_most_window(L, S):
    assert torch.equal(sliding_window_mask(L, S, S), causal_mask(L, S))
    assert torch.equal(sliding_window_mask(L, S + 5, S), causal_mask(L, S))
    assert (sliding_window_mask(L, 2, S).sum(-1) <= 2).all()
    assert torch.equal(
        sliding_window_mask(L, 2, S), sliding_window_mask(L, 2, S) & causal_mask(L, S)
    )


# --- document_mask -------------------------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(lengths=st.lists(st.integers(0, 5), max_size=5), causal=st.booleans())
def test_document_mask_matches_the_loop(lengths, causal):
    doc = [d for d, n in enumerate(lengths) for _ in range(n)]
    L = len(doc)
    expected = _loop(L, L, lambda i, j: doc[i] == doc[j] and (j <= i or not causal))
    mask = document_mask(lengths, causal=causal)
    assert mask.dtype == torch.bool and torch.equal(mask, expected.reshape(L, L))
    assert torch.equal(document_mask(torch.tensor(lengths, dtype=torch.long), causal=causal), mask)


def test_document_mask_causal_is_the_bidirectional_mask_and_the_causal_mask():
    lengths = [3, 1, 4]
    assert torch.equal(document_mask(lengths, causal=True), document_mask(lengths) & causal_mask(8))


def test_packed_documents_attend_as_if_alone():
    lengths = [3, 5, 2]
    q, k, v = randn(1, 2, 10, 4), randn(1, 2, 10, 4), randn(1, 2, 10, 4)
    packed, _ = scaled_dot_product_attention(q, k, v, document_mask(lengths, causal=True))
    start = 0
    for n in lengths:
        part = slice(start, start + n)
        alone, _ = scaled_dot_product_attention(q[..., part, :], k[..., part, :], v[..., part, :],
                                                causal_mask(n))  # fmt: skip
        assert_close(packed[..., part, :], alone)
        start += n


# --- prefix_lm_mask ------------------------------------------------------------------------


@pytest.mark.parametrize("L", [0, 1, 4, 7])
def test_prefix_lm_mask_matches_the_loop(L):
    for prefix in range(L + 1):
        expected = _loop(L, L, lambda i, j, p=prefix: j <= i or j < p).reshape(L, L)
        assert torch.equal(prefix_lm_mask(L, prefix), expected)
    assert torch.equal(prefix_lm_mask(L, 0), causal_mask(L))
    assert prefix_lm_mask(L, L).all()


# --- devices and bad input -----------------------------------------------------------------


def test_masks_are_built_on_the_requested_device():
    assert sliding_window_mask(3, 2, device="meta").device.type == "meta"
    assert prefix_lm_mask(3, 1, device="meta").device.type == "meta"
    assert document_mask([1, 2], device="meta").device.type == "meta"


@pytest.mark.parametrize(
    "build, error, match",
    [
        (lambda: sliding_window_mask(-1, 2), ValueError, r"L must be non-negative; got -1"),
        (lambda: sliding_window_mask(3, 0), ValueError, r"window must be at least 1; got 0"),
        (lambda: sliding_window_mask(3, 2.0), TypeError, r"window must be an int; got float"),
        (lambda: sliding_window_mask(3, 2, -4), ValueError, r"S must be non-negative; got -4"),
        (lambda: sliding_window_mask(True, 2), TypeError, r"L must be an int; got bool"),
        (lambda: prefix_lm_mask(3, 4), ValueError, r"prefix must be at most L=3; got 4"),
        (lambda: prefix_lm_mask(3, -1), ValueError, r"prefix must be non-negative; got -1"),
        (lambda: prefix_lm_mask(3.0, 1), TypeError, r"L must be an int; got float"),
        (
            lambda: document_mask([2, -1]),
            ValueError,
            r"lengths must be non-negative; got \[2, -1\]",
        ),
        (
            lambda: document_mask([2.0, 1.0]),
            TypeError,
            r"lengths must hold integers; got torch.float",
        ),
        (lambda: document_mask([[1, 2]]), ValueError, r"lengths must be 1-D; got shape \(1, 2\)"),
        (lambda: document_mask(3), TypeError, r"lengths must be a 1-D integer tensor.*got int"),
        (lambda: document_mask([1], causal=1), TypeError, r"causal must be a bool; got int"),
    ],
)
def test_bad_input(build, error, match):
    with pytest.raises(error, match=match):
        build()


# --- each mask is one predicate of positions -----------------------------------------------


def _positions(L, S):
    """The positions of L queries (the last of S, bottom-right aligned) and of S keys."""
    return torch.arange(S - L, S)[:, None], torch.arange(S)


@settings(max_examples=40, deadline=None)
@given(L=st.integers(0, 9), extra=st.integers(-3, 6), window=st.integers(1, 10), data=st.data())
def test_each_dense_mask_is_its_predicate_on_the_index_grid(L, extra, window, data):
    S = max(L + extra, 0)
    q, k = _positions(L, S)
    assert torch.equal(causal_mask(L, S), masks.causal(q, k))
    assert torch.equal(sliding_window_mask(L, window, S), masks.sliding_window(window)(q, k))
    prefix = data.draw(st.integers(0, L))
    q, k = _positions(L, L)
    assert torch.equal(prefix_lm_mask(L, prefix), masks.prefix_lm(prefix)(q, k))
    lengths = data.draw(st.lists(st.integers(0, 4), max_size=4))
    doc_ids = torch.repeat_interleave(torch.arange(len(lengths)), torch.tensor(lengths, dtype=int))
    q, k = _positions(len(doc_ids), len(doc_ids))
    assert torch.equal(document_mask(lengths), masks.document(doc_ids)(q, k))


def test_predicates_are_public_and_broadcast():
    assert {"causal", "sliding_window", "document", "prefix_lm"} <= set(masks.__all__)
    q, k = torch.tensor(5), torch.arange(8)  # one query against every key, as FlexAttention asks
    assert masks.causal(q, k).tolist() == [True] * 6 + [False] * 2
    assert masks.sliding_window(2)(q, k).nonzero().flatten().tolist() == [4, 5]
    assert masks.prefix_lm(7)(q, k).tolist() == [True] * 7 + [False]
    rows = torch.tensor([[0, 0, 1], [0, 1, 1]])  # documents packed differently in each row
    assert masks.document(rows)(torch.tensor(1), torch.arange(3), torch.tensor(1)).tolist() == [
        False, True, True
    ]  # fmt: skip


@pytest.mark.parametrize(
    "build, error, match",
    [
        (lambda: masks.sliding_window(0), ValueError, r"window must be at least 1; got 0"),
        (lambda: masks.sliding_window(True), TypeError, r"window must be an int; got bool"),
        (lambda: masks.prefix_lm(-1), ValueError, r"prefix must be non-negative; got -1"),
        (lambda: masks.document([0, 1]), TypeError, r"doc_ids must be an integer torch.Tensor"),
        (
            lambda: masks.document(torch.zeros(2, 2, 2, dtype=torch.long)),
            ValueError,
            r"doc_ids must be \(L\) or \(N, L\); got shape \(2, 2, 2\)",
        ),
        (
            lambda: masks.document(torch.zeros(2, 3, dtype=torch.long))(0, torch.arange(3)),
            TypeError,
            r"b, the batch row, is needed for doc_ids of shape \(N, L\)",
        ),
    ],
)
def test_predicates_refuse_bad_input(build, error, match):
    with pytest.raises(error, match=match):
        build()


# --- hardening: lengths, devices, sizes ----------------------------------------------------

_LENGTHS = [
    (torch.tensor([2, 1], dtype=torch.uint8), TypeError, r"lengths must be an int64 .*uint8"),
    (torch.tensor([2, 1], dtype=torch.int16), TypeError, r"lengths must be an int64 .*int16"),
    (torch.tensor([2, 1], device="meta"), ValueError, r"lengths must hold values; got .* meta"),
    ([2, True], TypeError, r"lengths must hold ints, not bools; got \[2, True\]"),
    ([2, None], TypeError, r"lengths must be a 1-D integer tensor or .*; got \[2, None\]"),
    (["a"], TypeError, r"lengths must be a 1-D integer tensor or .*; got \['a'\]"),
    ([2**70], ValueError, r"lengths must fit in int64"),
    (torch.tensor([1j]), TypeError, r"lengths must hold integers; got torch.complex64"),
]


@pytest.mark.parametrize("lengths, error, match", _LENGTHS)
def test_document_mask_refuses_lengths_it_would_misread(lengths, error, match):
    with pytest.raises(error, match=match):
        document_mask(lengths)


def test_document_mask_accepts_int32_lengths_and_numpy_ints():
    import numpy as np

    expected = document_mask([2, 1])
    assert torch.equal(document_mask(torch.tensor([2, 1], dtype=torch.int32)), expected)
    assert torch.equal(document_mask([np.int64(2), 1]), expected)


_BUILDERS = {
    "causal_mask": lambda d: causal_mask(2, device=d),
    "sliding_window_mask": lambda d: sliding_window_mask(2, 1, device=d),
    "prefix_lm_mask": lambda d: prefix_lm_mask(2, 1, device=d),
    "document_mask": lambda d: document_mask([1, 1], device=d),
}


@pytest.mark.parametrize("build", _BUILDERS.values(), ids=_BUILDERS.keys())
@pytest.mark.parametrize(
    "bad_device, error, match",
    [
        ("bogus", ValueError, r"device must name a device such as 'cpu'; got 'bogus'"),
        (torch.float32, TypeError, r"device must be a torch.device or a str; got torch.float32"),
        (1.5, TypeError, r"device must be a torch.device or a str; got 1.5"),
    ],
    ids=["bogus", "dtype", "float"],
)
def test_mask_builders_refuse_a_bad_device(build, bad_device, error, match):
    # document_mask(device=torch.float32) used to return a float mask: .to() read it as a dtype.
    with pytest.raises(error, match=match):
        build(bad_device)


@pytest.mark.parametrize(
    "build, match",
    [
        (lambda: sliding_window_mask(3, 2**70), r"window must fit in int64 \(below 2\*\*63\)"),
        (lambda: causal_mask(2**70, device="meta"), r"L must fit in int64"),
        (lambda: prefix_lm_mask(2**64, 1, device="meta"), r"L must fit in int64"),
    ],
)
def test_mask_builders_refuse_sizes_beyond_int64(build, match):
    with pytest.raises(ValueError, match=match):
        build()
