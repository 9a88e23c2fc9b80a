"""Attention as functions: the readable reference path and the memory-efficient tiled path."""

import math

import torch
import torch.nn.functional as F
from torch import Tensor

from ._checks import (
    check_bool,
    check_dropout,
    check_int,
    check_mask,
    check_positive,
    check_same_kind,
    check_tensor,
)

__all__ = ["scaled_dot_product_attention", "tiled_attention", "online_softmax_merge"]


def _check_qkv(query, key, value, scale) -> tuple[torch.Size, float]:
    """Check (*, L, D) query, (*, S, D) key, (*, S, Dv) value; return batch shape and scale."""
    for name, x in (("query", query), ("key", key), ("value", value)):
        check_tensor(x, name, min_ndim=2)
    for name, x in (("key", key), ("value", value)):
        check_same_kind(x, name, query, "query")
    if key.shape[-1] != query.shape[-1]:
        raise ValueError(
            f"query and key must have the same head dimension D; got query {tuple(query.shape)} "
            f"and key {tuple(key.shape)}"
        )
    if key.shape[-2] != value.shape[-2]:
        raise ValueError(
            f"key and value must have the same length S; got key {tuple(key.shape)} "
            f"and value {tuple(value.shape)}"
        )
    try:
        batch = torch.broadcast_shapes(query.shape[:-2], key.shape[:-2], value.shape[:-2])
    except RuntimeError:
        raise ValueError(
            f"the batch dimensions of query {tuple(query.shape)}, key {tuple(key.shape)} and "
            f"value {tuple(value.shape)} do not broadcast"
        ) from None
    if scale is None:
        scale = 1.0 / math.sqrt(query.shape[-1]) if query.shape[-1] else 1.0
    check_positive(scale, "scale")
    return batch, float(scale)


def scaled_dot_product_attention(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    mask: Tensor | None = None,
    *,
    dropout_p: float = 0.0,
    scale: float | None = None,
) -> tuple[Tensor, Tensor]:
    r"""Scaled dot-product attention, step by step, returning the attention weights.

    .. math::
        \text{Attention}(Q, K, V) = \text{softmax}\left(\frac{Q K^\top}{\sqrt{D}}\right) V

    Masked scores never reach the softmax. A query row with no key to attend to gets weights 0
    and output 0 (never NaN), with finite gradients.

    Args:
        query (Tensor): queries.
        key (Tensor): keys.
        value (Tensor): values.
        mask (Tensor, optional): bool, ``True`` = may attend; broadcasts to :math:`(*, L, S)`.
            Default: ``None``.
        dropout_p (float): probability of zeroing a weight (applied whenever it is positive,
            like :func:`torch.nn.functional.scaled_dot_product_attention`; modules pass 0 in
            eval mode). Default: ``0.0``.
        scale (float, optional): multiplies :math:`QK^\top`. Default: ``None``
            (:math:`1/\sqrt{D}`).

    Shape:
        - query: :math:`(*, L, D)`
        - key: :math:`(*, S, D)`
        - value: :math:`(*, S, D_v)`
        - Output: :math:`(*, L, D_v)` and weights :math:`(*, L, S)`

    Returns:
        tuple[Tensor, Tensor]: the output and the attention weights (after dropout).

    Examples::

        >>> q, k, v = torch.randn(2, 4, 8), torch.randn(2, 6, 8), torch.randn(2, 6, 3)
        >>> out, weights = scaled_dot_product_attention(q, k, v)
        >>> out.shape, weights.shape
        (torch.Size([2, 4, 3]), torch.Size([2, 4, 6]))
        >>> torch.allclose(weights.sum(-1), torch.ones(2, 4))
        True
    """
    batch, scale = _check_qkv(query, key, value, scale)
    check_dropout(dropout_p, "dropout_p")
    L, S = query.shape[-2], key.shape[-2]
    check_mask(mask, (*batch, L, S), query.device)

    # Scale the queries, not the product: q @ k^T can overflow in float16 before the scale
    # brings it back into range (torch's math path and tiled_attention do the same).
    scores = (query * scale) @ key.transpose(-2, -1)  # (*, L, D) @ (*, D, S) -> (*, L, S)
    if mask is not None:
        # The most negative finite number, not -inf: a row with no allowed key then becomes
        # uniform instead of NaN, and the zeroing below turns it into weights 0.
        scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)  # (*, L, S)
    weights = scores.softmax(dim=-1)  # (*, L, S)
    if mask is not None:
        weights = weights.masked_fill(~mask, 0.0)  # (*, L, S)
    if dropout_p > 0.0:
        weights = F.dropout(weights, p=dropout_p)  # (*, L, S)
    output = weights @ value  # (*, L, S) @ (*, S, Dv) -> (*, L, Dv)
    return output, weights


