"""One head of self-attention: queries, keys and values all come from the same sequence."""

from torch import Tensor, nn

from ._checks import check_bool, check_factory, check_features, check_int, check_mask
from .functional import scaled_dot_product_attention

__all__ = ["SelfAttention"]


class SelfAttention(nn.Module):
    r"""Single-head self-attention.

    .. math::
        Q = X W_Q^\top,\quad K = X W_K^\top,\quad V = X W_V^\top,\qquad
        \text{out} = \text{softmax}\left(\frac{Q K^\top}{\sqrt{E}}\right) V

    Args:
        embed_dim (int): size :math:`E` of each token's vector.
        bias (bool): add a learnable bias to the three projections. Default: ``False``.
        device (torch.device, optional): where to create the parameters. Default: ``None``.
        dtype (torch.dtype, optional): dtype of the parameters. Default: ``None``.

    Shape:
        - x: :math:`(N, L, E)`
        - mask: bool, ``True`` = may attend, broadcastable to :math:`(N, 1, L, L)`
        - Output: :math:`(N, L, E)` and weights :math:`(N, L, L)`

    Examples::

        >>> attn = SelfAttention(16)
        >>> out, weights = attn(torch.randn(2, 5, 16))
        >>> out.shape, weights.shape
        (torch.Size([2, 5, 16]), torch.Size([2, 5, 5]))
    """

    def __init__(self, embed_dim: int, *, bias: bool = False, device=None, dtype=None):
        super().__init__()
        check_int(embed_dim, "embed_dim")
        check_bool(bias, "bias")
        check_factory(device, dtype)
        self.embed_dim = embed_dim
        factory = {"device": device, "dtype": dtype}
        self.q_proj = nn.Linear(embed_dim, embed_dim, bias=bias, **factory)
        self.k_proj = nn.Linear(embed_dim, embed_dim, bias=bias, **factory)
        self.v_proj = nn.Linear(embed_dim, embed_dim, bias=bias, **factory)

    def forward(self, x: Tensor, mask: Tensor | None = None) -> tuple[Tensor, Tensor]:
        """Attend from every token of ``x`` to every token of ``x``.

        Args:
            x (Tensor): the sequence, :math:`(N, L, E)`.
            mask (Tensor, optional): bool, ``True`` = may attend. Default: ``None``.

        Returns:
            tuple[Tensor, Tensor]: output :math:`(N, L, E)` and weights :math:`(N, L, L)`.
        """
        check_features(x, "x", self.embed_dim, like=self.q_proj.weight)
        N, L, E = x.shape
        check_mask(mask, (N, 1, L, L), x.device)  # one head: masks broadcast as for (N, H, L, S)
        q = self.q_proj(x)  # (N, L, E)
        k = self.k_proj(x)  # (N, L, E)
        v = self.v_proj(x)  # (N, L, E)
        out, weights = scaled_dot_product_attention(
            q[:, None], k[:, None], v[:, None], mask
        )  # (N, 1, L, E), (N, 1, L, L)
        return out[:, 0], weights[:, 0]  # (N, L, E), (N, L, L)
