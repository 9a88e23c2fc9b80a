r"""Attention over tiles of queries and keys, with its own backward pass.

:func:`tiled_attention` never builds the :math:`L \times S` scores, neither in the forward nor in
the backward pass: the forward merges one tile of keys at a time into the running output and
log-sum-exp of each query (:func:`attention.functional.attention_block`,
:func:`attention.functional.merge_blocks`), and the backward recomputes each tile's weights from
the saved log-sum-exp (:func:`attention.functional.attention_block_backward`), as FlashAttention
does :cite:p:`dao2022`. :func:`blockwise_attention` is the same loop over any list of
:func:`tiles`; the distributed strategies (:mod:`attention.distributed`) use it on positions
spread over processes.
"""

import math

import torch
from torch import Tensor

from ._checks import check_bool, check_int, check_int_tensor
from .functional import (
    _check_qkv,
    accumulation_dtype,
    attention_block,
    attention_block_backward,
    merge_blocks,
)

__all__ = ["tiled_attention", "blockwise_attention", "tiles"]


def tiles(L: int, S: int, q_block: int, k_block: int, *, q_pos=None, k_pos=None) -> list:
    """The tiles of (query rows, key columns) that hold a pair that may attend.

    Without positions every tile is returned, with ``allowed = None``. With the positions of
    the queries and keys a query may see the keys at or before its own position; a tile in
    which no query sees any key is skipped, and a tile is trimmed to its rows that see a key
    and its columns that some query sees.

    Args:
        L (int): number of queries.
        S (int): number of keys.
        q_block (int): queries per tile.
        k_block (int): keys per tile.
        q_pos (Tensor, optional): the queries' positions, integers on the CPU.
            Default: ``None`` (no mask).
        k_pos (Tensor, optional): the keys' positions. Default: ``None``.

    Shape:
        - q_pos: :math:`(L)`; k_pos: :math:`(S)`
        - Output: each tile's mask is :math:`(R, C)` for its :math:`R` rows and :math:`C`
          columns

    Returns:
        list[tuple[slice, slice, Tensor | None]]: query rows, key columns and the tile's bool
        mask (``None`` when every pair may attend).

    Examples::

        >>> [(r.start, r.stop, c.start, c.stop) for r, c, _ in
        ...  tiles(4, 4, 2, 2, q_pos=torch.arange(4), k_pos=torch.arange(4))]
        [(0, 2, 0, 2), (2, 4, 0, 2), (2, 4, 2, 4)]
    """
    for name, n in (("L", L), ("S", S), ("q_block", q_block), ("k_block", k_block)):
        check_int(n, name, minimum=0 if name in ("L", "S") else 1)
    if (q_pos is None) != (k_pos is None):
        raise ValueError("q_pos and k_pos must be given together (positions) or both be None")
    if q_pos is not None:
        for name, pos, n in (("q_pos", q_pos, L), ("k_pos", k_pos, S)):
            if len(check_int_tensor(pos, name, lists=False, ndims=(1,))) != n:
                raise ValueError(f"{name} must hold one position per row ({n}); got {len(pos)}")
    found = []
    for q0 in range(0, L, q_block):
        for k0 in range(0, S, k_block):
            rows, cols = slice(q0, min(q0 + q_block, L)), slice(k0, min(k0 + k_block, S))
            if q_pos is None:
                found.append((rows, cols, None))
                continue
            allowed = k_pos[cols] <= q_pos[rows, None]  # (R, 1) vs (C,) -> (R, C)
            seeing, seen = allowed.any(dim=1).nonzero(), allowed.any(dim=0).nonzero()
            if len(seeing) == 0:
                continue
            r0, r1, c0, c1 = int(seeing[0]), int(seeing[-1]) + 1, int(seen[0]), int(seen[-1]) + 1
            allowed = allowed[r0:r1, c0:c1]  # (R', C')
            rows, cols = slice(q0 + r0, q0 + r1), slice(k0 + c0, k0 + c1)
            found.append((rows, cols, None if bool(allowed.all()) else allowed))
    return found


