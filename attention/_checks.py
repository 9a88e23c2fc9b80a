"""Input checks shared by every module: clear errors before any arithmetic.

Each check raises a ``TypeError`` (wrong type) or ``ValueError`` (right type, wrong value) whose
message names the argument, what was expected and what arrived, so a wrong call never ends in a
shape error from deep inside torch. A module adds a check here rather than writing one inline.
"""

import math

import torch
from torch import Tensor


def check_int(value, name: str, *, minimum: int = 1) -> None:
    """Check that ``value`` is an int (not a bool) of at least ``minimum``."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int; got {type(value).__name__}")
    if value < minimum:
        expected = "non-negative" if minimum == 0 else f"at least {minimum}"
        raise ValueError(f"{name} must be {expected}; got {value}")


def check_bool(value, name: str) -> None:
    """Check that ``value`` is a bool (``'no'``, ``0`` or ``None`` are not)."""
    if not isinstance(value, bool):
        raise TypeError(f"{name} must be a bool; got {type(value).__name__}")


def check_positive(value, name: str) -> None:
    """Check that ``value`` is a finite number above 0 (NaN and inf are not)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name} must be a positive finite number; got {type(value).__name__}")
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"{name} must be a positive finite number; got {value!r}")


def _autocast(device: torch.device) -> bool:
    try:
        return torch.is_autocast_enabled(device.type)
    except RuntimeError:  # a device type autocast does not know, such as meta
        return False


def check_same_kind(x: Tensor, name: str, like: Tensor, like_name: str) -> None:
    """Check that ``x`` has the dtype and device of ``like`` (the first input, or a parameter).

    Under autocast the inputs of one module may legitimately differ in dtype, so only the device
    is checked there.
    """
    if x.device != like.device:
        raise ValueError(
            f"{name} must be on the same device as {like_name} ({like.device}); got {x.device}"
        )
    if x.dtype != like.dtype and not _autocast(x.device):
        raise TypeError(
            f"{name} must have the same dtype as {like_name} ({like.dtype}); got {x.dtype} - "
            f"use {name}.to({like.dtype})"
        )


def check_tensor(x, name: str, *, ndim: int | None = None, min_ndim: int | None = None) -> None:
    """Check that ``x`` is a floating-point tensor with the expected number of dimensions."""
    if not isinstance(x, Tensor):
        raise TypeError(f"{name} must be a torch.Tensor; got {type(x).__name__}")
    if not x.is_floating_point():
        raise TypeError(
            f"{name} must be a floating-point tensor; got {x.dtype} - use {name}.float()"
        )
    if ndim is not None and x.dim() != ndim:
        raise ValueError(f"{name} must be {ndim}-D; got {x.dim()}-D with shape {tuple(x.shape)}")
    if min_ndim is not None and x.dim() < min_ndim:
        raise ValueError(
            f"{name} must have at least {min_ndim} dimensions; got shape {tuple(x.shape)}"
        )


def check_mask(mask, shape: tuple[int, ...], device: torch.device | None = None) -> None:
    """Check that ``mask`` is a bool tensor (True = may attend) that broadcasts to ``shape``,
    on ``device`` when one is given. ``None`` (no mask) passes."""
    if mask is None:
        return
    if not isinstance(mask, Tensor):
        raise TypeError(
            f"mask must be a bool torch.Tensor (True = may attend); got {type(mask).__name__}"
        )
    if mask.dtype != torch.bool:
        raise TypeError(
            f"mask must be a bool tensor (True = may attend); got {mask.dtype} - use mask.bool() "
            "for a 0/1 mask, or attention.masks.from_torch_masks() for an additive float mask or "
            "a mask in nn.MultiheadAttention's polarity (True = blocked)"
        )
    try:
        broadcast = torch.broadcast_shapes(mask.shape, shape)
    except RuntimeError:
        broadcast = None
    if broadcast != torch.Size(shape):
        raise ValueError(
            f"mask of shape {tuple(mask.shape)} does not broadcast to {tuple(shape)}; "
            "expected a shape such as (L, S), (N, 1, 1, S) or (N, H, L, S)"
        )
    if device is not None and mask.device != device:
        raise ValueError(
            f"mask must be on the same device as the inputs ({device}); got {mask.device} - "
            f"use mask.to({str(device)!r})"
        )


def check_embed(embed_dim, num_heads) -> None:
    """Check a module's ``embed_dim`` and ``num_heads``."""
    check_int(embed_dim, "embed_dim")
    check_int(num_heads, "num_heads")
    if embed_dim % num_heads != 0:
        raise ValueError(
            f"embed_dim must be divisible by num_heads; got embed_dim={embed_dim}, "
            f"num_heads={num_heads} (embed_dim % num_heads = {embed_dim % num_heads})"
        )


