"""Context parallelism: attention over a sequence split across processes.

Each process (rank ``r`` of ``P``) holds one shard of the sequence: local ``query``, ``key`` and
``value`` of shape (N, H, L/P, D). Three strategies give every rank the attention output of its
own queries over the whole sequence:

- :func:`ring_attention` passes the key/value shards around a ring of processes and merges the
  partial results with :func:`attention.functional.online_softmax_merge`, the step of
  :func:`attention.tiled_attention` :cite:p:`liu2023`.
- :func:`all_gather_attention` gathers every key and value, then attends locally (the context
  parallelism of Llama 3, Llama Team, 2024).
- :func:`ulysses_attention` trades the sequence split for a head split with an all-to-all,
  attends over the whole sequence for H/P heads, and trades back :cite:p:`jacobs2023`.

The layout is contiguous (rank ``r`` holds chunk ``r``) or zigzag (the sequence cut into ``2P``
chunks, rank ``r`` holds chunks ``r`` and ``2P - 1 - r``, which balances causal work);
:func:`shard_sequence` and :func:`gather_sequence` convert. The collectives run on whatever
backend the process group has: gloo for CPU tensors, NCCL for CUDA ones. :func:`spawn` starts
local gloo processes, and ``python -m attention.distributed`` runs a strategy from the command
line, on local processes or under ``torchrun``.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import math
import os
import queue as queue_module
import re
import sys
import tempfile
import time
import traceback
from datetime import timedelta
from pathlib import Path

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import Tensor

from ._checks import check_divisible, check_tensor
from .functional import online_softmax_merge

__all__ = [
    "ring_attention",
    "all_gather_attention",
    "ulysses_attention",
    "shard_sequence",
    "gather_sequence",
    "count_work",
    "bytes_formula",
    "spawn",
    "run_cases",
]


# ---------------------------------------------------------------------------------------------
# Layouts: which global positions a rank holds


def _chunks(rank: int, world_size: int, zigzag: bool) -> list[int]:
    """The chunks of the sequence rank ``rank`` holds: ``[r]`` of P, or ``[r, 2P-1-r]`` of 2P."""
    return [rank, 2 * world_size - 1 - rank] if zigzag else [rank]


def _positions(rank: int, world_size: int, local_len: int, zigzag: bool, device) -> Tensor:
    """Global positions of the local rows of rank ``rank``, in the order it holds them."""
    chunks = _chunks(rank, world_size, zigzag)
    size = local_len // len(chunks)
    return torch.cat([torch.arange(c * size, (c + 1) * size, device=device) for c in chunks])


def _check_layout_args(rank, world_size, zigzag) -> None:
    for name, value in (("rank", rank), ("world_size", world_size)):
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"{name} must be an int; got {type(value).__name__}")
    if world_size < 1:
        raise ValueError(f"world_size must be at least 1; got {world_size}")
    if not 0 <= rank < world_size:
        raise ValueError(f"rank must be in [0, world_size={world_size}); got {rank}")
    if not isinstance(zigzag, bool):
        raise TypeError(f"zigzag must be a bool; got {type(zigzag).__name__}")


def shard_sequence(x: Tensor, *, rank: int, world_size: int, zigzag: bool = False) -> Tensor:
    r"""The part of a sequence that rank ``rank`` of ``world_size`` holds.

    Contiguous: the sequence is cut into ``world_size`` equal chunks and rank ``r`` takes chunk
    ``r``. Zigzag: it is cut into ``2 * world_size`` chunks and rank ``r`` takes chunks ``r``
    and ``2 * world_size - 1 - r``, so that under a causal mask every rank has the same number
    of (query, key) pairs to compute.

    Args:
        x (Tensor): the whole sequence; the sequence is dimension -2.
        rank (int): which part.
        world_size (int): number of parts.
        zigzag (bool): the zigzag layout instead of the contiguous one. Default: ``False``.

    Shape:
        - x: :math:`(*, L, D)`, with L divisible by ``world_size`` (by ``2 * world_size`` for
          zigzag)
        - Output: :math:`(*, L / P, D)`

    Returns:
        Tensor: the rows of rank ``rank``, in the order the layout gives them.

    Examples::

        >>> x = torch.arange(8.0)[:, None]  # positions 0..7 as a (L, 1) sequence
        >>> shard_sequence(x, rank=0, world_size=2).flatten().tolist()
        [0.0, 1.0, 2.0, 3.0]
        >>> shard_sequence(x, rank=0, world_size=2, zigzag=True).flatten().tolist()
        [0.0, 1.0, 6.0, 7.0]
    """
    check_tensor(x, "x", min_ndim=2)
    _check_layout_args(rank, world_size, zigzag)
    L = x.shape[-2]
    parts = 2 * world_size if zigzag else world_size
    check_divisible(L, "the sequence length (x.shape[-2])", parts, "the number of chunks")
    size = L // parts
    return torch.cat(
        [x[..., c * size : (c + 1) * size, :] for c in _chunks(rank, world_size, zigzag)], dim=-2
    )  # (*, L/P, D)


def _unshard(shards: list[Tensor], zigzag: bool) -> Tensor:
    """Put the shards of every rank (in rank order) back into sequence order."""
    if not zigzag:
        return torch.cat(shards, dim=-2)  # (*, L, D)
    halves = [s.chunk(2, dim=-2) for s in shards]
    firsts = [h[0] for h in halves]  # chunks 0 .. P-1
    seconds = [h[1] for h in reversed(halves)]  # chunks P .. 2P-1
    return torch.cat(firsts + seconds, dim=-2)  # (*, L, D)


def gather_sequence(x: Tensor, *, zigzag: bool = False, group=None) -> Tensor:
    r"""The whole sequence from every rank's shard: an all-gather, then back to sequence order.

    The inverse of :func:`shard_sequence`; every rank of ``group`` must call it.

    Args:
        x (Tensor): this rank's shard; the sequence is dimension -2.
        zigzag (bool): the shards are in the zigzag layout. Default: ``False``.
        group (ProcessGroup, optional): the processes. Default: ``None`` (the default group).

    Shape:
        - x: :math:`(*, L / P, D)`
        - Output: :math:`(*, L, D)`

    Returns:
        Tensor: the whole sequence, on every rank (not differentiable).

    Examples::

        >>> # on every rank: full = gather_sequence(shard_sequence(x, rank=r, world_size=P))
    """
    check_tensor(x, "x", min_ndim=2)
    group, rank, world_size = _group(group)
    _check_layout_args(rank, world_size, zigzag)
    if zigzag:
        check_divisible(x.shape[-2], "the local length (x.shape[-2])", 2, "2 (zigzag)")
    x = x.contiguous()
    shards = [torch.empty_like(x) for _ in range(world_size)]
    dist.all_gather(shards, x, group=group)
    return _unshard(shards, zigzag)


# ---------------------------------------------------------------------------------------------
# Counting what moves and what is computed


_COUNTERS: list[dict] = []


@contextlib.contextmanager
def count_work():
    """Count, on this rank, the bytes it sends and the attention FLOPs of the forward pass.

    Bytes are counted from the tensors passed to the collectives: the whole tensor of a send,
    ``P - 1`` copies of the local tensor in an all-gather, and the ``(P - 1) / P`` of the input
    that leaves the rank in an all-to-all. FLOPs are ``4 * rows * cols * D`` per (N, H) pair for
    every block of scores the forward computes (:math:`QK^\\top` and the product with V).

    Yields:
        dict: ``{"bytes": int, "flops": int}``, filled in as the calls inside run.

    Examples::

        >>> with count_work() as work:
        ...     pass  # calls of ring_attention etc.
        >>> work
        {'bytes': 0, 'flops': 0}
    """
    counter = {"bytes": 0, "flops": 0}
    _COUNTERS.append(counter)
    try:
        yield counter
    finally:
        _COUNTERS.remove(counter)


def _count(key: str, amount: int) -> None:
    for counter in _COUNTERS:
        counter[key] += int(amount)


def _nbytes(x: Tensor) -> int:
    return x.numel() * x.element_size()


def bytes_formula(strategy: str, world_size: int, shard_bytes: int) -> tuple[int, int]:
    r"""Bytes one rank sends in the forward and in the backward pass of a strategy.

    With ``b`` the bytes of one local shard of K (the same for Q, V and the output) and ``P``
    ranks:

    - ring: forward :math:`2(P-1)b` (K and V move ``P - 1`` times); backward :math:`2(P-1)b`
      for K and V plus :math:`2Pb` for their gradients, which travel with them and then home.
    - all-gather: forward :math:`2(P-1)b` (K and V to every other rank); backward the same, a
      reduce-scatter of the gradients of the gathered K and V.
    - Ulysses: forward :math:`4 \frac{P-1}{P} b` (all-to-all of Q, K, V and of the output);
      backward the same for their gradients.

    Args:
        strategy (str): ``"ring"``, ``"all_gather"`` or ``"ulysses"``.
        world_size (int): ``P``.
        shard_bytes (int): ``b``.

    Returns:
        tuple[int, int]: bytes sent in the forward and in the backward pass.

    Examples::

        >>> bytes_formula("ring", 4, 1000)
        (6000, 14000)
        >>> bytes_formula("ulysses", 4, 1000)
        (3000, 3000)
    """
    P, b = world_size, shard_bytes
    if strategy == "ring":
        return 2 * (P - 1) * b, (2 * (P - 1) * b + 2 * P * b) if P > 1 else 0
    if strategy == "all_gather":
        return 2 * (P - 1) * b, 2 * (P - 1) * b
    if strategy == "ulysses":
        return 4 * (P - 1) * b // P, 4 * (P - 1) * b // P
    raise ValueError(f"strategy must be one of {sorted(STRATEGIES)}; got {strategy!r}")


# ---------------------------------------------------------------------------------------------
# Checks shared by the strategies


def _group(group):
    """The group, this rank in it and its size; a clear error when nothing was initialised."""
    if not (dist.is_available() and dist.is_initialized()):
        raise RuntimeError(
            "the default process group is not initialised: call "
            "torch.distributed.init_process_group() first (gloo for CPU tensors, nccl for CUDA), "
            "run under torchrun, or start local processes with attention.distributed.spawn()"
        )
    group = dist.group.WORLD if group is None else group
    return group, dist.get_rank(group), dist.get_world_size(group)


def _check_shards(query, key, value, causal, zigzag, group):
    """Check local (N, H, L/P, D) shards and the flags; return group, rank and world size."""
    for name, x in (("query", query), ("key", key), ("value", value)):
        check_tensor(x, name, ndim=4)
    if key.shape != query.shape:
        raise ValueError(
            f"query and key shards must have the same shape (N, H, L/P, D); got query "
            f"{tuple(query.shape)} and key {tuple(key.shape)}"
        )
    if value.shape[:3] != key.shape[:3]:
        raise ValueError(
            f"key and value shards must have the same (N, H, L/P); got key {tuple(key.shape)} "
            f"and value {tuple(value.shape)}"
        )
    for name, flag in (("causal", causal), ("zigzag", zigzag)):
        if not isinstance(flag, bool):
            raise TypeError(f"{name} must be a bool; got {type(flag).__name__}")
    if zigzag:
        check_divisible(query.shape[-2], "the local length (query.shape[-2])", 2, "2 (zigzag)")
    return _group(group)


# ---------------------------------------------------------------------------------------------
# One block of keys: partial sums for the online softmax


def _attend_block(q, k, v, q_pos, k_pos, causal, scale):
    """Partial softmax sums of the queries ``q`` over one block of keys.

    Positions increase along each block, so under a causal mask the keys that some query may
    see form a prefix of the block, and the queries that see at least one key form a suffix;
    only that part is computed. Returns ``(row0, (m, l, acc))`` for the rows from ``row0``, or
    ``None`` when no query may see any key of the block.
    """
    row0, allowed = 0, None
    if causal:
        cols = int((k_pos <= q_pos.max()).sum())  # the keys some query may see: a prefix
        row0 = int((q_pos < k_pos.min()).sum())  # the queries that see none: a prefix
        if cols == 0 or row0 == q.shape[-2]:
            return None
        q, k, v = q[..., row0:, :], k[..., :cols, :], v[..., :cols, :]
        allowed = k_pos[:cols] <= q_pos[row0:, None]  # (R, C)
        if bool(allowed.all()):
            allowed = None
    N, H, R, D = q.shape
    _count("flops", 2 * N * H * R * k.shape[-2] * (D + v.shape[-1]))
    s = q @ k.transpose(-2, -1) * scale  # (N, H, R, D) @ (N, H, D, C) -> (N, H, R, C)
    if allowed is not None:
        s = s.masked_fill(~allowed, torch.finfo(s.dtype).min)  # (N, H, R, C)
    m = s.detach().amax(dim=-1, keepdim=True)  # (N, H, R, 1)
    p = torch.exp(s - m)  # (N, H, R, C)
    if allowed is not None:
        p = p.masked_fill(~allowed, 0.0)  # (N, H, R, C)
    return row0, (m, p.sum(dim=-1, keepdim=True), p @ v)  # (N, H, R, C) @ (N, H, C, Dv)


def _merge_rows(state, row0, block):
    """Merge a block's partial sums into the running ones, for the rows from ``row0`` on."""
    if row0 == 0:
        return online_softmax_merge(*state, *block)
    merged = online_softmax_merge(*(x[..., row0:, :] for x in state), *block)
    return tuple(
        torch.cat([x[..., :row0, :], y], dim=-2) for x, y in zip(state, merged, strict=False)
    )