def _blockwise_forward(query, key, value, scale, tile_list, batch):
    """Merge the blocks of every tile; return the output and log-sum-exp of every row."""
    L, Dv = query.shape[-2], value.shape[-1]
    acc = accumulation_dtype(query.dtype)  # running sums in float32 at least
    out = query.new_zeros((*batch, L, Dv), dtype=acc)  # (*, L, Dv)
    lse = query.new_full((*batch, L, 1), -math.inf, dtype=acc)  # no keys yet  (*, L, 1)
    for rows, cols, allowed in tile_list:
        if allowed is not None:
            allowed = allowed.to(query.device)
        block = attention_block(
            query[..., rows, :], key[..., cols, :], value[..., cols, :], scale=scale,
            allowed=allowed,
        )  # fmt: skip
        out[..., rows, :], lse[..., rows, :] = merge_blocks(
            out[..., rows, :], lse[..., rows, :], *block
        )  # (*, R, Dv), (*, R, 1)
    return out.to(query.dtype), lse


class _BlockwiseAttention(torch.autograd.Function):
    """Attention over tiles: the forward keeps the output and log-sum-exp of each row, the
    backward recomputes each tile's weights from them (FlashAttention's backward)."""

    @staticmethod
    def forward(ctx, query, key, value, scale, tile_list):
        batch = torch.broadcast_shapes(query.shape[:-2], key.shape[:-2], value.shape[:-2])
        out, lse = _blockwise_forward(query, key, value, scale, tile_list, batch)
        ctx.save_for_backward(query, key, value, out, lse)
        ctx.scale, ctx.tile_list = scale, tile_list
        return out

    @staticmethod
    def backward(ctx, grad_out):
        if torch.is_grad_enabled():  # create_graph=True: a graph of the gradient is asked for
            raise RuntimeError(
                "tiled_attention has first derivatives only: its backward pass recomputes the "
                "weights and is not itself differentiable, so create_graph=True (double "
                "backward, gradgradcheck, a gradient penalty) is not supported; use "
                "attention.scaled_dot_product_attention there"
            )
        query, key, value, out, lse = ctx.saved_tensors
        delta = (grad_out.to(lse.dtype) * out).sum(dim=-1, keepdim=True)  # rowsum(dO O)  (*, L, 1)
        batch = out.shape[:-2]
        grad_q = query.new_zeros((*batch, *query.shape[-2:]))  # (*, L, D)
        grad_k = key.new_zeros((*batch, *key.shape[-2:]))  # (*, S, D)
        grad_v = value.new_zeros((*batch, *value.shape[-2:]))  # (*, S, Dv)
        for rows, cols, allowed in ctx.tile_list:
            if allowed is not None:
                allowed = allowed.to(query.device)
            dq, dk, dv = attention_block_backward(
                grad_out[..., rows, :], query[..., rows, :], key[..., cols, :],
                value[..., cols, :], lse[..., rows, :], delta[..., rows, :], scale=ctx.scale,
                allowed=allowed,
            )  # fmt: skip
            grad_q[..., rows, :] += dq
            grad_k[..., cols, :] += dk
            grad_v[..., cols, :] += dv
        # Inputs that were broadcast over the batch get the sum of their gradients.
        grads = (g.sum_to_size(x.shape) for g, x in ((grad_q, query), (grad_k, key),
                                                     (grad_v, value)))  # fmt: skip
        return *grads, None, None


