"""Helpers shared by the unit tests: tolerances, random inputs, torch references, gradchecks."""

import warnings

import torch
from torch import Tensor
from torch.autograd import gradcheck, gradgradcheck
from torch.func import functional_call

# float64: the two implementations compute the same sums in a possibly different order; the
# rounding differences are ~1e-16 relative, so 1e-10 is loose for a correct path yet ~1e8 times
# tighter than what a wrong scale, mask or head order produces (errors of order 1e-2 or more).
# float32: the same reordering costs a few ulps (eps = 1.2e-7) per reduction over at most ~64
# terms, so errors reach ~1e-6 on values of order 1; 1e-5 keeps a 10x margin and is still
# three orders of magnitude below the size of any real bug.
TOLERANCES = {
    torch.float64: {"atol": 1e-10, "rtol": 0.0},
    torch.float32: {"atol": 1e-5, "rtol": 1e-5},
}


def assert_close(actual: Tensor, expected: Tensor, **kwargs) -> None:
    """``torch.testing.assert_close`` with this suite's tolerance for ``expected``'s dtype."""
    tol = TOLERANCES[expected.dtype] | kwargs
    torch.testing.assert_close(actual, expected, **tol)


def randn(*shape: int, dtype=torch.float64, requires_grad: bool = False) -> Tensor:
    """A standard normal tensor (float64 unless asked), a leaf when ``requires_grad``."""
    return torch.randn(*shape, dtype=dtype).requires_grad_(requires_grad)


def random_mask(*shape: int, p: float = 0.6, generator=None) -> Tensor:
    """A random bool mask (True = may attend) with about ``p`` of its entries allowed."""
    return torch.rand(*shape, generator=generator) < p


def blocked_for_torch(mask: Tensor, N: int, H: int) -> Tensor:
    """Our mask (True = may attend, broadcastable to (N, H, L, S)) as ``nn.MultiheadAttention``'s
    3-D ``attn_mask`` (True = blocked, (N * H, L, S)), written here without the package's
    converters so the golden tests do not trust the code they check."""
    L, S = mask.shape[-2:]
    return (~mask).expand(N, H, L, S).reshape(N * H, L, S)


def torch_lower_right(L: int, S: int | None = None) -> Tensor:
    """Torch's own bottom-right causal mask (``CausalBias``, lower-right variant), materialised
    as a bool (L, S) mask with True = may attend."""
    from torch.nn.attention.bias import causal_lower_right

    S = L if S is None else S
    with warnings.catch_warnings():  # its warning that L > S leaves rows with no key
        warnings.simplefilter("ignore", UserWarning)
        return causal_lower_right(L, S)._materialize()


def torch_causal_blocked(L: int, S: int | None = None) -> Tensor:
    """Torch's own bottom-right causal mask, in ``nn.MultiheadAttention``'s polarity."""
    return ~torch_lower_right(L, S)


def _tensors(out) -> tuple[Tensor, ...]:
    """Flatten a module's output ``(tensor, weights or list of weights or None)`` to tensors."""
    if isinstance(out, Tensor):
        return (out,)
    flat = []
    for item in out:
        if isinstance(item, Tensor):
            flat.append(item)
        elif isinstance(item, (list, tuple)):
            flat.extend(t for t in item if t is not None)
    return tuple(flat)


def check_module_gradients(module, *inputs, gradgrad: bool = True, **kwargs) -> None:
    """gradcheck (and gradgradcheck) ``module(*inputs, **kwargs)`` in float64 with respect to
    its float inputs and every parameter, through ``torch.func.functional_call``.

    ``fast_mode`` compares the analytical and numerical Jacobians projected on random vectors
    (``v^T J u``) instead of element by element: a wrong gradient anywhere still changes the
    projection (with probability 1), at a cost that does not grow with the parameter count.
    """
    names = [name for name, _ in module.named_parameters()]
    params = [p.detach().clone().requires_grad_() for _, p in module.named_parameters()]
    inputs = tuple(x.detach().requires_grad_() if x.is_floating_point() else x for x in inputs)
    assert params and all(p.dtype == torch.float64 for p in params), "build the module in float64"
    n = len(inputs)

    def f(*args):
        out = functional_call(module, dict(zip(names, args[n:], strict=True)), args[:n], kwargs)
        return _tensors(out)

    args = (*inputs, *params)
    assert gradcheck(f, args, fast_mode=True)
    if gradgrad:
        assert gradgradcheck(f, args, fast_mode=True)


# Entries whose unscaled q . k (64 products of big * big) overflows the format (65504 for
# float16, 3.4e38 for bfloat16) while the scaled score, divided by sqrt(64) = 8, fits.
NEAR_RANGE = {torch.float16: 40.0, torch.bfloat16: 4e18}


def near_range(low, N=2, L=5, D=64):
    """(N, L, D) entries of +-big in ``low``: each row's dot product with itself overflows
    before scaling; the first row is constant (all 40s in float16 gave NaN when the product was
    scaled after it was computed)."""
    signs = torch.randint(0, 2, (N, L, D), generator=torch.Generator().manual_seed(0)) * 2 - 1
    signs[:, 0] = 1
    return (NEAR_RANGE[low] * signs).to(low)


# --- small decoders, shared by the decoder, cache and language-model tests ---------------------

#: E, H, N, L of the small decoders below.
DECODER_SIZES = (16, 4, 2, 7)
KV_HEADS = [4, 2, 1]  # H, H/2 and 1: multi-head, grouped-query and multi-query attention
DECODER_OPTIONS = {
    "plain": {},
    "rotary": {"rotary": True},
    "alibi": {"alibi": True},
    "window": {"window": 3},
    "all": {"rotary": True, "alibi": True, "window": 3},
}


def small_causal_attention(num_kv_heads=None, dtype=torch.float64, **kwargs):
    """A CausalSelfAttention of E = 16 and H = 4, in eval mode."""
    from attention import CausalSelfAttention

    E, H, _, _ = DECODER_SIZES
    return CausalSelfAttention(E, H, num_kv_heads=num_kv_heads, dtype=dtype, **kwargs).eval()


def small_lm(positions="learned", num_kv_heads=None, dtype=torch.float64, **kwargs):
    """A two-layer DecoderLM of E = 16, H = 4, 11 tokens and max_len 12, in eval mode."""
    from attention import DecoderLM

    E, H, _, _ = DECODER_SIZES
    model = DecoderLM(
        11, embed_dim=E, num_heads=H, num_layers=2, max_len=12, num_kv_heads=num_kv_heads,
        positions=positions, **kwargs,
    )  # fmt: skip
    return model.to(dtype).eval()
