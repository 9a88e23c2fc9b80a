r"""The kernel: every path of the package that computes softmax attention calls these functions.

- :func:`scaled_dot_product_attention`, the readable reference that returns the weights. Its
  keys and values may have fewer heads than its queries (``enable_gqa=True``), and it takes an
  additive ``bias`` (ALiBi) beside the mask.
- :func:`attention_block`, the step of every blockwise path: the attention of some queries over
  one block of keys, as the block's output and the log-sum-exp of its scores;
  :func:`merge_blocks` combines two blocks, :func:`attention_block_backward` gives one block's
  share of the gradients. :func:`attention.tiled_attention` (:mod:`attention.tiled`) and ring,
  all-gather and Ulysses attention (:mod:`attention.distributed`) are loops over these three.

One convention on every path. The queries are scaled *before* the product: :math:`q k^\top` can
overflow float16 before a later scale brings it back into range. Masked scores are filled with
the dtype's most negative finite number, never :math:`-\infty`, and a query with no key to
attend to gets output 0, weights 0 and gradients 0, never NaN. The scores are formed in
float32 at least (:func:`accumulation_dtype`), as in PyTorch's math kernel: float16 inputs whose
scaled scores pass 65504 still give a finite output, returned in the inputs' dtype. The blockwise
paths keep their running sums and log-sum-exps in that dtype too, as FlashAttention does: in
float16 a log-sum-exp near 12800 is spaced by 8, and the log of a sum of a few equal terms
would be lost.
"""

import math

import torch
import torch.nn.functional as F
from torch import Tensor

from ._checks import (
    check_bool,
    check_dropout,
    check_floating_dtype,
    check_mask,
    check_positive,
    check_same_kind,
    check_tensor,
)

__all__ = [
    "accumulation_dtype",
    "scaled_dot_product_attention",
    "attention_block",
    "merge_blocks",
    "attention_block_backward",
]


def _check_qkv(query, key, value, scale, enable_gqa=False) -> tuple[torch.Size, float]:
    """Check (*, L, D) query, (*, S, D) key, (*, S, Dv) value; return batch shape and scale."""
    for name, x in (("query", query), ("key", key), ("value", value)):
        check_tensor(x, name, min_ndim=3 if enable_gqa else 2)
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
    shapes = [query.shape[:-2], key.shape[:-2], value.shape[:-2]]
    if enable_gqa:
        H, H_kv = query.shape[-3], key.shape[-3]
        if value.shape[-3] != H_kv or H_kv == 0 or H % H_kv != 0:
            raise ValueError(
                "with enable_gqa=True, key and value must have the same number of heads "
                f"(dim -3), dividing query's; got query {tuple(query.shape)}, key "
                f"{tuple(key.shape)} and value {tuple(value.shape)}"
            )
        shapes = [shape[:-1] for shape in shapes]
    try:
        batch = torch.broadcast_shapes(*shapes)
    except RuntimeError:
        raise ValueError(
            f"the batch dimensions of query {tuple(query.shape)}, key {tuple(key.shape)} and "
            f"value {tuple(value.shape)} do not broadcast"
        ) from None
    if enable_gqa:
        batch = torch.Size((*batch, query.shape[-3]))
    if scale is None:
        scale = 1.0 / math.sqrt(query.shape[-1]) if query.shape[-1] else 1.0
    check_positive(scale, "scale")
    return batch, float(scale)


def accumulation_dtype(dtype: torch.dtype) -> torch.dtype:
    """The dtype the blockwise paths keep their running sums in: float32, or ``dtype`` if wider.

    Args:
        dtype (torch.dtype): the inputs' dtype.

    Returns:
        torch.dtype: ``float32`` for float16 and bfloat16, else ``dtype``.

    Examples::

        >>> accumulation_dtype(torch.float16), accumulation_dtype(torch.float64)
        (torch.float32, torch.float64)
    """
    check_floating_dtype(dtype)
    return torch.promote_types(dtype, torch.float32)


