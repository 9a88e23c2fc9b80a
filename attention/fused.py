"""Multi-head attention with one packed (3E, E) projection and PyTorch's fused kernel."""

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ._checks import check_dropout, check_embed, check_mask, check_sequences
from .functional import scaled_dot_product_attention
from .multi_head import check_torch_mha, merge_heads, split_heads

__all__ = ["FusedMultiHeadAttention"]


class FusedMultiHeadAttention(nn.Module):
    r"""Multi-head attention with the three input projections packed into one.

    Same arguments, results and masks as :class:`attention.MultiHeadAttention`, but
    ``qkv_proj`` holds :math:`W_Q, W_K, W_V` stacked as one :math:`(3E, E)` matrix, so
    self-attention projects with a single matmul. With ``need_weights=False`` the attention
    itself runs in :func:`torch.nn.functional.scaled_dot_product_attention`, which picks a
    fused kernel (flash or memory-efficient) and never returns the weights; with
    ``need_weights=True`` it runs :func:`attention.scaled_dot_product_attention`.

    Args:
        embed_dim (int): model dimension :math:`E`.
        num_heads (int): number of heads :math:`H`; must divide ``embed_dim``.
        dropout (float): dropout on the attention weights, in training mode only.
            Default: ``0.0``.
        bias (bool): add a bias to the projections. Default: ``True``.
        device (torch.device, optional): where to create the parameters. Default: ``None``.
        dtype (torch.dtype, optional): dtype of the parameters. Default: ``None``.

    Shape:
        - query: :math:`(N, L, E)`; key and value: :math:`(N, S, E)`
        - mask: bool, ``True`` = may attend, broadcastable to :math:`(N, H, L, S)`
        - Output: :math:`(N, L, E)` and weights :math:`(N, H, L, S)`, or ``None``

    Examples::

        >>> mha = FusedMultiHeadAttention(512, 8)
        >>> out, weights = mha(torch.randn(4, 10, 512), need_weights=False)
        >>> out.shape, weights
        (torch.Size([4, 10, 512]), None)
    """

    def __init__(
        self,
        embed_dim: int,
        num_heads: int,
        *,
        dropout: float = 0.0,
        bias: bool = True,
        device=None,
        dtype=None,
    ):
        super().__init__()
        check_embed(embed_dim, num_heads)
        check_dropout(dropout)
        self.embed_dim, self.num_heads = embed_dim, num_heads
        self.head_dim = embed_dim // num_heads
        self.dropout = float(dropout)
        factory = {"device": device, "dtype": dtype}
        self.qkv_proj = nn.Linear(embed_dim, 3 * embed_dim, bias=bias, **factory)
        self.out_proj = nn.Linear(embed_dim, embed_dim, bias=bias, **factory)

    def _project(self, query: Tensor, key: Tensor, value: Tensor) -> tuple[Tensor, ...]:
        """Project to q, k, v: one matmul for self-attention, three slices of it otherwise."""
        if key is query and value is query:
            return self.qkv_proj(query).chunk(3, dim=-1)  # (N, L, 3E) -> 3 x (N, L, E)
        weights = self.qkv_proj.weight.chunk(3)  # 3 x (E, E)
        biases = (None,) * 3 if self.qkv_proj.bias is None else self.qkv_proj.bias.chunk(3)
        return tuple(
            F.linear(x, w, b) for x, w, b in zip((query, key, value), weights, biases, strict=True)
        )  # (N, L, E), (N, S, E), (N, S, E)

    def forward(
        self,
        query: Tensor,
        key: Tensor | None = None,
        value: Tensor | None = None,
        mask: Tensor | None = None,
        *,
        need_weights: bool = True,
    ) -> tuple[Tensor, Tensor | None]:
        """Attend from ``query`` to ``key``/``value`` (default: to ``query`` itself).

        Args:
            query (Tensor): :math:`(N, L, E)`.
            key (Tensor, optional): :math:`(N, S, E)`. Default: ``None`` (``query``).
            value (Tensor, optional): :math:`(N, S, E)`. Default: ``None`` (``key``).
            mask (Tensor, optional): bool, ``True`` = may attend. Default: ``None``.
            need_weights (bool): compute and return the per-head weights (the readable path);
                ``False`` runs PyTorch's fused kernel. Default: ``True``.

        Returns:
            tuple[Tensor, Tensor | None]: output :math:`(N, L, E)` and weights
            :math:`(N, H, L, S)`, or ``None`` when ``need_weights=False``.
        """
        key = query if key is None else key
        value = key if value is None else value
        check_sequences(query, key, value, self.embed_dim)
        N, L, E = query.shape
        S, H = key.shape[1], self.num_heads
        check_mask(mask, (N, H, L, S))

        # Copied to a dense (L, D) block per head: SDPA's CPU kernels read that layout faster
        # than the strided views of the packed projection, by more than the copy costs.
        q, k, v = (
            split_heads(x, H).contiguous() for x in self._project(query, key, value)
        )  # (N, H, L|S, D)
        dropout_p = self.dropout if self.training else 0.0
        if need_weights:
            out, weights = scaled_dot_product_attention(
                q, k, v, mask, dropout_p=dropout_p
            )  # (N, H, L, D), (N, H, L, S)
        else:
            out, weights = (
                F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout_p),
                None,
            )  # (N, H, L, D)
        out = self.out_proj(merge_heads(out))  # (N, H, L, D) -> (N, L, E)
        return out, weights

    @classmethod
    def from_torch(cls, m: nn.MultiheadAttention) -> "FusedMultiHeadAttention":
        """Build a module with every weight and bias of an ``nn.MultiheadAttention``.

        ``in_proj_weight`` is already the packed (3E, E) matrix: it becomes ``qkv_proj``.
        The dtype, device and dropout of ``m`` are kept.

        Args:
            m (nn.MultiheadAttention): the source, with or without bias.

        Returns:
            FusedMultiHeadAttention: equal to ``m``.

        Examples::

            >>> torch_mha = nn.MultiheadAttention(16, 4, bias=False, batch_first=True)
            >>> ours = FusedMultiHeadAttention.from_torch(torch_mha)
            >>> x = torch.randn(2, 3, 16)
            >>> torch.allclose(ours(x)[0], torch_mha(x, x, x)[0], atol=1e-6)
            True
        """
        check_torch_mha(m)
        weight = m.in_proj_weight
        ours = cls(
            m.embed_dim,
            m.num_heads,
            dropout=m.dropout,
            bias=m.in_proj_bias is not None,
            device=weight.device,
            dtype=weight.dtype,
        )
        with torch.no_grad():
            ours.qkv_proj.weight.copy_(weight)
            ours.out_proj.weight.copy_(m.out_proj.weight)
            if m.in_proj_bias is not None:
                ours.qkv_proj.bias.copy_(m.in_proj_bias)
                ours.out_proj.bias.copy_(m.out_proj.bias)
        return ours.train(m.training)
