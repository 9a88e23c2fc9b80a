"""The layers of a decoder: causal self-attention with shared key/value heads, and the block
around it.

- :class:`CausalSelfAttention`: each position attends to itself and the past only. Its keys and
  values may have fewer heads than its queries (grouped-query attention; one key/value head is
  multi-query attention). It is the attention registered as ``"causal"``.
- :class:`DecoderBlock`: a pre-LN block around *any* attention module it is given.

A new attention variant plugs in without editing this file or the model: see
:mod:`attention.config` for what it provides and :func:`attention.config.register_attention`.
"""

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ._checks import (
    check_bool,
    check_dropout,
    check_embed,
    check_factory,
    check_features,
    check_int,
)
from .block import FeedForward
from .cache import KVCache
from .config import DecoderConfig, register_attention
from .functional import scaled_dot_product_attention
from .masks import causal, causal_mask, sliding_window, sliding_window_mask
from .positions import RotaryEmbedding, alibi_bias, alibi_penalty, alibi_slopes

__all__ = ["CausalSelfAttention", "DecoderBlock"]


class CausalSelfAttention(nn.Module):
    r"""Causal self-attention with grouped-query attention, for decoders.

    Query :math:`i` attends to keys :math:`j \le i` only (bottom-right aligned, as
    :func:`attention.causal_mask`: with :math:`S` cached keys and :math:`L` new queries, query
    :math:`i` sits at position :math:`i + S - L`). The queries have ``num_heads`` heads; the
    keys and values have ``num_kv_heads``, each serving ``num_heads // num_kv_heads`` query
    heads: ``num_kv_heads = num_heads`` is multi-head attention, ``1`` is multi-query
    attention :cite:p:`shazeer2019`, anything between is grouped-query attention
    :cite:p:`ainslie2023`. Fewer key/value heads mean a smaller :class:`attention.KVCache`.

    Positions, optionally: ``rotary=True`` rotates the queries and keys with
    :class:`attention.RotaryEmbedding`, and ``alibi=True`` adds :func:`attention.alibi_bias` to
    the scores. The keys are cached *before* their rotation and rotated after being read back,
    by the position (slot) each holds in the cache, so cached and uncached calls agree and a
    rolling cache never shows a position the model was not trained on.

    With ``need_weights=False`` the attention runs in
    :func:`torch.nn.functional.scaled_dot_product_attention` (``enable_gqa=True``); with
    ``need_weights=True`` in :func:`attention.scaled_dot_product_attention` (``enable_gqa=True``),
    which returns the weights.

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
        for name, value in (("rotary", rotary), ("alibi", alibi), ("bias", bias)):
            check_bool(value, name)
        if window is not None:
            check_int(window, "window", minimum=1)
        if max_len is not None:
            check_int(max_len, "max_len", minimum=1)
        check_factory(device, dtype)
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

    @property
    def positions(self) -> str:
        """The positions this layer applies itself: ``"rotary"``, ``"alibi"`` or ``"none"``."""
        return "rotary" if self.rotary is not None else "alibi" if self.alibi else "none"

    def new_state(
        self, num_layers: int, *, batch_size: int, max_len=None, window=None, sinks=0
    ) -> KVCache:
        """An empty :class:`attention.KVCache` for ``num_layers`` layers like this one: its
        key/value heads, head dimension, dtype and device (the decoding-state contract,
        :class:`attention.state.DecodingState`)."""
        weight = self.q_proj.weight
        return KVCache(
            num_layers, batch_size=batch_size, num_kv_heads=self.num_kv_heads,
            head_dim=self.head_dim, max_len=max_len, window=window, sinks=sinks,
            device=weight.device, dtype=weight.dtype,
        )  # fmt: skip

    @classmethod
    def from_config(cls, config: DecoderConfig) -> "CausalSelfAttention":
        """The attention of one layer of a :class:`attention.DecoderLM` with this ``config``."""
        if config.attention_options:
            raise ValueError(
                f"CausalSelfAttention takes its settings from the config's fields; got "
                f"attention_options={config.attention_options}"
            )
        return cls(
            config.embed_dim, config.num_heads, num_kv_heads=config.num_kv_heads,
            rotary=config.positions == "rotary", alibi=config.positions == "alibi",
            window=config.window, max_len=config.max_len, bias=config.bias,
            dropout=config.dropout,
        )  # fmt: skip

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

    def _rows(self, q: Tensor, positions: Tensor, S: int) -> tuple[Tensor, Tensor, Tensor | None]:
        """Queries rotated, mask and ALiBi bias for rows whose queries sit at ``positions``
        :math:`(N, 1, L)` over keys at slots ``0..S-1``: a query sees the keys at its own position
        and before (within the window, if any)."""
        key = torch.arange(S, device=q.device)  # (S,)
        mask = causal(positions[..., None], key)  # (N, 1, L, S)
        if self.window is not None:
            mask = mask & sliding_window(self.window)(positions[..., None], key)  # (N, 1, L, S)
        if self.rotary is not None:
            q = self.rotary(q, positions=positions)  # (N, H, L, D)
        bias = None
        if self.alibi:
            slopes = alibi_slopes(self.num_heads).to(q.device)[:, None, None]  # (H, 1, 1)
            bias = alibi_penalty(slopes, positions[..., None], key).to(q.dtype)  # (N, H, L, S)
        return q, mask, bias

    def _check_call(self, x: Tensor, cache, layer: int, need_weights: bool) -> None:
        """The checks of :meth:`forward`'s arguments, before any arithmetic."""
        check_features(x, "x", self.embed_dim, like=self.q_proj.weight)
        check_bool(need_weights, "need_weights")
        check_int(layer, "layer", minimum=0)
        KVCache.check(cache, self.num_kv_heads, self.head_dim)
        if cache is not None:
            cache.check_append(layer, *x.shape[:2], dtype=x.dtype, device=x.device)

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
        self._check_call(x, cache, layer, need_weights)
        N, L, E = x.shape
        H, H_kv, D = self.num_heads, self.num_kv_heads, self.head_dim
        positions = None if cache is None else cache.positions(L)  # (N, L): rows of own lengths

        q = self.q_proj(x).view(N, L, H, D).transpose(1, 2)  # (N, L, E) -> (N, H, L, D)
        k = self.k_proj(x).view(N, L, H_kv, D).transpose(1, 2)  # (N, L, E) -> (N, H_kv, L, D)
        v = self.v_proj(x).view(N, L, H_kv, D).transpose(1, 2)  # (N, L, E) -> (N, H_kv, L, D)
        if cache is not None:
            k, v = cache.update(layer, k, v)  # (N, H_kv, S, D), the new positions last
        S = k.shape[2]
        if positions is not None:  # each row's queries at their own positions
            q, mask, bias = self._rows(q, positions[:, None], S)  # (N, H, L, D), (N, 1|H, L, S)
            k = k if self.rotary is None else self.rotary(k)  # (N, H_kv, S, D)
        elif self.rotary is not None:  # by position in the sequence (the cache's slots)
            q = self.rotary(q, offset=S - L)  # (N, H, L, D)
            k = self.rotary(k)  # (N, H_kv, S, D)
        if positions is None:
            mask = self.mask(L, S, device=x.device)  # (L, S)
            bias = None
            if self.alibi:
                bias = alibi_bias(H, L, S, device=x.device, dtype=q.dtype)  # (H, L, S)
        dropout_p = self.dropout if self.training else 0.0

        if need_weights:  # the readable path, which returns the weights
            out, weights = scaled_dot_product_attention(
                q, k, v, mask, bias=bias, dropout_p=dropout_p, enable_gqa=True
            )  # (N, H, L, D), (N, H, L, S)
        else:  # PyTorch's fused kernel; a float mask is added to the scores
            attn_mask = mask
            if bias is not None:
                attn_mask = bias.masked_fill(~mask, torch.finfo(bias.dtype).min)  # (H, L, S)
            out = F.scaled_dot_product_attention(
                q, k, v, attn_mask=attn_mask, dropout_p=dropout_p, enable_gqa=True
            )  # (N, H, L, D)
            weights = None
        out = out.transpose(1, 2).reshape(N, L, E)  # (N, H, L, D) -> (N, L, E)
        return self.out_proj(out), weights


