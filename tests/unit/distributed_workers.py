"""Workers that the context-parallel tests run on spawned processes (attention.distributed.spawn).

They live in a module of their own, not in the test file and not in the package: a spawned
child imports the worker by its module's name, with the parent's ``sys.path``, so it needs an
importable module and nothing from pytest. Each worker is called as ``fn(rank, world_size,
*args)`` inside a gloo group and returns picklable results, which the tests then judge.
"""

import traceback

import torch
import torch.distributed as dist
import torch.nn.functional as F

from attention.distributed import STRATEGIES, run_cases, shard_sequence, ulysses_attention

from .helpers import NEAR_RANGE, near_range

SHAPE = (2, 4, 24, 8)  # (N, H, L, D): L divides by 2P for P = 2 and 4 (zigzag)
CASES = [
    {"strategy": s, "causal": c, "zigzag": z, "shape": SHAPE}
    for s in STRATEGIES
    for c in (False, True)
    for z in (False, True)
]
GRID = [(s, c, z) for s in STRATEGIES for c in (False, True) for z in (False, True)]


def world_and_rank(rank, world_size):
    """The smallest worker: where am I?"""
    return dist.get_rank(), dist.get_world_size()


def fail_on_rank(rank, world_size, fail_rank):
    """A worker whose rank ``fail_rank`` raises while the others wait for it in a collective."""
    if rank == fail_rank:
        raise ValueError(f"rank {rank} raises on purpose")
    dist.barrier()  # never returns: the failing rank does not arrive
    return rank


def a_tensor(rank, world_size):
    """A worker that returns a tensor (sent back by value, not as memory shared with a process
    that has ended)."""
    return torch.full((2,), float(rank))


def cases_and_errors(rank, world_size):
    """Every case, then the errors that need a process group of ``world_size``."""
    results = run_cases(rank, world_size, CASES)
    q = torch.randn(1, world_size + 1, 4, 8, dtype=torch.float64)  # heads not divisible by P
    try:
        ulysses_attention(q, q, q)
    except ValueError as error:
        heads_error = str(error)
    else:
        heads_error = None
    return results, heads_error


def _attempt(fn, *args):
    """``("ok", fn(*args))``, or ``("error", traceback)``: one check's failure stays its own."""
    try:
        return "ok", fn(*args)
    except Exception:
        return "error", traceback.format_exc()


def hardening(rank, world_size):
    """The inputs that used to fail: each check's results, by name, for the tests to judge."""
    return {
        "near_range": _attempt(_near_range, rank, world_size),
        "empty_shard": _attempt(_empty_shard, rank, world_size),
        "head_size_0": _attempt(_head_size_0, rank, world_size),
        "unequal_lengths": _attempt(_unequal_lengths, rank),
    }


def _shard(x, rank, world_size, zigzag):
    return shard_sequence(x, rank=rank, world_size=world_size, zigzag=zigzag)


def _near_range(rank, world_size):
    """float16 and bfloat16 queries and keys whose q.k overflows the format unless scaled first:
    every strategy's output next to single-process attention's on the same values (float64)."""
    found = {}
    for low in NEAR_RANGE:
        x = near_range(low, N=4, L=8 * world_size, D=64)[None]  # (1, H, L, D)
        v = torch.randn(x.shape, generator=torch.Generator().manual_seed(0)).to(low)
        for strategy, causal, zigzag in GRID:
            q, k, vs = (_shard(t, rank, world_size, zigzag) for t in (x, x, v))
            out = STRATEGIES[strategy](q, k, vs, causal=causal, zigzag=zigzag)
            expected = F.scaled_dot_product_attention(
                x.double(), x.double(), v.double(), is_causal=causal
            )  # (1, H, L, D)
            found[str(low), strategy, causal, zigzag] = (
                out.double(),
                _shard(expected, rank, world_size, zigzag),
            )
    return found


def _empty_shard(rank, world_size):
    """Shards of no position (L/P = 0): the output's shape, and the gradients' after backward."""
    found = {}
    for strategy, causal, zigzag in GRID:
        q, k, v = (torch.randn(1, 4, 0, 8, dtype=torch.float64, requires_grad=True) for _ in "qkv")
        out = STRATEGIES[strategy](q, k, v, causal=causal, zigzag=zigzag)
        out.sum().backward()
        expected = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
        found[strategy, causal, zigzag] = (
            tuple(out.shape),
            tuple(expected.shape),
            [tuple(t.grad.shape) for t in (q, k, v)],
        )
    return found


def _head_size_0(rank, world_size):
    """Heads of size 0: with D = D_v = 0 an empty output; with D = 0 < D_v, what SDPA gives
    (every allowed key equally weighted), output and gradients."""
    found = {}
    L = 4 * world_size
    generator = torch.Generator().manual_seed(0)
    for strategy, causal, zigzag in GRID:
        for Dv in (0, 3):
            whole = [torch.randn(1, 4, L, D, generator=generator, dtype=torch.float64)
                     for D in (0, 0, Dv)]  # fmt: skip
            grad = torch.randn(1, 4, L, Dv, generator=generator, dtype=torch.float64)
            local = [_shard(t, rank, world_size, zigzag).requires_grad_() for t in whole]
            out = STRATEGIES[strategy](*local, causal=causal, zigzag=zigzag)
            out.backward(_shard(grad, rank, world_size, zigzag))
            ref = [t.clone().requires_grad_() for t in whole]
            expected = F.scaled_dot_product_attention(*ref, is_causal=causal)
            expected.backward(grad)
            found[strategy, causal, zigzag, Dv] = (
                out.detach(),
                _shard(expected.detach(), rank, world_size, zigzag),
                local[2].grad,
                _shard(ref[2].grad, rank, world_size, zigzag),
            )
    return found


def _unequal_lengths(rank):
    """Rank 0 holds 2 positions, the others 4: each strategy's error, on every rank."""
    Lp = 2 if rank == 0 else 4
    found = {}
    for strategy, fn in STRATEGIES.items():
        q = torch.randn(1, 4, Lp, 8, dtype=torch.float64)
        try:
            fn(q, q, q)
        except ValueError as error:
            found[strategy] = str(error)
        else:
            found[strategy] = None
    return found
