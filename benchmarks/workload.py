"""What the benchmarks run and how much work it is: FLOP counts, the matmul roof, module steps.

Timing and memory are measured with the package's own timer and meter (:mod:`attention.measure`:
``compare``, ``time_it``, ``round_ratios``, ``peak_memory``); this module holds only what is
particular to the benchmarks.

- FLOPs follow FlashAttention-2's count: a forward pass of attention does two matmuls of
  ``2 * L * S * D`` operations per head (``4 * N * H * L * S * D``), half of it when causal; a
  backward pass counts as 2.5 forward passes. A module's forward adds its four projections, and
  its training step (forward and backward, the backward computing the gradients of the inputs
  and of the weights) counts as 3 forward passes.
- :func:`matmul_case`: a square product, timed in the same rounds as a case, is the roof its
  FLOP/s are read against.
- :func:`module_step` and :func:`attention_step`: one inference call or one training step
  (forward and backward) as a function of no arguments, the form the timer takes.
"""

from __future__ import annotations

from collections.abc import Callable

import torch


def attention_flops(N: int, H: int, L: int, S: int, D: int, *, causal: bool = False) -> float:
    """Forward FLOPs of attention (FlashAttention-2's count): ``4 N H L S D``, halved if causal."""
    flops = 4 * N * H * L * S * D  # Q K^T and P V: 2 L S D each per head
    return flops / 2 if causal else flops


def mha_flops(
    N: int, L: int, S: int, E: int, H: int, *, training: bool = False, recompute: bool = False
) -> float:
    """FLOPs of a multi-head attention module: projections plus attention; training = 3x.

    ``recompute=True`` counts a training step's attention as FlashAttention-2 does for its
    kernels, whose backward recomputes :math:`QK^\\top`: forward plus 2.5 forwards, not 3x.
    """
    projections = 2 * N * L * E * E * 2 + 2 * N * S * E * E * 2  # q, out on L rows; k, v on S
    attention = attention_flops(N, H, L, S, E // H)
    if not training:
        return projections + attention
    return 3 * projections + (3.5 if recompute else 3) * attention


def matmul_case(n: int = 2048, *, device=None, dtype=torch.float32):
    """A square ``(n, n) @ (n, n)`` product and its FLOPs: what the hardware can do."""
    a = torch.randn(n, n, device=device, dtype=dtype)
    b = torch.randn(n, n, device=device, dtype=dtype)
    return (lambda: a @ b), 2 * n**3


def module_step(m: torch.nn.Module, call: Callable, x: torch.Tensor, mode: str) -> Callable:
    """A function of no arguments that runs ``call(m, x)`` once: an inference pass, or for
    ``mode="training"`` a forward and backward pass to the input and every parameter."""
    if mode == "inference":
        m.eval()

        def step():
            with torch.inference_mode():
                return call(m, x)

        return step
    m.train()  # dropout is 0: train() changes the code path, not the result
    xg = x.clone().requires_grad_()
    inputs, grad = [xg, *m.parameters()], torch.randn_like(x)
    return lambda: torch.autograd.grad(call(m, xg), inputs, grad)


def attention_step(fn: Callable, q, k, v, mode: str, *, seed: int = 1) -> Callable:
    """A function of no arguments that runs the attention ``fn(q, k, v)`` once: without autograd
    (``mode="inference"``), or forward and backward to the queries, keys and values
    (``mode="training"``, with a fixed random gradient of the output)."""
    if mode == "inference":

        def infer():
            with torch.inference_mode():
                return fn(q, k, v)

        return infer
    q, k, v = (x.detach().requires_grad_() for x in (q, k, v))
    g = torch.Generator(device=q.device).manual_seed(seed)
    shape = (*torch.broadcast_shapes(q.shape[:-2], v.shape[:-2]), q.shape[-2], v.shape[-1])
    grad = torch.randn(shape, device=q.device, dtype=q.dtype, generator=g)  # (*, L, Dv)
    return lambda: torch.autograd.grad(fn(q, k, v), (q, k, v), grad)
