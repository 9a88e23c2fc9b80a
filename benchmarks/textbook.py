"""The multi-head attention most tutorials write: four Linear layers, matmul and softmax.

It is the baseline of the module benchmark: nothing fused, the (N, H, L, S) weights always
materialised, the heads merged with ``contiguous().view``. It has no mask and no dropout, so it
is timed on the cases where the other modules run without them too.
"""

import math

import torch
from torch import Tensor, nn


class TextbookMultiHeadAttention(nn.Module):
    """Self-attention as usually written from the paper, for timing only."""

    def __init__(self, embed_dim: int, num_heads: int, *, device=None, dtype=None):
        super().__init__()
        self.num_heads, self.head_dim = num_heads, embed_dim // num_heads
        factory = {"device": device, "dtype": dtype}
        self.q_proj = nn.Linear(embed_dim, embed_dim, **factory)
        self.k_proj = nn.Linear(embed_dim, embed_dim, **factory)
        self.v_proj = nn.Linear(embed_dim, embed_dim, **factory)
        self.out_proj = nn.Linear(embed_dim, embed_dim, **factory)

    def forward(self, x: Tensor) -> Tensor:
        N, L, E = x.shape
        H, D = self.num_heads, self.head_dim
        q = self.q_proj(x).view(N, L, H, D).transpose(1, 2)  # (N, H, L, D)
        k = self.k_proj(x).view(N, L, H, D).transpose(1, 2)  # (N, H, L, D)
        v = self.v_proj(x).view(N, L, H, D).transpose(1, 2)  # (N, H, L, D)
        scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(D)  # (N, H, L, L)
        weights = torch.softmax(scores, dim=-1)  # (N, H, L, L)
        out = torch.matmul(weights, v)  # (N, H, L, L) @ (N, H, L, D) -> (N, H, L, D)
        out = out.transpose(1, 2).contiguous().view(N, L, E)  # (N, L, E)
        return self.out_proj(out)  # (N, L, E)

    @classmethod
    def from_torch(cls, m: nn.MultiheadAttention) -> "TextbookMultiHeadAttention":
        """Copy the weights of an ``nn.MultiheadAttention`` (with bias), to check the outputs."""
        w = m.in_proj_weight
        ours = cls(m.embed_dim, m.num_heads, device=w.device, dtype=w.dtype)
        with torch.no_grad():
            projections = (ours.q_proj, ours.k_proj, ours.v_proj)
            for proj, wi, bi in zip(projections, w.chunk(3), m.in_proj_bias.chunk(3), strict=True):
                proj.weight.copy_(wi)
                proj.bias.copy_(bi)
            ours.out_proj.weight.copy_(m.out_proj.weight)
            ours.out_proj.bias.copy_(m.out_proj.bias)
        return ours
