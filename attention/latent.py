r"""Multi-head latent attention (MLA, DeepSeek-V2 :cite:p:`deepseekv2`): cache one small latent
per token instead of every head's key and value.

- :class:`MultiHeadLatentAttention`: keys and values are rebuilt from one latent
  :math:`c^{KV}` of size :math:`d_c` per token, plus one rotary key of size :math:`d_h^R`
  shared by every head (the *decoupled* rotary key); at inference the up-projections are
  absorbed into the query and the output, so attention reads the latent directly.
- :class:`LatentCache`: its decoding state, the latent and the rotary key of every token,
  each held once: :math:`(d_c + d_h^R)` elements per token and layer.
"""

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ._checks import (
    check_bool,
    check_device_dtype,
    check_dropout,
    check_embed,
    check_factory,
    check_features,
    check_float,
    check_int,
    check_tensor,
)
from .config import DecoderConfig, register_attention
from .functional import scaled_dot_product_attention
from .masks import causal_mask, sliding_window_mask
from .positions import RotaryEmbedding
from .state import DecodingState

__all__ = ["MultiHeadLatentAttention", "LatentCache"]


class LatentCache(DecodingState):
    r"""The decoding state of :class:`MultiHeadLatentAttention`: every layer's latents and
    rotary keys, preallocated to ``max_len`` positions.

    Each token leaves one latent :math:`c^{KV}_t` (:math:`d_c` elements) and one rotary key
    :math:`k^R_t` (:math:`d_h^R` elements, before its rotation, shared by all heads), so the
    memory is

    .. math::
        (d_c + d_h^R) \times \text{layers} \times N \times \text{max\_len}
        \times \text{bytes per element},

    against :math:`2 H_{kv} D` elements per token and layer for a :class:`attention.KVCache`.
    Rolling (``window``, ``sinks``) works as for :class:`attention.KVCache`.

    Args:
        num_layers (int): number of attention layers.
        batch_size (int): number of sequences :math:`N`.
        latent_dim (int): size :math:`d_c` of the latent.
        rope_dim (int): size :math:`d_h^R` of the rotary key.
        max_len (int, optional): most positions held. Default: ``None`` (``sinks + window``;
            required without ``window``).
        window (int, optional): keep only the most recent ``window`` positions after the sinks.
            Default: ``None``.
        sinks (int): with ``window``, the first positions that are always kept. Default: ``0``.
        device (torch.device, optional): where to allocate. Default: ``None`` (CPU).
        dtype (torch.dtype, optional): element type. Default: ``None`` (the default dtype).

    Shape:
        - latents of one layer: :math:`(N, \text{max\_len}, d_c)`
        - rotary keys of one layer: :math:`(N, \text{max\_len}, d_h^R)`

    Examples::

        >>> cache = LatentCache(2, batch_size=1, latent_dim=32, rope_dim=4, max_len=8)
        >>> cache.nbytes // (2 * 8)  # bytes per token and layer: (32 + 4) x 4
        144
    """

    position_axis = 1  # a layer's store is (N, max_len, d)

    def __init__(
        self,
        num_layers: int,
        *,
        batch_size: int,
        latent_dim: int,
        rope_dim: int,
        max_len: int | None = None,
        window: int | None = None,
        sinks: int = 0,
        device=None,
        dtype=None,
    ):
        super().__init__(
            num_layers, batch_size=batch_size, max_len=max_len, window=window, sinks=sinks
        )
        check_int(latent_dim, "latent_dim")
        check_int(rope_dim, "rope_dim")
        self.latent_dim, self.rope_dim = latent_dim, rope_dim
        shape = (num_layers, batch_size, self.max_len)
        self.latents = self._allocate((*shape, latent_dim), device=device, dtype=dtype)
        self.rope_keys = self._allocate((*shape, rope_dim), device=device, dtype=dtype)

    def stores(self) -> tuple[Tensor, Tensor]:
        r"""The latents and the rotary keys, :math:`(\text{layers}, N, \text{max\_len}, d)`."""
        return self.latents, self.rope_keys

    def update(self, layer: int, latent: Tensor, rope_key: Tensor) -> tuple[Tensor, Tensor]:
        r"""Write ``layer``'s new latents and rotary keys after the held ones; return all.

        Args:
            layer (int): the layer index.
            latent (Tensor): the new latents :math:`c^{KV}`.
            rope_key (Tensor): the new rotary keys, not yet rotated.

        Shape:
            - latent: :math:`(N, L, d_c)`; rope_key: :math:`(N, L, d_h^R)`
            - Output: :math:`(N, S, d_c)` and :math:`(N, S, d_h^R)`, the new positions last

        Returns:
            tuple[Tensor, Tensor]: views of the layer's latents and rotary keys.

        Examples::

            >>> cache = LatentCache(1, batch_size=1, latent_dim=3, rope_dim=2, max_len=4)
            >>> latents, keys = cache.update(0, torch.ones(1, 2, 3), torch.ones(1, 2, 2))
            >>> latents.shape, cache.length
            (torch.Size([1, 2, 3]), 2)
        """
        for name, x, size in (("latent", latent, self.latent_dim), ("rope_key", rope_key,
                                                                     self.rope_dim)):  # fmt: skip
            check_tensor(x, name, ndim=3)
            if x.shape[0] != self.batch_size or x.shape[2] != size or x.shape[1] != latent.shape[1]:
                raise ValueError(
                    f"{name} must have shape (N={self.batch_size}, L, {size}) with the same L "
                    f"as latent; got {tuple(x.shape)}"
                )
            check_device_dtype(x, name, self.device, self.dtype, "the cache")
            if x.requires_grad and torch.is_grad_enabled():
                raise ValueError(
                    f"{name} requires grad: LatentCache is for inference and does not keep the "
                    "graph; call the model under torch.no_grad()"
                )
        latents, rope_keys = self.write(layer, (latent, rope_key))  # (N, S, d_c), (N, S, d_h^R)
        return latents, rope_keys