def _scores(query: Tensor, key: Tensor, scale: float, allowed=None, bias=None) -> Tensor:
    """The scores of the queries against the keys: scaled, biased, masked. Formed only here,
    in :func:`accumulation_dtype` (float32 for half-precision inputs, whose largest finite
    number, 65504 in float16, a score can pass; PyTorch's math path does the same)."""
    acc = accumulation_dtype(query.dtype)
    query, key = query.to(acc), key.to(acc)  # no copy unless the inputs are half precision
    scores = (query * scale) @ key.transpose(-2, -1)  # (*, L, D) @ (*, D, S) -> (*, L, S)
    if bias is not None:
        scores = scores + bias  # (*, L, S)
    if allowed is not None:
        # The most negative finite number, not -inf: a row with no allowed key then gives a
        # finite maximum and no NaN; the weights of masked keys are set to 0 afterwards.
        scores = scores.masked_fill(~allowed, torch.finfo(scores.dtype).min)  # (*, L, S)
    return scores


def _heads_in_groups(x: Tensor | None, groups: int) -> Tensor | None:
    """A mask or bias that broadcasts to (*, H, L, S), viewed to broadcast to (*, H_kv, G, L, S)."""
    if x is None or x.dim() < 3:
        return x  # (L, S) broadcasts as it is
    if x.shape[-3] == 1:
        return x.unsqueeze(-3)  # (*, 1, 1, L, S)
    return x.unflatten(-3, (-1, groups))  # (*, H, L, S) -> (*, H_kv, G, L, S)


def scaled_dot_product_attention(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    mask: Tensor | None = None,
    *,
    bias: Tensor | None = None,
    dropout_p: float = 0.0,
    scale: float | None = None,
    enable_gqa: bool = False,
) -> tuple[Tensor, Tensor]:
    r"""Scaled dot-product attention, step by step, returning the attention weights.

    .. math::
        \text{Attention}(Q, K, V) = \text{softmax}\left(\frac{Q K^\top}{\sqrt{D}}
        + \text{bias}\right) V

    Masked scores never reach the softmax. A query row with no key to attend to gets weights 0
    and output 0 (never NaN), with finite gradients. With ``enable_gqa=True`` the keys and
    values may have fewer heads (dimension -3) than the queries: key/value head :math:`j`
    serves query heads :math:`jG, \dots, (j+1)G - 1`, :math:`G = H / H_{kv}`, as in
    :func:`torch.nn.functional.scaled_dot_product_attention`; the keys are never copied, the
    queries are viewed as :math:`(*, H_{kv}, G, L, D)` and the keys broadcast over the groups.

    Args:
        query (Tensor): queries.
        key (Tensor): keys.
        value (Tensor): values.
        mask (Tensor, optional): bool, ``True`` = may attend; broadcasts to :math:`(*, L, S)`.
            Default: ``None``.
        bias (Tensor, optional): added to the scaled scores (ALiBi); broadcasts to
            :math:`(*, L, S)`. Default: ``None``.
        dropout_p (float): probability of zeroing a weight (applied whenever it is positive,
            like :func:`torch.nn.functional.scaled_dot_product_attention`; modules pass 0 in
            eval mode). Default: ``0.0``.
        scale (float, optional): multiplies :math:`QK^\top`. Default: ``None``
            (:math:`1/\sqrt{D}`).
        enable_gqa (bool): share each key/value head among a group of query heads.
            Default: ``False``.

    Shape:
        - query: :math:`(*, L, D)`, or :math:`(*, H, L, D)` with ``enable_gqa``
        - key: :math:`(*, S, D)`, or :math:`(*, H_{kv}, S, D)` with ``enable_gqa``
        - value: :math:`(*, S, D_v)`, or :math:`(*, H_{kv}, S, D_v)` with ``enable_gqa``
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
        >>> q, k = torch.randn(1, 8, 3, 4), torch.randn(1, 2, 3, 4)  # 8 query heads, 2 key heads
        >>> out, _ = scaled_dot_product_attention(q, k, k, causal_mask(3), enable_gqa=True)
        >>> expected = F.scaled_dot_product_attention(q, k, k, is_causal=True, enable_gqa=True)
        >>> torch.allclose(out, expected, atol=1e-6)
        True
    """
    check_bool(enable_gqa, "enable_gqa")
    batch, scale = _check_qkv(query, key, value, scale, enable_gqa)
    check_dropout(dropout_p, "dropout_p")
    L, S = query.shape[-2], key.shape[-2]
    check_mask(mask, (*batch, L, S), query.device)
    if bias is not None:
        check_tensor(bias, "bias", min_ndim=2)
        check_same_kind(bias, "bias", query, "query")
        _check_broadcasts(bias, "bias", (*batch, L, S))

    groups = query.shape[-3] // key.shape[-3] if enable_gqa else 1
    if groups > 1:
        query = query.unflatten(-3, (key.shape[-3], groups))  # (*, H_kv, G, L, D)
        key, value = key.unsqueeze(-3), value.unsqueeze(-3)  # (*, H_kv, 1, S, D)
        mask, bias = _heads_in_groups(mask, groups), _heads_in_groups(bias, groups)
    scores = _scores(query, key, scale, mask, bias)  # (*, L, S), float32 at least
    weights = scores.softmax(dim=-1)  # (*, L, S)
    if mask is not None:
        weights = weights.masked_fill(~mask, 0.0)  # a row with no allowed key: all 0
    if dropout_p > 0.0:
        weights = F.dropout(weights, p=dropout_p)  # (*, L, S)
    # Half-precision inputs: the weights times the values in float32, returned in their dtype.
    output = weights @ value.to(weights.dtype)  # (*, L, S) @ (*, S, Dv) -> (*, L, Dv)
    output, weights = output.to(value.dtype), weights.to(value.dtype)
    if groups > 1:
        output, weights = output.flatten(-4, -3), weights.flatten(-4, -3)  # (*, H, L, ...)
    return output, weights


