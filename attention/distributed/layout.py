r"""Where the sequence lives: which positions each rank holds, and the checks every strategy runs.

A sequence of L positions is split between the P ranks of a process group. In the contiguous
layout rank ``r`` holds chunk ``r`` of P; in the zigzag layout the sequence is cut into 2P chunks
and rank ``r`` holds chunks ``r`` and ``2P - 1 - r``, an early one and a late one, which balances
the work of causal attention. :func:`shard_sequence` takes a rank's part, :func:`gather_sequence`
puts the parts back together.

The strategies (:mod:`~attention.distributed.ring`, :mod:`~attention.distributed.all_gather`,
:mod:`~attention.distributed.ulysses`) share what is here: the positions of a rank's rows, the
tiles of (query rows, key columns) of rank blocks that causal attention computes
(:func:`attention.tiled.tiles`), the all-to-all they send shards with, and the checks of their
inputs, which refuse bad shards before any communication and then check, with one small
collective, that every rank holds shards of the same shape.
"""

from __future__ import annotations

import zlib
from typing import NamedTuple

import torch
import torch.distributed as dist
from torch import Tensor

from .._checks import check_bool, check_divisible, check_int, check_same_kind, check_tensor
from ..functional import _check_qkv
from ..tiled import tiles
from .cost import count_sent

__all__ = ["shard_sequence", "gather_sequence"]


# ---------------------------------------------------------------------------------------------
# Which global positions a rank holds


def _chunks(rank: int, world_size: int, zigzag: bool) -> list[int]:
    """The chunks of the sequence rank ``rank`` holds: ``[r]`` of P, or ``[r, 2P-1-r]`` of 2P."""
    return [rank, 2 * world_size - 1 - rank] if zigzag else [rank]


def positions(rank: int, world_size: int, local_len: int, zigzag: bool) -> Tensor:
    """Global positions of the ``local_len`` rows of rank ``rank``, in the order it holds them
    (a 1-D CPU tensor, as :func:`attention.tiled.tiles` takes them)."""
    chunks = _chunks(rank, world_size, zigzag)
    size = local_len // len(chunks)
    return torch.cat([torch.arange(c * size, (c + 1) * size) for c in chunks])  # (L/P,)


def rank_tiles(q_ranks, k_ranks, world_size: int, local_len: int, *, causal: bool, zigzag: bool):
    """The tiles of the queries of ``q_ranks`` over the keys of ``k_ranks``, one rank block each.

    The rows are the ranks' rows in the order given, ``local_len`` per rank, and so are the
    columns. Without a causal mask every block is one tile. With it, a block whose keys all
    lie after its queries is skipped and the others are trimmed to the rows that see a key and
    the columns that some query sees: positions increase along a rank's rows in both layouts,
    so that part of a block is one rectangle, with a mask where it crosses the diagonal.
    """
    L, S = len(q_ranks) * local_len, len(k_ranks) * local_len
    if not causal:
        return tiles(L, S, local_len, local_len)
    q_pos = torch.cat([positions(r, world_size, local_len, zigzag) for r in q_ranks])  # (L,)
    k_pos = torch.cat([positions(r, world_size, local_len, zigzag) for r in k_ranks])  # (S,)
    return tiles(L, S, local_len, local_len, q_pos=q_pos, k_pos=k_pos)


def _check_layout_args(rank, world_size, zigzag) -> None:
    for name, value in (("rank", rank), ("world_size", world_size)):
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"{name} must be an int; got {type(value).__name__}")
    check_int(world_size, "world_size")
    if not 0 <= rank < world_size:
        raise ValueError(f"rank must be in [0, world_size={world_size}); got {rank}")
    check_bool(zigzag, "zigzag")


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

        >>> from attention.distributed import shard_sequence
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

        >>> import torch.distributed as dist
        >>> from attention.distributed import gather_sequence, shard_sequence
        >>> dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
        >>> x = torch.arange(8.0)[:, None]  # (L, 1)
        >>> mine = shard_sequence(x, rank=0, world_size=1, zigzag=True)  # (L/P, 1)
        >>> torch.equal(gather_sequence(mine, zigzag=True), x)
        True
        >>> dist.destroy_process_group()
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