class MultiHeadLatentAttention(nn.Module):
    r"""Multi-head latent attention (DeepSeek-V2 :cite:p:`deepseekv2`), causal.

    Every token is compressed to one latent, from which every head's key and value are
    rebuilt, and gives one rotary key shared by every head:

    .. math::
        c^{KV}_t = \text{RMSNorm}(W^{DKV} x_t), \quad
        k^C_{t,i} = W^{UK}_i c^{KV}_t, \quad v^C_{t,i} = W^{UV}_i c^{KV}_t, \quad
        k^R_t = \text{RoPE}(W^{KR} x_t),

    with queries :math:`[q^C_{t,i}; \text{RoPE}(q^R_{t,i})]` from :math:`x_t` (through a
    compressed :math:`c^Q_t = \text{RMSNorm}(W^{DQ} x_t)` when ``query_latent_dim`` is set), and
    head :math:`i` scores :math:`(q^{C\top}_{t,i} k^C_{j,i} + q^{R\top}_{t,i} k^R_j) /
    \sqrt{d_h + d_h^R}`. The rotary part is decoupled because a rotation between :math:`W^{UK}`
    and the query would stop :math:`W^{UK}` from being absorbed: since
    :math:`q^{C\top}_{t,i} W^{UK}_i c^{KV}_j = (W^{UK\top}_i q^C_{t,i})^\top c^{KV}_j`, the
    *absorbed* form scores the latents directly with the query :math:`W^{UK\top}_i q^C_{t,i}`
    (one shared key of size :math:`d_c + d_h^R` for every head, as multi-query attention),
    averages the latents with the weights, and applies :math:`W^{UV}_i` after. The two forms
    are equal; only the absorbed one never builds the keys and values of the cached tokens, so
    the cache (:class:`LatentCache`) holds :math:`d_c + d_h^R` elements per token.

    ``absorb=None`` (the default of :meth:`forward`) uses the absorbed form when a cache is
    given (decoding) and the naive form otherwise (training).

    Args:
        embed_dim (int): model dimension :math:`E`.
        num_heads (int): heads :math:`H`; must divide ``embed_dim``.
        latent_dim (int): size :math:`d_c` of the key/value latent.
        rope_dim (int): size :math:`d_h^R` of the rotary query and key; even.
        head_dim (int, optional): size :math:`d_h` of each head's non-rotary query and key.
            Default: ``None`` (``embed_dim // num_heads``).
        value_dim (int, optional): size of each head's value. Default: ``None`` (``head_dim``).
        query_latent_dim (int, optional): compress the queries to a latent of this size
            :math:`d_c'`. Default: ``None`` (no query compression).
        window (int, optional): attend to the ``window`` most recent keys only. Default: ``None``.
        max_len (int, optional): the longest sequence, for the rotary table. Default: ``None``
            (:class:`attention.RotaryEmbedding`'s).
        rope_base (float): the rotary base. Default: ``10000.0``.
        bias (bool): biases in the down-projections and the output projection (DeepSeek's
            ``attention_bias``). Default: ``False``.
        dropout (float): dropout on the attention weights, in training mode only.
            Default: ``0.0``.
        eps (float): the RMSNorms' epsilon. Default: ``1e-6``.
        device (torch.device, optional): where to create the parameters. Default: ``None``.
        dtype (torch.dtype, optional): dtype of the parameters. Default: ``None``.

    Shape:
        - x: :math:`(N, L, E)`
        - Output: :math:`(N, L, E)` and weights :math:`(N, H, L, S)` (or ``None``)

    Examples::

        >>> mla = MultiHeadLatentAttention(64, 4, latent_dim=32, rope_dim=8)
        >>> x = torch.randn(2, 5, 64)
        >>> out, weights = mla(x, need_weights=True)
        >>> out.shape, weights.shape
        (torch.Size([2, 5, 64]), torch.Size([2, 4, 5, 5]))
        >>> torch.allclose(out, mla(x, absorb=True)[0], atol=1e-5)
        True
    """

    positions = "rotary"

    def __init__(
        self,
        embed_dim: int,
        num_heads: int,
        *,
        latent_dim: int,
        rope_dim: int,
        head_dim: int | None = None,
        value_dim: int | None = None,
        query_latent_dim: int | None = None,
        window: int | None = None,
        max_len: int | None = None,
        rope_base: float = 10000.0,
        bias: bool = False,
        dropout: float = 0.0,
        eps: float = 1e-6,
        device=None,
        dtype=None,
    ):
        super().__init__()
        check_embed(embed_dim, num_heads)
        head_dim = embed_dim // num_heads if head_dim is None else head_dim
        value_dim = head_dim if value_dim is None else value_dim
        for name, value in (("latent_dim", latent_dim), ("rope_dim", rope_dim),
                            ("head_dim", head_dim), ("value_dim", value_dim)):  # fmt: skip
            check_int(value, name)
        if rope_dim % 2:
            raise ValueError(f"rope_dim must be even (rotated in pairs); got {rope_dim}")
        for name, value in (("query_latent_dim", query_latent_dim), ("window", window),
                            ("max_len", max_len)):  # fmt: skip
            if value is not None:
                check_int(value, name)
        check_float(rope_base, "rope_base", greater_than=1)
        check_bool(bias, "bias")
        check_dropout(dropout)
        check_float(eps, "eps", positive=True)
        check_factory(device, dtype)
        self.embed_dim, self.num_heads, self.head_dim = embed_dim, num_heads, head_dim
        self.latent_dim, self.rope_dim, self.value_dim = latent_dim, rope_dim, value_dim
        self.query_latent_dim, self.window, self.dropout = query_latent_dim, window, float(dropout)
        self.scale = 1 / math.sqrt(head_dim + rope_dim)  # of the whole query, both parts
        factory = {"device": device, "dtype": dtype}
        H, q_dim = num_heads, num_heads * (head_dim + rope_dim)
        if query_latent_dim is None:
            self.q_proj = nn.Linear(embed_dim, q_dim, bias=False, **factory)  # W^Q, W^QR
        else:
            self.q_down = nn.Linear(embed_dim, query_latent_dim, bias=bias, **factory)  # W^DQ
            self.q_norm = nn.RMSNorm(query_latent_dim, eps=eps, **factory)
            self.q_up = nn.Linear(query_latent_dim, q_dim, bias=False, **factory)  # W^UQ, W^QR
        self.kv_down = nn.Linear(embed_dim, latent_dim, bias=bias, **factory)  # W^DKV
        self.kv_norm = nn.RMSNorm(latent_dim, eps=eps, **factory)
        self.k_rope_proj = nn.Linear(embed_dim, rope_dim, bias=bias, **factory)  # W^KR
        self.k_up = nn.Linear(latent_dim, H * head_dim, bias=False, **factory)  # W^UK
        self.v_up = nn.Linear(latent_dim, H * value_dim, bias=False, **factory)  # W^UV
        self.out_proj = nn.Linear(H * value_dim, embed_dim, bias=bias, **factory)  # W^O
        options = {} if max_len is None else {"max_len": max_len}
        self.rotary = RotaryEmbedding(rope_dim, base=rope_base, **options)

    def new_state(
        self, num_layers: int, *, batch_size: int, max_len=None, window=None, sinks=0
    ) -> LatentCache:
        """An empty :class:`LatentCache` for ``num_layers`` layers like this one (the
        decoding-state contract, :class:`attention.state.DecodingState`)."""
        weight = self.kv_down.weight
        return LatentCache(
            num_layers, batch_size=batch_size, latent_dim=self.latent_dim,
            rope_dim=self.rope_dim, max_len=max_len, window=window, sinks=sinks,
            device=weight.device, dtype=weight.dtype,
        )  # fmt: skip

    @classmethod
    def from_config(cls, config: DecoderConfig) -> "MultiHeadLatentAttention":
        """One layer of a :class:`attention.DecoderLM` with ``config``: its
        ``attention_options`` may set ``latent_dim`` (default :math:`4 d_h`, DeepSeek-V2's
        choice), ``rope_dim`` (default :math:`d_h / 2`), ``head_dim`` (default :math:`E / H`),
        ``value_dim``, ``query_latent_dim`` and ``rope_base``; ``positions`` must be
        ``"rotary"``, and the key/value heads are not shared (``num_kv_heads`` unset)."""
        options = dict(config.attention_options)
        known = {"latent_dim", "rope_dim", "head_dim", "value_dim", "query_latent_dim",
                 "rope_base"}  # fmt: skip
        if set(options) - known:
            raise ValueError(
                f"attention_options for 'latent' may hold {sorted(known)}; got "
                f"{sorted(set(options) - known)}"
            )
        if config.positions != "rotary":
            raise ValueError(
                "MultiHeadLatentAttention rotates its decoupled key itself: build the model "
                f"with positions='rotary'; got positions={config.positions!r}"
            )
        if config.num_kv_heads != config.num_heads:
            raise ValueError(
                "MultiHeadLatentAttention shares a latent, not key/value heads: leave "
                f"num_kv_heads unset; got num_kv_heads={config.num_kv_heads}"
            )
        head_dim = options.setdefault("head_dim", config.embed_dim // config.num_heads)
        check_int(head_dim, "head_dim")
        options.setdefault("latent_dim", 4 * head_dim)
        options.setdefault("rope_dim", max(2, head_dim // 2 // 2 * 2))
        return cls(
            config.embed_dim, config.num_heads, window=config.window, max_len=config.max_len,
            bias=config.bias, dropout=config.dropout, **options,
        )  # fmt: skip

    def mask(self, L: int, S: int, *, device=None) -> Tensor:
        """The bool mask :math:`(L, S)` of ``L`` new queries over ``S`` keys, bottom-right
        aligned: causal, within the last ``window`` keys when a window is set."""
        if self.window is None:
            return causal_mask(L, S, device=device)  # (L, S)
        return sliding_window_mask(L, self.window, S, device=device)  # (L, S)

    def query(self, x: Tensor) -> Tensor:
        r"""Every head's query :math:`[q^C; q^R]` (not yet rotated), :math:`(N, H, L, d_h +
        d_h^R)` from ``x`` :math:`(N, L, E)`."""
        check_features(x, "x", self.embed_dim, like=self.kv_down.weight)
        N, L, _ = x.shape
        if self.query_latent_dim is None:
            q = self.q_proj(x)  # (N, L, H (d_h + d_h^R))
        else:
            q = self.q_up(self.q_norm(self.q_down(x)))  # (N, L, d_c') -> (N, L, H (d_h + d_h^R))
        return q.view(N, L, self.num_heads, -1).transpose(1, 2)  # (N, H, L, d_h + d_h^R)

    def _check_call(self, x: Tensor, cache, layer: int, need_weights: bool, absorb) -> bool:
        """The checks of :meth:`forward`'s arguments, before any arithmetic; ``absorb`` resolved."""
        check_features(x, "x", self.embed_dim, like=self.kv_down.weight)
        check_bool(need_weights, "need_weights")
        check_int(layer, "layer", minimum=0)
        absorb = cache is not None if absorb is None else absorb
        check_bool(absorb, "absorb")
        if cache is not None:
            if not isinstance(cache, LatentCache):
                raise TypeError(f"cache must be a LatentCache or None; got {type(cache).__name__}")
            if (cache.latent_dim, cache.rope_dim) != (self.latent_dim, self.rope_dim):
                raise ValueError(
                    f"the cache holds latents of {cache.latent_dim} and rotary keys of "
                    f"{cache.rope_dim}; expected {self.latent_dim} and {self.rope_dim}"
                )
            cache.check_append(layer, *x.shape[:2], dtype=x.dtype, device=x.device)
        return absorb

    def forward(
        self,
        x: Tensor,
        *,
        cache: LatentCache | None = None,
        layer: int = 0,
        need_weights: bool = False,
        absorb: bool | None = None,
    ) -> tuple[Tensor, Tensor | None]:
        """Attend from every position of ``x`` to itself and the earlier positions.

        Args:
            x (Tensor): :math:`(N, L, E)`, the new positions.
            cache (LatentCache, optional): the latents and rotary keys of the earlier
                positions; this call appends its own at ``layer``. Default: ``None``.
            layer (int): this layer's slot in ``cache``. Default: ``0``.
            need_weights (bool): return the per-head weights. Default: ``False``.
            absorb (bool, optional): attend on the latents with the up-projections absorbed
                (``True``) or on rebuilt keys and values (``False``). Default: ``None``
                (absorbed with a cache, naive without).

        Returns:
            tuple[Tensor, Tensor | None]: output :math:`(N, L, E)` and weights
            :math:`(N, H, L, S)`, or ``None``.
        """
        absorb = self._check_call(x, cache, layer, need_weights, absorb)
        N, L, _ = x.shape
        H, d_h, d_R, d_c, d_v = (self.num_heads, self.head_dim, self.rope_dim, self.latent_dim,
                                 self.value_dim)  # fmt: skip

        q_nope, q_rope = self.query(x).split([d_h, d_R], dim=-1)  # (N, H, L, d_h), (.., d_h^R)
        latent = self.kv_norm(self.kv_down(x))  # (N, L, E) -> (N, L, d_c)
        k_rope = self.k_rope_proj(x)  # (N, L, E) -> (N, L, d_h^R), one for every head
        if cache is not None:
            latent, k_rope = cache.update(layer, latent, k_rope)  # (N, S, d_c), (N, S, d_h^R)
        S = latent.shape[1]
        q_rope = self.rotary(q_rope, offset=S - L)  # (N, H, L, d_h^R)
        k_rope = self.rotary(k_rope)  # (N, S, d_h^R), by the slot each key holds
        mask = self.mask(L, S, device=x.device)  # (L, S)

        if absorb:  # W^UK into the query, W^UV after the weighted sum: attend on the latents
            W_UK = self.k_up.weight.view(H, d_h, d_c)  # (H d_h, d_c) -> (H, d_h, d_c)
            q_latent = q_nope @ W_UK  # (N, H, L, d_h) @ (H, d_h, d_c) -> (N, H, L, d_c)
            q = torch.cat((q_latent, q_rope), dim=-1)  # (N, H, L, d_c + d_h^R)
            k = torch.cat((latent, k_rope), dim=-1)[:, None]  # (N, 1, S, d_c + d_h^R)
            context, weights = self._attend(q, k, latent[:, None], mask, need_weights)
            W_UV = self.v_up.weight.view(H, d_v, d_c)  # (H d_v, d_c) -> (H, d_v, d_c)
            out = context @ W_UV.mT  # (N, H, L, d_c) @ (H, d_c, d_v) -> (N, H, L, d_v)
        else:  # rebuild every head's keys and values from the latents
            k_nope = self.k_up(latent).view(N, S, H, d_h).transpose(1, 2)  # (N, H, S, d_h)
            v = self.v_up(latent).view(N, S, H, d_v).transpose(1, 2)  # (N, H, S, d_v)
            q = torch.cat((q_nope, q_rope), dim=-1)  # (N, H, L, d_h + d_h^R)
            k_shared = k_rope[:, None].expand(N, H, S, d_R)  # (N, H, S, d_h^R)
            k = torch.cat((k_nope, k_shared), dim=-1)  # (N, H, S, d_h + d_h^R)
            out, weights = self._attend(q, k, v, mask, need_weights)  # (N, H, L, d_v)
        out = out.transpose(1, 2).reshape(N, L, H * d_v)  # (N, H, L, d_v) -> (N, L, H d_v)
        return self.out_proj(out), weights

    def _attend(self, q, k, v, mask, need_weights):
        """Softmax attention with this module's scale; keys of one head serve every head."""
        dropout_p = self.dropout if self.training else 0.0
        if need_weights:  # the readable path, which returns the weights
            return scaled_dot_product_attention(
                q, k, v, mask, dropout_p=dropout_p, scale=self.scale, enable_gqa=True
            )  # (N, H, L, Dv), (N, H, L, S)
        out = F.scaled_dot_product_attention(
            q, k, v, attn_mask=mask, dropout_p=dropout_p, scale=self.scale, enable_gqa=True
        )  # (N, H, L, Dv)
        return out, None


register_attention("latent", MultiHeadLatentAttention.from_config)
