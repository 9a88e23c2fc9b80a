r"""FlashAttention as Triton kernels: the forward and the backward that a GPU runs.

:func:`attention.tiled_attention` does FlashAttention's arithmetic in PyTorch, one operation on
a whole tile at a time, each reading and writing memory. Here the same arithmetic is written as
*kernels* :cite:p:`dao2022,dao2023`: a grid of programs, each owning one block of rows, which
keeps its running state on the chip while blocks of the other side stream past it.

- :func:`_forward_kernel`: one program per block of queries (and head); it keeps the running
  maximum, sum and output of its rows, visits the key blocks a causal mask leaves visible and
  skips the rest, and stores the output and the log-sum-exp of every row.
- :func:`_key_value_gradients_kernel`: one program per block of keys; it visits the query blocks
  that see its keys and adds up :math:`dK` and :math:`dV`, recomputing the weights from the
  log-sum-exp.
- :func:`_query_gradients_kernel`: one program per block of queries; the same walk as the
  forward, adding up :math:`dQ`.

The backward runs over blocks of keys as FlashAttention-2's does, but computes :math:`dQ` in a
kernel of its own instead of adding it with atomic operations: each program writes only the
gradient rows it owns, so no two programs add into the same memory and every run gives the same
result, at the price of computing the scores and :math:`dP` in both kernels.
:func:`flash_attention` checks its inputs and runs them.

Triton compiles the kernels for a GPU. With no GPU, this module switches Triton's *interpreter*
on (``TRITON_INTERPRET=1``) unless the variable is already set: the same kernels then run on CPU
tensors, every program in turn, in NumPy. Triton reads the variable when ``triton.language`` is
first imported, and ``torch.compile`` imports it too, so a program that compiles anything before
importing this module sets the variable at its start (the docs build and the tests do); on a
machine with a GPU, that is also how to run the interpreter. :data:`INTERPRETED` says which way
the kernels run.

The rest of the package never imports this module, and works without Triton.
"""

import os

import torch
from torch import Tensor

from ._checks import check_bool, check_int, check_tensor
from .functional import _check_qkv, accumulation_dtype

if not torch.cuda.is_available():  # no GPU to compile for: run the kernels in Python
    os.environ.setdefault("TRITON_INTERPRET", "1")
try:
    import triton
    import triton.language as tl
    from triton.runtime.interpreter import InterpretedFunction
except ImportError as error:  # the package works without Triton; only this module needs it
    raise ImportError(
        "attention.flash_triton needs Triton (`pip install triton`, wheels for Linux only); "
        "the rest of the package works without it"
    ) from error

__all__ = ["flash_attention", "INTERPRETED"]

INTERPRETED = os.environ.get("TRITON_INTERPRET") == "1"
"""Whether the kernels run in Triton's interpreter (on CPU tensors) rather than compiled."""

if INTERPRETED and not isinstance(tl.zeros, InterpretedFunction):
    raise RuntimeError(
        "triton.language was imported before TRITON_INTERPRET=1 was set (torch.compile imports "
        "it), so its functions cannot run in the interpreter: set TRITON_INTERPRET=1 at the "
        "start of the program"
    )

DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)
MAX_HEAD_DIM = 256  # a block of queries and its (BLOCK, D) output must fit in registers
# Triton compiles a kernel again for an int argument equal to 1 or a multiple of 16; the lengths
# and the group size change from call to call, and gain nothing from it.
LENGTHS = ["L", "S", "GROUP"]


