r"""Ulysses attention: trade the split of the sequence for a split of the heads
:cite:p:`jacobs2023`.

An all-to-all turns each rank's (N, H, L/P, D) sequence shard into an (N, H/P, L, D) head shard:
every position, ``H/P`` of the heads. Each rank computes ordinary attention for its heads, tile
by tile (:func:`attention.tiled.blockwise_attention`, FlashAttention's forward and backward, one
rank block of queries and of keys per tile), and a second all-to-all turns the output back into
sequence shards. The backward pass is the same two all-to-alls, of the gradients.
"""

from __future__ import annotations

import torch
from torch import Tensor

from .._checks import check_divisible
from ..tiled import blockwise_attention
from .cost import count_flops
from .layout import all_to_all, check_shards, empty_output, rank_tiles

__all__ = ["ulysses_attention"]


class _AllToAll(torch.autograd.Function):
    """All-to-all over dimension 0; the backward pass is the same all-to-all of the gradient."""

    @staticmethod
    def forward(ctx, x, group, world_size):
        ctx.group, ctx.world_size = group, world_size
        return all_to_all(x, group, world_size)

    @staticmethod
    def backward(ctx, grad):
        return all_to_all(grad, ctx.group, ctx.world_size), None, None


def _sequence_to_heads(x: Tensor, group, world_size: int) -> Tensor:
    """(N, H, L/P, D) sequence shards -> (N, H/P, L, D) head shards (sequence in rank order)."""
    N, H, Lp, D = x.shape
    x = x.reshape(N, world_size, H // world_size, Lp, D).transpose(0, 1)  # (P, N, H/P, L/P, D)
    x = _AllToAll.apply(x.contiguous(), group, world_size)  # row i: rank i's positions
    x = x.permute(1, 2, 0, 3, 4)  # (N, H/P, P, L/P, D)
    return x.reshape(N, H // world_size, world_size * Lp, D)  # (N, H/P, L, D)


def _heads_to_sequence(x: Tensor, group, world_size: int) -> Tensor:
    """(N, H/P, L, D) head shards -> (N, H, L/P, D) sequence shards."""
    N, Hp, L, D = x.shape
    x = x.reshape(N, Hp, world_size, L // world_size, D)  # (N, H/P, P, L/P, D)
    x = x.permute(2, 0, 1, 3, 4)  # (P, N, H/P, L/P, D)
    x = _AllToAll.apply(x.contiguous(), group, world_size)  # row i: rank i's heads
    return x.transpose(0, 1).reshape(N, world_size * Hp, L // world_size, D)  # (N, H, L/P, D)


def ulysses_attention(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    *,
    causal: bool = False,
    zigzag: bool = False,
    group=None,
) -> Tensor:
    r"""Attention over a sequence split across processes, by trading the sequence split for heads.

    An all-to-all turns each rank's (N, H, L/P, D) sequence shard into an (N, H/P, L, D) head
    shard: all positions, ``H/P`` of the heads. Each rank computes ordinary attention for its
    heads with :func:`attention.tiled.blockwise_attention`, one rank block of queries and keys
    per tile, and a second all-to-all turns the output back into sequence shards. Every rank
    does the same work, causal or not, and each all-to-all moves only the :math:`(P-1)/P` of a
    shard that leaves the rank; the number of heads must divide by ``P`` (DeepSpeed-Ulysses,
    :cite:t:`jacobs2023`).

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
        - query, key: :math:`(N, H, L/P, D)`, the same on every rank, H divisible by P
        - value: :math:`(N, H, L/P, D_v)`
        - Output: :math:`(N, H, L/P, D_v)`

    Returns:
        Tensor: this rank's shard of the attention output.

    Examples::

        >>> import torch.distributed as dist
        >>> from attention.distributed import ulysses_attention
        >>> dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
        >>> q, k, v = torch.randn(3, 1, 2, 8, 4)  # one rank holds every head
        >>> out = ulysses_attention(q, k, v, causal=True)
        >>> expected = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        >>> torch.allclose(out, expected, atol=1e-6)
        True
        >>> dist.destroy_process_group()
    """
    setup = check_shards(query, key, value, causal, zigzag, group)
    P = setup.world_size
    check_divisible(query.shape[1], "the number of heads (query.shape[1])", P, "P")
    if setup.empty:
        return empty_output(query, key, value)
    N, H, Lp, D = query.shape
    q, k, v = (_sequence_to_heads(x, setup.group, P) for x in (query, key, value))
    tile_list = rank_tiles(range(P), range(P), P, Lp, causal=causal, zigzag=zigzag)
    count_flops(tile_list, N * H // P, D, value.shape[-1])
    out = blockwise_attention(q, k, v, tile_list, scale=setup.scale)  # (N, H/P, L, Dv)
    return _heads_to_sequence(out, setup.group, P)
