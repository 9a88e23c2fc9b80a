"""The attention computations the benchmarks compare, by name, as ``fn(q, k, v) -> output``.

- ``reference``: :func:`attention.scaled_dot_product_attention`, the readable path that
  materialises the (N, H, L, S) weights;
- ``tiled``: :func:`attention.tiled_attention`, online softmax over blocks;
- ``sdpa``: :func:`torch.nn.functional.scaled_dot_product_attention`, letting torch choose;
- ``math``, ``flash``, ``efficient``, ``cudnn``: the same function restricted to one backend with
  ``torch.nn.attention.sdpa_kernel`` (``math`` runs everywhere, ``flash`` on the CPU and on
  GPUs, ``efficient`` and ``cudnn`` on GPUs only).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.nn.attention import SDPBackend, sdpa_kernel

import attention

BACKENDS = {
    "math": SDPBackend.MATH,
    "flash": SDPBackend.FLASH_ATTENTION,
    "efficient": SDPBackend.EFFICIENT_ATTENTION,
    "cudnn": SDPBackend.CUDNN_ATTENTION,
}

Path = Callable[[Tensor, Tensor, Tensor], Tensor]


def attention_path(name: str, *, causal: bool = False, block_size: int | None = None) -> Path:
    """The computation called ``name`` (see the module docstring), causal or not."""
    if name == "reference":

        def reference(q, k, v):
            L, S = q.shape[-2], k.shape[-2]
            mask = attention.causal_mask(L, S, device=q.device) if causal else None
            return attention.scaled_dot_product_attention(q, k, v, mask)[0]

        return reference
    if name == "tiled":
        options = {} if block_size is None else {"block_size": block_size}
        return lambda q, k, v: attention.tiled_attention(q, k, v, causal=causal, **options)
    if name == "sdpa":
        return lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    if name in BACKENDS:

        def one_backend(q, k, v):
            with sdpa_kernel(BACKENDS[name]):
                return F.scaled_dot_product_attention(q, k, v, is_causal=causal)

        return one_backend
    raise ValueError(f"unknown attention path {name!r}; expected one of {PATHS}")


PATHS = ("reference", "tiled", "sdpa", *BACKENDS)


def qkv(N: int, H: int, L: int, S: int, D: int, *, device=None, dtype=torch.float32, seed=0):
    """Random (N, H, L, D) queries and (N, H, S, D) keys and values."""
    g = torch.Generator(device=device or "cpu").manual_seed(seed)
    q = torch.randn(N, H, L, D, device=device, dtype=dtype, generator=g)  # (N, H, L, D)
    k = torch.randn(N, H, S, D, device=device, dtype=dtype, generator=g)  # (N, H, S, D)
    v = torch.randn(N, H, S, D, device=device, dtype=dtype, generator=g)  # (N, H, S, D)
    return q, k, v