class DecoderBlock(nn.Module):
    r"""One pre-LN decoder block around the attention module it is given, then a feed-forward
    network.

    ::

        x = x + dropout(self_attn(norm1(x)))
        x = x + dropout(ffn(norm2(x)))

    Args:
        self_attn (nn.Module): the attention: an ``embed_dim`` attribute and
            ``forward(x, *, cache, layer, need_weights) -> (out, weights)``, as
            :class:`CausalSelfAttention`.
        ffn_dim (int): hidden size of the feed-forward network.
        dropout (float): dropout probability, in training mode only. Default: ``0.0``.

    Shape:
        - x: :math:`(N, L, E)`
        - Output: :math:`(N, L, E)` and weights :math:`(N, H, L, S)` or ``None``

    Examples::

        >>> block = DecoderBlock(CausalSelfAttention(32, 4, num_kv_heads=2), 128)
        >>> block(torch.randn(2, 5, 32))[0].shape
        torch.Size([2, 5, 32])
    """

    def __init__(self, self_attn: nn.Module, ffn_dim: int, *, dropout: float = 0.0):
        super().__init__()
        if not isinstance(self_attn, nn.Module):
            raise TypeError(f"self_attn must be an nn.Module; got {type(self_attn).__name__}")
        embed_dim = getattr(self_attn, "embed_dim", None)
        check_int(embed_dim, "self_attn.embed_dim")
        check_int(ffn_dim, "ffn_dim")
        check_dropout(dropout)
        weight = next(self_attn.parameters(), None)
        factory = {} if weight is None else {"device": weight.device, "dtype": weight.dtype}
        self.embed_dim = embed_dim
        self.self_attn = self_attn
        self.ffn = FeedForward(embed_dim, ffn_dim, dropout=dropout, **factory)
        self.norm1 = nn.LayerNorm(embed_dim, **factory)
        self.norm2 = nn.LayerNorm(embed_dim, **factory)
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
        check_features(x, "x", self.embed_dim, like=self.norm1.weight)
        attended, weights = self.self_attn(
            self.norm1(x), cache=cache, layer=layer, need_weights=need_weights
        )  # (N, L, E)
        x = x + self.dropout(attended)  # (N, L, E)
        x = x + self.dropout(self.ffn(self.norm2(x)))  # (N, L, E)
        return x, weights


register_attention("causal", CausalSelfAttention.from_config)
