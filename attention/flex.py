"""The package's masks and biases as functions of indices, for FlexAttention.

:func:`torch.nn.attention.flex_attention.flex_attention` takes a mask as a *function*
``mask_mod(b, h, q_idx, kv_idx) -> bool`` (``True`` = may attend, this package's polarity)
and a bias as a function ``score_mod(score, b, h, q_idx, kv_idx) -> score`` applied to each
scaled score before the softmax. Here are the masks of :mod:`attention.masks` and the ALiBi
bias of :func:`attention.alibi_bias` written that way, plus tanh soft-capping. Each mask is the
predicate of :mod:`attention.masks` that the dense mask evaluates (``causal(q, k)``, ...), wrapped
with the ``b`` and ``h`` it does not use and the position of the first query.

Every function is written with broadcasting operations only, so it also runs outside
FlexAttention: called on index grids such as ``q_idx = torch.arange(L)[:, None]`` and
``kv_idx = torch.arange(S)`` it builds the whole ``(L, S)`` mask or bias at once.

This module does not import :mod:`torch.nn.attention.flex_attention` (whose import is slow);
it imports on any machine, and the functions need nothing beyond torch.

Shape:
    The indices ``b``, ``h``, ``q_idx`` and ``kv_idx`` are integer tensors (0-d inside
    FlexAttention, which vmaps the function over :math:`(N, H, L, S)`); ``q_idx`` counts
    queries from 0 and ``kv_idx`` keys from 0.
"""

import torch
from torch import Tensor

from . import masks
from ._checks import check_bool, check_factory, check_float, check_index, check_int_tensor
from .masks import _document_ids, _same_document
from .positions import alibi_penalty, alibi_slopes

__all__ = ["causal", "sliding_window", "document", "prefix_lm", "alibi", "softcap"]


def causal(b: Tensor, h: Tensor, q_idx: Tensor, kv_idx: Tensor) -> Tensor:
    r"""The causal mask as a ``mask_mod``: query ``q_idx`` may attend to keys ``kv_idx <= q_idx``.

    Equal to :func:`attention.causal_mask` when :math:`L = S`; for queries that come after
    cached keys use :func:`sliding_window` with a window of at least :math:`S` and
    ``offset = S - L``.

    Args:
        b (Tensor): batch index (unused).
        h (Tensor): head index (unused).
        q_idx (Tensor): query index.
        kv_idx (Tensor): key index.

    Shape:
        - Output: the broadcast shape of ``q_idx`` and ``kv_idx``, bool.

    Returns:
        Tensor: :func:`attention.masks.causal` of ``q_idx`` and ``kv_idx``: ``q_idx >= kv_idx``.

    Examples::

        >>> from attention.flex import causal
        >>> causal(0, 0, torch.arange(3)[:, None], torch.arange(3)).int()
        tensor([[1, 0, 0],
                [1, 1, 0],
                [1, 1, 1]], dtype=torch.int32)
    """
    return masks.causal(q_idx, kv_idx)


def sliding_window(window: int, *, offset: int = 0):
    r"""A causal sliding-window ``mask_mod``: each query sees its last ``window`` keys.

    Query ``q_idx`` sits at position ``q_idx + offset`` and may attend to key ``kv_idx`` when
    :math:`0 \le (q_\text{idx} + \text{offset}) - kv_\text{idx} < \text{window}`: the
    predicate :func:`attention.masks.sliding_window`, which :func:`attention.sliding_window_mask`
    evaluates with ``offset = S - L``.

    Args:
        window (int): how many keys each query sees, its own included; at least 1.
        offset (int): position of the first query. Default: ``0``.

    Shape:
        - Output: a ``mask_mod(b, h, q_idx, kv_idx)`` returning the broadcast shape of
          ``q_idx`` and ``kv_idx``, bool.

    Returns:
        Callable: the ``mask_mod``.

    Examples::

        >>> from attention.flex import sliding_window
        >>> mask_mod = sliding_window(2)
        >>> mask_mod(0, 0, torch.arange(4)[:, None], torch.arange(4)).int()
        tensor([[1, 0, 0, 0],
                [1, 1, 0, 0],
                [0, 1, 1, 0],
                [0, 0, 1, 1]], dtype=torch.int32)
    """
    allowed = masks.sliding_window(window)
    check_index(offset, "offset")

    def sliding_window_mask_mod(b, h, q_idx, kv_idx):
        return allowed(q_idx + offset, kv_idx)

    return sliding_window_mask_mod


