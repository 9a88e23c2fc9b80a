r"""All-gather attention: every rank gathers the keys and values of the whole sequence.

The simplest strategy: one collective per tensor, then the attention of this rank's queries over
every key, computed tile by tile (:func:`attention.tiled.blockwise_attention`, FlashAttention's
forward and backward), one rank block of keys per tile. Its backward pass is a reduce-scatter of
the gradients of the gathered keys and values. This is how Llama 3 trains on long sequences
(Llama Team, 2024); the price is the whole sequence's keys and values on every rank.
"""

from __future__ import annotations

import torch
import torch.distributed as dist
from torch import Tensor

from ..tiled import blockwise_attention
from .cost import count_flops, count_sent
from .layout import all_to_all, check_shards, empty_output, rank_tiles

__all__ = ["all_gather_attention"]


class _AllGather(torch.autograd.Function):
    """All-gather along the sequence (dimension -2); backward: reduce-scatter of the gradient."""

    @staticmethod
    def forward(ctx, x, group, world_size):
        ctx.group, ctx.world_size = group, world_size
        x = x.contiguous()
        parts = [torch.empty_like(x) for _ in range(world_size)]
        dist.all_gather(parts, x, group=group)
        count_sent("all_gather", x, world_size)
        return torch.cat(parts, dim=-2)  # (N, H, L, D), the ranks' shards in rank order

    @staticmethod
    def backward(ctx, grad):
        # Every rank's gradient has a share for each rank's shard; send each share to its
        # owner (all-to-all) and add up the shares received: a reduce-scatter.
        parts = torch.stack(grad.chunk(ctx.world_size, dim=-2))  # (P, N, H, L/P, D)
        received = all_to_all(parts, ctx.group, ctx.world_size)  # (P, N, H, L/P, D)
        return received.sum(dim=0), None, None


def all_gather_attention(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    *,
    causal: bool = False,
    zigzag: bool = False,
    group=None,
) -> Tensor:
    r"""Attention over a sequence split across processes, after gathering every key and value.

    Each rank all-gathers the keys and values of the whole sequence, then computes its own
    queries' attention over them with :func:`attention.tiled.blockwise_attention`, one rank
    block of keys at a time (skipping, under a causal mask, the blocks in its queries'
    future). The simplest strategy: one collective per tensor, at the price of holding the
    whole sequence's keys and values on every rank. Its backward is a reduce-scatter of their
    gradients. This is how Llama 3 trains on long sequences (Llama Team, 2024).

    Args:
        query (Tensor): this rank's queries.
        key (Tensor): this rank's keys.
        value (Tensor): this rank's values.
        causal (bool): each query attends only to the keys at or before its global position.
            Default: ``False``.
        zigzag (bool): the shards are in the zigzag layout of :func:`shard_sequence`.
            Default: ``False``.
        group (ProcessGroup, optional): the processes sharing the sequence. Default: ``None``
            (the default group).

    Shape:
        - query, key: :math:`(N, H, L/P, D)`, the same on every rank
        - value: :math:`(N, H, L/P, D_v)`
        - Output: :math:`(N, H, L/P, D_v)`

    Returns:
        Tensor: this rank's shard of the attention output.

    Examples::

        >>> import torch.distributed as dist
        >>> from attention.distributed import all_gather_attention
        >>> dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
        >>> q, k, v = torch.randn(3, 1, 2, 8, 4)  # one rank holds everything
        >>> out = all_gather_attention(q, k, v, causal=True)
        >>> expected = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        >>> torch.allclose(out, expected, atol=1e-6)
        True
        >>> dist.destroy_process_group()
    """
    setup = check_shards(query, key, value, causal, zigzag, group)
    if setup.empty:
        return empty_output(query, key, value)
    N, H, Lp, D = query.shape
    P = setup.world_size
    keys = _AllGather.apply(key, setup.group, P)  # (N, H, L, D)
    values = _AllGather.apply(value, setup.group, P)  # (N, H, L, Dv)
    tile_list = rank_tiles([setup.rank], range(P), P, Lp, causal=causal, zigzag=zigzag)
    count_flops(tile_list, N * H, D, value.shape[-1])
    return blockwise_attention(query, keys, values, tile_list, scale=setup.scale)