def _check_broadcasts(x: Tensor, name: str, shape: tuple[int, ...]) -> None:
    try:
        broadcast = torch.broadcast_shapes(x.shape, shape)
    except RuntimeError:
        broadcast = None
    if broadcast != torch.Size(shape):
        raise ValueError(f"{name} of shape {tuple(x.shape)} does not broadcast to {tuple(shape)}")


# ---------------------------------------------------------------------------------------------
# One block of keys: the step of the tiled path and of the distributed strategies


def attention_block(
    query: Tensor, key: Tensor, value: Tensor, *, scale: float, allowed: Tensor | None = None
) -> tuple[Tensor, Tensor]:
    r"""The attention of the queries over one block of keys: its output and log-sum-exp.

    .. math::
        \text{lse}_i = \log \sum_j e^{s_{ij}}, \qquad
        \text{out}_i = \sum_j e^{s_{ij} - \text{lse}_i}\, v_j, \qquad
        s_{ij} = \text{scale} \cdot q_i \cdot k_j

    over the allowed keys :math:`j` of the block. The weights are a softmax (which subtracts each
    row's maximum :math:`m_i` before the exponentials, so they never overflow), and the
    log-sum-exp comes from the largest weight, :math:`e^{m_i - \text{lse}_i}`. A row with no
    allowed key gives output 0 and :math:`\text{lse} = -\infty` (the log of an empty sum),
    which :func:`merge_blocks` treats as "no keys yet". Both come back in
    :func:`accumulation_dtype` (float32 for half-precision inputs), so that merging them keeps
    the log of the sum.

    Args:
        query (Tensor): the queries.
        key (Tensor): the block's keys.
        value (Tensor): the block's values.
        scale (float): multiplies :math:`q \cdot k`.
        allowed (Tensor, optional): bool, ``True`` = may attend. Default: ``None`` (all).

    Shape:
        - query: :math:`(*, R, D)`; key: :math:`(*, C, D)`; value: :math:`(*, C, D_v)`
        - allowed: broadcasts to :math:`(*, R, C)`
        - Output: :math:`(*, R, D_v)` and :math:`(*, R, 1)`

    Returns:
        tuple[Tensor, Tensor]: the block's output and log-sum-exp.

    Examples::

        >>> q, k, v = torch.randn(5, 4), torch.randn(7, 4), torch.randn(7, 3)
        >>> out, lse = attention_block(q, k, v, scale=0.5)
        >>> torch.allclose(lse, (0.5 * q @ k.T).logsumexp(-1, keepdim=True))
        True
    """
    scores = _scores(query, key, scale, allowed)  # (*, R, C), in the accumulation dtype
    acc = scores.dtype
    m = scores.amax(dim=-1, keepdim=True).to(acc)  # each row's largest score  (*, R, 1)
    # The weights in one fused pass over each row, which subtracts the row's maximum first.
    p = torch.softmax(scores, dim=-1, dtype=acc)  # (*, R, C)
    if allowed is not None:
        p = p.masked_fill(~allowed, 0.0)  # a row with no allowed key had 1/C on each  (*, R, C)
    # The largest weight is e^(m - lse): the log-sum-exp without another pass over the tile.
    top = p.amax(dim=-1, keepdim=True)  # (*, R, 1)
    seen = top > 0  # rows with at least one allowed key  (*, R, 1)
    out = (p.to(value.dtype) @ value).to(acc)  # (*, R, C) @ (*, C, Dv) -> (*, R, Dv)
    lse = torch.where(seen, m - torch.log(top), -math.inf)  # (*, R, 1)
    return out, lse


