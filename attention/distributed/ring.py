r"""Ring attention: the keys and values travel round a ring of processes :cite:p:`liu2023`.

Rank ``r`` keeps its queries. At step ``t`` it holds the keys and values of rank ``r - t`` (mod
P): it sends them on to rank ``r + 1`` while it computes its queries' attention over them
(:func:`attention.functional.attention_block`), and merges that block into its running output
and log-sum-exp (:func:`attention.functional.merge_blocks`), the step of
:func:`attention.tiled_attention`. The backward pass sends the keys and values round once more,
each step adding a block's share of the gradients
(:func:`attention.functional.attention_block_backward`, FlashAttention's backward), and the
gradients of the keys and values travel with them and end at their owner.
"""

from __future__ import annotations

import math

import torch
import torch.distributed as dist
from torch import Tensor

from ..functional import (
    accumulation_dtype,
    attention_block,
    attention_block_backward,
    merge_blocks,
)
from .cost import count_flops, count_sent
from .layout import check_shards, empty_output, rank_tiles

__all__ = ["ring_attention"]


def _peers(group, rank, world_size):
    """Global ranks of the next and the previous process on the ring."""
    nxt, prev = (rank + 1) % world_size, (rank - 1) % world_size
    return dist.get_global_rank(group, nxt), dist.get_global_rank(group, prev)


def _ring_shift(tensors, group, rank, world_size):
    """Start sending ``tensors`` to the next rank and receiving the previous rank's.

    Returns the requests (wait on them before reading) and the receive buffers.
    """
    nxt, prev = _peers(group, rank, world_size)
    tensors = [t.contiguous() for t in tensors]
    received = [torch.empty_like(t) for t in tensors]
    ops = []
    for t, buf in zip(tensors, received, strict=True):
        ops.append(dist.P2POp(dist.isend, t, nxt, group))
        ops.append(dist.P2POp(dist.irecv, buf, prev, group))
        count_sent("send", t, world_size)
    return dist.batch_isend_irecv(ops), received


def _on(allowed, device):
    """A tile's mask, made on the CPU by :func:`attention.tiled.tiles`, on ``device``."""
    return None if allowed is None else allowed.to(device)


class _RingAttention(torch.autograd.Function):
    """Forward and backward of ring attention, each one trip of the shards around the ring."""

    @staticmethod
    def forward(ctx, query, key, value, causal, zigzag, group, rank, world_size, scale):
        N, H, Lp, D = query.shape
        acc = accumulation_dtype(query.dtype)  # running sums in float32 at least
        out = query.new_zeros((N, H, Lp, value.shape[-1]), dtype=acc)  # (N, H, L/P, Dv)
        lse = query.new_full((N, H, Lp, 1), -math.inf, dtype=acc)  # no keys yet  (N, H, L/P, 1)
        steps = []  # the tiles of each step, for the backward pass
        k, v = key, value
        for step in range(world_size):
            src = (rank - step) % world_size  # whose keys and values this rank holds now
            if step < world_size - 1:  # send them on while computing with them
                requests, (k_next, v_next) = _ring_shift([k, v], group, rank, world_size)
            # One tile: the whole block, or under a causal mask its part that may attend.
            tile_list = rank_tiles([rank], [src], world_size, Lp, causal=causal, zigzag=zigzag)
            count_flops(tile_list, N * H, D, value.shape[-1])
            for rows, cols, allowed in tile_list:
                block = attention_block(
                    query[..., rows, :], k[..., cols, :], v[..., cols, :], scale=scale,
                    allowed=_on(allowed, query.device),
                )  # fmt: skip
                out[..., rows, :], lse[..., rows, :] = merge_blocks(
                    out[..., rows, :], lse[..., rows, :], *block
                )  # (N, H, R, Dv), (N, H, R, 1)
            steps.append(tile_list)
            if step < world_size - 1:
                for request in requests:
                    request.wait()
                k, v = k_next, v_next
        out = out.to(query.dtype)
        ctx.save_for_backward(query, key, value, out, lse)
        ctx.settings = (group, rank, world_size, scale, steps)
        return out

    @staticmethod
    def backward(ctx, grad_out):
        query, key, value, out, lse = ctx.saved_tensors
        group, rank, world_size, scale, steps = ctx.settings
        delta = (grad_out.to(lse.dtype) * out).sum(dim=-1, keepdim=True)  # (N, H, L/P, 1)
        grad_q = torch.zeros_like(query)
        # The key/value gradients travel with their keys and values and end at their owner.
        k, v, grad_k, grad_v = key, value, torch.zeros_like(key), torch.zeros_like(value)
        for step in range(world_size):
            if step < world_size - 1:
                kv_requests, (k_next, v_next) = _ring_shift([k, v], group, rank, world_size)
            for rows, cols, allowed in steps[step]:
                dq, dk, dv = attention_block_backward(
                    grad_out[..., rows, :], query[..., rows, :], k[..., cols, :],
                    v[..., cols, :], lse[..., rows, :], delta[..., rows, :], scale=scale,
                    allowed=_on(allowed, query.device),
                )  # fmt: skip
                grad_q[..., rows, :] += dq  # (N, H, R, D)
                grad_k[..., cols, :] += dk  # (N, H, C, D)
                grad_v[..., cols, :] += dv  # (N, H, C, Dv)
            if world_size > 1:
                requests, (grad_k, grad_v) = _ring_shift([grad_k, grad_v], group, rank, world_size)
                for request in requests:
                    request.wait()
            if step < world_size - 1:
                for request in kv_requests:
                    request.wait()
                k, v = k_next, v_next
        return grad_q, grad_k, grad_v, None, None, None, None, None, None


def ring_attention(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    *,
    causal: bool = False,
    zigzag: bool = False,
    group=None,
) -> Tensor:
    r"""Attention over a sequence split across processes, with keys and values passed round a ring.

    Rank ``r`` keeps its queries. At step ``t`` it holds the keys and values of rank
    ``r - t`` (mod P): it sends them on to rank ``r + 1`` while it computes its queries'
    attention over them with :func:`attention.functional.attention_block`, then merges that
    block into its running output with :func:`attention.functional.merge_blocks`. After ``P``
    steps every rank has its queries' attention over the whole sequence. Under a causal mask,
    the blocks and parts of blocks that lie in a query's future are skipped. The backward pass
    sends the keys and values round the ring again, with their gradients travelling alongside
    :cite:p:`liu2023`.

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
        >>> from attention.distributed import ring_attention
        >>> dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
        >>> q, k, v = torch.randn(3, 1, 2, 8, 4)  # a ring of one rank holds everything
        >>> out = ring_attention(q, k, v, causal=True)
        >>> expected = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        >>> torch.allclose(out, expected, atol=1e-6)
        True
        >>> dist.destroy_process_group()
    """
    setup = check_shards(query, key, value, causal, zigzag, group)
    if setup.empty:
        return empty_output(query, key, value)
    return _RingAttention.apply(
        query, key, value, causal, zigzag, setup.group, setup.rank, setup.world_size, setup.scale
    )