def _empty_state(q, dv):
    N, H, L, _ = q.shape
    m = q.new_full((N, H, L, 1), -math.inf)  # running maximum  (N, H, L, 1)
    return m, q.new_zeros((N, H, L, 1)), q.new_zeros((N, H, L, dv))  # l, acc


def _finish(state):
    """Output ``acc / l`` and log-sum-exp ``m + log l`` (rows that saw no key give 0)."""
    m, l, acc = state  # noqa: E741
    l_safe = l.masked_fill(l == 0, 1.0)  # (N, H, L, 1)
    return acc / l_safe, m + torch.log(l_safe)  # (N, H, L, Dv), (N, H, L, 1)


def _local_attention(q_blocks, q_positions, k, v, k_positions, causal, scale):
    """Attention of each query block over every key block, merged block by block."""
    k_blocks = k.chunk(len(k_positions), dim=-2)
    v_blocks = v.chunk(len(k_positions), dim=-2)
    outs = []
    for q, q_pos in zip(q_blocks, q_positions, strict=False):
        state = _empty_state(q, v.shape[-1])
        for kb, vb, k_pos in zip(k_blocks, v_blocks, k_positions, strict=False):
            block = _attend_block(q, kb, vb, q_pos, k_pos, causal, scale)
            if block is not None:
                state = _merge_rows(state, *block)
        outs.append(_finish(state)[0])
    return torch.cat(outs, dim=-2)  # (N, H, Lq, Dv)