@triton.jit(do_not_specialize=LENGTHS)
def _forward_kernel(
    Q, K, V, O, LSE,  # noqa: E741  pointers to the first element of (N, H, L, D) tensors
    scale, L, S, D, GROUP,  # GROUP query heads share one key/value head
    CAUSAL: tl.constexpr, BLOCK: tl.constexpr, BLOCK_D: tl.constexpr, ACC: tl.constexpr,
):  # fmt: skip
    """One program: BLOCK queries of one head against every key block they may see."""
    first_query = tl.program_id(0) * BLOCK
    head, kv_head = tl.program_id(1), tl.program_id(1) // GROUP  # n * H + h, n * H_kv + h_kv
    rows = first_query + tl.arange(0, BLOCK)  # this program's queries
    dims = tl.arange(0, BLOCK_D)  # D rounded up to a power of two; the rest is masked
    q_at = head * L * D + rows[:, None] * D + dims[None, :]  # (BLOCK, BLOCK_D) offsets
    q = tl.load(Q + q_at, mask=(rows[:, None] < L) & (dims[None, :] < D), other=0.0)

    # The running state of every row, kept in registers for the whole walk.
    m = tl.full([BLOCK], float("-inf"), ACC)  # largest score so far
    ell = tl.zeros([BLOCK], ACC)  # sum of exp(score - m)
    acc = tl.zeros([BLOCK, BLOCK_D], ACC)  # sum of exp(score - m) * value

    # Query i sits at position i + S - L (bottom-right aligned, as attention.causal_mask) and
    # sees the keys j <= i + S - L: the key blocks after the last row's are never visited.
    end = S
    if CAUSAL:
        end = tl.minimum(S, first_query + BLOCK + S - L)
    for first_key in range(0, end, BLOCK):
        keys = first_key + tl.arange(0, BLOCK)
        kv_at = kv_head * S * D + keys[:, None] * D + dims[None, :]  # (BLOCK, BLOCK_D)
        kv_mask = (keys[:, None] < S) & (dims[None, :] < D)
        k = tl.load(K + kv_at, mask=kv_mask, other=0.0)
        v = tl.load(V + kv_at, mask=kv_mask, other=0.0)
        # Products accumulate in float32 (float64 for float64), so q . k cannot overflow.
        s = tl.dot(q, tl.trans(k), input_precision="ieee") * scale  # (BLOCK, BLOCK) scores
        allowed = keys[None, :] < S  # the last block may reach past S
        if CAUSAL:
            allowed = allowed & (keys[None, :] <= rows[:, None] + S - L)
        s = tl.where(allowed, s, float("-inf"))

        # The online softmax: rescale what was summed so far to the new maximum.
        m_new = tl.maximum(m, tl.max(s, axis=1))
        m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)  # a row that has seen no key
        p = tl.exp(s - m_safe[:, None])  # (BLOCK, BLOCK) unnormalised weights
        alpha = tl.exp(m - m_safe)  # the share the earlier blocks keep
        ell = ell * alpha + tl.sum(p, axis=1)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v, input_precision="ieee")
        m = m_new

    seen = ell > 0  # rows with no key to attend to give output 0 and log-sum-exp -inf
    out = acc / tl.where(seen, ell, 1.0)[:, None]  # (BLOCK, BLOCK_D)
    lse = tl.where(seen, m + tl.log(tl.where(seen, ell, 1.0)), float("-inf"))  # (BLOCK,)
    tl.store(O + q_at, out.to(O.dtype.element_ty), mask=(rows[:, None] < L) & (dims[None, :] < D))
    tl.store(LSE + head * L + rows, lse, mask=rows < L)