def check_dropout(p, name: str = "dropout") -> None:
    """Check a dropout probability: a number in [0, 1)."""
    if isinstance(p, bool) or not isinstance(p, (int, float)):
        raise TypeError(f"{name} must be a float in [0, 1); got {type(p).__name__}")
    if not 0.0 <= p < 1.0:
        raise ValueError(f"{name} must be in [0, 1); got {p}")


def check_features(
    x, name: str, embed_dim: int, *, ndim: int | None = 3, like: Tensor | None = None
) -> None:
    """Check a float tensor of ``ndim`` dimensions whose last dimension is ``embed_dim``, with
    the dtype and device of ``like`` (a parameter of the module it goes into) when given."""
    check_tensor(x, name, ndim=ndim, min_ndim=1)
    if x.shape[-1] != embed_dim:
        raise ValueError(
            f"{name}'s last dimension must equal embed_dim={embed_dim}; got shape {tuple(x.shape)}"
        )
    if like is not None:
        check_same_kind(x, name, like, "the module's parameters")


def check_sequences(
    query: Tensor, key: Tensor, value: Tensor, embed_dim: int, *, like: Tensor | None = None
) -> None:
    """Check batch-first (N, L, E) query and (N, S, E) key/value for an attention module."""
    for name, x in (("query", query), ("key", key), ("value", value)):
        check_features(x, name, embed_dim, like=like)
    for name, x in (("key", key), ("value", value)):
        if x.shape[0] != query.shape[0]:
            raise ValueError(
                f"{name} must have the same batch size as query ({query.shape[0]}); "
                f"got shape {tuple(x.shape)}"
            )
    if key.shape[1] != value.shape[1]:
        raise ValueError(
            f"key and value must have the same length S; got key {tuple(key.shape)} "
            f"and value {tuple(value.shape)}"
        )


def check_divisible(value: int, name: str, divisor: int, divisor_name: str) -> None:
    """Check that ``value`` (described by ``name``) is divisible by ``divisor``."""
    if value % divisor != 0:
        raise ValueError(
            f"{name} must be divisible by {divisor_name} = {divisor}; got {value} "
            f"({value} % {divisor} = {value % divisor})"
        )


def check_lengths(lengths, name: str = "lengths") -> Tensor:
    """Check a 1-D integer tensor or list of non-negative ints; return it as a tensor."""
    if isinstance(lengths, (list, tuple)) and not lengths:
        lengths = torch.zeros(0, dtype=torch.long)  # an empty list would become float32
    if not isinstance(lengths, (Tensor, list, tuple)):
        raise TypeError(
            f"{name} must be a 1-D integer tensor or list of ints; got {type(lengths).__name__}"
        )
    lengths = torch.as_tensor(lengths)
    if lengths.is_floating_point() or lengths.is_complex() or lengths.dtype == torch.bool:
        raise TypeError(f"{name} must hold integers; got {lengths.dtype}")
    if lengths.dim() != 1:
        raise ValueError(f"{name} must be 1-D; got shape {tuple(lengths.shape)}")
    if len(lengths) and lengths.min() < 0:
        raise ValueError(f"{name} must be non-negative; got {lengths.tolist()}")
    return lengths


def check_tokens(tokens, vocab_size: int, max_len: int, *, name: str = "tokens") -> None:
    """Check a 2-D integer tensor of token ids in ``[0, vocab_size)``, at most ``max_len`` long."""
    if not isinstance(tokens, Tensor):
        raise TypeError(f"{name} must be a torch.Tensor of ids; got {type(tokens).__name__}")
    if tokens.is_floating_point() or tokens.is_complex() or tokens.dtype == torch.bool:
        raise TypeError(f"{name} must be an integer tensor; got {tokens.dtype} - use .long()")
    if tokens.dim() != 2:
        raise ValueError(f"{name} must be 2-D (N, L); got shape {tuple(tokens.shape)}")
    if tokens.shape[1] > max_len:
        raise ValueError(f"{name} length {tokens.shape[1]} is longer than max_len={max_len}")
    if tokens.numel() and (tokens.min() < 0 or tokens.max() >= vocab_size):
        raise ValueError(
            f"{name} ids must lie in [0, vocab_size={vocab_size}); "
            f"got min {int(tokens.min())}, max {int(tokens.max())}"
        )
