"""Attention as functions: the readable reference path and the memory-efficient tiled path."""

import math

import torch
import torch.nn.functional as F
from torch import Tensor

from ._checks import check_dropout, check_mask, check_tensor

__all__ = ["scaled_dot_product_attention", "tiled_attention"]


def _check_qkv(query, key, value, scale) -> tuple[torch.Size, float]:
    """Check (*, L, D) query, (*, S, D) key, (*, S, Dv) value; return batch shape and scale."""
    for name, x in (("query", query), ("key", key), ("value", value)):
        check_tensor(x, name, min_ndim=2)
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
    elif isinstance(scale, bool) or not isinstance(scale, (int, float)) or scale <= 0:
        raise ValueError(f"scale must be a positive number or None; got {scale!r}")
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
    check_mask(mask, (*batch, L, S))

    scores = query @ key.transpose(-2, -1) * scale  # (*, L, D) @ (*, D, S) -> (*, L, S)
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

    The keys and values are visited ``block_size`` at a time. For each block the scores of all
    queries against that block are computed, and a running maximum ``m``, a running softmax
    denominator ``l`` and a running weighted sum ``acc`` are updated; when the maximum grows,
    what was accumulated so far is rescaled by :math:`e^{m_\text{old} - m_\text{new}}`. At the
    end ``acc / l`` equals :func:`scaled_dot_product_attention`'s output. Peak memory is
    :math:`O(L \cdot \text{block\_size})` instead of :math:`O(L \cdot S)`.

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
    if isinstance(block_size, bool) or not isinstance(block_size, int) or block_size < 1:
        raise ValueError(f"block_size must be a positive int; got {block_size!r}")
    if not isinstance(causal, bool):
        raise TypeError(f"causal must be a bool; got {type(causal).__name__}")
    L, S = query.shape[-2], key.shape[-2]
    lowest = torch.finfo(query.dtype).min

    m = query.new_full((*batch, L, 1), -math.inf)  # running max of the scores  (*, L, 1)
    l = query.new_zeros((*batch, L, 1))  # running softmax denominator  (*, L, 1)  # noqa: E741
    acc = query.new_zeros((*batch, L, value.shape[-1]))  # running weighted sum  (*, L, Dv)
    rows = torch.arange(L, device=query.device)[:, None] + (S - L)  # last allowed key  (L, 1)

    for start in range(0, S, block_size):
        k = key[..., start : start + block_size, :]  # (*, B, D)
        v = value[..., start : start + block_size, :]  # (*, B, Dv)
        s = query @ k.transpose(-2, -1) * scale  # (*, L, D) @ (*, D, B) -> (*, L, B)
        if causal:
            cols = torch.arange(start, start + k.shape[-2], device=query.device)  # (B,)
            allowed = cols <= rows  # (B,) vs (L, 1) -> (L, B)
            s = s.masked_fill(~allowed, lowest)  # (*, L, B)
        m_new = torch.maximum(m, s.amax(dim=-1, keepdim=True))  # (*, L, 1)
        p = torch.exp(s - m_new)  # (*, L, B)
        if causal:
            p = p.masked_fill(~allowed, 0.0)  # (*, L, B)
        alpha = torch.exp(m - m_new)  # rescales what came before  (*, L, 1)
        l = alpha * l + p.sum(dim=-1, keepdim=True)  # (*, L, 1)  # noqa: E741
        acc = alpha * acc + p @ v  # (*, L, B) @ (*, B, Dv) -> (*, L, Dv)
        m = m_new

    # A row that saw no allowed key has l = 0 and acc = 0: divide by 1 there to return 0.
    return acc / l.masked_fill(l == 0, 1.0)  # (*, L, Dv)