@triton.jit(do_not_specialize=LENGTHS)
def _key_value_gradients_kernel(
    Q, K, V, dO, LSE, DELTA, dK, dV,
    scale, L, S, D, GROUP,
    CAUSAL: tl.constexpr, BLOCK: tl.constexpr, BLOCK_D: tl.constexpr, ACC: tl.constexpr,
):  # fmt: skip
    """One program: dK and dV of BLOCK keys of one key/value head, from every query that sees
    them, in each of the GROUP query heads that share the head."""
    first_key = tl.program_id(0) * BLOCK
    kv_head = tl.program_id(1)  # n * H_kv + h_kv
    keys = first_key + tl.arange(0, BLOCK)
    dims = tl.arange(0, BLOCK_D)
    kv_at = kv_head * S * D + keys[:, None] * D + dims[None, :]  # (BLOCK, BLOCK_D)
    kv_mask = (keys[:, None] < S) & (dims[None, :] < D)
    k = tl.load(K + kv_at, mask=kv_mask, other=0.0)
    v = tl.load(V + kv_at, mask=kv_mask, other=0.0)
    dk = tl.zeros([BLOCK, BLOCK_D], dtype=ACC)
    dv = tl.zeros([BLOCK, BLOCK_D], dtype=ACC)

    # Causal: the first query that sees key j is i = j - (S - L); earlier blocks are skipped.
    start = 0
    if CAUSAL:
        start = tl.maximum(0, first_key - (S - L)) // BLOCK * BLOCK
    for g in range(0, GROUP):
        head = kv_head * GROUP + g  # n * H + h
        for first_query in range(start, L, BLOCK):
            rows = first_query + tl.arange(0, BLOCK)
            q_at = head * L * D + rows[:, None] * D + dims[None, :]
            q_mask = (rows[:, None] < L) & (dims[None, :] < D)
            q = tl.load(Q + q_at, mask=q_mask, other=0.0)
            do = tl.load(dO + q_at, mask=q_mask, other=0.0)
            lse = tl.load(LSE + head * L + rows, mask=rows < L, other=0.0)
            delta = tl.load(DELTA + head * L + rows, mask=rows < L, other=0.0)

            s = tl.dot(q, tl.trans(k), input_precision="ieee") * scale  # (BLOCK, BLOCK)
            allowed = (rows[:, None] < L) & (keys[None, :] < S)
            if CAUSAL:
                allowed = allowed & (keys[None, :] <= rows[:, None] + S - L)
            p = tl.where(allowed, tl.exp(s - lse[:, None]), 0.0)  # the weights, recomputed
            dv += tl.dot(tl.trans(p).to(do.dtype), do, input_precision="ieee")  # P^T dO
            dp = tl.dot(do, tl.trans(v), input_precision="ieee")  # dO V^T: (BLOCK, BLOCK)
            ds = p * (dp - delta[:, None])  # the softmax's backward
            dk += tl.dot(tl.trans(ds).to(q.dtype), q, input_precision="ieee")  # dS^T Q

    tl.store(dK + kv_at, (dk * scale).to(dK.dtype.element_ty), mask=kv_mask)
    tl.store(dV + kv_at, dv.to(dV.dtype.element_ty), mask=kv_mask)


@triton.jit(do_not_specialize=LENGTHS)
def _query_gradients_kernel(
    Q, K, V, dO, LSE, DELTA, dQ,
    scale, L, S, D, GROUP,
    CAUSAL: tl.constexpr, BLOCK: tl.constexpr, BLOCK_D: tl.constexpr, ACC: tl.constexpr,
):  # fmt: skip
    """One program: dQ of BLOCK queries of one head, walking the key blocks as the forward."""
    first_query = tl.program_id(0) * BLOCK
    head, kv_head = tl.program_id(1), tl.program_id(1) // GROUP
    rows = first_query + tl.arange(0, BLOCK)
    dims = tl.arange(0, BLOCK_D)
    q_at = head * L * D + rows[:, None] * D + dims[None, :]
    q_mask = (rows[:, None] < L) & (dims[None, :] < D)
    q = tl.load(Q + q_at, mask=q_mask, other=0.0)
    do = tl.load(dO + q_at, mask=q_mask, other=0.0)
    lse = tl.load(LSE + head * L + rows, mask=rows < L, other=0.0)
    delta = tl.load(DELTA + head * L + rows, mask=rows < L, other=0.0)
    dq = tl.zeros([BLOCK, BLOCK_D], dtype=ACC)

    end = S
    if CAUSAL:
        end = tl.minimum(S, first_query + BLOCK + S - L)
    for first_key in range(0, end, BLOCK):
        keys = first_key + tl.arange(0, BLOCK)
        kv_at = kv_head * S * D + keys[:, None] * D + dims[None, :]
        kv_mask = (keys[:, None] < S) & (dims[None, :] < D)
        k = tl.load(K + kv_at, mask=kv_mask, other=0.0)
        v = tl.load(V + kv_at, mask=kv_mask, other=0.0)
        s = tl.dot(q, tl.trans(k), input_precision="ieee") * scale  # (BLOCK, BLOCK)
        allowed = (rows[:, None] < L) & (keys[None, :] < S)
        if CAUSAL:
            allowed = allowed & (keys[None, :] <= rows[:, None] + S - L)
        p = tl.where(allowed, tl.exp(s - lse[:, None]), 0.0)
        dp = tl.dot(do, tl.trans(v), input_precision="ieee")  # (BLOCK, BLOCK)
        ds = p * (dp - delta[:, None])
        dq += tl.dot(ds.to(k.dtype), k, input_precision="ieee")  # dS K: (BLOCK, BLOCK_D)

    tl.store(dQ + q_at, (dq * scale).to(dQ.dtype.element_ty), mask=q_mask)