def merge_blocks(
    out: Tensor, lse: Tensor, block_out: Tensor, block_lse: Tensor
) -> tuple[Tensor, Tensor]:
    r"""Combine the attention over two disjoint sets of keys into the attention over both.

    Each side's output is a softmax-weighted average over its keys, and its log-sum-exp the log
    of its softmax's denominator, so the merged denominator is the sum of the two and each side
    keeps its share:

    .. math::
        \text{lse} = \log\left(e^{\text{lse}_a} + e^{\text{lse}_b}\right), \qquad
        \text{out} = e^{\text{lse}_a - \text{lse}}\, \text{out}_a
                   + e^{\text{lse}_b - \text{lse}}\, \text{out}_b

    This is the online softmax :cite:p:`milakov2018,dao2022`: start from ``out = 0``,
    ``lse = -inf`` (no keys yet) and merge one block of keys at a time, and the result is the
    attention over every block, though no step held more than one block's scores.

    Args:
        out (Tensor): the running output.
        lse (Tensor): the running log-sum-exp.
        block_out (Tensor): the block's output.
        block_lse (Tensor): the block's log-sum-exp.

    Shape:
        - out, block_out: :math:`(*, R, D_v)`; lse, block_lse: :math:`(*, R, 1)`
        - Output: the merged ``(out, lse)``, of the same shapes

    Returns:
        tuple[Tensor, Tensor]: the merged output and log-sum-exp.

    Examples::

        >>> q, k, v = torch.randn(5, 4), torch.randn(7, 4), torch.randn(7, 3)
        >>> a = attention_block(q, k[:3], v[:3], scale=0.5)
        >>> b = attention_block(q, k[3:], v[3:], scale=0.5)
        >>> out, lse = merge_blocks(*a, *b)
        >>> torch.allclose(out, (0.5 * q @ k.T).softmax(-1) @ v, atol=1e-6)
        True
    """
    merged = torch.logaddexp(lse, block_lse)  # (*, R, 1)
    shift = torch.where(torch.isneginf(merged), 0.0, merged)  # rows with no key stay 0
    out = torch.exp(lse - shift) * out + torch.exp(block_lse - shift) * block_out  # (*, R, Dv)
    return out, merged