def all_to_all(x: Tensor, group, world_size: int) -> Tensor:
    """Send ``x[j]`` to rank j; return the tensor whose row i came from rank i (counted)."""
    x = x.contiguous()  # and the output below too: the collective reads and writes memory
    out = torch.empty_like(x)
    dist.all_to_all_single(out, x, group=group)
    count_sent("all_to_all", x, world_size)
    return out


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


class Shards(NamedTuple):
    """What a strategy needs to know about its call, once the shards are checked."""

    group: object
    rank: int
    world_size: int
    scale: float  # the kernel's default, 1/sqrt(D)
    empty: bool  # the output has no element (L/P, D_v, N or H is 0): nothing to compute


def check_shards(query, key, value, causal, zigzag, group) -> Shards:
    """Check local (N, H, L/P, D) shards and the flags, then agree on them with the other ranks.

    Everything about this rank's inputs is checked before any communication; then one small
    collective checks that every rank holds shards of the same shape and dtype, with the same
    flags: a mismatch would otherwise fail inside gloo or NCCL ("Connection reset by peer") or
    hang.
    """
    for name, x in (("query", query), ("key", key), ("value", value)):
        check_tensor(x, name, ndim=4)
    for name, x in (("key", key), ("value", value)):
        check_same_kind(x, name, query, "query")
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
    check_bool(causal, "causal")
    check_bool(zigzag, "zigzag")
    if zigzag:
        check_divisible(query.shape[-2], "the local length (query.shape[-2])", 2, "2 (zigzag)")
    _, scale = _check_qkv(query, key, value, None)
    group, rank, world_size = _group(group)
    _check_same_on_every_rank(query, value, causal, zigzag, group)
    N, H, Lp, _ = query.shape
    return Shards(group, rank, world_size, scale, N * H * Lp * value.shape[-1] == 0)


#: What every rank must agree on, as named in the error message.
_AGREED = (
    "the batch size N (query.shape[0])",
    "the number of heads H (query.shape[1])",
    None,  # the local length: its own message
    "the head size D (query.shape[3])",
    "the value head size D_v (value.shape[3])",
    "causal",
    "zigzag",
    None,  # the dtype: its own message
)


def _check_same_on_every_rank(query, value, causal, zigzag, group) -> None:
    """One all-reduce of a few integers: the largest and the smallest of each over the ranks."""
    N, H, Lp, D = query.shape
    dtype_code = zlib.crc32(str(query.dtype).encode())  # the same number in every process
    mine = [N, H, Lp, D, value.shape[-1], int(causal), int(zigzag), dtype_code]
    both = torch.tensor(mine + [-x for x in mine], dtype=torch.int64, device=query.device)
    dist.all_reduce(both, op=dist.ReduceOp.MAX, group=group)
    high, low = both[: len(mine)].tolist(), [-x for x in both[len(mine) :].tolist()]
    if low[2] != high[2]:
        raise ValueError(
            f"the shards must have equal length on every rank: query.shape[-2] (L/P) is "
            f"{Lp} here and ranges from {low[2]} to {high[2]} over the group - shard the "
            "sequence with attention.distributed.shard_sequence"
        )
    if low[-1] != high[-1]:
        raise ValueError(
            f"the shards must have the same dtype on every rank; this rank's are {query.dtype} "
            "and another rank's differ"
        )
    for name, here, lo, hi in zip(_AGREED, mine, low, high, strict=True):
        if name is not None and lo != hi:
            raise ValueError(
                f"{name} must be the same on every rank; got values from {lo} to {hi} over "
                f"the group ({here} here)"
            )


def empty_output(query: Tensor, key: Tensor, value: Tensor) -> Tensor:
    """The (N, H, L/P, D_v) output when it has no element, joined to the graph of the inputs:
    its backward gives gradients 0, as ``F.scaled_dot_product_attention`` does."""
    N, H, Lp, _ = query.shape
    nothing = (query.sum() + key.sum() + value.sum()) * 0  # (): 0, joined to every input
    return nothing + value.new_zeros((N, H, Lp, value.shape[-1]))  # (N, H, L/P, Dv)
