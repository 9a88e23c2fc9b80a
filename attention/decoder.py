"""Decoder-only attention: causal self-attention with shared key/value heads, a key/value cache,
and a small GPT-style language model.

- :class:`CausalSelfAttention`: each position attends to itself and the past only. Its keys and
  values may have fewer heads than its queries (grouped-query attention; one key/value head is
  multi-query attention).
- :class:`KVCache`: the keys and values of every layer, preallocated, so that generating one
  more token costs one query against the cached keys instead of re-encoding the whole prefix.
- :class:`DecoderLM`: token and position embeddings, pre-LN blocks and an output head that
  predicts the next token; :meth:`DecoderLM.generate` samples from it, with or without a cache.
"""

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ._checks import check_dropout, check_embed, check_features, check_int, check_tokens
from .block import FeedForward
from .masks import causal_mask, sliding_window_mask
from .positions import PositionalEncoding, RotaryEmbedding, alibi_bias

__all__ = ["CausalSelfAttention", "KVCache", "DecoderLM", "grouped_attention", "DecoderBlock"]

POSITIONS = ("learned", "sinusoidal", "rotary", "alibi", "none")


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

    which :attr:`nbytes` reports. The cache is meant for inference, under
    :func:`torch.no_grad`.

    Args:
        num_layers (int): number of attention layers.
        batch_size (int): number of sequences :math:`N`.
        num_kv_heads (int): key/value heads per layer :math:`H_{kv}`.
        head_dim (int): head dimension :math:`D`.
        max_len (int): most positions the cache can hold.
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
    """

    def __init__(
        self,
        num_layers: int,
        *,
        batch_size: int,
        num_kv_heads: int,
        head_dim: int,
        max_len: int,
        device=None,
        dtype=None,
    ):
        for name, value in (("num_layers", num_layers), ("batch_size", batch_size),
                            ("num_kv_heads", num_kv_heads), ("head_dim", head_dim),
                            ("max_len", max_len)):  # fmt: skip
            check_int(value, name, minimum=1)
        dtype = torch.get_default_dtype() if dtype is None else dtype
        if not dtype.is_floating_point:
            raise TypeError(f"dtype must be a floating-point dtype; got {dtype}")
        self.num_layers, self.batch_size, self.max_len = num_layers, batch_size, max_len
        self.num_kv_heads, self.head_dim = num_kv_heads, head_dim
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

    def check_append(self, layer: int, batch_size: int, length: int, dtype=None) -> None:
        """Check, before any arithmetic, that ``length`` new positions of ``batch_size``
        sequences can be written to ``layer``.

        Args:
            layer (int): the layer index, in ``[0, num_layers)``.
            batch_size (int): the number of sequences :math:`N` being appended.
            length (int): the number of new positions :math:`L`.
            dtype (torch.dtype, optional): the dtype of what will be written. Default: ``None``
                (not checked).

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
            raise TypeError(f"the cache holds {self.dtype}; got {dtype}")
        if self.length + length > self.max_len:
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
            - Output: keys and values :math:`(N, H_{kv}, S, D)`, :math:`S` = ``length + L``

        Returns:
            tuple[Tensor, Tensor]: views of the layer's cached keys and values, the new ones
            last. When ``layer`` is the last layer, :attr:`length` grows by :math:`L`.

        Examples::

            >>> cache = KVCache(1, batch_size=1, num_kv_heads=1, head_dim=2, max_len=4)
            >>> keys, values = cache.update(0, torch.ones(1, 1, 3, 2), torch.ones(1, 1, 3, 2))
            >>> keys.shape, cache.length
            (torch.Size([1, 1, 3, 2]), 3)
        """
        expected = (self.batch_size, self.num_kv_heads, None, self.head_dim)
        for name, x in (("key", key), ("value", value)):
            check_features(x, name, self.head_dim, ndim=4)
            if x.shape[:2] != expected[:2] or x.shape[2] != key.shape[2]:
                raise ValueError(
                    f"{name} must have shape (N={self.batch_size}, H_kv={self.num_kv_heads}, "
                    f"L, D={self.head_dim}) with the same L as key; got {tuple(x.shape)}"
                )
        L = key.shape[2]
        self.check_append(layer, key.shape[0], L, key.dtype)
        end = self.length + L
        self.keys[layer, :, :, self.length : end] = key  # (N, H_kv, L, D)
        self.values[layer, :, :, self.length : end] = value  # (N, H_kv, L, D)
        keys = self.keys[layer, :, :, :end]  # (N, H_kv, S, D)
        values = self.values[layer, :, :, :end]  # (N, H_kv, S, D)
        if layer == self.num_layers - 1:
            self.length = end
        return keys, values

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
        return (
            f"KVCache(num_layers={self.num_layers}, batch_size={self.batch_size}, "
            f"num_kv_heads={self.num_kv_heads}, head_dim={self.head_dim}, "
            f"max_len={self.max_len}, length={self.length}, dtype={self.dtype})"
        )


def grouped_attention(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    mask: Tensor,
    *,
    bias: Tensor | None = None,
    dropout_p: float = 0.0,
) -> tuple[Tensor, Tensor]:
    r"""Attention where each key/value head serves a group of ``G = H / H_kv`` query heads.

    Query head :math:`h` reads key/value head :math:`\lfloor h / G \rfloor`, as
    ``F.scaled_dot_product_attention(..., enable_gqa=True)`` does. The key/value heads are
    never copied: the queries are viewed as :math:`(N, H_{kv}, G, L, D)` and the keys broadcast
    over the group.

    .. math::
        \text{weights} = \text{softmax}\left(\frac{Q K^\top}{\sqrt{D}} + \text{bias}\right)
        \text{ over the allowed keys}, \qquad \text{out} = \text{weights}\, V

    Args:
        query (Tensor): the queries.
        key (Tensor): the keys.
        value (Tensor): the values.
        mask (Tensor): bool, ``True`` = may attend; every row must allow at least one key.
        bias (Tensor, optional): added to the scores of each head (ALiBi). Default: ``None``.
        dropout_p (float): dropout on the weights. Default: ``0.0``.

    Shape:
        - query: :math:`(N, H, L, D)`; key and value: :math:`(N, H_{kv}, S, D)`
        - mask: :math:`(L, S)`; bias: :math:`(H, L, S)`
        - Output: :math:`(N, H, L, D)` and weights :math:`(N, H, L, S)`

    Returns:
        tuple[Tensor, Tensor]: the output and the weights (after dropout).

    Examples::

        >>> q, k, v = torch.randn(1, 4, 3, 8), torch.randn(1, 2, 3, 8), torch.randn(1, 2, 3, 8)
        >>> out, weights = grouped_attention(q, k, v, causal_mask(3))
        >>> expected = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        >>> torch.allclose(out, expected, atol=1e-6), weights.shape
        (True, torch.Size([1, 4, 3, 3]))
    """
    N, H, L, D = query.shape
    H_kv, S = key.shape[1], key.shape[2]
    G = H // H_kv
    q = query.view(N, H_kv, G, L, D)  # (N, H_kv, G, L, D)
    k, v = key[:, :, None], value[:, :, None]  # (N, H_kv, 1, S, D)
    # (N, H_kv, G, L, D) @ (N, H_kv, 1, D, S) -> (N, H_kv, G, L, S)
    scores = q @ k.transpose(-2, -1) / math.sqrt(D)
    if bias is not None:
        scores = scores + bias.view(H_kv, G, L, S)  # (N, H_kv, G, L, S)
    scores = scores.masked_fill(~mask, -math.inf)  # (N, H_kv, G, L, S)
    weights = scores.softmax(dim=-1)  # (N, H_kv, G, L, S)
    if dropout_p > 0.0:
        weights = F.dropout(weights, p=dropout_p)  # (N, H_kv, G, L, S)
    out = weights @ v  # (N, H_kv, G, L, S) @ (N, H_kv, 1, S, D) -> (N, H_kv, G, L, D)
    return out.view(N, H, L, D), weights.view(N, H, L, S)  # (N, H, L, D), (N, H, L, S)


class CausalSelfAttention(nn.Module):
    r"""Causal self-attention with grouped-query attention, for decoders.

    Query :math:`i` attends to keys :math:`j \le i` only (bottom-right aligned, as
    :func:`attention.causal_mask`: with :math:`S` cached keys and :math:`L` new queries, query
    :math:`i` sits at position :math:`i + S - L`). The queries have ``num_heads`` heads; the
    keys and values have ``num_kv_heads``, each serving ``num_heads // num_kv_heads`` query
    heads: ``num_kv_heads = num_heads`` is multi-head attention, ``1`` is multi-query
    attention :cite:p:`shazeer2019`, anything between is grouped-query attention
    :cite:p:`ainslie2023`. Fewer key/value heads mean a smaller :class:`KVCache`.

    Positions, optionally: ``rotary=True`` rotates the queries and keys with
    :class:`attention.RotaryEmbedding` after the projections, and ``alibi=True`` adds
    :func:`attention.alibi_bias` to the scores. Both use absolute positions that continue
    across a :class:`KVCache` (the new positions start at the cache's length), so cached and
    uncached calls agree.

    With ``need_weights=False`` the attention runs in
    :func:`torch.nn.functional.scaled_dot_product_attention` (``enable_gqa=True``); with
    ``need_weights=True`` in :func:`grouped_attention`, which returns the weights.

    Args:
        embed_dim (int): model dimension :math:`E`.
        num_heads (int): query heads :math:`H`; must divide ``embed_dim``.
        num_kv_heads (int, optional): key/value heads :math:`H_{kv}`; must divide
            ``num_heads``. Default: ``None`` (``num_heads``).
        rotary (bool): rotate queries and keys by their positions (RoPE); the head dimension
            must be even. Default: ``False``.
        alibi (bool): add ALiBi's linear distance penalty to the scores. Default: ``False``.
        window (int, optional): query :math:`i` attends only to the ``window`` keys
            :math:`i - \text{window} + 1, \dots, i` (a sliding window). Default: ``None``
            (all earlier keys).
        max_len (int, optional): the longest sequence, for the rotary embedding's table.
            Default: ``None`` (the :class:`attention.RotaryEmbedding` default).
        bias (bool): add a bias to the four projections. Default: ``False``.
        dropout (float): dropout on the attention weights, in training mode only.
            Default: ``0.0``.
        device (torch.device, optional): where to create the parameters. Default: ``None``.
        dtype (torch.dtype, optional): dtype of the parameters. Default: ``None``.

    Shape:
        - x: :math:`(N, L, E)`
        - Output: :math:`(N, L, E)` and weights :math:`(N, H, L, S)` (or ``None``), where
          :math:`S = L` plus the cached positions

    Examples::

        >>> attn = CausalSelfAttention(64, 8, num_kv_heads=2)
        >>> attn.k_proj.weight.shape  # 2 key heads of D = 8
        torch.Size([16, 64])
        >>> out, weights = attn(torch.randn(3, 5, 64), need_weights=True)
        >>> out.shape, weights.shape
        (torch.Size([3, 5, 64]), torch.Size([3, 8, 5, 5]))
    """

    def __init__(
        self,
        embed_dim: int,
        num_heads: int,
        *,
        num_kv_heads: int | None = None,
        rotary: bool = False,
        alibi: bool = False,
        window: int | None = None,
        max_len: int | None = None,
        bias: bool = False,
        dropout: float = 0.0,
        device=None,
        dtype=None,
    ):
        super().__init__()
        check_embed(embed_dim, num_heads)
        check_dropout(dropout)
        num_kv_heads = num_heads if num_kv_heads is None else num_kv_heads
        check_int(num_kv_heads, "num_kv_heads", minimum=1)
        if num_heads % num_kv_heads != 0:
            raise ValueError(
                f"num_kv_heads must divide num_heads; got num_heads={num_heads}, "
                f"num_kv_heads={num_kv_heads}"
            )
        for name, value in (("rotary", rotary), ("alibi", alibi)):
            if not isinstance(value, bool):
                raise TypeError(f"{name} must be a bool; got {type(value).__name__}")
        if window is not None:
            check_int(window, "window", minimum=1)
        if max_len is not None:
            check_int(max_len, "max_len", minimum=1)
        self.embed_dim, self.num_heads, self.num_kv_heads = embed_dim, num_heads, num_kv_heads
        self.head_dim = embed_dim // num_heads
        self.window, self.max_len, self.dropout = window, max_len, float(dropout)
        factory = {"device": device, "dtype": dtype}
        kv_dim = num_kv_heads * self.head_dim
        self.q_proj = nn.Linear(embed_dim, embed_dim, bias=bias, **factory)
        self.k_proj = nn.Linear(embed_dim, kv_dim, bias=bias, **factory)
        self.v_proj = nn.Linear(embed_dim, kv_dim, bias=bias, **factory)
        self.out_proj = nn.Linear(embed_dim, embed_dim, bias=bias, **factory)
        self.alibi = alibi
        self.rotary = None
        if rotary:
            options = {} if max_len is None else {"max_len": max_len}
            self.rotary = RotaryEmbedding(self.head_dim, **options)

    def mask(self, L: int, S: int, *, device=None) -> Tensor:
        """The bool mask of ``L`` queries over ``S`` keys, bottom-right aligned: causal, and
        limited to the last ``window`` keys when a window is set.

        Args:
            L (int): number of queries (the new positions).
            S (int): number of keys (cached plus new).
            device (torch.device, optional): where to build the mask. Default: ``None``.

        Shape:
            - Output: :math:`(L, S)`, ``True`` = may attend

        Returns:
            Tensor: the mask.

        Examples::

            >>> CausalSelfAttention(8, 2, window=2).mask(3, 4).int()
            tensor([[1, 1, 0, 0],
                    [0, 1, 1, 0],
                    [0, 0, 1, 1]], dtype=torch.int32)
        """
        if self.window is None:
            return causal_mask(L, S, device=device)  # (L, S)
        return sliding_window_mask(L, self.window, S, device=device)  # (L, S)

    def forward(
        self,
        x: Tensor,
        *,
        cache: KVCache | None = None,
        layer: int = 0,
        need_weights: bool = False,
    ) -> tuple[Tensor, Tensor | None]:
        """Attend from every position of ``x`` to itself and the earlier positions.

        Args:
            x (Tensor): :math:`(N, L, E)`, the new positions.
            cache (KVCache, optional): the keys and values of the earlier positions; this call
                appends its own to slot ``layer``. Default: ``None``.
            layer (int): this layer's slot in ``cache``. Default: ``0``.
            need_weights (bool): compute and return the per-head weights. Default: ``False``.

        Returns:
            tuple[Tensor, Tensor | None]: output :math:`(N, L, E)` and weights
            :math:`(N, H, L, S)`, or ``None`` when ``need_weights=False``.
        """
        check_features(x, "x", self.embed_dim)
        N, L, E = x.shape
        H, H_kv, D = self.num_heads, self.num_kv_heads, self.head_dim
        if cache is not None:
            if not isinstance(cache, KVCache):
                raise TypeError(f"cache must be a KVCache or None; got {type(cache).__name__}")
            if (cache.num_kv_heads, cache.head_dim) != (H_kv, D):
                raise ValueError(
                    f"the cache holds H_kv={cache.num_kv_heads} heads of D={cache.head_dim}; "
                    f"this layer has H_kv={H_kv}, D={D}"
                )
            cache.check_append(layer, N, L, x.dtype)

        q = self.q_proj(x).view(N, L, H, D).transpose(1, 2)  # (N, L, E) -> (N, H, L, D)
        k = self.k_proj(x).view(N, L, H_kv, D).transpose(1, 2)  # (N, L, E) -> (N, H_kv, L, D)
        v = self.v_proj(x).view(N, L, H_kv, D).transpose(1, 2)  # (N, L, E) -> (N, H_kv, L, D)
        if self.rotary is not None:  # the new positions follow the cached ones
            offset = 0 if cache is None else cache.length
            q = self.rotary(q, offset=offset)  # (N, H, L, D)
            k = self.rotary(k, offset=offset)  # (N, H_kv, L, D)
        if cache is not None:
            k, v = cache.update(layer, k, v)  # (N, H_kv, S, D), the new positions last
        S = k.shape[2]
        mask = self.mask(L, S, device=x.device)  # (L, S)
        bias = None
        if self.alibi:
            bias = alibi_bias(H, L, S, device=x.device, dtype=q.dtype)  # (H, L, S)
        dropout_p = self.dropout if self.training else 0.0

        if need_weights:  # the readable path, which returns the weights
            out, weights = grouped_attention(q, k, v, mask, bias=bias, dropout_p=dropout_p)
        else:  # PyTorch's fused kernel; a float mask is added to the scores
            attn_mask = mask if bias is None else bias.masked_fill(~mask, -math.inf)
            out = F.scaled_dot_product_attention(
                q, k, v, attn_mask=attn_mask, dropout_p=dropout_p, enable_gqa=True
            )  # (N, H, L, D)
            weights = None
        out = out.transpose(1, 2).reshape(N, L, E)  # (N, H, L, D) -> (N, L, E)
        return self.out_proj(out), weights


class DecoderBlock(nn.Module):
    r"""One pre-LN decoder block: causal self-attention, then a feed-forward network.

    ::

        x = x + dropout(self_attn(norm1(x)))
        x = x + dropout(ffn(norm2(x)))

    Args:
        embed_dim (int): model dimension :math:`E`.
        num_heads (int): query heads :math:`H`.
        num_kv_heads (int, optional): key/value heads. Default: ``None`` (``num_heads``).
        ffn_dim (int, optional): hidden size of the feed-forward network. Default: ``None``
            (``4 * embed_dim``).
        rotary (bool): rotary embeddings in the attention. Default: ``False``.
        alibi (bool): ALiBi biases in the attention. Default: ``False``.
        window (int, optional): sliding-window size. Default: ``None``.
        max_len (int, optional): the longest sequence. Default: ``None``.
        dropout (float): dropout probability, in training mode only. Default: ``0.0``.

    Shape:
        - x: :math:`(N, L, E)`
        - Output: :math:`(N, L, E)` and weights :math:`(N, H, L, S)` or ``None``

    Examples::

        >>> block = DecoderBlock(32, 4, num_kv_heads=2)
        >>> block(torch.randn(2, 5, 32))[0].shape
        torch.Size([2, 5, 32])
    """

    def __init__(
        self,
        embed_dim: int,
        num_heads: int,
        *,
        num_kv_heads: int | None = None,
        ffn_dim: int | None = None,
        rotary: bool = False,
        alibi: bool = False,
        window: int | None = None,
        max_len: int | None = None,
        dropout: float = 0.0,
    ):
        super().__init__()
        self.self_attn = CausalSelfAttention(
            embed_dim, num_heads, num_kv_heads=num_kv_heads, rotary=rotary, alibi=alibi,
            window=window, max_len=max_len, dropout=dropout,
        )  # fmt: skip
        self.ffn = FeedForward(embed_dim, ffn_dim or 4 * embed_dim, dropout=dropout)
        self.norm1 = nn.LayerNorm(embed_dim)
        self.norm2 = nn.LayerNorm(embed_dim)
        self.dropout = nn.Dropout(dropout)

    def forward(
        self,
        x: Tensor,
        *,
        cache: KVCache | None = None,
        layer: int = 0,
        need_weights: bool = False,
    ) -> tuple[Tensor, Tensor | None]:
        """Run the block on ``x`` :math:`(N, L, E)`; ``cache`` and ``layer`` as in
        :meth:`CausalSelfAttention.forward`.

        Args:
            x (Tensor): :math:`(N, L, E)`.
            cache (KVCache, optional): the earlier keys and values. Default: ``None``.
            layer (int): this block's slot in ``cache``. Default: ``0``.
            need_weights (bool): also return the attention weights. Default: ``False``.

        Returns:
            tuple[Tensor, Tensor | None]: output :math:`(N, L, E)` and weights or ``None``.
        """
        attended, weights = self.self_attn(
            self.norm1(x), cache=cache, layer=layer, need_weights=need_weights
        )
        x = x + self.dropout(attended)  # (N, L, E)
        x = x + self.dropout(self.ffn(self.norm2(x)))  # (N, L, E)
        return x, weights


class DecoderLM(nn.Module):
    r"""A small GPT-style language model: it predicts each next token from the ones before.

    Token embeddings plus position information, ``num_layers`` pre-LN :class:`DecoderBlock` s
    of :class:`CausalSelfAttention`, a final LayerNorm, and an output head to one logit per
    vocabulary entry. The head is **not tied** to the token embedding: a separate
    ``nn.Linear(E, V, bias=False)``, which costs :math:`V E` parameters (little for the small
    vocabularies of these pages) and lets the model read and write tokens differently.

    Positions (``positions``): ``"learned"`` adds an ``nn.Embedding`` of ``max_len``
    positions; ``"sinusoidal"`` adds :class:`attention.PositionalEncoding`; ``"rotary"``
    rotates every layer's queries and keys (:class:`attention.RotaryEmbedding`); ``"alibi"``
    biases every layer's scores (:func:`attention.alibi_bias`); ``"none"`` adds nothing (the
    causal mask alone lets a position count the ones before it). With a :class:`KVCache`, the
    new tokens take positions ``cache.length`` onwards.

    Args:
        vocab_size (int): number of token ids :math:`V`.
        embed_dim (int): model dimension :math:`E`.
        num_heads (int): query heads per layer :math:`H`.
        num_layers (int): number of blocks.
        max_len (int): longest sequence (prompt plus generated tokens).
        num_kv_heads (int, optional): key/value heads per layer. Default: ``None``
            (``num_heads``).
        ffn_dim (int, optional): hidden size of the feed-forward networks. Default: ``None``
            (``4 * embed_dim``).
        dropout (float): dropout everywhere, in training mode only. Default: ``0.0``.
        positions (str): how positions enter the model: ``"learned"``, ``"sinusoidal"``,
            ``"rotary"``, ``"alibi"`` or ``"none"``. Default: ``"learned"``.
        window (int, optional): sliding-window attention in every layer. Default: ``None``.

    Shape:
        - tokens: :math:`(N, L)` integer ids
        - Output: logits :math:`(N, L, V)` and a list of ``num_layers`` weights
          :math:`(N, H, L, S)`, or ``None``

    Examples::

        >>> model = DecoderLM(10, embed_dim=16, num_heads=4, num_layers=2, max_len=8)
        >>> logits, weights = model(torch.tensor([[1, 2, 3]]), need_weights=True)
        >>> logits.shape, len(weights), weights[0].shape
        (torch.Size([1, 3, 10]), 2, torch.Size([1, 4, 3, 3]))
    """

    def __init__(
        self,
        vocab_size: int,
        *,
        embed_dim: int,
        num_heads: int,
        num_layers: int,
        max_len: int,
        num_kv_heads: int | None = None,
        ffn_dim: int | None = None,
        dropout: float = 0.0,
        positions: str = "learned",
        window: int | None = None,
    ):
        super().__init__()
        check_embed(embed_dim, num_heads)
        for name, value in (("vocab_size", vocab_size), ("num_layers", num_layers),
                            ("max_len", max_len)):  # fmt: skip
            check_int(value, name, minimum=1)
        if positions not in POSITIONS:
            raise ValueError(f"positions must be one of {POSITIONS}; got {positions!r}")
        self.vocab_size, self.max_len, self.positions = vocab_size, max_len, positions
        self.embedding = nn.Embedding(vocab_size, embed_dim)
        if positions == "learned":
            self.position_embedding = nn.Embedding(max_len, embed_dim)
        elif positions == "sinusoidal":
            self.position_embedding = PositionalEncoding(embed_dim, max_len)
        self.dropout = nn.Dropout(dropout)
        self.blocks = nn.ModuleList(
            DecoderBlock(
                embed_dim,
                num_heads,
                num_kv_heads=num_kv_heads,
                ffn_dim=ffn_dim,
                rotary=positions == "rotary",
                alibi=positions == "alibi",
                window=window,
                max_len=max_len,
                dropout=dropout,
            )
            for _ in range(num_layers)
        )
        self.norm = nn.LayerNorm(embed_dim)
        self.head = nn.Linear(embed_dim, vocab_size, bias=False)
        # Small embeddings, as in GPT-2 (std 0.02): the default N(0, 1) would swamp the
        # residual stream the blocks add to.
        for embedding in (self.embedding, getattr(self, "position_embedding", None)):
            if isinstance(embedding, nn.Embedding):
                nn.init.normal_(embedding.weight, std=0.02)

    def new_cache(self, batch_size: int, *, max_len: int | None = None) -> KVCache:
        """An empty :class:`KVCache` for this model: every layer, its key/value heads, its
        dtype and device.

        Args:
            batch_size (int): number of sequences :math:`N`.
            max_len (int, optional): positions to allocate. Default: ``None`` (the model's
                ``max_len``).

        Returns:
            KVCache: the empty cache.

        Examples::

            >>> model = DecoderLM(10, embed_dim=16, num_heads=4, num_layers=2, max_len=8,
            ...                   num_kv_heads=1)
            >>> model.new_cache(3).nbytes  # 2 x 2 layers x 3 x 1 x 8 x 4 x 4 bytes
            1536
        """
        attn = self.blocks[0].self_attn
        weight = attn.q_proj.weight
        return KVCache(
            len(self.blocks), batch_size=batch_size, num_kv_heads=attn.num_kv_heads,
            head_dim=attn.head_dim, max_len=self.max_len if max_len is None else max_len,
            device=weight.device, dtype=weight.dtype,
        )  # fmt: skip

    def forward(self, tokens: Tensor, *, cache: KVCache | None = None, need_weights=False):
        """Predict, at every position of ``tokens``, the next token.

        Args:
            tokens (Tensor): :math:`(N, L)` integer ids; with ``cache``, the new tokens only.
            cache (KVCache, optional): the keys and values of the earlier tokens; the new
                ones are appended. Default: ``None``.
            need_weights (bool): also return every layer's attention weights.
                Default: ``False``.

        Returns:
            tuple[Tensor, list[Tensor] | None]: logits :math:`(N, L, V)` and, per layer, the
            weights :math:`(N, H, L, S)` (or ``None``).
        """
        offset = 0
        if cache is not None:
            if not isinstance(cache, KVCache):
                raise TypeError(f"cache must be a KVCache or None; got {type(cache).__name__}")
            if cache.num_layers != len(self.blocks):
                raise ValueError(
                    f"the cache has {cache.num_layers} layers; this model has {len(self.blocks)}"
                )
            offset = cache.length
        check_tokens(tokens, self.vocab_size, self.max_len)
        N, L = tokens.shape
        if offset + L > self.max_len:
            raise ValueError(
                f"the cache holds {offset} positions; {L} more would exceed max_len={self.max_len}"
            )
        x = self.embedding(tokens)  # (N, L) -> (N, L, E)
        if self.positions == "learned":
            where = torch.arange(offset, offset + L, device=tokens.device)  # (L,)
            x = x + self.position_embedding(where)  # (N, L, E) + (L, E) -> (N, L, E)
        elif self.positions == "sinusoidal":
            x = x + self.position_embedding.pe[offset : offset + L].to(x.dtype)  # (N, L, E)
        x = self.dropout(x)
        all_weights = []
        for layer, block in enumerate(self.blocks):
            x, weights = block(x, cache=cache, layer=layer, need_weights=need_weights)
            all_weights.append(weights)
        logits = self.head(self.norm(x))  # (N, L, E) -> (N, L, V)
        return logits, (all_weights if need_weights else None)

    @torch.no_grad()
    def generate(
        self,
        prompt: Tensor,
        max_new_tokens: int,
        *,
        use_cache: bool = True,
        temperature: float = 0.0,
        top_k: int | None = None,
        generator: torch.Generator | None = None,
    ) -> Tensor:
        r"""Continue ``prompt`` by ``max_new_tokens`` tokens, one at a time, in eval mode.

        With ``use_cache=True`` the prompt is encoded once into a :class:`KVCache`, and each
        new token is one query against the cached keys and values; without, every step
        re-encodes the whole sequence so far. Both give the same tokens.

        Args:
            prompt (Tensor): the first tokens.
            max_new_tokens (int): how many tokens to add.
            use_cache (bool): keep the keys and values between steps. Default: ``True``.
            temperature (float): divides the logits before sampling; ``0`` picks the most
                likely token (greedy). Default: ``0.0``.
            top_k (int, optional): sample among the ``top_k`` most likely tokens only.
                Default: ``None`` (all).
            generator (torch.Generator, optional): the random numbers of sampling, for
                reproducible samples. Default: ``None``.

        Shape:
            - prompt: :math:`(N, L_0)` integer ids
            - Output: :math:`(N, L_0 + T)`, ``T = max_new_tokens``

        Returns:
            Tensor: the prompt followed by the generated tokens. The training mode is restored.

        Examples::

            >>> model = DecoderLM(10, embed_dim=16, num_heads=4, num_layers=2, max_len=8)
            >>> out = model.generate(torch.tensor([[1, 2]]), 4)
            >>> out.shape, torch.equal(out, model.generate(torch.tensor([[1, 2]]), 4,
            ...                                            use_cache=False))
            (torch.Size([1, 6]), True)
        """
        check_tokens(prompt, self.vocab_size, self.max_len, name="prompt")
        check_int(max_new_tokens, "max_new_tokens", minimum=0)
        N, L0 = prompt.shape
        if L0 == 0:
            raise ValueError("prompt must hold at least one token per sequence; got L0 = 0")
        if L0 + max_new_tokens > self.max_len:
            raise ValueError(
                f"prompt length {L0} + max_new_tokens {max_new_tokens} exceeds "
                f"max_len={self.max_len}"
            )
        if isinstance(temperature, bool) or not isinstance(temperature, (int, float)):
            raise TypeError(f"temperature must be a float; got {type(temperature).__name__}")
        if temperature < 0:
            raise ValueError(f"temperature must be >= 0; got {temperature}")
        if top_k is not None:
            check_int(top_k, "top_k", minimum=1)
        was_training = self.training
        self.eval()
        tokens = prompt
        cache = self.new_cache(N, max_len=L0 + max_new_tokens) if use_cache else None
        step_input = prompt
        for _ in range(max_new_tokens):
            if cache is None:
                step_input = tokens  # re-encode the whole sequence so far
            logits, _ = self(step_input, cache=cache)  # (N, L, V)
            next_token = self._pick(logits[:, -1], temperature, top_k, generator)  # (N, 1)
            tokens = torch.cat([tokens, next_token], dim=1)  # (N, L + 1)
            step_input = next_token  # with a cache, only the new token goes in
        self.train(was_training)
        return tokens

    @staticmethod
    def _pick(logits: Tensor, temperature: float, top_k, generator) -> Tensor:
        """The next token from the last position's logits (N, V): greedy or sampled."""
        if temperature == 0:
            return logits.argmax(dim=-1, keepdim=True)  # (N, 1)
        logits = logits / temperature  # (N, V)
        if top_k is not None and top_k < logits.shape[-1]:
            kth = logits.topk(top_k, dim=-1).values[:, -1:]  # (N, 1)
            logits = logits.masked_fill(logits < kth, -math.inf)  # (N, V)
        probabilities = logits.softmax(dim=-1)  # (N, V)
        return torch.multinomial(probabilities, 1, generator=generator)  # (N, 1)