def blockwise_attention(
    query: Tensor, key: Tensor, value: Tensor, tile_list: list, *, scale: float
) -> Tensor:
    r"""Attention computed tile by tile (:func:`tiles`), with the backward of FlashAttention.

    The forward pass merges the blocks of keys of each tile
    (:func:`attention.functional.merge_blocks`) and keeps only the output and the log-sum-exp of
    each row; the backward pass walks the same tiles and recomputes each one's weights
    (:func:`attention.functional.attention_block_backward`). Memory beyond the inputs and the
    output is one tile of scores, in both passes. No double backward.

    Args:
        query (Tensor): queries.
        key (Tensor): keys.
        value (Tensor): values.
        tile_list (list): the tiles to compute, from :func:`tiles`.
        scale (float): multiplies :math:`q \cdot k`.

    Shape:
        - query: :math:`(*, L, D)`; key: :math:`(*, S, D)`; value: :math:`(*, S, D_v)`
        - Output: :math:`(*, L, D_v)`

    Returns:
        Tensor: the attention output; rows that see no key are 0.

    Examples::

        >>> q, k, v = torch.randn(6, 4), torch.randn(6, 4), torch.randn(6, 2)
        >>> positions = {"q_pos": torch.arange(6), "k_pos": torch.arange(6)}
        >>> out = blockwise_attention(q, k, v, tiles(6, 6, 2, 2, **positions), scale=0.5)
        >>> expected = F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=0.5)
        >>> torch.allclose(out, expected, atol=1e-6)
        True
    """
    batch, scale = _check_qkv(query, key, value, scale)
    if not isinstance(tile_list, list) or not all(
        isinstance(t, tuple) and len(t) == 3 and all(isinstance(s, slice) for s in t[:2])
        for t in tile_list
    ):
        raise TypeError("tile_list must be a list of (rows, columns, mask) tiles from tiles(); "
                        f"got {tile_list!r:.60}")  # fmt: skip
    return _BlockwiseAttention.apply(query, key, value, scale, tile_list)


def tiled_attention(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    *,
    causal: bool = False,
    scale: float | None = None,
    block_size: int = 512,
) -> Tensor:
    r"""Attention by online softmax over tiles of queries and keys: the (L, S) matrix is never
    built, neither in the forward nor in the backward pass.

    The keys and values are visited ``block_size`` at a time, and the queries ``2**16 //
    block_size`` rows at a time, so that a tile of scores (64K numbers per head, 256 KiB in
    float32) and its temporaries stay in the processor's caches. Each tile's output and
    log-sum-exp (:func:`attention.functional.attention_block`) are merged into the running ones
    (:func:`attention.functional.merge_blocks`); at the end the output equals
    :func:`attention.scaled_dot_product_attention`'s. With ``causal=True`` the tiles above the
    diagonal are skipped.

    It trains in :math:`O(L)` memory too: its own backward pass (FlashAttention's,
    :cite:p:`dao2022`) keeps only the output and the log-sum-exp of each row, and recomputes
    each tile's weights from them, instead of the :math:`L \times S` weights that autograd
    would keep. It has first derivatives only: asking for the graph of its gradient
    (``create_graph=True``, for ``gradgradcheck`` or a gradient penalty) raises a
    ``RuntimeError``; use :func:`attention.scaled_dot_product_attention` there.

    Args:
        query (Tensor): queries.
        key (Tensor): keys.
        value (Tensor): values.
        causal (bool): query ``i`` attends only to keys ``j <= i + (S - L)`` (bottom-right
            aligned, as :func:`attention.causal_mask`); each tile's mask is made on the fly.
            Default: ``False``.
        scale (float, optional): multiplies :math:`QK^\top`. Default: ``None``
            (:math:`1/\sqrt{D}`).
        block_size (int): keys per tile. Default: ``512``.

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
    _, scale = _check_qkv(query, key, value, scale)
    check_int(block_size, "block_size")
    check_bool(causal, "causal")
    L, S = query.shape[-2], key.shape[-2]
    if L == 0 or S == 0:
        # Nothing to tile. The empty product is 0 and keeps the graph, so backward gives the
        # reference path's zero gradients.
        return (query @ key.transpose(-2, -1)) @ value  # (*, L, S) @ (*, S, Dv) -> (*, L, Dv)
    positions = {}
    if causal:  # query i sits at position i + S - L, key j at j
        positions = {"q_pos": torch.arange(S - L, S), "k_pos": torch.arange(S)}
    # 128 rows by 512 keys by default: with 8 heads, tiles of 256 rows made a training step
    # slower and its peak memory larger (benchmarks/README.md, "tiled_attention").
    tile_list = tiles(L, S, max(1, 2**16 // block_size), block_size, **positions)
    return blockwise_attention(query, key, value, tile_list, scale=scale)
