"""The Transformer's blocks: attention and a feed-forward network, each with a residual.

- :class:`FeedForward`: the same two-layer MLP on every position.
- :class:`TransformerBlock`: the encoder block, self-attention then the feed-forward network,
  as :class:`torch.nn.TransformerEncoderLayer`.
- :class:`TransformerDecoderBlock`: the decoder block of an encoder-decoder: masked
  self-attention, cross-attention over the encoder's output, then the feed-forward network, as
  :class:`torch.nn.TransformerDecoderLayer`.
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
    check_memory,
    check_named_mask,
    check_positive,
)
from .cache import KVCache
from .functional import scaled_dot_product_attention
from .multi_head import MultiHeadAttention, merge_heads, split_heads

__all__ = ["FeedForward", "TransformerBlock", "TransformerDecoderBlock"]


class FeedForward(nn.Module):
    r"""The position-wise feed-forward network: the same two-layer MLP on every token.

    .. math::
        \text{FFN}(x) = \text{Dropout}(\text{ReLU}(x W_1^\top + b_1)) W_2^\top + b_2

    Args:
        embed_dim (int): model dimension :math:`E`.
        ffn_dim (int): hidden dimension. Default: ``2048``.
        dropout (float): dropout after the activation, in training mode only. Default: ``0.0``.
        bias (bool): add biases to both layers. Default: ``True``.
        device (torch.device, optional): where to create the parameters. Default: ``None``.
        dtype (torch.dtype, optional): dtype of the parameters. Default: ``None``.

    Shape:
        - x: :math:`(N, L, E)`
        - Output: :math:`(N, L, E)`

    Examples::

        >>> ffn = FeedForward(16, 64)
        >>> ffn(torch.randn(2, 5, 16)).shape
        torch.Size([2, 5, 16])
    """

    def __init__(
        self,
        embed_dim: int,
        ffn_dim: int = 2048,
        *,
        dropout: float = 0.0,
        bias: bool = True,
        device=None,
        dtype=None,
    ):
        super().__init__()
        check_int(embed_dim, "embed_dim")
        check_int(ffn_dim, "ffn_dim")
        check_dropout(dropout)
        check_bool(bias, "bias")
        check_factory(device, dtype)
        factory = {"device": device, "dtype": dtype}
        self.embed_dim = embed_dim
        self.linear1 = nn.Linear(embed_dim, ffn_dim, bias=bias, **factory)
        self.dropout = nn.Dropout(dropout)
        self.linear2 = nn.Linear(ffn_dim, embed_dim, bias=bias, **factory)

    def forward(self, x: Tensor) -> Tensor:
        """Apply the MLP to every position of ``x`` :math:`(*, E)`."""
        check_features(x, "x", self.embed_dim, ndim=None, like=self.linear1.weight)
        h = F.relu(self.linear1(x))  # (N, L, E) -> (N, L, ffn_dim)
        return self.linear2(self.dropout(h))  # (N, L, ffn_dim) -> (N, L, E)


class TransformerBlock(nn.Module):
    r"""One Transformer encoder block: self-attention and a feed-forward network.

    Post-LN (the order of :cite:t:`vaswani2017`, ``norm_first=False``)::

        x = norm1(x + dropout1(attention(x)))
        x = norm2(x + dropout2(ffn(x)))

    Pre-LN (``norm_first=True``)::

        x = x + dropout1(attention(norm1(x)))
        x = x + dropout2(ffn(norm2(x)))

    Dropout sits where :class:`torch.nn.TransformerEncoderLayer` puts it: on the attention
    weights, after the feed-forward activation, and on each branch before the residual sum,
    never after a LayerNorm.

    Args:
        embed_dim (int): model dimension :math:`E`. Default: ``512``.
        num_heads (int): number of heads :math:`H`. Default: ``8``.
        ffn_dim (int): hidden size of the feed-forward network. Default: ``2048``.
        dropout (float): dropout probability everywhere, in training mode only. Default: ``0.1``.
        norm_first (bool): pre-LN instead of post-LN. Default: ``False``.
        layer_norm_eps (float): the LayerNorms' epsilon. Default: ``1e-5``.
        bias (bool): biases in the linear layers and LayerNorms. Default: ``True``.
        device (torch.device, optional): where to create the parameters. Default: ``None``.
        dtype (torch.dtype, optional): dtype of the parameters. Default: ``None``.

    Shape:
        - x: :math:`(N, L, E)`
        - mask: bool, ``True`` = may attend, broadcastable to :math:`(N, H, L, L)`
        - Output: :math:`(N, L, E)` and weights :math:`(N, H, L, L)` or ``None``

    Examples::

        >>> block = TransformerBlock(64, 8, ffn_dim=128).eval()
        >>> out, weights = block(torch.randn(2, 5, 64), need_weights=True)
        >>> out.shape, weights.shape
        (torch.Size([2, 5, 64]), torch.Size([2, 8, 5, 5]))
    """

    def __init__(
        self,
        embed_dim: int = 512,
        num_heads: int = 8,
        *,
        ffn_dim: int = 2048,
        dropout: float = 0.1,
        norm_first: bool = False,
        layer_norm_eps: float = 1e-5,
        bias: bool = True,
        device=None,
        dtype=None,
    ):
        super().__init__()
        check_dropout(dropout)
        check_bool(norm_first, "norm_first")
        check_positive(layer_norm_eps, "layer_norm_eps")
        check_int(ffn_dim, "ffn_dim")
        check_factory(device, dtype)  # before the first parameter is made (and random draw)
        factory = {"device": device, "dtype": dtype}
        self.embed_dim, self.norm_first = embed_dim, norm_first
        self.self_attn = MultiHeadAttention(
            embed_dim, num_heads, dropout=dropout, bias=bias, **factory
        )
        self.ffn = FeedForward(embed_dim, ffn_dim, dropout=dropout, bias=bias, **factory)
        self.norm1 = nn.LayerNorm(embed_dim, eps=layer_norm_eps, bias=bias, **factory)
        self.norm2 = nn.LayerNorm(embed_dim, eps=layer_norm_eps, bias=bias, **factory)
        self.dropout1 = nn.Dropout(dropout)
        self.dropout2 = nn.Dropout(dropout)

    def _attend(self, x: Tensor, mask: Tensor | None, need_weights: bool):
        out, weights = self.self_attn(x, mask=mask, need_weights=need_weights)  # (N, L, E)
        return self.dropout1(out), weights

    def forward(
        self, x: Tensor, mask: Tensor | None = None, *, need_weights: bool = False
    ) -> tuple[Tensor, Tensor | None]:
        """Run the block on ``x`` :math:`(N, L, E)`.

        Args:
            x (Tensor): :math:`(N, L, E)`.
            mask (Tensor, optional): bool, ``True`` = may attend. Default: ``None``.
            need_weights (bool): also return the attention weights. Default: ``False``.

        Returns:
            tuple[Tensor, Tensor | None]: output :math:`(N, L, E)` and weights
            :math:`(N, H, L, L)` or ``None``.
        """
        check_features(x, "x", self.embed_dim, like=self.norm1.weight)
        if self.norm_first:
            attended, weights = self._attend(self.norm1(x), mask, need_weights)
            x = x + attended  # (N, L, E)
            x = x + self.dropout2(self.ffn(self.norm2(x)))  # (N, L, E)
        else:
            attended, weights = self._attend(x, mask, need_weights)
            x = self.norm1(x + attended)  # (N, L, E)
            x = self.norm2(x + self.dropout2(self.ffn(x)))  # (N, L, E)
        return x, weights

    @classmethod
    def from_torch(cls, layer: nn.TransformerEncoderLayer) -> "TransformerBlock":
        """Build a block with every parameter of an ``nn.TransformerEncoderLayer``.

        The layer must use the ReLU activation; ``norm_first``, the LayerNorm epsilon, bias,
        dropout, dtype and device are kept. Our block is batch first whatever the layer's
        ``batch_first``.

        Args:
            layer (nn.TransformerEncoderLayer): the source.

        Returns:
            TransformerBlock: equal to ``layer`` (in eval mode, or with equal dropout masks).

        Examples::

            >>> layer = nn.TransformerEncoderLayer(32, 4, 64, batch_first=True).eval()
            >>> block = TransformerBlock.from_torch(layer)
            >>> x = torch.randn(2, 5, 32)
            >>> torch.allclose(block(x)[0], layer(x), atol=1e-5)
            True
        """
        if not isinstance(layer, nn.TransformerEncoderLayer):
            raise TypeError(f"expected an nn.TransformerEncoderLayer; got {type(layer).__name__}")
        relu = layer.activation in (F.relu, torch.relu) or isinstance(layer.activation, nn.ReLU)
        if not relu:
            raise ValueError(f"only the relu activation is supported; got {layer.activation}")
        weight = layer.linear1.weight
        block = cls(
            layer.self_attn.embed_dim, layer.self_attn.num_heads,
            ffn_dim=layer.linear1.out_features, dropout=layer.dropout.p,
            norm_first=layer.norm_first, layer_norm_eps=layer.norm1.eps,
            bias=layer.linear1.bias is not None, device=weight.device, dtype=weight.dtype,
        )  # fmt: skip
        block.self_attn = MultiHeadAttention.from_torch(layer.self_attn)
        with torch.no_grad():
            for ours, theirs in (
                (block.ffn.linear1, layer.linear1),
                (block.ffn.linear2, layer.linear2),
                (block.norm1, layer.norm1),
                (block.norm2, layer.norm2),
            ):
                ours.load_state_dict(theirs.state_dict())
        return block.train(layer.training)


class TransformerDecoderBlock(nn.Module):
    r"""One Transformer decoder block: masked self-attention, cross-attention, feed-forward.

    The cross-attention's queries come from the target :math:`x`, its keys and values from the
    encoder's output, the *memory* :math:`m`. Post-LN (``norm_first=False``)::

        x = norm1(x + dropout1(self_attn(x)))
        x = norm2(x + dropout2(cross_attn(x, m)))
        x = norm3(x + dropout3(ffn(x)))

    Pre-LN (``norm_first=True``)::

        x = x + dropout1(self_attn(norm1(x)))
        x = x + dropout2(cross_attn(norm2(x), m))
        x = x + dropout3(ffn(norm3(x)))

    as in :class:`torch.nn.TransformerDecoderLayer` (whose ``multihead_attn`` is ``cross_attn``
    here). The block adds no mask of its own: pass :func:`attention.causal_mask` as ``mask``.
    ``memory`` may also be the keys and values of :meth:`cross_kv`, computed once per source;
    with a :class:`attention.KVCache`, the self-attention appends its new keys and values to the
    cached ones, so that a decoder can write one token at a time.

    Args:
        embed_dim (int): model dimension :math:`E`.
        num_heads (int): number of heads :math:`H`.
        ffn_dim (int): hidden size of the feed-forward network. Default: ``2048``.
        dropout (float): dropout probability everywhere, in training mode only. Default: ``0.1``.
        norm_first (bool): pre-LN instead of post-LN. Default: ``False``.
        layer_norm_eps (float): the LayerNorms' epsilon. Default: ``1e-5``.
        bias (bool): biases in the linear layers and LayerNorms. Default: ``True``.
        device (torch.device, optional): where to create the parameters. Default: ``None``.
        dtype (torch.dtype, optional): dtype of the parameters. Default: ``None``.

    Shape:
        - x: :math:`(N, L, E)`; memory: :math:`(N, S, E)`
        - mask: bool, ``True`` = may attend, broadcastable to :math:`(N, H, L, L)`
        - memory_mask: bool, broadcastable to :math:`(N, H, L, S)`, such as
          :func:`attention.padding_mask` ``(lengths, S)``
        - Output: :math:`(N, L, E)` and the weights ``(self, cross)``, :math:`(N, H, L, L)` and
          :math:`(N, H, L, S)`, or ``None``

    Examples::

        >>> block = TransformerDecoderBlock(16, 4, ffn_dim=32).eval()
        >>> x, memory = torch.randn(2, 5, 16), torch.randn(2, 7, 16)
        >>> out, (self_weights, cross_weights) = block(x, memory, mask=causal_mask(5),
        ...     memory_mask=padding_mask([7, 3], 7), need_weights=True)
        >>> out.shape, self_weights.shape, cross_weights.shape
        (torch.Size([2, 5, 16]), torch.Size([2, 4, 5, 5]), torch.Size([2, 4, 5, 7]))
        >>> cross_weights[1, :, :, 3:].abs().max().item()  # the padding is never attended to
        0.0
    """

    def __init__(
        self,
        embed_dim: int,
        num_heads: int,
        *,
        ffn_dim: int = 2048,
        dropout: float = 0.1,
        norm_first: bool = False,
        layer_norm_eps: float = 1e-5,
        bias: bool = True,
        device=None,
        dtype=None,
    ):
        super().__init__()
        check_embed(embed_dim, num_heads)
        check_int(ffn_dim, "ffn_dim")
        check_bool(norm_first, "norm_first")
        check_positive(layer_norm_eps, "layer_norm_eps")
        check_factory(device, dtype)
        factory = {"device": device, "dtype": dtype}
        self.embed_dim, self.num_heads, self.norm_first = embed_dim, num_heads, norm_first
        self.self_attn, self.cross_attn = (
            MultiHeadAttention(embed_dim, num_heads, dropout=dropout, bias=bias, **factory)
            for _ in range(2)
        )
        self.ffn = FeedForward(embed_dim, ffn_dim, dropout=dropout, bias=bias, **factory)
        self.norm1, self.norm2, self.norm3 = (
            nn.LayerNorm(embed_dim, eps=layer_norm_eps, bias=bias, **factory) for _ in range(3)
        )
        self.dropout1, self.dropout2, self.dropout3 = (nn.Dropout(dropout) for _ in range(3))

    def cross_kv(self, memory: Tensor) -> tuple[Tensor, Tensor]:
        """The cross-attention's keys and values of ``memory`` :math:`(N, S, E)`, each
        :math:`(N, H, S, D)`: the same at every decoding step, so computed once per source."""
        check_features(memory, "memory", self.embed_dim, like=self.norm1.weight)
        attn, H = self.cross_attn, self.num_heads
        keys = split_heads(attn.k_proj(memory), H)  # (N, S, E) -> (N, H, S, D)
        values = split_heads(attn.v_proj(memory), H)  # (N, S, E) -> (N, H, S, D)
        return keys, values

    def _attend(self, attn: MultiHeadAttention, q, k, v, mask) -> tuple[Tensor, Tensor]:
        """The package's kernel on every head, then ``attn``'s output projection."""
        p = attn.dropout if attn.training else 0.0
        out, weights = scaled_dot_product_attention(q, k, v, mask, dropout_p=p)  # (N, H, L, D)
        return attn.out_proj(merge_heads(out)), weights  # (N, H, L, D) -> (N, L, E)

    def _self_attention(self, x: Tensor, mask, cache: KVCache | None, layer: int):
        attn, H = self.self_attn, self.num_heads
        q = split_heads(attn.q_proj(x), H)  # (N, L, E) -> (N, H, L, D)
        k = split_heads(attn.k_proj(x), H)  # (N, L, E) -> (N, H, L, D)
        v = split_heads(attn.v_proj(x), H)  # (N, L, E) -> (N, H, L, D)
        if cache is not None:
            k, v = cache.update(layer, k, v)  # (N, H, S, D): the cached positions, then these
        return self._attend(attn, q, k, v, mask)

    def _cross_attention(self, x: Tensor, keys: Tensor, values: Tensor, memory_mask):
        q = split_heads(self.cross_attn.q_proj(x), self.num_heads)  # (N, L, E) -> (N, H, L, D)
        return self._attend(self.cross_attn, q, keys, values, memory_mask)

    def forward(
        self,
        x: Tensor,
        memory: Tensor | tuple[Tensor, Tensor],
        *,
        mask: Tensor | None = None,
        memory_mask: Tensor | None = None,
        need_weights: bool = False,
        cache: KVCache | None = None,
        layer: int = 0,
    ) -> tuple[Tensor, tuple[Tensor, Tensor] | None]:
        """Run the block on the target ``x``, attending over ``memory``.

        Args:
            x (Tensor): :math:`(N, L, E)`; with ``cache``, the new positions only.
            memory (Tensor or tuple): the encoder's output :math:`(N, S, E)`, or its keys and
                values :math:`(N, H, S, D)` from :meth:`cross_kv`.
            mask (Tensor, optional): the self-attention's, bool, ``True`` = may attend.
                Default: ``None``.
            memory_mask (Tensor, optional): the cross-attention's. Default: ``None``.
            need_weights (bool): also return both attentions' weights. Default: ``False``.
            cache (KVCache, optional): the self-attention's earlier keys and values; this call
                appends its own. Default: ``None``.
            layer (int): this block's slot in ``cache``. Default: ``0``.

        Returns:
            tuple[Tensor, tuple[Tensor, Tensor] | None]: output :math:`(N, L, E)` and the
            weights ``(self, cross)``, :math:`(N, H, L, S_{self})` and :math:`(N, H, L, S)`.
        """
        check_features(x, "x", self.embed_dim, like=self.norm1.weight)
        check_bool(need_weights, "need_weights")
        check_int(layer, "layer", minimum=0)
        N, L, E = x.shape
        H = self.num_heads
        S_memory = check_memory(memory, N, E, H, self.norm1.weight)
        KVCache.check(cache, H, E // H)
        if cache is not None:
            cache.check_append(layer, N, L, dtype=x.dtype, device=x.device)
        S = L if cache is None else cache.offset(L) + L
        check_named_mask(mask, "mask", (N, H, L, S), x.device)
        check_named_mask(memory_mask, "memory_mask", (N, H, L, S_memory), x.device)

        keys, values = self.cross_kv(memory) if isinstance(memory, Tensor) else memory
        if self.norm_first:
            attended, self_weights = self._self_attention(self.norm1(x), mask, cache, layer)
            x = x + self.dropout1(attended)  # (N, L, E)
            attended, cross_weights = self._cross_attention(
                self.norm2(x), keys, values, memory_mask
            )
            x = x + self.dropout2(attended)  # (N, L, E)
            x = x + self.dropout3(self.ffn(self.norm3(x)))  # (N, L, E)
        else:
            attended, self_weights = self._self_attention(x, mask, cache, layer)
            x = self.norm1(x + self.dropout1(attended))  # (N, L, E)
            attended, cross_weights = self._cross_attention(x, keys, values, memory_mask)
            x = self.norm2(x + self.dropout2(attended))  # (N, L, E)
            x = self.norm3(x + self.dropout3(self.ffn(x)))  # (N, L, E)
        return x, ((self_weights, cross_weights) if need_weights else None)

    @classmethod
    def from_torch(cls, layer: nn.TransformerDecoderLayer) -> "TransformerDecoderBlock":
        """Build a block with every parameter of an ``nn.TransformerDecoderLayer``.

        The layer must use the ReLU activation; ``norm_first``, the LayerNorm epsilon, bias,
        dropout, dtype, device and training mode are kept. Our block is batch first whatever
        the layer's ``batch_first``.

        Args:
            layer (nn.TransformerDecoderLayer): the source.

        Returns:
            TransformerDecoderBlock: equal to ``layer`` (in eval mode, or with equal dropout
            masks); its ``cross_attn`` is the layer's ``multihead_attn``.

        Examples::

            >>> layer = nn.TransformerDecoderLayer(32, 4, 64, batch_first=True).eval()
            >>> block = TransformerDecoderBlock.from_torch(layer)
            >>> x, memory = torch.randn(2, 5, 32), torch.randn(2, 7, 32)
            >>> torch.allclose(block(x, memory)[0], layer(x, memory), atol=1e-5)
            True
        """
        if not isinstance(layer, nn.TransformerDecoderLayer):
            raise TypeError(f"expected an nn.TransformerDecoderLayer; got {type(layer).__name__}")
        relu = layer.activation in (F.relu, torch.relu) or isinstance(layer.activation, nn.ReLU)
        if not relu:
            raise ValueError(f"only the relu activation is supported; got {layer.activation}")
        weight = layer.linear1.weight
        block = cls(
            layer.self_attn.embed_dim, layer.self_attn.num_heads,
            ffn_dim=layer.linear1.out_features, dropout=layer.dropout.p,
            norm_first=layer.norm_first, layer_norm_eps=layer.norm1.eps,
            bias=layer.linear1.bias is not None, device=weight.device, dtype=weight.dtype,
        )  # fmt: skip
        block.self_attn = MultiHeadAttention.from_torch(layer.self_attn)
        block.cross_attn = MultiHeadAttention.from_torch(layer.multihead_attn)
        with torch.no_grad():
            for ours, theirs in (
                (block.ffn.linear1, layer.linear1), (block.ffn.linear2, layer.linear2),
                (block.norm1, layer.norm1), (block.norm2, layer.norm2), (block.norm3, layer.norm3),
            ):  # fmt: skip
                ours.load_state_dict(theirs.state_dict())
        return block.train(layer.training)
