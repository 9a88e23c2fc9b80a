r"""The key/value cache of a decoder: every layer's keys and values, preallocated.

Generating one more token with a cache costs one query against the cached keys and values,
instead of re-encoding the whole prefix. A rolling cache (``window``) keeps the first ``sinks``
positions and the most recent ones, so that a model can read text longer than its context
(StreamingLLM, :cite:t:`xiao2023`).
"""

import torch
from torch import Tensor

from ._checks import check_device_dtype, check_int, check_tensor
from .state import DecodingState

__all__ = ["KVCache"]


class KVCache(DecodingState):
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

    position_axis = 2  # a layer's store is (N, H_kv, max_len, D)

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
        super().__init__(
            num_layers, batch_size=batch_size, max_len=max_len, window=window, sinks=sinks
        )
        check_int(num_kv_heads, "num_kv_heads", minimum=1)
        check_int(head_dim, "head_dim", minimum=1)
        self.num_kv_heads, self.head_dim = num_kv_heads, head_dim
        shape = (num_layers, batch_size, num_kv_heads, self.max_len, head_dim)
        # One (N, H_kv, max_len, D) tensor of keys and one of values per layer, stacked.
        self.keys = self._allocate(shape, device=device, dtype=dtype)
        self.values = self._allocate(shape, device=device, dtype=dtype)

    def stores(self) -> tuple[Tensor, Tensor]:
        r"""The keys and the values, each :math:`(\text{layers}, N, H_{kv}, \text{max\_len}, D)`."""
        return self.keys, self.values

    @staticmethod
    def check(cache, heads: int, head_dim: int, *, num_layers=None, rolling=True) -> None:
        """Check that ``cache`` is a :class:`KVCache` (or ``None``) for attention layers of
        ``heads`` key/value heads of ``head_dim``; of ``num_layers`` layers when given; without a
        window unless ``rolling``.

        Examples::

            >>> KVCache.check(KVCache(1, batch_size=1, num_kv_heads=2, head_dim=4, max_len=3), 2, 8)
            Traceback (most recent call last):
            ...
            ValueError: the cache holds 2 heads of D=4; expected 2 heads of D=8
        """
        if cache is None:
            return
        if not isinstance(cache, KVCache):
            raise TypeError(f"cache must be a KVCache or None; got {type(cache).__name__}")
        if (cache.num_kv_heads, cache.head_dim) != (heads, head_dim):
            raise ValueError(f"the cache holds {cache.num_kv_heads} heads of D={cache.head_dim}; "
                             f"expected {heads} heads of D={head_dim}")  # fmt: skip
        if num_layers is not None and cache.num_layers != num_layers:
            raise ValueError(f"the cache holds {cache.num_layers} layers; expected {num_layers}")
        if not rolling and cache.window is not None:
            raise ValueError(f"the cache must not roll (window=None); got window={cache.window}")

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
            last. Inside a model's :meth:`step` the length advances when the call ends; a
            layer used on its own advances it when ``layer`` is the last layer.

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
        keys, values = self.write(layer, (key, value))  # (N, H_kv, S, D) each
        return keys, values

    def __repr__(self) -> str:
        rolling = "" if self.window is None else f", window={self.window}, sinks={self.sinks}"
        return (
            f"KVCache(num_layers={self.num_layers}, batch_size={self.batch_size}, "
            f"num_kv_heads={self.num_kv_heads}, head_dim={self.head_dim}, "
            f"max_len={self.max_len}{rolling}, length={self.length}, dtype={self.dtype})"
        )