def tiled_attention(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    *,
    causal: bool = False,
    scale: float | None = None,
    block_size: int = 512,
) -> Tensor:
    r"""Attention by online softmax over blocks of keys: the (L, S) matrix is never built.

    The keys and values are visited ``block_size`` at a time. For each block the scores of the
    queries against that block are computed, and a running maximum ``m``, a running softmax
    denominator ``l`` and a running weighted sum ``acc`` are updated; when the maximum grows,
    what was accumulated so far is rescaled by :math:`e^{m_\text{old} - m_\text{new}}`. At the
    end ``acc / l`` equals :func:`scaled_dot_product_attention`'s output. The queries go
    ``2**17 // block_size`` rows at a time, so that a tile of scores (128K numbers per head)
    stays in the processor's caches; with ``causal=True`` the blocks above the diagonal are
    skipped. Peak memory beyond the output is one tile instead of the :math:`L \times S` matrix.

    Args:
        query (Tensor): queries.
        key (Tensor): keys.
        value (Tensor): values.
        causal (bool): query ``i`` attends only to keys ``j <= i + (S - L)`` (bottom-right
            aligned, as :func:`attention.causal_mask`); each block's mask is made on the fly.
            Default: ``False``.
        scale (float, optional): multiplies :math:`QK^\top`. Default: ``None``
            (:math:`1/\sqrt{D}`).
        block_size (int): keys per block. Default: ``512``.

    Shape:
        - query: :math:`(*, L, D)`
        - key: :math:`(*, S, D)`
        - value: :math:`(*, S, D_v)`
        - Output: :math:`(*, L, D_v)`

    Returns:
        Tensor: the attention output; rows with no key to attend to are 0.

    Examples::

        >>> q, k, v = torch.randn(3, 100, 16), torch.randn(3, 70, 16), torch.randn(3, 70, 16)
        >>> out = tiled_attention(q, k, v, block_size=32)
        >>> torch.allclose(out, scaled_dot_product_attention(q, k, v)[0], atol=1e-6)
        True
    """
    batch, scale = _check_qkv(query, key, value, scale)
    check_int(block_size, "block_size")
    check_bool(causal, "causal")
    L, S = query.shape[-2], key.shape[-2]
    if L == 0 or S == 0:
        # Nothing to tile. The empty product is 0 and keeps the graph, so backward gives the
        # reference path's zero gradients.
        return (query @ key.transpose(-2, -1)) @ value  # (*, L, S) @ (*, S, Dv) -> (*, L, Dv)
    lowest = torch.finfo(query.dtype).min
    out = query.new_empty((*batch, L, value.shape[-1]))  # (*, L, Dv)
    # Query rows are independent of each other: take R of them at a time, so that each tile of
    # scores (R rows by block_size keys, 128K numbers per head) stays in the processor's caches.
    R = max(1, 2**17 // block_size)

    for q_start in range(0, L, R):
        q = query[..., q_start : q_start + R, :] * scale  # (*, R, D)
        rows = q.shape[-2]
        last = torch.arange(q_start, q_start + rows, device=q.device)[:, None] + (S - L)  # (R, 1)
        m = q.new_full((*batch, rows, 1), -math.inf)  # running max of the scores  (*, R, 1)
        l = q.new_zeros((*batch, rows, 1))  # running softmax denominator  (*, R, 1)  # noqa: E741
        acc = q.new_zeros((*batch, rows, value.shape[-1]))  # running weighted sum  (*, R, Dv)
        # Causal: keys after the last row's last allowed key are masked for every row here.
        stop = min(S, q_start + rows + S - L) if causal else S

        for start in range(0, stop, block_size):
            k = key[..., start : start + block_size, :]  # (*, B, D)
            v = value[..., start : start + block_size, :]  # (*, B, Dv)
            s = q @ k.transpose(-2, -1)  # (*, R, D) @ (*, D, B) -> (*, R, B)
            # Only a block that crosses the diagonal holds masked scores.
            crosses = causal and start + k.shape[-2] - 1 > q_start + S - L
            if crosses:
                cols = torch.arange(start, start + k.shape[-2], device=q.device)  # (B,)
                allowed = cols <= last  # (B,) vs (R, 1) -> (R, B)
                s.masked_fill_(~allowed, lowest)  # (*, R, B)
            # The maximum only keeps exp() in range; the result does not depend on it, so no
            # gradient flows through it (and s can then be overwritten in place).
            m_block = s.detach().amax(dim=-1, keepdim=True)  # (*, R, 1)
            p = s.sub_(m_block).exp_()  # (*, R, B)
            if crosses:
                p = p.masked_fill(~allowed, 0.0)  # (*, R, B)
            l_block = p.sum(dim=-1, keepdim=True)  # (*, R, 1)
            acc_block = p @ v  # (*, R, B) @ (*, B, Dv) -> (*, R, Dv)
            m, l, acc = online_softmax_merge(m, l, acc, m_block, l_block, acc_block)  # noqa: E741

        # A row that saw no allowed key has l = 0 and acc = 0: divide by 1 there to return 0.
        out[..., q_start : q_start + rows, :] = acc / l.masked_fill(l == 0, 1.0)  # (*, R, Dv)
    return out  # (*, L, Dv)


def online_softmax_merge(
    m: Tensor,
    l: Tensor,  # noqa: E741
    acc: Tensor,
    block_m: Tensor,
    block_l: Tensor,
    block_acc: Tensor,
) -> tuple[Tensor, Tensor, Tensor]:
    r"""Merge the partial softmax sums of two disjoint sets of keys: one online-softmax step.

    Each side holds, per query row, a maximum :math:`m` of its scores, the sum
    :math:`l = \sum_j e^{s_j - m}` and the weighted sum :math:`acc = \sum_j e^{s_j - m} v_j`
    over its keys. Both are rescaled to the larger maximum and added:

    .. math::
        m' = \max(m, m_b), \quad l' = e^{m - m'} l + e^{m_b - m'} l_b, \quad
        acc' = e^{m - m'} acc + e^{m_b - m'} acc_b

    so that :math:`acc' / l'` is attention over both sets of keys. :func:`tiled_attention` merges
    one block of keys at a time into its running sums; ring attention
    (:mod:`attention.distributed`) merges the blocks that arrive from other processes. Start from
    :math:`m = -\infty`, :math:`l = 0`, :math:`acc = 0` (nothing seen); a block's maximum must be
    finite (mask scores with the most negative finite number, not :math:`-\infty`).

    Args:
        m (Tensor): running maximum of the scores.
        l (Tensor): running sum of :math:`e^{s - m}`.
        acc (Tensor): running sum of :math:`e^{s - m} v`.
        block_m (Tensor): the block's maximum.
        block_l (Tensor): the block's sum of :math:`e^{s - m_b}`.
        block_acc (Tensor): the block's sum of :math:`e^{s - m_b} v`.

    Shape:
        - m, l, block_m, block_l: :math:`(*, L, 1)`
        - acc, block_acc: :math:`(*, L, D_v)`
        - Output: the merged ``(m, l, acc)``, of the same shapes.

    Returns:
        tuple[Tensor, Tensor, Tensor]: the merged maximum, sum and weighted sum.

    Examples::

        >>> s, v = torch.randn(1, 6), torch.randn(6, 2)
        >>> def partial(s, v):
        ...     m = s.amax(-1, keepdim=True)
        ...     return m, (s - m).exp().sum(-1, keepdim=True), (s - m).exp() @ v
        >>> m, l, acc = online_softmax_merge(*partial(s[:, :4], v[:4]), *partial(s[:, 4:], v[4:]))
        >>> torch.allclose(acc / l, s.softmax(-1) @ v)
        True
    """
    m_new = torch.maximum(m, block_m)  # (*, L, 1)
    alpha = torch.exp(m - m_new)  # rescales the running sums  (*, L, 1)
    beta = torch.exp(block_m - m_new)  # rescales the block's sums  (*, L, 1)
    return m_new, alpha * l + beta * block_l, alpha * acc + beta * block_acc
