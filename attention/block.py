"""The Transformer encoder block: attention and a feed-forward network, each with a residual."""

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ._checks import check_bool, check_dropout, check_features, check_int, check_positive
from .multi_head import MultiHeadAttention

__all__ = ["FeedForward", "TransformerBlock"]


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
            layer.self_attn.embed_dim,
            layer.self_attn.num_heads,
            ffn_dim=layer.linear1.out_features,
            dropout=layer.dropout.p,
            norm_first=layer.norm_first,
            layer_norm_eps=layer.norm1.eps,
            bias=layer.linear1.bias is not None,
            device=weight.device,
            dtype=weight.dtype,
        )
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