# ---------------------------------------------------------------------------------------------
# Ring attention


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
    for t, buf in zip(tensors, received, strict=False):
        ops.append(dist.P2POp(dist.isend, t, nxt, group))
        ops.append(dist.P2POp(dist.irecv, buf, prev, group))
        _count("bytes", _nbytes(t))
    return dist.batch_isend_irecv(ops), received


class _RingAttention(torch.autograd.Function):
    """Forward and backward of ring attention, each one trip of the shards around the ring."""

    @staticmethod
    def forward(ctx, query, key, value, causal, zigzag, group, rank, world_size):
        N, H, Lp, D = query.shape
        scale = 1.0 / math.sqrt(D)
        q_pos = _positions(rank, world_size, Lp, zigzag, query.device)  # (Lp,)
        state = _empty_state(query, value.shape[-1])
        k, v = key, value
        for step in range(world_size):
            src = (rank - step) % world_size  # whose keys and values this rank holds now
            if step < world_size - 1:  # send them on while computing with them
                requests, (k_next, v_next) = _ring_shift([k, v], group, rank, world_size)
            k_pos = _positions(src, world_size, Lp, zigzag, query.device)  # (Lp,)
            block = _attend_block(query, k, v, q_pos, k_pos, causal, scale)
            if block is not None:
                state = _merge_rows(state, *block)
            if step < world_size - 1:
                for request in requests:
                    request.wait()
                k, v = k_next, v_next
        out, lse = _finish(state)  # (N, H, Lp, Dv), (N, H, Lp, 1)
        ctx.save_for_backward(query, key, value, out, lse)
        ctx.settings = (causal, zigzag, group, rank, world_size, scale)
        return out

    @staticmethod
    def backward(ctx, grad_out):
        query, key, value, out, lse = ctx.saved_tensors
        causal, zigzag, group, rank, world_size, scale = ctx.settings
        Lp = query.shape[-2]
        q_pos = _positions(rank, world_size, Lp, zigzag, query.device)
        delta = (grad_out * out).sum(dim=-1, keepdim=True)  # (N, H, Lp, 1)
        grad_q = torch.zeros_like(query)
        # The key/value gradients travel with their keys and values and end at their owner.
        k, v, grad_k, grad_v = key, value, torch.zeros_like(key), torch.zeros_like(value)
        for step in range(world_size):
            src = (rank - step) % world_size
            if step < world_size - 1:
                kv_requests, (k_next, v_next) = _ring_shift([k, v], group, rank, world_size)
            k_pos = _positions(src, world_size, Lp, zigzag, query.device)
            _block_backward(
                query, k, v, grad_out, delta, lse, q_pos, k_pos, causal, scale,
                grad_q, grad_k, grad_v,
            )  # fmt: skip
            if world_size > 1:
                requests, (grad_k, grad_v) = _ring_shift([grad_k, grad_v], group, rank, world_size)
                for request in requests:
                    request.wait()
            if step < world_size - 1:
                for request in kv_requests:
                    request.wait()
                k, v = k_next, v_next
        return grad_q, grad_k, grad_v, None, None, None, None, None