def document(lengths=None, *, doc_ids=None, causal: bool = False, device=None):
    r"""A ``mask_mod`` for packed documents: tokens attend only within their own document.

    Give either the documents' ``lengths`` (packed one after another, as
    :func:`attention.document_mask`) or each token's document id ``doc_ids``, one row per
    batch element if documents are packed differently in each row. Query ``q_idx`` may attend
    to key ``kv_idx`` when ``doc_ids[q_idx] == doc_ids[kv_idx]`` (and ``kv_idx <= q_idx`` with
    ``causal=True``): the predicate :func:`attention.masks.document`.

    A ``mask_mod`` cannot know the shape it will be used on when it is built: it covers the
    :math:`L` tokens of ``doc_ids`` (``sum(lengths)``), which it keeps as its attribute
    ``length``. Used on more queries or keys (FlexAttention with :math:`L, S >` ``length``), it
    indexes past the table and torch raises an ``IndexError``; check ``mask_mod.length`` against
    the sequence first.

    Args:
        lengths (Tensor or sequence of int, optional): the length of each document, in order.
            Default: ``None``.
        doc_ids (Tensor, optional): the document of each token, :math:`(L)` or :math:`(N, L)`
            integers. Default: ``None``.
        causal (bool): also forbid later tokens of the same document. Default: ``False``.
        device (torch.device, optional): where the ``mask_mod`` will run (the device of the
            queries). Default: ``None`` (where ``lengths`` or ``doc_ids`` are; CPU for a list).

    Shape:
        - lengths: one entry per document; doc_ids: :math:`(L)` or :math:`(N, L)`
        - Output: a ``mask_mod(b, h, q_idx, kv_idx)`` returning a bool tensor.

    Returns:
        Callable: the ``mask_mod``, with the number of tokens it covers as ``length``.

    Examples::

        >>> from attention.flex import document
        >>> mask_mod = document([2, 1])
        >>> mask_mod(0, 0, torch.arange(3)[:, None], torch.arange(3)).int()
        tensor([[1, 1, 0],
                [1, 1, 0],
                [0, 0, 1]], dtype=torch.int32)
        >>> mask_mod.length  # use it on at most 3 queries and 3 keys
        3
    """
    if (lengths is None) == (doc_ids is None):
        raise ValueError("give exactly one of lengths and doc_ids")
    check_bool(causal, "causal")
    check_factory(device, None)
    if lengths is not None:
        doc_ids = _document_ids(lengths)  # (L,)
    check_int_tensor(doc_ids, "doc_ids", lists=False, ndims=(1, 2))  # as masks.document does
    if device is not None:
        doc_ids = doc_ids.to(device)

    def document_mask_mod(b, h, q_idx, kv_idx):  # the predicate masks.document(doc_ids)
        same = _same_document(doc_ids, q_idx, kv_idx, b)
        return same & masks.causal(q_idx, kv_idx) if causal else same

    document_mask_mod.length = doc_ids.shape[-1]
    return document_mask_mod


