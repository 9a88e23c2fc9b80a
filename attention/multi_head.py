"""Multi-head attention with separate query, key and value projections."""

import torch
from torch import Tensor, nn

from ._checks import (
    check_bool,
    check_dropout,
    check_embed,
    check_factory,
    check_mask,
    check_sequences,
)
from .functional import scaled_dot_product_attention

__all__ = ["MultiHeadAttention", "split_heads", "merge_heads"]


def split_heads(x: Tensor, num_heads: int) -> Tensor:
    """Split the last dimension into heads: :math:`(N, L, E) \\to (N, H, L, D)`, ``D = E / H``."""
    N, L, E = x.shape
    x = x.view(N, L, num_heads, E // num_heads)  # (N, L, H, D)
    return x.transpose(1, 2)  # (N, H, L, D)


def merge_heads(x: Tensor) -> Tensor:
    """Concatenate the heads again: :math:`(N, H, L, D) \\to (N, L, E)`, ``E = H D``."""
    N, H, L, D = x.shape
    x = x.transpose(1, 2)  # (N, L, H, D)
    return x.reshape(N, L, H * D)  # (N, L, E)


def check_torch_mha(m: nn.MultiheadAttention) -> None:
    """Refuse the ``nn.MultiheadAttention`` options this package does not have."""
    if not isinstance(m, nn.MultiheadAttention):
        raise TypeError(f"expected an nn.MultiheadAttention; got {type(m).__name__}")
    if not m._qkv_same_embed_dim:
        raise ValueError("kdim and vdim must equal embed_dim; got a module with separate kdim/vdim")
    if m.bias_k is not None or m.add_zero_attn:
        raise ValueError("add_bias_kv=True and add_zero_attn=True are not supported")


class MultiHeadAttention(nn.Module):
    r"""Multi-head attention, with one projection each for queries, keys and values.

    .. math::
        \text{MultiHead}(Q, K, V) = \text{Concat}(\text{head}_1, \dots, \text{head}_H) W_O^\top

        \text{head}_h = \text{Attention}(Q W_{Q,h}^\top, K W_{K,h}^\top, V W_{V,h}^\top)

    Each head works in :math:`D = E / H` dimensions. Self-attention when only ``query`` is
    given; cross-attention when ``key`` (and ``value``) come from another sequence.

    Args:
        embed_dim (int): model dimension :math:`E`.
        num_heads (int): number of heads :math:`H`; must divide ``embed_dim``.
        dropout (float): dropout on the attention weights, in training mode only.
            Default: ``0.0``.
        bias (bool): add a bias to the four projections. Default: ``True``.
        device (torch.device, optional): where to create the parameters. Default: ``None``.
        dtype (torch.dtype, optional): dtype of the parameters. Default: ``None``.

    Shape:
        - query: :math:`(N, L, E)`; key and value: :math:`(N, S, E)`
        - mask: bool, ``True`` = may attend, broadcastable to :math:`(N, H, L, S)`
        - Output: :math:`(N, L, E)` and weights :math:`(N, H, L, S)` per head

    Examples::

        >>> mha = MultiHeadAttention(512, 8)
        >>> x = torch.randn(4, 10, 512)
        >>> out, weights = mha(x)
        >>> out.shape, weights.shape
        (torch.Size([4, 10, 512]), torch.Size([4, 8, 10, 10]))
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
        check_bool(bias, "bias")
        check_factory(device, dtype)
        self.embed_dim, self.num_heads = embed_dim, num_heads
        self.head_dim = embed_dim // num_heads
        self.dropout = float(dropout)
        factory = {"device": device, "dtype": dtype}
        self._make_in_projections(bias, factory)
        self.out_proj = nn.Linear(embed_dim, embed_dim, bias=bias, **factory)

    def _make_in_projections(self, bias: bool, factory: dict) -> None:
        """Create ``q_proj``, ``k_proj`` and ``v_proj``: one :math:`(E, E)` layer each."""
        E = self.embed_dim
        self.q_proj = nn.Linear(E, E, bias=bias, **factory)
        self.k_proj = nn.Linear(E, E, bias=bias, **factory)
        self.v_proj = nn.Linear(E, E, bias=bias, **factory)

    def _project(self, query: Tensor, key: Tensor, value: Tensor) -> tuple[Tensor, ...]:
        """Project the tokens to queries, keys and values and split each into heads."""
        H = self.num_heads
        q = split_heads(self.q_proj(query), H)  # (N, L, E) -> (N, H, L, D)
        k = split_heads(self.k_proj(key), H)  # (N, S, E) -> (N, H, S, D)
        v = split_heads(self.v_proj(value), H)  # (N, S, E) -> (N, H, S, D)
        return q, k, v

    def _attend(self, q, k, v, mask, *, need_weights: bool, dropout_p: float):
        """Attention on all heads at once; the readable path always computes the weights."""
        return scaled_dot_product_attention(
            q, k, v, mask, dropout_p=dropout_p
        )  # (N, H, L, D), (N, H, L, S)

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
            need_weights (bool): return the per-head weights. Default: ``True``.

        Returns:
            tuple[Tensor, Tensor | None]: output :math:`(N, L, E)` and weights
            :math:`(N, H, L, S)`, or ``None`` when ``need_weights=False``.
        """
        key = query if key is None else key
        value = key if value is None else value
        check_sequences(query, key, value, self.embed_dim, like=self.out_proj.weight)
        check_bool(need_weights, "need_weights")
        N, L, E = query.shape
        S, H = key.shape[1], self.num_heads
        check_mask(mask, (N, H, L, S), query.device)

        q, k, v = self._project(query, key, value)  # (N, H, L, D), (N, H, S, D), (N, H, S, D)
        dropout_p = self.dropout if self.training else 0.0
        out, weights = self._attend(
            q, k, v, mask, need_weights=need_weights, dropout_p=dropout_p
        )  # (N, H, L, D), (N, H, L, S) or None
        out = self.out_proj(merge_heads(out))  # (N, H, L, D) -> (N, L, E)
        return out, (weights if need_weights else None)

    def _load_in_projections(self, weight: Tensor, bias: Tensor | None) -> None:
        """Copy ``nn.MultiheadAttention``'s packed (3E, E) ``in_proj_weight`` (and bias) into
        ``q_proj``, ``k_proj`` and ``v_proj``, one third each."""
        projections = (self.q_proj, self.k_proj, self.v_proj)
        for proj, w in zip(projections, weight.chunk(3), strict=True):  # 3 x (E, E)
            proj.weight.copy_(w)
        if bias is not None:
            for proj, b in zip(projections, bias.chunk(3), strict=True):  # 3 x (E,)
                proj.bias.copy_(b)

    @classmethod
    def from_torch(cls, m: nn.MultiheadAttention) -> "MultiHeadAttention":
        """Build a module with every weight and bias of an ``nn.MultiheadAttention``.

        The packed ``in_proj_weight`` (3E, E) goes into the input projections (for this class,
        split into ``q_proj``, ``k_proj`` and ``v_proj``); the dtype, device and dropout of
        ``m`` are kept.

        Args:
            m (nn.MultiheadAttention): the source, with or without bias.

        Returns:
            MultiHeadAttention: equal to ``m`` (``average_attn_weights=False`` for its weights).

        Examples::

            >>> torch_mha = nn.MultiheadAttention(16, 4, batch_first=True)
            >>> ours = MultiHeadAttention.from_torch(torch_mha)
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
            ours._load_in_projections(weight, m.in_proj_bias)
            ours.out_proj.weight.copy_(m.out_proj.weight)
            if m.in_proj_bias is not None:
                ours.out_proj.bias.copy_(m.out_proj.bias)
        return ours.train(m.training)
