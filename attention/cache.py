r"""The key/value cache of a decoder: every layer's keys and values, preallocated.

Generating one more token with a cache costs one query against the cached keys and values,
instead of re-encoding the whole prefix. A rolling cache (``window``) keeps the first ``sinks``
positions and the most recent ones, so that a model can read text longer than its context
(StreamingLLM, :cite:t:`xiao2023`).
"""

import torch
from torch import Tensor

from ._checks import check_device_dtype, check_floating_dtype, check_int, check_tensor

__all__ = ["KVCache"]


class KVCache:
    r"""The keys and values of every layer of a decoder, preallocated to ``max_len`` positions.

    Each layer's keys and values live in a tensor of shape :math:`(N, H_{kv}, \text{max\_len},
    D)`, allocated once. :meth:`update` writes a layer's new keys and values after the ones
    already held and returns all of them; the cache's :attr:`length` (the positions every layer
    holds) grows when the *last* layer has written, so every layer of one forward pass sees the
    same starting position. The memory is

    .. math::
        2 \times \text{layers} \times N \times H_{kv} \times \text{max\_len} \times D
        \times \text{bytes per element},

    which :attr:`nbytes` reports.

    **Rolling.** With ``window`` set, the cache never fills: it holds the first ``sinks``
    positions and the ``window`` most recent ones (``max_len = sinks + window``). When new
    positions do not fit, the oldest positions after the sinks are dropped and the ones after
    them move down. Positions are slots of the cache: a key's position is where it sits now,
    so the model never sees a position beyond ``max_len`` however long the text; keys must
    therefore be cached *before* any rotation by position (:class:`attention.CausalSelfAttention`
    rotates after reading the cache). The attention over a rolling cache equals the attention,
    without a cache, over the positions it kept.

    The cache is for inference: writing keys that require a gradient while autograd is on is
    refused with a ``ValueError`` (call the model under :func:`torch.no_grad`); the cache writes
    in place, so the graph of an earlier step would not survive the next.

    Args:
        num_layers (int): number of attention layers.
        batch_size (int): number of sequences :math:`N`.
        num_kv_heads (int): key/value heads per layer :math:`H_{kv}`.
        head_dim (int): head dimension :math:`D`.
        max_len (int, optional): most positions the cache holds. Default: ``None``
            (``sinks + window``; required without ``window``).
        window (int, optional): keep only the most recent ``window`` positions after the sinks.
            Default: ``None`` (a cache that fills up).
        sinks (int): with ``window``, the first positions that are always kept. Default: ``0``.
        device (torch.device, optional): where to allocate. Default: ``None`` (CPU).
        dtype (torch.dtype, optional): element type. Default: ``None`` (the default dtype).

    Shape:
        - keys and values of one layer: :math:`(N, H_{kv}, \text{max\_len}, D)`

    Examples::

        >>> cache = KVCache(2, batch_size=1, num_kv_heads=2, head_dim=4, max_len=8)
        >>> keys, values = cache.update(0, torch.randn(1, 2, 3, 4), torch.randn(1, 2, 3, 4))
        >>> keys.shape, cache.length  # layer 0 holds 3 positions; the last layer has not run
        (torch.Size([1, 2, 3, 4]), 0)
        >>> _ = cache.update(1, torch.randn(1, 2, 3, 4), torch.randn(1, 2, 3, 4))
        >>> cache.length, cache.nbytes  # 2 x 2 layers x 1 x 2 x 8 x 4 x 4 bytes
        (3, 1024)
        >>> rolling = KVCache(1, batch_size=1, num_kv_heads=1, head_dim=1, window=2, sinks=1)
        >>> for t in range(5):
        ...     new = torch.full((1, 1, 1, 1), float(t))
        ...     keys, _ = rolling.update(0, new, torch.zeros_like(new))
        >>> keys.flatten().tolist()  # the sink and the two most recent
        [0.0, 3.0, 4.0]
    """

    def __init__(
        self,
        num_layers: int,
        *,
        batch_size: int,
        num_kv_heads: int,
        head_dim: int,
        max_len: int | None = None,
        window: int | None = None,
        sinks: int = 0,
        device=None,
        dtype=None,
    ):
        for name, value in (("num_layers", num_layers), ("batch_size", batch_size),
                            ("num_kv_heads", num_kv_heads), ("head_dim", head_dim)):  # fmt: skip
            check_int(value, name, minimum=1)
        check_int(sinks, "sinks", minimum=0)
        if window is None:
            if max_len is None:
                raise TypeError("max_len is required for a cache without a window")
            if sinks:
                raise ValueError(f"sinks are kept by a rolling cache: give window too; got {sinks}")
        else:
            check_int(window, "window", minimum=1)
            if max_len is not None and max_len != sinks + window:
                raise ValueError(
                    f"a rolling cache holds max_len = sinks + window = {sinks + window} "
                    f"positions; got max_len={max_len}"
                )
            max_len = sinks + window
        check_int(max_len, "max_len", minimum=1)
        dtype = torch.get_default_dtype() if dtype is None else dtype
        check_floating_dtype(dtype, "dtype")
        self.num_layers, self.batch_size, self.max_len = num_layers, batch_size, max_len
        self.num_kv_heads, self.head_dim = num_kv_heads, head_dim
        self.window, self.sinks = window, sinks
        shape = (num_layers, batch_size, num_kv_heads, max_len, head_dim)
        # One (N, H_kv, max_len, D) tensor of keys and one of values per layer, stacked.
        self.keys = torch.zeros(shape, device=device, dtype=dtype)
        self.values = torch.zeros(shape, device=device, dtype=dtype)
        self.length = 0

    @property
    def dtype(self) -> torch.dtype:
        """The element type of the keys and values."""
        return self.keys.dtype

    @property
    def device(self) -> torch.device:
        """Where the keys and values live."""
        return self.keys.device

    @property
    def nbytes(self) -> int:
        """Bytes allocated for the keys and values of every layer."""
        return self.keys.nbytes + self.values.nbytes

    def dropped(self, length: int) -> int:
        """How many cached positions writing ``length`` more drops (0 unless rolling)."""
        if self.window is None:
            return 0
        return max(0, min(self.length - self.sinks, self.length + length - self.max_len))

    def offset(self, length: int) -> int:
        """The position (slot) at which ``length`` new positions will be written.

        Examples::

            >>> cache = KVCache(1, batch_size=1, num_kv_heads=1, head_dim=2, window=4)
            >>> cache.offset(3), cache.offset(5)
            (0, 0)
        """
        return self.length - self.dropped(length)

    def check_append(
        self, layer: int, batch_size: int, length: int, *, dtype=None, device=None
    ) -> None:
        """Check, before any arithmetic, that ``length`` new positions of ``batch_size``
        sequences can be written to ``layer``.

        Args:
            layer (int): the layer index, in ``[0, num_layers)``.
            batch_size (int): the number of sequences :math:`N` being appended.
            length (int): the number of new positions :math:`L`.
            dtype (torch.dtype, optional): the dtype of what will be written. Default: ``None``
                (not checked).
            device (torch.device, optional): where it lives. Default: ``None`` (not checked).

        Returns:
            None: raises ``ValueError`` (or ``TypeError``) if the write is impossible.

        Examples::

            >>> cache = KVCache(1, batch_size=1, num_kv_heads=1, head_dim=2, max_len=2)
            >>> cache.check_append(0, 1, 3)
            Traceback (most recent call last):
            ...
            ValueError: KVCache is full: it holds 0 of max_len=2 positions and cannot take 3 ...
        """
        check_int(layer, "layer", minimum=0)
        if layer >= self.num_layers:
            raise ValueError(f"layer must be in [0, {self.num_layers}); got {layer}")
        if batch_size != self.batch_size:
            raise ValueError(
                f"the cache holds batch_size={self.batch_size} sequences; got a batch of "
                f"{batch_size}"
            )
        if dtype is not None and dtype != self.dtype:
            raise TypeError(
                f"the cache holds {self.dtype}; got {dtype} - make the cache with dtype={dtype}"
            )
        if device is not None and torch.device(device) != self.device:
            raise ValueError(f"the cache lives on {self.device}; got inputs on {device}")
        if self.window is not None:
            if length > self.window:
                raise ValueError(
                    f"a rolling cache takes at most window={self.window} new positions at "
                    f"once; got {length}"
                )
        elif self.length + length > self.max_len:
            raise ValueError(
                f"KVCache is full: it holds {self.length} of max_len={self.max_len} positions "
                f"and cannot take {length} more; make a cache with a larger max_len, or "
                "crop() or reset() this one"
            )

    def update(self, layer: int, key: Tensor, value: Tensor) -> tuple[Tensor, Tensor]:
        r"""Write ``layer``'s new keys and values after the cached ones; return all of them.

        Args:
            layer (int): the layer index.
            key (Tensor): the new keys.
            value (Tensor): the new values.

        Shape:
            - key, value: :math:`(N, H_{kv}, L, D)`
            - Output: keys and values :math:`(N, H_{kv}, S, D)`, :math:`S` = ``offset(L) + L``

        Returns:
            tuple[Tensor, Tensor]: views of the layer's cached keys and values, the new ones
            last. When ``layer`` is the last layer, :attr:`length` becomes :math:`S`.

        Examples::

            >>> cache = KVCache(1, batch_size=1, num_kv_heads=1, head_dim=2, max_len=4)
            >>> keys, values = cache.update(0, torch.ones(1, 1, 3, 2), torch.ones(1, 1, 3, 2))
            >>> keys.shape, cache.length
            (torch.Size([1, 1, 3, 2]), 3)
        """
        for name, x in (("key", key), ("value", value)):
            check_tensor(x, name, ndim=4)
        expected = (self.batch_size, self.num_kv_heads, key.shape[2], self.head_dim)
        for name, x in (("key", key), ("value", value)):
            if tuple(x.shape) != expected:
                raise ValueError(
                    f"{name} must have shape (N={self.batch_size}, H_kv={self.num_kv_heads}, "
                    f"L, D={self.head_dim}) with the same L as key; got {tuple(x.shape)}"
                )
            check_device_dtype(x, name, self.device, self.dtype, "the cache")
            if x.requires_grad and torch.is_grad_enabled():
                raise ValueError(
                    f"{name} requires grad: KVCache is for inference and does not keep the "
                    "graph; call the model under torch.no_grad()"
                )
        L = key.shape[2]
        self.check_append(layer, key.shape[0], L)
        dropped = self.dropped(L)
        if dropped:  # move the most recent positions down over the oldest after the sinks
            keep = slice(self.sinks + dropped, self.length)
            kept = self.length - self.sinks - dropped
            for store in (self.keys, self.values):
                moved = store[layer, :, :, keep].clone()  # (N, H_kv, kept, D)
                store[layer, :, :, self.sinks : self.sinks + kept] = moved
        start = self.length - dropped
        end = start + L
        self.keys[layer, :, :, start:end] = key  # (N, H_kv, L, D)
        self.values[layer, :, :, start:end] = value  # (N, H_kv, L, D)
        if layer == self.num_layers - 1:
            self.length = end
        return self.keys[layer, :, :, :end], self.values[layer, :, :, :end]  # (N, H_kv, S, D)

    def reorder(self, rows: Tensor) -> None:
        """Make sequence ``i`` of every layer a copy of sequence ``rows[i]``: beam search moves
        each hypothesis's keys and values with it when it re-ranks them.

        Args:
            rows (Tensor): for each of the ``batch_size`` sequences, the one it continues.

        Shape:
            - rows: :math:`(N)` integer indices in ``[0, N)``

        Returns:
            None

        Examples::

            >>> cache = KVCache(1, batch_size=2, num_kv_heads=1, head_dim=1, max_len=2)
            >>> _ = cache.update(0, torch.tensor([[[[1.0]]], [[[2.0]]]]), torch.zeros(2, 1, 1, 1))
            >>> cache.reorder(torch.tensor([1, 1])); cache.keys[0, :, 0, 0, 0].tolist()
            [2.0, 2.0]
        """
        if not isinstance(rows, Tensor) or rows.dtype not in (torch.int64, torch.int32):
            raise TypeError("rows must be an int64 or int32 tensor of sequence indices")
        if rows.shape != (self.batch_size,):
            raise ValueError(f"rows must have shape ({self.batch_size},); got {tuple(rows.shape)}")
        if len(rows) and (rows.min() < 0 or rows.max() >= self.batch_size):
            raise ValueError(f"rows must lie in [0, {self.batch_size}); got {rows.tolist()}")
        S = self.length
        for store in (self.keys, self.values):  # (layers, N, H_kv, max_len, D)
            store[:, :, :, :S] = store[:, rows.to(self.device), :, :S]  # (layers, N, H_kv, S, D)

    def crop(self, length: int) -> None:
        """Keep only the first ``length`` positions (to rewind generation).

        Args:
            length (int): positions to keep, in ``[0, self.length]``.

        Returns:
            None

        Examples::

            >>> cache = KVCache(1, batch_size=1, num_kv_heads=1, head_dim=2, max_len=4)
            >>> _ = cache.update(0, torch.ones(1, 1, 3, 2), torch.ones(1, 1, 3, 2))
            >>> cache.crop(1); cache.length
            1
        """
        check_int(length, "length", minimum=0)
        if length > self.length:
            raise ValueError(
                f"length must be at most the cache's length {self.length}; got {length}"
            )
        self.length = length

    def reset(self) -> None:
        """Empty the cache (its memory stays allocated).

        Returns:
            None

        Examples::

            >>> cache = KVCache(1, batch_size=1, num_kv_heads=1, head_dim=2, max_len=4)
            >>> _ = cache.update(0, torch.ones(1, 1, 3, 2), torch.ones(1, 1, 3, 2))
            >>> cache.reset(); cache.length
            0
        """
        self.length = 0

    def __repr__(self) -> str:
        rolling = "" if self.window is None else f", window={self.window}, sinks={self.sinks}"
        return (
            f"KVCache(num_layers={self.num_layers}, batch_size={self.batch_size}, "
            f"num_kv_heads={self.num_kv_heads}, head_dim={self.head_dim}, "
            f"max_len={self.max_len}{rolling}, length={self.length}, dtype={self.dtype})"
        )