def attention_block_backward(
    grad_out: Tensor,
    query: Tensor,
    key: Tensor,
    value: Tensor,
    lse: Tensor,
    delta: Tensor,
    *,
    scale: float,
    allowed: Tensor | None = None,
) -> tuple[Tensor, Tensor, Tensor]:
    r"""One block's share of the gradients, with its weights recomputed from the log-sum-exp.

    The forward pass kept only the output :math:`O` and the log-sum-exp of each row over all
    the keys; the block's weights come back exactly as :math:`P = e^{S - \text{lse}}`. Then

    .. math::
        dV = P^\top dO, \quad dP = dO\, V^\top, \quad dS = P \odot (dP - \delta), \quad
        dQ = \text{scale} \cdot dS\, K, \quad dK = \text{scale} \cdot dS^\top Q

    with :math:`\delta = \text{rowsum}(dO \odot O)`, which equals :math:`\text{rowsum}(P \odot
    dP)` summed over *all* the blocks, so each block needs only its own keys
    :cite:p:`dao2022`.

    Args:
        grad_out (Tensor): the gradient of the output rows, :math:`dO`.
        query (Tensor): the queries.
        key (Tensor): the block's keys.
        value (Tensor): the block's values.
        lse (Tensor): the rows' log-sum-exp over every key (``-inf`` where they see none), in
            :func:`accumulation_dtype`.
        delta (Tensor): :math:`\text{rowsum}(dO \odot O)`.
        scale (float): the forward's scale.
        allowed (Tensor, optional): the forward's mask of the block. Default: ``None``.

    Shape:
        - grad_out: :math:`(*, R, D_v)`; query: :math:`(*, R, D)`; key: :math:`(*, C, D)`;
          value: :math:`(*, C, D_v)`; lse, delta: :math:`(*, R, 1)`
        - Output: :math:`(*, R, D)`, :math:`(*, C, D)` and :math:`(*, C, D_v)`

    Returns:
        tuple[Tensor, Tensor, Tensor]: the block's shares of :math:`dQ`, :math:`dK`, :math:`dV`.

    Examples::

        >>> q, k, v = (torch.randn(5, 4, requires_grad=True) for _ in range(3))
        >>> out, _ = scaled_dot_product_attention(q, k, v, scale=0.5)
        >>> grad_out = torch.randn(5, 4)
        >>> expected = torch.autograd.grad(out, (q, k, v), grad_out)
        >>> with torch.no_grad():
        ...     _, lse = attention_block(q, k, v, scale=0.5)
        ...     delta = (grad_out * out).sum(-1, keepdim=True)
        ...     grads = attention_block_backward(grad_out, q, k, v, lse, delta, scale=0.5)
        >>> all(torch.allclose(g, e, atol=1e-5) for g, e in zip(grads, expected))
        True
    """
    dtype, acc = query.dtype, lse.dtype  # the products in the inputs' dtype, the rest in acc
    scores = _scores(query, key, scale, allowed)  # (*, R, C), in acc
    # A row that saw no key has lse = -inf; +inf instead makes its weights e^-inf = 0.
    p = torch.exp(scores - lse.masked_fill(torch.isneginf(lse), math.inf))  # (*, R, C)
    if allowed is not None:
        p = p.masked_fill(~allowed, 0.0)  # (*, R, C)
    grad_value = p.to(dtype).transpose(-2, -1) @ grad_out  # (*, C, R) @ (*, R, Dv) -> (*, C, Dv)
    grad_p = grad_out @ value.transpose(-2, -1)  # (*, R, Dv) @ (*, Dv, C) -> (*, R, C)
    grad_scores = (p * (grad_p.to(acc) - delta) * scale).to(dtype)  # (*, R, C)
    grad_query = grad_scores @ key  # (*, R, C) @ (*, C, D) -> (*, R, D)
    grad_key = grad_scores.transpose(-2, -1) @ query  # (*, C, R) @ (*, R, D) -> (*, C, D)
    return grad_query, grad_key, grad_value