def _block_backward(q, k, v, grad_out, delta, lse, q_pos, k_pos, causal, scale, gq, gk, gv):
    """Add one block's share of the gradients to ``gq``, ``gk`` and ``gv`` (in place).

    With the saved log-sum-exp the block's weights are recomputed exactly,
    :math:`p = e^{s - \\text{lse}}`; then :math:`dV \\mathrel{+}= p^\\top dO`,
    :math:`dS = p \\odot (dO V^\\top - \\delta)` with :math:`\\delta = \\text{rowsum}(dO \\odot O)`,
    :math:`dQ \\mathrel{+}= dS K \\cdot scale` and :math:`dK \\mathrel{+}= dS^\\top Q \\cdot scale`.
    """
    row0, cols, allowed = 0, k.shape[-2], None
    if causal:
        cols = int((k_pos <= q_pos.max()).sum())
        row0 = int((q_pos < k_pos.min()).sum())
        if cols == 0 or row0 == q.shape[-2]:
            return
        allowed = k_pos[:cols] <= q_pos[row0:, None]  # (R, C)
    q, do, dl, ls = (x[..., row0:, :] for x in (q, grad_out, delta, lse))
    k, v = k[..., :cols, :], v[..., :cols, :]
    s = q @ k.transpose(-2, -1) * scale  # (N, H, R, D) @ (N, H, D, C) -> (N, H, R, C)
    p = torch.exp(s - ls)  # (N, H, R, C)
    if allowed is not None:
        p = p.masked_fill(~allowed, 0.0)  # (N, H, R, C)
    gv[..., :cols, :] += p.transpose(-2, -1) @ do  # (N, H, C, R) @ (N, H, R, Dv) -> (N, H, C, Dv)
    dp = do @ v.transpose(-2, -1)  # (N, H, R, Dv) @ (N, H, Dv, C) -> (N, H, R, C)
    ds = p * (dp - dl) * scale  # (N, H, R, C)
    gq[..., row0:, :] += ds @ k  # (N, H, R, C) @ (N, H, C, D) -> (N, H, R, D)
    gk[..., :cols, :] += ds.transpose(-2, -1) @ q  # (N, H, C, R) @ (N, H, R, D) -> (N, H, C, D)


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
    ``r - t`` (mod P): it sends them on to rank ``r + 1`` while it computes its queries' partial
    softmax sums over them, then merges those into its running sums with
    :func:`attention.functional.online_softmax_merge`. After ``P`` steps every rank has its
    queries' attention over the whole sequence. Under a causal mask, the blocks and parts of
    blocks that lie in a query's future are skipped. The backward pass sends the keys and values
    round the ring again, with their gradients travelling alongside :cite:p:`liu2023`.

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
        - query, key: :math:`(N, H, L/P, D)`
        - value: :math:`(N, H, L/P, D_v)`
        - Output: :math:`(N, H, L/P, D_v)`

    Returns:
        Tensor: this rank's shard of the attention output.

    Examples::

        >>> # on every rank r of P, with q, k, v the whole (N, H, L, D) sequence:
        >>> # shards = [shard_sequence(x, rank=r, world_size=P) for x in (q, k, v)]
        >>> # out = ring_attention(*shards)  # rank r's rows of the output
    """
    group, rank, world_size = _check_shards(query, key, value, causal, zigzag, group)
    return _RingAttention.apply(query, key, value, causal, zigzag, group, rank, world_size)


# ---------------------------------------------------------------------------------------------
# All-gather attention


class _AllGather(torch.autograd.Function):
    """All-gather along the sequence (dimension -2); backward: reduce-scatter of the gradient."""

    @staticmethod
    def forward(ctx, x, group, world_size):
        ctx.group, ctx.world_size = group, world_size
        x = x.contiguous()
        parts = [torch.empty_like(x) for _ in range(world_size)]
        dist.all_gather(parts, x, group=group)
        _count("bytes", (world_size - 1) * _nbytes(x))
        return torch.cat(parts, dim=-2)  # (N, H, L, D)

    @staticmethod
    def backward(ctx, grad):
        # Every rank's gradient has a share for each rank's shard; send each share to its
        # owner (all-to-all) and add up the shares received: a reduce-scatter.
        parts = torch.stack(grad.chunk(ctx.world_size, dim=-2))  # (P, N, H, L/P, D)
        received = _all_to_all(parts, ctx.group, ctx.world_size)  # (P, N, H, L/P, D)
        return received.sum(dim=0), None, None


def _all_to_all(x: Tensor, group, world_size: int) -> Tensor:
    """Send ``x[j]`` to rank j; return the tensor whose row i came from rank i."""
    x = x.contiguous()  # and the output below too: the collective reads and writes memory
    out = torch.empty_like(x)
    dist.all_to_all_single(out, x, group=group)
    _count("bytes", (world_size - 1) * _nbytes(x) // world_size)
    return out


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
    queries' attention over them, block by block with the online softmax (skipping, under a
    causal mask, the blocks in its queries' future). The simplest strategy: one collective per
    tensor, at the price of holding the whole sequence's keys and values on every rank. Its
    backward is a reduce-scatter of their gradients. This is how Llama 3 trains on long
    sequences (Llama Team, 2024).

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
        - query, key: :math:`(N, H, L/P, D)`
        - value: :math:`(N, H, L/P, D_v)`
        - Output: :math:`(N, H, L/P, D_v)`

    Returns:
        Tensor: this rank's shard of the attention output.

    Examples::

        >>> # on every rank r of P, with q, k, v the whole (N, H, L, D) sequence:
        >>> # shards = [shard_sequence(x, rank=r, world_size=P) for x in (q, k, v)]
        >>> # out = all_gather_attention(*shards)  # rank r's rows of the output
    """
    group, rank, world_size = _check_shards(query, key, value, causal, zigzag, group)
    Lp = query.shape[-2]
    keys = _AllGather.apply(key, group, world_size)  # (N, H, L, D)
    values = _AllGather.apply(value, group, world_size)  # (N, H, L, Dv)
    q_pos = _positions(rank, world_size, Lp, zigzag, query.device)
    k_positions = [_positions(r, world_size, Lp, zigzag, query.device) for r in range(world_size)]
    scale = 1.0 / math.sqrt(query.shape[-1])
    return _local_attention([query], [q_pos], keys, values, k_positions, causal, scale)