def prefix_lm(prefix: int):
    r"""A prefix-LM ``mask_mod``: the first ``prefix`` keys are seen by every query, the rest
    causally, as :func:`attention.prefix_lm_mask`.

    Query ``q_idx`` may attend to key ``kv_idx`` when ``kv_idx <= q_idx`` or
    ``kv_idx < prefix``: the predicate :func:`attention.masks.prefix_lm`.

    Args:
        prefix (int): number of leading tokens that attend bidirectionally.

    Shape:
        - Output: a ``mask_mod(b, h, q_idx, kv_idx)`` returning the broadcast shape of
          ``q_idx`` and ``kv_idx``, bool.

    Returns:
        Callable: the ``mask_mod``.

    Examples::

        >>> from attention.flex import prefix_lm
        >>> prefix_lm(2)(0, 0, torch.arange(3)[:, None], torch.arange(3)).int()
        tensor([[1, 1, 0],
                [1, 1, 0],
                [1, 1, 1]], dtype=torch.int32)
    """
    allowed = masks.prefix_lm(prefix)

    def prefix_lm_mask_mod(b, h, q_idx, kv_idx):
        return allowed(q_idx, kv_idx)

    return prefix_lm_mask_mod


def alibi(num_heads: int, *, offset: int = 0):
    r"""ALiBi as a ``score_mod``: subtract :math:`m_h\,\lvert q - k\rvert` from each score.

    .. math::
        \text{score}_{h, i, j} \leftarrow \text{score}_{h, i, j}
        - m_h \, \lvert (i + \text{offset}) - j \rvert

    with the slopes :math:`m_h` of :func:`attention.positions.alibi_slopes`: the same numbers as
    adding :func:`attention.alibi_bias` (computed in float64, cast to the score's dtype), with
    ``offset = S - L``. Combine it with a causal ``mask_mod``. The slopes are a table of
    ``num_heads``: used with more heads (FlexAttention with :math:`H >` ``num_heads``), the
    ``score_mod`` indexes past it and torch raises an ``IndexError``.

    Args:
        num_heads (int): the number of heads :math:`H`.
        offset (int): position of the first query. Default: ``0``.

    Shape:
        - Output: a ``score_mod(score, b, h, q_idx, kv_idx)`` returning ``score``'s shape.

    Returns:
        Callable: the ``score_mod``.

    Examples::

        >>> from attention.flex import alibi
        >>> score_mod = alibi(2)
        >>> h = torch.arange(2)[:, None, None]
        >>> score_mod(torch.zeros(2, 1, 3), 0, h, torch.tensor([[2]]), torch.arange(3))
        tensor([[[-0.1250, -0.0625,  0.0000]],
        <BLANKLINE>
                [[-0.0078, -0.0039,  0.0000]]])
    """
    check_index(num_heads, "num_heads", minimum=1)
    check_index(offset, "offset")
    slopes = alibi_slopes(num_heads)  # (H,) float64

    def alibi_score_mod(score, b, h, q_idx, kv_idx):
        bias = alibi_penalty(slopes.to(score.device)[h], q_idx + offset, kv_idx)  # float64
        return score + bias.to(score.dtype)

    return alibi_score_mod


def softcap(cap: float):
    r"""Tanh soft-capping as a ``score_mod``: squash every score into :math:`(-c, c)`.

    .. math::
        \text{score} \leftarrow c \tanh(\text{score} / c)

    Scores much smaller than :math:`c` pass almost unchanged; large ones saturate, so no score
    grows without bound (Gemma 2 caps its attention scores at :math:`c = 50`). Two capped scores
    still differ by up to :math:`2c`, so one key can still take nearly all the weight.

    Args:
        cap (float): the cap :math:`c > 0`, finite.

    Shape:
        - Output: a ``score_mod(score, b, h, q_idx, kv_idx)`` returning ``score``'s shape.

    Returns:
        Callable: the ``score_mod``.

    Examples::

        >>> from attention.flex import softcap
        >>> softcap(5.0)(torch.tensor([0.5, 5.0, 500.0]), 0, 0, 0, 0)
        tensor([0.4983, 3.8080, 5.0000])
    """
    check_float(cap, "cap", positive=True)

    def softcap_score_mod(score, b, h, q_idx, kv_idx):
        return cap * torch.tanh(score / cap)

    return softcap_score_mod