def _launch_options(D: int, block_size: int, causal: bool, dtype: torch.dtype) -> dict:
    """The keywords every kernel takes besides its tensors: what it is compiled for."""
    return {
        "CAUSAL": causal,
        "BLOCK": block_size,
        "BLOCK_D": max(16, triton.next_power_of_2(D)),  # tl.dot takes blocks of 16 or more
        "ACC": tl.float64 if dtype == torch.float64 else tl.float32,  # the running sums' dtype
    }


class _FlashAttention(torch.autograd.Function):
    """The kernels as an autograd function: the forward saves the output and the log-sum-exp of
    every row, the backward recomputes the weights from them."""

    @staticmethod
    def forward(ctx, query, key, value, causal, scale, block_size):
        N, H, L, D = query.shape
        H_kv, S = key.shape[1], key.shape[2]
        q, k, v = query.contiguous(), key.contiguous(), value.contiguous()
        out = torch.empty_like(q)  # (N, H, L, D)
        lse = torch.empty(N, H, L, device=q.device, dtype=accumulation_dtype(q.dtype))  # (N, H, L)
        grid = (triton.cdiv(L, block_size), N * H)  # (query blocks, heads): one program each
        options = _launch_options(D, block_size, causal, q.dtype)
        _forward_kernel[grid](q, k, v, out, lse, scale, L, S, D, H // H_kv, **options)
        ctx.save_for_backward(q, k, v, out, lse)
        ctx.causal, ctx.scale, ctx.block_size = causal, scale, block_size
        return out

    @staticmethod
    def backward(ctx, grad_out):
        if torch.is_grad_enabled():  # create_graph=True asks for a graph of the gradient
            raise RuntimeError(
                "flash_attention has first derivatives only: its backward kernels are not "
                "differentiable, so create_graph=True is not supported; use "
                "attention.scaled_dot_product_attention there"
            )
        q, k, v, out, lse = ctx.saved_tensors
        N, H, L, D = q.shape
        H_kv, S = k.shape[1], k.shape[2]
        do = grad_out.contiguous()
        delta = (do.to(lse.dtype) * out).sum(dim=-1)  # rowsum(dO * O): (N, H, L)
        dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
        options = _launch_options(D, ctx.block_size, ctx.causal, q.dtype)
        args = (ctx.scale, L, S, D, H // H_kv)
        kv_grid = (triton.cdiv(S, ctx.block_size), N * H_kv)  # (key blocks, key/value heads)
        _key_value_gradients_kernel[kv_grid](q, k, v, do, lse, delta, dk, dv, *args, **options)
        q_grid = (triton.cdiv(L, ctx.block_size), N * H)  # (query blocks, heads)
        _query_gradients_kernel[q_grid](q, k, v, do, lse, delta, dq, *args, **options)
        return dq, dk, dv, None, None, None


def _check_inputs(query, key, value, causal, scale, block_size) -> float:
    """Refuse what the kernels do not handle, before any work; return the scale."""
    for name, x in (("query", query), ("key", key), ("value", value)):
        check_tensor(x, name, ndim=4)
    _, scale = _check_qkv(query, key, value, scale, enable_gqa=True)
    check_bool(causal, "causal")
    check_int(block_size, "block_size", minimum=16)
    if block_size & (block_size - 1):
        raise ValueError(f"block_size must be a power of two (16, 32, 64, ...); got {block_size}")
    if query.dtype not in DTYPES:
        raise TypeError(f"query must be float16, bfloat16, float32 or float64; got {query.dtype}")
    (N, H, L, D), (N_kv, _, S, _) = query.shape, key.shape
    if value.shape != key.shape or N_kv != N:
        raise ValueError(
            f"key and value must both be (N={N}, H_kv, S, D={D}); got key {tuple(key.shape)} "
            f"and value {tuple(value.shape)}"
        )
    if L == 0 or S == 0 or D == 0 or N * H == 0:
        raise ValueError(
            f"flash_attention needs at least one query, key, head and feature; got query "
            f"{tuple(query.shape)} and key {tuple(key.shape)}"
        )
    if D > MAX_HEAD_DIM:
        raise ValueError(f"the head dimension D must be at most {MAX_HEAD_DIM}; got {D}")
    if query.dtype == torch.bfloat16 and INTERPRETED:
        raise TypeError(
            "bfloat16 runs only compiled, on a GPU: Triton's interpreter keeps bfloat16 as "
            "16-bit integers and multiplies the blocks as such; use float16 or float32 here"
        )
    if query.device.type == "cpu" and not INTERPRETED:
        raise ValueError(
            "query is on the CPU, and the kernels are compiled for a GPU: move the tensors to "
            "the GPU, or set TRITON_INTERPRET=1 before importing attention.flash_triton"
        )
    return scale


def flash_attention(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    *,
    causal: bool = False,
    scale: float | None = None,
    block_size: int = 64,
) -> Tensor:
    r"""Attention by the Triton kernels of FlashAttention-2, forward and backward.

    A grid of programs, one per block of ``block_size`` queries and head, computes
    :math:`\text{softmax}(\text{scale} \cdot QK^\top) V` with the online softmax, never storing
    the scores; it saves the output and the log-sum-exp of every row, from which the backward
    kernels recompute the weights. With ``causal=True`` the key blocks that lie wholly in a
    block's future are skipped. Keys and values may have fewer heads than the queries (grouped
    queries): query head ``h`` reads key/value head ``h // (H / H_kv)``. The result equals
    ``F.scaled_dot_product_attention`` to rounding.

    On a GPU the kernels are compiled; without one they run in Triton's interpreter
    (:data:`INTERPRETED`), slowly, which is how the tests and the docs build check them. It has
    first derivatives only (no ``create_graph=True``).

    Args:
        query (Tensor): queries, float16, bfloat16, float32 or float64.
        key (Tensor): keys, same dtype and device.
        value (Tensor): values, same shape as ``key``.
        causal (bool): query ``i`` attends only to keys ``j <= i + (S - L)`` (bottom-right
            aligned, as :func:`attention.causal_mask`; for ``L = S`` the same as
            ``is_causal=True``). Rows that see no key give 0. Default: ``False``.
        scale (float, optional): multiplies :math:`QK^\top`. Default: ``None``
            (:math:`1/\sqrt{D}`).
        block_size (int): queries (and keys) per block, a power of two, at least 16.
            Default: ``64``.

    Shape:
        - query: :math:`(N, H, L, D)`, with :math:`D \le 256`
        - key, value: :math:`(N, H_{kv}, S, D)`, with :math:`H_{kv}` dividing :math:`H`
        - Output: :math:`(N, H, L, D)`

    Returns:
        Tensor: the attention output, in the dtype of ``query``.

    Examples::

        >>> from attention.flash_triton import flash_attention
        >>> q, k, v = (torch.randn(1, 2, 40, 16) for _ in range(3))
        >>> out = flash_attention(q, k, v, causal=True, block_size=16)
        >>> expected = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        >>> torch.allclose(out, expected, atol=1e-6)
        True
    """
    scale = _check_inputs(query, key, value, causal, scale, block_size)
    return _FlashAttention.apply(query, key, value, causal, scale, block_size)