# ---------------------------------------------------------------------------------------------
# Ulysses attention


class _AllToAll(torch.autograd.Function):
    """All-to-all over dimension 0; the backward pass is the same all-to-all of the gradient."""

    @staticmethod
    def forward(ctx, x, group, world_size):
        ctx.group, ctx.world_size = group, world_size
        return _all_to_all(x, group, world_size)

    @staticmethod
    def backward(ctx, grad):
        return _all_to_all(grad, ctx.group, ctx.world_size), None, None


def _sequence_to_heads(x: Tensor, group, world_size: int) -> Tensor:
    """(N, H, L/P, D) sequence shards -> (N, H/P, L, D) head shards (sequence in rank order)."""
    N, H, Lp, D = x.shape
    x = x.reshape(N, world_size, H // world_size, Lp, D).transpose(0, 1)  # (P, N, H/P, L/P, D)
    x = _AllToAll.apply(x.contiguous(), group, world_size)  # row i: rank i's positions
    return x.permute(1, 2, 0, 3, 4).reshape(N, H // world_size, world_size * Lp, D)


def _heads_to_sequence(x: Tensor, group, world_size: int) -> Tensor:
    """(N, H/P, L, D) head shards -> (N, H, L/P, D) sequence shards."""
    N, Hp, L, D = x.shape
    x = x.reshape(N, Hp, world_size, L // world_size, D).permute(
        2, 0, 1, 3, 4
    )  # (P, N, H/P, L/P, D)
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
    heads, block by block with the online softmax, and a second all-to-all turns the output
    back into sequence shards. Every rank does the same work, causal or not, and each
    all-to-all moves only the :math:`(P-1)/P` of a shard that leaves the rank; the number of
    heads must divide by ``P`` (DeepSpeed-Ulysses, :cite:t:`jacobs2023`).

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
        - query, key: :math:`(N, H, L/P, D)`, H divisible by P
        - value: :math:`(N, H, L/P, D_v)`
        - Output: :math:`(N, H, L/P, D_v)`

    Returns:
        Tensor: this rank's shard of the attention output.

    Examples::

        >>> # on every rank r of P, with q, k, v the whole (N, H, L, D) sequence:
        >>> # shards = [shard_sequence(x, rank=r, world_size=P) for x in (q, k, v)]
        >>> # out = ulysses_attention(*shards)  # rank r's rows of the output
    """
    group, rank, world_size = _check_shards(query, key, value, causal, zigzag, group)
    check_divisible(query.shape[1], "the number of heads (query.shape[1])", world_size, "P")
    Lp = query.shape[-2]
    q, k, v = (_sequence_to_heads(x, group, world_size) for x in (query, key, value))
    positions = [_positions(r, world_size, Lp, zigzag, query.device) for r in range(world_size)]
    scale = 1.0 / math.sqrt(query.shape[-1])
    q_blocks = q.chunk(world_size, dim=-2)
    out = _local_attention(q_blocks, positions, k, v, positions, causal, scale)  # (N, H/P, L, Dv)
    return _heads_to_sequence(out, group, world_size)


STRATEGIES = {
    "ring": ring_attention,
    "all_gather": all_gather_attention,
    "ulysses": ulysses_attention,
}


# ---------------------------------------------------------------------------------------------
# Local processes


@contextlib.contextmanager
def _without_main_script():
    """Spawned processes re-run the caller's script unless it is hidden from them.

    The workers live in this package, so a child needs nothing from ``__main__``; hiding its
    file keeps a tutorial or a test script from running again (and spawning again) in every
    child.
    """
    main = sys.modules.get("__main__")
    saved = main.__dict__.pop("__file__", None) if main is not None else None
    try:
        yield
    finally:
        if saved is not None:
            main.__file__ = saved


def _entry(rank, world_size, store_path, timeout_s, fn, args, results):
    """A spawned process: join the gloo group through a file, run ``fn``, report back."""
    if sys.platform.startswith("linux"):
        os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")  # talk over 127.0.0.1 only
    torch.set_num_threads(1)  # the processes share the machine's cores
    try:
        dist.init_process_group(
            "gloo",
            init_method=f"file://{store_path}",
            rank=rank,
            world_size=world_size,
            timeout=timedelta(seconds=timeout_s),
        )
        # Gloo connects the ranks pair by pair, and a rank whose own side is done may return
        # while a peer is still connecting to it; closing its sockets then fails the peer
        # ("Connection closed by peer"). One barrier before and one after ``fn`` keep every
        # rank in the group until all of them have joined, and until all have finished.
        dist.barrier()
        value = fn(rank, world_size, *args)
        dist.barrier()
        results.put((rank, None, value))
    except BaseException:
        results.put((rank, traceback.format_exc(), None))
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()


def spawn(fn, *args, nproc: int, timeout: float = 120.0) -> list:
    r"""Run ``fn(rank, nproc, *args)`` on ``nproc`` local processes joined in a gloo group.

    The processes start with :mod:`torch.multiprocessing`'s ``spawn`` method, find each other
    through a file (no port to choose), and talk over 127.0.0.1. ``fn`` must be importable (a
    function of a module, not of a script), and its return value picklable. If a rank raises,
    the others are ended and the rank's traceback is raised here; if the run takes longer than
    ``timeout`` seconds, every process is ended and ``TimeoutError`` is raised. Nothing hangs.

    Args:
        fn (callable): the worker, called as ``fn(rank, world_size, *args)``.
        *args: more arguments for ``fn`` (picklable).
        nproc (int): number of processes.
        timeout (float): seconds for the whole run. Default: ``120.0``.

    Returns:
        list: ``fn``'s return value on each rank, in rank order.

    Examples::

        >>> spawn(_world_and_rank, nproc=2)
        [(0, 2), (1, 2)]
    """
    if isinstance(nproc, bool) or not isinstance(nproc, int):
        raise TypeError(f"nproc must be an int; got {type(nproc).__name__}")
    if nproc < 1:
        raise ValueError(f"nproc must be at least 1; got {nproc}")
    import torch.multiprocessing as mp

    context = mp.get_context("spawn")
    results = context.Queue()
    deadline = time.monotonic() + timeout
    with tempfile.TemporaryDirectory(prefix="attention-spawn-") as folder:
        store = os.path.join(folder, "store")
        processes = [
            context.Process(
                target=_entry,
                args=(rank, nproc, store, timeout, fn, args, results),
                daemon=True,
            )
            for rank in range(nproc)
        ]
        with _without_main_script():
            for process in processes:
                process.start()
        done: dict[int, object] = {}
        try:
            while len(done) < nproc:
                left = deadline - time.monotonic()
                if left <= 0:
                    missing = sorted(set(range(nproc)) - set(done))
                    raise TimeoutError(
                        f"ranks {missing} of {nproc} did not finish within {timeout:.0f} s"
                    )
                try:
                    rank, error, value = results.get(timeout=min(left, 0.5))
                except queue_module.Empty:
                    for rank, process in enumerate(processes):
                        if rank not in done and process.exitcode is not None:
                            time.sleep(0.5)  # its report may still be in the pipe
                            if results.empty():
                                raise RuntimeError(
                                    f"rank {rank} of {nproc} exited with code "
                                    f"{process.exitcode} without reporting a result"
                                ) from None
                    continue
                if error is not None:
                    raise RuntimeError(f"rank {rank} of {nproc} failed:\n{error}")
                done[rank] = value
        finally:
            for process in processes:
                process.join(timeout=max(0.0, min(10.0, deadline - time.monotonic())))
            for process in processes:
                if process.is_alive():
                    process.kill()
                    process.join(timeout=10)
            results.close()
    return [done[rank] for rank in range(nproc)]


def _world_and_rank(rank, world_size):
    """The smallest worker: where am I?"""
    return dist.get_rank(), dist.get_world_size()


def _fail_on_rank(rank, world_size, fail_rank):
    """A worker whose rank ``fail_rank`` raises while the others wait for it in a collective."""
    if rank == fail_rank:
        raise ValueError(f"rank {rank} raises on purpose")
    dist.barrier()  # never returns: the failing rank does not arrive
    return rank


# ---------------------------------------------------------------------------------------------
# Measuring: memory, and the runs that the tests, the tutorial and the benchmarks share


def _status_bytes(field: str) -> int:
    text = Path("/proc/self/status").read_text()
    return int(re.search(rf"^{field}:\s+(\d+) kB", text, re.MULTILINE).group(1)) * 1024


def peak_extra_bytes(fn, *args, **kwargs) -> int | None:
    """Extra peak memory of ``fn(*args, **kwargs)`` in bytes on this process, or ``None``.

    CUDA tensors: PyTorch's allocator statistics. CPU: the peak resident memory of the process
    (Linux's ``VmHWM``, reset through ``/proc/self/clear_refs``) minus its resident memory just
    before the call, after ``malloc_trim`` has handed freed memory back to the system.
    """
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        before = torch.cuda.memory_allocated()
        fn(*args, **kwargs)
        torch.cuda.synchronize()
        return torch.cuda.max_memory_allocated() - before
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
        Path("/proc/self/clear_refs").write_text("5")
        before = _status_bytes("VmRSS")
    except (OSError, AttributeError):
        return None
    fn(*args, **kwargs)
    return _status_bytes("VmHWM") - before


def run_cases(rank: int, world_size: int, cases: list[dict], seed: int = 0) -> list:
    """Worker: run each case on this rank and measure it; the tests and tutorials share it.

    A case is a dict: ``strategy``, ``causal``, ``zigzag``, ``shape`` (N, H, L, D of the whole
    sequence); optional ``group_size`` (the first ``group_size`` ranks take part; default all),
    ``dtype`` (default ``"float64"``), ``check`` (compare output and gradients with
    single-process ``F.scaled_dot_product_attention``; default ``True``) and ``memory`` (measure
    the forward pass's extra peak memory without autograd; default ``False``). Returns one dict
    per case (``None`` on ranks outside its group) with ``bytes_forward``, ``bytes_backward``,
    ``flops``, ``shard_bytes``, ``seconds``, and ``error_out``, ``error_gathered``,
    ``error_grad`` or ``peak_bytes``.
    """
    groups = {}
    for size in sorted({case.get("group_size", world_size) for case in cases}):
        groups[size] = None if size == world_size else dist.new_group(list(range(size)))
    results = []
    for case in cases:
        size = case.get("group_size", world_size)
        if rank >= size:
            results.append(None)
            continue
        results.append(_run_case(rank, size, groups[size], case, seed))
    return results


def _run_case(rank, size, group, case, seed):
    fn = STRATEGIES[case["strategy"]]
    causal, zigzag = case["causal"], case["zigzag"]
    dtype = getattr(torch, case.get("dtype", "float64"))
    generator = torch.Generator().manual_seed(seed)
    q, k, v, grad = (torch.randn(*case["shape"], generator=generator, dtype=dtype) for _ in "qkvg")

    def shard(x):
        return shard_sequence(x, rank=rank, world_size=size, zigzag=zigzag)

    check = case.get("check", True)
    local = [shard(x).requires_grad_(check) for x in (q, k, v)]
    kwargs = {"causal": causal, "zigzag": zigzag, "group": group}
    result = {"shard_bytes": _nbytes(local[1])}
    if case.get("memory", False):
        with torch.no_grad():
            fn(*local, **kwargs)  # the first call sets up buffers that are not the call's
            result["peak_bytes"] = peak_extra_bytes(fn, *local, **kwargs)
    start = time.perf_counter()
    with count_work() as forward:
        out = fn(*local, **kwargs)
    result["seconds"] = time.perf_counter() - start
    result.update(bytes_forward=forward["bytes"], flops=forward["flops"])
    if check:
        ref = [x.clone().requires_grad_() for x in (q, k, v)]
        expected = F.scaled_dot_product_attention(*ref, is_causal=causal)
        expected.backward(grad)
        result["error_out"] = (out - shard(expected)).abs().max().item()
        gathered = gather_sequence(out.detach(), zigzag=zigzag, group=group)
        result["error_gathered"] = (gathered - expected).abs().max().item()
        with count_work() as backward:
            out.backward(shard(grad))
        result["bytes_backward"] = backward["bytes"]
        result["error_grad"] = max(
            (mine.grad - shard(theirs.grad)).abs().max().item()
            for mine, theirs in zip(local, ref, strict=False)
        )
    return result


# ---------------------------------------------------------------------------------------------
# The command: python -m attention.distributed


def _fits_in_memory(nbytes: int, device: torch.device) -> bool:
    """Whether ``nbytes`` more can be held comfortably (a quarter of what is free)."""
    if device.type == "cuda":
        return nbytes < torch.cuda.mem_get_info(device)[0] / 4
    try:
        text = Path("/proc/meminfo").read_text()
        free = int(re.search(r"^MemAvailable:\s+(\d+) kB", text, re.MULTILINE).group(1)) * 1024
    except (OSError, AttributeError):
        return False
    return nbytes < free / 4 / dist.get_world_size()


ROWS = 512  # query rows per reference call in the command's check


def command_worker(rank: int, world_size: int, options: dict) -> dict:
    """Worker of the command: one strategy on this rank, checked and measured."""
    device = torch.device(options["device"])
    dtype = getattr(torch, options["dtype"])
    N, H, L, D = options["batch"], options["heads"], options["seq_len"], options["head_dim"]
    causal, zigzag = options["causal"], options["zigzag"]
    fn = STRATEGIES[options["strategy"]]
    full_bytes = N * H * L * D * torch.empty((), dtype=dtype).element_size()
    Lp = L // world_size
    # The check needs the whole sequence's keys and values on every rank, and the reference
    # builds the scores of ROWS of this rank's queries at a time against all L keys.
    itemsize = torch.empty((), dtype=dtype).element_size()
    scores_bytes = 3 * N * H * min(ROWS, Lp) * L * itemsize
    check = options["check"] and _fits_in_memory(3 * full_bytes + scores_bytes, device)
    generator = torch.Generator().manual_seed(options["seed"])
    if check:
        q, k, v = (torch.randn(N, H, L, D, generator=generator, dtype=dtype) for _ in "qkv")
        local = [
            shard_sequence(x, rank=rank, world_size=world_size, zigzag=zigzag) for x in (q, k, v)
        ]
    else:  # only this rank's rows
        generator.manual_seed(options["seed"] + rank)
        local = [torch.randn(N, H, Lp, D, generator=generator, dtype=dtype) for _ in "qkv"]
    local = [x.to(device).requires_grad_(options["backward"]) for x in local]

    def step():
        out = fn(*local, causal=causal, zigzag=zigzag)
        if options["backward"]:
            out.sum().backward()
        return out

    # A first call on two positions sets up the connections between the processes.
    fn(*(x.detach()[..., :2, :] for x in local), causal=causal, zigzag=zigzag)
    dist.barrier()
    runs = []

    def timed():
        start = time.perf_counter()
        runs.append(step())
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        runs.append(time.perf_counter() - start)

    with count_work() as work:
        peak = peak_extra_bytes(timed)
    out, seconds = runs
    result = {"rank": rank, "seconds": seconds, "bytes": work["bytes"], "flops": work["flops"]}
    result.update(peak_bytes=peak, shard_bytes=local[1].numel() * local[1].element_size())
    result["error"] = None
    if check:
        k, v = k.to(device), v.to(device)
        q_pos = _positions(rank, world_size, Lp, zigzag, device)
        error = 0.0
        with torch.no_grad():
            for start in range(0, Lp, ROWS):
                rows = slice(start, start + ROWS)
                mask = torch.arange(L, device=device) <= q_pos[rows, None] if causal else None
                expected = F.scaled_dot_product_attention(
                    local[0].detach()[..., rows, :], k, v, attn_mask=mask
                )  # (N, H, ROWS, D) against all L keys
                error = max(error, (out.detach()[..., rows, :] - expected).abs().max().item())
        result["error"] = error
    return result


def _report(options: dict, results: list[dict], world_size: int, backend: str) -> int:
    """Print the check and the measurements; return the exit status."""
    o = options
    layout = "zigzag" if o["zigzag"] else "contiguous"
    print(
        f"{o['strategy']} attention, {'causal' if o['causal'] else 'not causal'}, {layout} layout: "
        f"N={o['batch']} H={o['heads']} L={o['seq_len']} D={o['head_dim']} {o['dtype']}, "
        f"{'forward and backward' if o['backward'] else 'forward'}, on {world_size} processes "
        f"({backend}, {o['device']}), torch {torch.__version__}"
    )
    status = 0
    errors = [r["error"] for r in results]
    if any(e is None for e in errors):
        print("check against single-device attention: skipped (the whole sequence does not fit)")
    else:
        tolerance = 1e-10 if o["dtype"] == "float64" else 1e-4
        ok = max(errors) < tolerance
        status = 0 if ok else 1
        print(
            f"check against single-device attention: largest difference {max(errors):.1e} "
            f"(tolerance {tolerance:.0e}): {'ok' if ok else 'FAILED'}"
        )
    MiB = 2**20
    print("rank  time (s)  sent (MiB)  formula (MiB)  peak memory (MiB)  forward GFLOP")
    for r in results:
        forward, backward = bytes_formula(o["strategy"], world_size, r["shard_bytes"])
        formula = forward + (backward if o["backward"] else 0)
        peak = "n/a" if r["peak_bytes"] is None else f"{r['peak_bytes'] / MiB:.1f}"
        print(
            f"{r['rank']:>4}  {r['seconds']:8.3f}  {r['bytes'] / MiB:10.2f}  {formula / MiB:13.2f}"
            f"  {peak:>17}  {r['flops'] / 1e9:13.2f}"
        )
    return status


def main(argv: list[str] | None = None) -> int:
    """Run one strategy on local processes, or on the processes ``torchrun`` started."""
    parser = argparse.ArgumentParser(
        prog="python -m attention.distributed",
        description="Context-parallel attention on several processes, checked against "
        "single-device attention. Without torchrun it spawns --nproc local CPU processes (gloo); "
        "under torchrun it joins the launcher's processes (NCCL on GPUs, gloo on CPUs).",
    )
    parser.add_argument("--nproc", type=int, default=4, help="local processes (default: 4)")
    parser.add_argument("--strategy", choices=sorted(STRATEGIES), default="ring")
    parser.add_argument("--seq-len", type=int, default=8192, help="whole sequence length L")
    parser.add_argument("--heads", type=int, default=8)
    parser.add_argument("--head-dim", type=int, default=64)
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--causal", action="store_true")
    parser.add_argument("--zigzag", action="store_true", help="the zigzag layout")
    parser.add_argument("--backward", action="store_true", help="time the backward pass too")
    parser.add_argument("--dtype", choices=["float32", "float64", "bfloat16"], default="float32")
    parser.add_argument("--no-check", dest="check", action="store_false")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds for the run")
    args = parser.parse_args(argv)
    options = {k: v for k, v in vars(args).items() if k not in ("nproc", "timeout")}
    if "RANK" in os.environ and "WORLD_SIZE" in os.environ:  # started by torchrun
        if torch.cuda.is_available():
            torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", 0)))
            options["device"], backend = "cuda", "nccl"
        else:
            options["device"], backend = "cpu", "gloo"
        dist.init_process_group(backend, timeout=timedelta(seconds=args.timeout))
        try:
            rank, world_size = dist.get_rank(), dist.get_world_size()
            _check_run(args, world_size)
            results = [None] * world_size
            dist.all_gather_object(results, command_worker(rank, world_size, options))
        finally:
            dist.destroy_process_group()
        return _report(options, results, world_size, backend) if rank == 0 else 0
    _check_run(args, args.nproc)
    options["device"] = "cpu"
    results = spawn(command_worker, options, nproc=args.nproc, timeout=args.timeout)
    return _report(options, results, args.nproc, "gloo")


def _check_run(args, world_size: int) -> None:
    parts = 2 * world_size if args.zigzag else world_size
    check_divisible(args.seq_len, "--seq-len", parts, "the number of chunks")
    if args.strategy == "ulysses":
        check_divisible(args.heads, "--heads", world_size, "the number of processes")


if __name__ == "__main__":
    # Run as a script, this file is __main__; the workers must be pickled from the package.
    from attention.distributed import main as _main

    sys.exit(_main())
