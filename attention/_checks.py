"""Input checks shared by every module: clear errors before any arithmetic.

Each check raises a ``TypeError`` (wrong type) or ``ValueError`` (right type, wrong value) whose
message names the argument, what was expected and what arrived, so a wrong call never ends in a
shape error from deep inside torch. A module adds a check here rather than writing one inline.
"""

import math

import torch
from torch import Tensor


def check_int(value, name: str, *, minimum: int = 1) -> None:
    """Check that ``value`` is an int (not a bool) of at least ``minimum`` that fits in int64
    (torch sizes, counts and positions are int64). A size that ``torch.export`` traces is a
    ``torch.SymInt``, checked the same way (the comparisons become the export's guards)."""
    if isinstance(value, bool) or not isinstance(value, (int, torch.SymInt)):
        raise TypeError(f"{name} must be an int; got {type(value).__name__}")
    if value < minimum:
        expected = "non-negative" if minimum == 0 else f"at least {minimum}"
        raise ValueError(f"{name} must be {expected}; got {value}")
    if value >= 2**63:
        raise ValueError(f"{name} must fit in int64 (below 2**63); got {value}")


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
    x,
    name: str,
    embed_dim: int,
    *,
    ndim: int | None = 3,
    min_ndim: int = 1,
    like: Tensor | None = None,
    dim_name: str = "embed_dim",
) -> None:
    """Check a float tensor of ``ndim`` (or at least ``min_ndim``) dimensions whose last
    dimension is ``embed_dim`` (named ``dim_name`` in the error), with the dtype and device of
    ``like`` (a parameter of the module it goes into) when given."""
    check_tensor(x, name, ndim=ndim, min_ndim=min_ndim)
    if x.shape[-1] != embed_dim:
        raise ValueError(
            f"{name}'s last dimension must equal {dim_name}={embed_dim}; got shape {tuple(x.shape)}"
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
    if reads_values() and len(lengths) and lengths.min() < 0:
        raise ValueError(f"{name} must be non-negative; got {lengths.tolist()}")
    return lengths


def reads_values() -> bool:
    """Whether the checks that read a tensor's values run: not while ``torch.export`` (and so
    ``torch.onnx.export``), ``torch.compile`` or the TorchScript tracer trace a model, where a
    value is a symbol that no ``if`` can branch on. Shapes, dtypes and devices are checked all
    the same; an eager call checks everything."""
    return not (
        torch.compiler.is_exporting() or torch.compiler.is_compiling() or torch.jit.is_tracing()
    )


def check_tokens(
    tokens, vocab_size: int, max_len: int, *, name: str = "tokens", device=None
) -> None:
    """Check a 2-D int64 or int32 tensor (what ``nn.Embedding`` takes) of token ids in
    ``[0, vocab_size)``, at most ``max_len`` long, on ``device`` when one is given."""
    if not isinstance(tokens, Tensor):
        raise TypeError(f"{name} must be a torch.Tensor of ids; got {type(tokens).__name__}")
    if tokens.dtype not in (torch.int64, torch.int32):
        raise TypeError(
            f"{name} must be an int64 or int32 tensor of ids; got {tokens.dtype} - use .long()"
        )
    if device is not None and tokens.device != device:
        raise ValueError(f"{name} must be on the model's device ({device}); got {tokens.device}")
    if tokens.dim() != 2:
        raise ValueError(f"{name} must be 2-D (N, L); got shape {tuple(tokens.shape)}")
    if tokens.shape[1] > max_len:
        raise ValueError(f"{name} length {tokens.shape[1]} is longer than max_len={max_len}")
    if reads_values() and tokens.numel() and (tokens.min() < 0 or tokens.max() >= vocab_size):
        raise ValueError(
            f"{name} ids must lie in [0, vocab_size={vocab_size}); "
            f"got min {int(tokens.min())}, max {int(tokens.max())}"
        )


def check_floating_dtype(dtype, name: str = "dtype") -> None:
    """Check that ``dtype`` is a floating-point ``torch.dtype`` (not a string, not an integer)."""
    if not isinstance(dtype, torch.dtype):
        raise TypeError(f"{name} must be a torch.dtype such as torch.float32; got {dtype!r}")
    if not dtype.is_floating_point:
        raise TypeError(f"{name} must be a floating-point dtype; got {dtype}")


def check_factory(device, dtype) -> None:
    """Check a module's ``device`` and ``dtype`` keywords: ``None`` or a valid value."""
    if dtype is not None:
        check_floating_dtype(dtype)
    if device is not None:
        if not isinstance(device, (str, int, torch.device)) or isinstance(device, bool):
            raise TypeError(f"device must be a torch.device or a str; got {device!r}")
        try:
            torch.device(device)
        except RuntimeError:
            raise ValueError(f"device must name a device such as 'cpu'; got {device!r}") from None


def check_device_dtype(x: Tensor, name: str, device, dtype, owner: str) -> None:
    """Check that ``x`` lives on ``device`` with ``dtype``, those of ``owner`` (a module, a
    cache): a clear error instead of a silent cast or a device error from inside torch."""
    if x.device != device:
        raise ValueError(f"{name} must be on {owner}'s device ({device}); got {x.device}")
    if x.dtype != dtype and not _autocast(x.device):
        raise TypeError(
            f"{name} must have {owner}'s dtype ({dtype}); got {x.dtype} - use {name}.to({dtype})"
        )


def check_choice(value, name: str, choices) -> None:
    """Check that ``value`` is one of the strings ``choices`` (a name, such as a strategy's)."""
    if not isinstance(value, str):
        raise TypeError(
            f"{name} must be a str, one of {sorted(choices)}; got {type(value).__name__}"
        )
    if value not in choices:
        raise ValueError(f"{name} must be one of {sorted(choices)}; got {value!r}")


INT64_LIMIT = 2**63  # torch indexes and counts with int64: a size or position must stay below


def check_index(value, name: str, *, minimum: int = 0) -> None:
    """Check an int (not a bool) of at least ``minimum`` that fits in int64 (a size, a position
    or a count that torch will compare with int64 index tensors)."""
    check_int(value, name, minimum=minimum)
    if value >= INT64_LIMIT:
        raise ValueError(f"{name} must fit in int64 (below 2**63); got {value}")


def check_sizes(device=None, **sizes: int) -> None:
    """Check each of ``sizes`` with :func:`check_index`, named by its keyword, and ``device``."""
    for name, size in sizes.items():
        check_index(size, name)
    check_factory(device, None)


def check_float(value, name: str, *, positive: bool = False, greater_than=None) -> None:
    """Check a finite real number (an int or a float, not a bool, NaN or inf), positive or
    greater than ``greater_than`` when asked."""
    import numbers

    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a float; got {type(value).__name__}")
    if not math.isfinite(value):
        raise ValueError(f"{name} must be finite; got {value!r}")
    if positive and not value > 0:
        raise ValueError(f"{name} must be positive; got {value!r}")
    if greater_than is not None and not value > greater_than:
        raise ValueError(f"{name} must be greater than {greater_than}; got {value!r}")


def check_has_values(x: Tensor, name: str) -> None:
    """Check that ``x`` holds values to read (a tensor on the meta device has only a shape)."""
    if x.device.type == "meta":
        raise ValueError(
            f"{name} must hold values; got a tensor on the meta device, which has only a shape"
        )


def check_int_tensor(values, name: str, *, lists=True, ndims=None, meta=False) -> Tensor:
    """Check integer values that a mask is built from (lengths, document ids): a tensor, or a
    list of ints (not bools, which torch would read as 0 and 1) when ``lists``, in int64 or
    int32 (what torch counts and indexes with), holding values (on meta only if ``meta``),
    with one of ``ndims`` dimensions ((L) or (N, L)) when given. Return them as a tensor."""
    kind = "a 1-D integer tensor or list of ints" if lists else "an integer torch.Tensor"
    if not isinstance(values, (Tensor, list, tuple) if lists else Tensor):
        raise TypeError(f"{name} must be {kind}; got {type(values).__name__}")
    if isinstance(values, (list, tuple)):
        if any(isinstance(v, bool) for v in values):
            raise TypeError(f"{name} must hold ints, not bools; got {values!r}")
        if not values:
            values = torch.zeros(0, dtype=torch.long)  # an empty list would become float32
        try:
            values = torch.as_tensor(values)
        except (TypeError, ValueError, RuntimeError) as error:
            if "Overflow" in str(error):
                raise ValueError(f"{name} must fit in int64; got {values!r}") from None
            raise TypeError(f"{name} must be {kind}; got {values!r}") from None
    if not meta:
        check_has_values(values, name)
    if values.is_floating_point() or values.is_complex() or values.dtype == torch.bool:
        raise TypeError(f"{name} must hold integers; got {values.dtype}")
    if values.dtype not in (torch.int64, torch.int32):
        raise TypeError(
            f"{name} must be an int64 or int32 tensor; got {values.dtype} - use {name}.long()"
        )
    if ndims is not None and values.dim() not in ndims:
        shapes = " or ".join({1: "(L)", 2: "(N, L)"}.get(n, f"{n}-D") for n in ndims)
        raise ValueError(f"{name} must be {shapes}; got shape {tuple(values.shape)}")
    return values


def check_on_device(x: Tensor, name: str, device: torch.device, owner: str) -> None:
    """Check that ``x`` lives on ``device``, that of ``owner`` (whose tensors it meets)."""
    if x.device != device:
        raise ValueError(
            f"{name} must be on {owner}'s device ({device}); got {x.device} - "
            f"use {name}.to({str(device)!r})"
        )


def check_required_mask(mask) -> None:
    """Check a mask that a converter needs: ``None`` is refused, unlike in the attention
    functions, and anything else must be a bool tensor (True = may attend)."""
    if not isinstance(mask, Tensor):
        raise TypeError(
            f"mask must be a bool torch.Tensor (True = may attend); got {type(mask).__name__}"
        )
    check_mask(mask, mask.shape)


def check_padding_lengths(lengths, S: int) -> Tensor:
    """Check the lengths of sequences padded to ``S``: a 1-D integer tensor (any integer dtype,
    with values) or a list of ints (not bools), each in ``[0, S]``; return them as a tensor."""
    kind = "lengths must be a 1-D integer tensor or a list of ints"
    if isinstance(lengths, (list, tuple)):
        import numbers

        if not all(isinstance(n, numbers.Integral) and not isinstance(n, bool) for n in lengths):
            raise TypeError(f"{kind}; got {lengths!r}")
        if any(abs(int(n)) >= INT64_LIMIT for n in lengths):
            raise ValueError(f"lengths must lie in [0, S={S}]; got {list(lengths)}")
        lengths = torch.tensor(lengths, dtype=torch.long)
    if not isinstance(lengths, Tensor):
        raise TypeError(f"{kind}; got {type(lengths).__name__}")
    check_has_values(lengths, "lengths")
    integer = not (lengths.is_floating_point() or lengths.is_complex())
    if not integer or lengths.dtype == torch.bool or lengths.dim() != 1:
        raise TypeError(f"{kind}; got {lengths.dtype} with shape {tuple(lengths.shape)}")
    if reads_values() and len(lengths) and (lengths.min() < 0 or lengths.max() > S):
        raise ValueError(f"lengths must lie in [0, S={S}]; got {lengths.tolist()}")
    return lengths


def check_named_mask(mask, name: str, shape: tuple[int, ...], device=None) -> None:
    """:func:`check_mask` for a mask with another name (``memory_mask``): the same checks, with
    messages that name it."""
    try:
        check_mask(mask, shape, device)
    except (TypeError, ValueError) as error:
        message = str(error)
        message = name + message[len("mask") :] if message.startswith("mask") else message
        raise type(error)(message.replace("use mask.", f"use {name}.")) from None


def check_token_id(value, name: str, vocab_size: int) -> None:
    """Check a token id (an int, not a bool) in ``[0, vocab_size)``: ``bos_id``, ``eos_id``."""
    check_int(value, name, minimum=0)
    if value >= vocab_size:
        raise ValueError(f"{name} must be in [0, vocab_size={vocab_size}); got {value}")


def check_batch_lengths(lengths, name: str, batch_size: int, S: int, device) -> Tensor:
    """Check the lengths of ``batch_size`` sequences padded to ``S``: a 1-D int64/int32 tensor
    on ``device`` or a list of ints, each in ``[0, S]``; return them as a tensor on ``device``."""
    if isinstance(lengths, Tensor):
        check_on_device(lengths, name, device, "the model")
    lengths = check_int_tensor(lengths, name, ndims=(1,)).to(device)
    if len(lengths) != batch_size:
        raise ValueError(f"{name} must hold one length per sequence ({batch_size}); "
                         f"got {len(lengths)}")  # fmt: skip
    if reads_values() and len(lengths) and (lengths.min() < 0 or lengths.max() > S):
        raise ValueError(f"{name} must lie in [0, S={S}]; got {lengths.tolist()}")
    return lengths


def check_memory(memory, N: int, E: int, H: int, like: Tensor) -> int:
    """Check the memory of a cross-attention: a tensor (N, S, E) or its projected pair
    ``(keys, values)``, each (N, H, S, D), with the dtype and device of ``like``; return S."""
    if isinstance(memory, Tensor):
        check_features(memory, "memory", E, like=like)
        if memory.shape[0] != N:
            raise ValueError(f"memory must have batch size {N}; got shape {tuple(memory.shape)}")
        return memory.shape[1]
    if not (isinstance(memory, (tuple, list)) and len(memory) == 2):
        kind = type(memory).__name__
        raise TypeError(f"memory must be a tensor (N, S, E) or a pair (keys, values); got {kind}")
    keys, values = memory
    for name, x in (("memory keys", keys), ("memory values", values)):
        check_tensor(x, name, ndim=4)
        if (x.shape[0], x.shape[1], x.shape[3]) != (N, H, E // H) or x.shape != keys.shape:
            raise ValueError(
                f"memory keys and values must both have shape (N={N}, H={H}, S, D={E // H}); "
                f"got {tuple(keys.shape)} and {tuple(values.shape)}"
            )
        check_same_kind(x, name, like, "the module's parameters")
    return keys.shape[2]
