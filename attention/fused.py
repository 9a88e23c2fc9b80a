"""Multi-head attention with one packed (3E, E) projection and PyTorch's fused kernel."""

import torch.nn.functional as F
from torch import Tensor, nn

from .multi_head import MultiHeadAttention, split_heads

__all__ = ["FusedMultiHeadAttention"]


class FusedMultiHeadAttention(MultiHeadAttention):
    r"""Multi-head attention with the three input projections packed into one.

    Same arguments, results and masks as :class:`attention.MultiHeadAttention`, but
    ``qkv_proj`` holds :math:`W_Q, W_K, W_V` stacked as one :math:`(3E, E)` matrix, so
    self-attention projects with a single matmul. With ``need_weights=False`` the attention
    itself runs in :func:`torch.nn.functional.scaled_dot_product_attention`, which picks a
    fused kernel (flash or memory-efficient) and never returns the weights; with
    ``need_weights=True`` it runs :func:`attention.scaled_dot_product_attention`.

    It is a :class:`attention.MultiHeadAttention` that overrides only what fusing changes:
    creating and loading the packed projection, projecting, and the attention call.

    .. note::
        With ``need_weights=False`` there is no double backward on the CPU: torch's flash
        kernel, which SDPA picks there, has first derivatives only, so
        :func:`torch.autograd.gradgradcheck` (or a gradient penalty) fails. Use
        ``need_weights=True``, or run inside
        ``torch.nn.attention.sdpa_kernel(SDPBackend.MATH)``, for second derivatives.

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
        >>> torch_mha = nn.MultiheadAttention(16, 4, bias=False, batch_first=True)
        >>> ours = FusedMultiHeadAttention.from_torch(torch_mha)
        >>> x = torch.randn(2, 3, 16)
        >>> torch.allclose(ours(x)[0], torch_mha(x, x, x)[0], atol=1e-6)
        True
    """

    def _make_in_projections(self, bias: bool, factory: dict) -> None:
        """Create ``qkv_proj``: :math:`W_Q, W_K, W_V` stacked as one :math:`(3E, E)` layer."""
        E = self.embed_dim
        self.qkv_proj = nn.Linear(E, 3 * E, bias=bias, **factory)

    def _project(self, query: Tensor, key: Tensor, value: Tensor) -> tuple[Tensor, ...]:
        """Project with one matmul for self-attention, three slices of it otherwise; split into
        heads."""
        if key is query and value is query:
            qkv = self.qkv_proj(query).chunk(3, dim=-1)  # (N, L, 3E) -> 3 x (N, L, E)
        else:
            weights = self.qkv_proj.weight.chunk(3)  # 3 x (E, E)
            biases = (None,) * 3 if self.qkv_proj.bias is None else self.qkv_proj.bias.chunk(3)
            qkv = (
                F.linear(x, w, b)
                for x, w, b in zip((query, key, value), weights, biases, strict=True)
            )  # (N, L, E), (N, S, E), (N, S, E)
        # Copied to a dense (L, D) block per head: SDPA's CPU kernels read that layout faster
        # than the strided views of the packed projection, by more than the copy costs.
        return tuple(split_heads(x, self.num_heads).contiguous() for x in qkv)  # (N, H, L|S, D)

    def _attend(self, q, k, v, mask, *, need_weights: bool, dropout_p: float):
        """The readable path when the weights are needed, PyTorch's fused kernel otherwise."""
        if need_weights:
            return super()._attend(q, k, v, mask, need_weights=True, dropout_p=dropout_p)
        # The queries are scaled here, as on the readable path: torch's CPU flash kernel scales
        # after the product, which overflows near the top of bfloat16's range (float32's too).
        q = q * self.head_dim**-0.5  # (N, H, L, D)
        out = F.scaled_dot_product_attention(
            q, k, v, attn_mask=mask, dropout_p=dropout_p, scale=1.0
        )  # (N, H, L, D)
        return out, None

    def _load_in_projections(self, weight: Tensor, bias: Tensor | None) -> None:
        """``in_proj_weight`` is already the packed (3E, E) matrix: it becomes ``qkv_proj``."""
        self.qkv_proj.weight.copy_(weight)
        if bias is not None:
            self.qkv_proj.bias.copy_(bias)
