"""Where tokens are: sinusoidal positions, rotary embeddings (RoPE) and linear biases (ALiBi).

Attention alone does not see order: permute the tokens and its outputs are permuted the same
way. Each object here gives it positions in one of the three ways in use:

- :class:`PositionalEncoding` *adds* a fixed sinusoidal vector to each token embedding
  :cite:p:`vaswani2017`.
- :class:`RotaryEmbedding` *rotates* queries and keys by an angle proportional to their
  position, so that a query-key dot product depends only on their offset :cite:p:`su2021`.
- :func:`alibi_bias` *biases* the attention scores by a per-head penalty linear in the distance
  between query and key :cite:p:`press2022`.
"""

import math

import torch
from torch import Tensor, nn

from ._checks import (
    check_dropout,
    check_embed,
    check_factory,
    check_features,
    check_float,
    check_index,
    check_on_device,
)

__all__ = ["PositionalEncoding", "RotaryEmbedding", "alibi_slopes", "alibi_penalty", "alibi_bias"]


class PositionalEncoding(nn.Module):
    r"""Add the sinusoidal position signal of the original Transformer to each token.

    .. math::
        PE_{(p, 2i)} = \sin\left(p / 10000^{2i/E}\right), \qquad
        PE_{(p, 2i+1)} = \cos\left(p / 10000^{2i/E}\right)

    Args:
        embed_dim (int): model dimension :math:`E`.
        max_len (int): longest sequence the table covers. Default: ``512``.
        dropout (float): dropout after the sum, in training mode only. Default: ``0.0``.

    Shape:
        - x: :math:`(N, L, E)` with :math:`L \le` ``max_len``
        - Output: :math:`(N, L, E)`

    Examples::

        >>> pe = PositionalEncoding(8, max_len=10)
        >>> pe(torch.zeros(1, 3, 8))[0, 0]  # position 0: sin 0 = 0, cos 0 = 1
        tensor([0., 1., 0., 1., 0., 1., 0., 1.])
    """

    pe: Tensor

    def __init__(self, embed_dim: int, max_len: int = 512, *, dropout: float = 0.0):
        super().__init__()
        check_embed(embed_dim, 1)
        check_index(max_len, "max_len", minimum=1)
        check_dropout(dropout)
        position = torch.arange(max_len)[:, None]  # (max_len, 1)
        frequency = torch.exp(torch.arange(0, embed_dim, 2) * (-math.log(10000.0) / embed_dim))
        angle = position * frequency  # (max_len, 1) * (ceil(E / 2),) -> (max_len, ceil(E / 2))
        pe = torch.zeros(max_len, embed_dim)  # (max_len, E)
        pe[:, 0::2] = torch.sin(angle)
        pe[:, 1::2] = torch.cos(angle[:, : embed_dim // 2])
        self.register_buffer("pe", pe, persistent=False)
        self.embed_dim, self.max_len = embed_dim, max_len
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor) -> Tensor:
        """Add the position signal to ``x`` :math:`(N, L, E)`."""
        check_features(x, "x", self.embed_dim)
        check_on_device(x, "x", self.pe.device, "the module")
        N, L, E = x.shape
        if L > self.max_len:
            raise ValueError(f"sequence length {L} is longer than max_len={self.max_len}")
        return self.dropout(x + self.pe[:L].to(x.dtype))  # (N, L, E) + (L, E) -> (N, L, E)


class RotaryEmbedding(nn.Module):
    r"""Rotate each pair of features by an angle proportional to the position (RoPE).

    Split the last dimension of :math:`x` into halves :math:`x = (x^{(1)}, x^{(2)})` of size
    :math:`D/2` and pair feature :math:`i` of the first half with feature :math:`i` of the
    second (the *half-split* pairing of GPT-NeoX and Llama; :cite:t:`su2021` pair neighbours
    :math:`(2i, 2i+1)`, which is the same rotation with the features permuted). At position
    :math:`p` the pair :math:`i` turns by the angle :math:`p\,\theta_i`:

    .. math::
        \theta_i = \text{base}^{-2i/D}, \qquad
        \begin{pmatrix} y^{(1)}_i \\ y^{(2)}_i \end{pmatrix} =
        \begin{pmatrix} \cos p\theta_i & -\sin p\theta_i \\
                        \sin p\theta_i & \cos p\theta_i \end{pmatrix}
        \begin{pmatrix} x^{(1)}_i \\ x^{(2)}_i \end{pmatrix}, \qquad i = 0, \dots, D/2 - 1.

    Rotations compose, :math:`R_m^\top R_n = R_{n-m}`, so a query rotated to position :math:`m`
    and a key rotated to position :math:`n` have
    :math:`\langle R_m q, R_n k\rangle = \langle q, R_{n-m} k\rangle`: the score depends on the
    offset :math:`n - m` only. Apply it to queries and keys after the projections, never to
    values.

    The angles are computed in float64 (float32 where the device has no float64) for the
    positions asked for, then cast to ``x.dtype``; nothing is stored, so the module has no
    buffers and no state. Positions at or beyond ``max_len`` are refused with a ``ValueError``
    (the table is not extended silently).

    Args:
        head_dim (int): size :math:`D` of each head's vectors; must be even.
        base (float): the base of the geometric sequence of frequencies. Default: ``10000.0``.
        max_len (int): positions ``0 .. max_len - 1`` may be rotated. Default: ``4096``.

    Shape:
        - x: :math:`(*, L, D)`, for instance :math:`(N, H, L, D)`: positions along dim ``-2``
        - Output: :math:`(*, L, D)`, the same shape

    Examples::

        >>> rope = RotaryEmbedding(4)
        >>> q, k = torch.randn(1, 1, 1, 4), torch.randn(1, 1, 1, 4)
        >>> near = rope(q, offset=3) @ rope(k, offset=1).mT  # positions 3 and 1
        >>> far = rope(q, offset=12) @ rope(k, offset=10).mT  # positions 12 and 10
        >>> torch.allclose(near, far, atol=1e-5)  # same offset, same score
        True
        >>> rope(torch.randn(2, 8, 5, 4)).shape
        torch.Size([2, 8, 5, 4])
    """

    def __init__(self, head_dim: int, *, base: float = 10000.0, max_len: int = 4096):
        super().__init__()
        check_index(head_dim, "head_dim", minimum=2)
        if head_dim % 2 != 0:
            raise ValueError(
                f"head_dim must be even (features are rotated in pairs); got {head_dim}"
            )
        check_float(base, "base", greater_than=1)
        check_index(max_len, "max_len", minimum=1)
        self.head_dim, self.base, self.max_len = head_dim, float(base), max_len

    def extra_repr(self) -> str:
        return f"head_dim={self.head_dim}, base={self.base}, max_len={self.max_len}"

    def angles(self, L: int, *, offset: int = 0, device=None, dtype=torch.float64) -> Tensor:
        r"""The rotation angles :math:`p\,\theta_i` for positions ``offset .. offset + L - 1``.

        Args:
            L (int): number of positions.
            offset (int): the first position. Default: ``0``.
            device (torch.device, optional): where to build them. Default: ``None`` (CPU).
            dtype (torch.dtype): the floating-point dtype to compute in.
                Default: ``torch.float64``.

        Shape:
            - Output: :math:`(L, D/2)`

        Returns:
            Tensor: ``angles[l, i]`` is :math:`(\text{offset} + l)\,\theta_i`.

        Examples::

            >>> RotaryEmbedding(4, base=100.0).angles(3)
            tensor([[0.0000, 0.0000],
                    [1.0000, 0.1000],
                    [2.0000, 0.2000]], dtype=torch.float64)
        """
        check_index(L, "L")
        check_index(offset, "offset")
        check_factory(device, dtype)
        if offset + L > self.max_len:
            raise ValueError(
                f"positions {offset}..{offset + L - 1} reach past max_len={self.max_len}; "
                "build the RotaryEmbedding with a larger max_len"
            )
        half = torch.arange(0, self.head_dim, 2, device=device, dtype=dtype)  # (D/2,)
        theta = self.base ** (-half / self.head_dim)  # (D/2,)
        position = torch.arange(offset, offset + L, device=device, dtype=dtype)  # (L,)
        return position[:, None] * theta  # (L, 1) * (D/2,) -> (L, D/2)

    def forward(self, x: Tensor, *, offset: int = 0, positions: Tensor | None = None) -> Tensor:
        """Rotate ``x`` :math:`(*, L, D)`, whose row ``l`` sits at position ``offset + l``, or
        at ``positions[..., l]`` (integers broadcastable to ``x.shape[:-1]``) when given."""
        check_features(x, "x", self.head_dim, ndim=None, min_ndim=2, dim_name="head_dim")
        L, D = x.shape[-2:]
        exact = torch.float32 if x.device.type == "mps" else torch.float64
        if positions is None:
            angle = self.angles(L, offset=offset, device=x.device, dtype=exact)  # (L, D/2)
        else:  # a table up to the furthest position, read at each one
            if positions.dtype != torch.int64 or (positions.numel() and positions.min() < 0):
                raise ValueError("positions must be non-negative int64 positions")
            table = self.angles(int(positions.max()) + 1, device=x.device, dtype=exact)
            angle = table[positions]  # (..., L, D/2)
        cos, sin = angle.cos().to(x.dtype), angle.sin().to(x.dtype)  # (L, D/2) each
        x1, x2 = x[..., : D // 2], x[..., D // 2 :]  # (*, L, D/2) each
        return torch.cat((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1)  # (*, L, D)


def alibi_slopes(num_heads: int) -> Tensor:
    r"""The per-head slopes of ALiBi :cite:p:`press2022`.

    For :math:`H` a power of two, head :math:`h = 1, \dots, H` gets
    :math:`m_h = 2^{-8h/H}`, a geometric sequence from :math:`2^{-8/H}` down to
    :math:`2^{-8}`. Otherwise, with :math:`P` the largest power of two below :math:`H`, the
    first :math:`P` heads take the slopes for :math:`P` and the other :math:`H - P` take every
    other slope of the sequence for :math:`2P` (the interpolation of :cite:t:`press2022`).

    Args:
        num_heads (int): the number of heads :math:`H`.

    Shape:
        - Output: :math:`(H)`, float64

    Returns:
        Tensor: the slopes, largest first.

    Examples::

        >>> from attention.positions import alibi_slopes
        >>> alibi_slopes(4)
        tensor([0.2500, 0.0625, 0.0156, 0.0039], dtype=torch.float64)
        >>> alibi_slopes(6)  # the 4 of H = 4, then slopes 1 and 3 of H = 8
        tensor([0.2500, 0.0625, 0.0156, 0.0039, 0.5000, 0.1250], dtype=torch.float64)
    """
    check_index(num_heads, "num_heads", minimum=1)
    power = 2 ** math.floor(math.log2(num_heads))
    h = torch.arange(1, power + 1, dtype=torch.float64)  # (P,)
    slopes = 2.0 ** (-8.0 * h / power)  # (P,)
    if power == num_heads:
        return slopes
    extra = alibi_slopes(2 * power)[0::2][: num_heads - power]  # (H - P,)
    return torch.cat((slopes, extra))  # (H,)


def alibi_penalty(slope: Tensor, q: Tensor, k: Tensor) -> Tensor:
    r"""ALiBi's bias of one query and key: :math:`-m\,\lvert q - k\rvert`, written once for
    :func:`alibi_bias` (on index grids) and :func:`attention.flex.alibi` (inside FlexAttention).

    Args:
        slope (Tensor): the head's slope :math:`m`.
        q (Tensor): query positions.
        k (Tensor): key positions.

    Shape:
        - Output: the broadcast shape of ``slope``, ``q`` and ``k``

    Returns:
        Tensor: the bias.

    Examples::

        >>> from attention.positions import alibi_penalty
        >>> alibi_penalty(torch.tensor(0.5), torch.tensor(3), torch.arange(5))
        tensor([-1.5000, -1.0000, -0.5000,  0.0000, -0.5000])
    """
    return slope * -(q - k).abs()


def alibi_bias(num_heads: int, L: int, S: int | None = None, *, device=None, dtype=None) -> Tensor:
    r"""The ALiBi bias to add to the attention scores: a per-head linear penalty on distance.

    Query :math:`i` sits at position :math:`S - L + i` (bottom-right alignment, as
    :func:`attention.causal_mask`: with a cache, the :math:`L` queries are the last of
    :math:`S` positions) and key :math:`j` at position :math:`j`, so

    .. math::
        \text{bias}_{h, i, j} = -m_h \, \lvert (S - L + i) - j \rvert

    with the slopes :math:`m_h` of :func:`attention.positions.alibi_slopes`. The bias is 0 for
    a key at the query's own position and falls linearly with the distance on *both* sides:
    ALiBi is meant for causal models, so combine it with :func:`attention.causal_mask`, which
    removes the future keys (the bias never does).

    Args:
        num_heads (int): the number of heads :math:`H`.
        L (int): number of queries.
        S (int, optional): number of keys. Default: ``None`` (``S = L``).
        device (torch.device, optional): where to build the bias. Default: ``None`` (CPU).
        dtype (torch.dtype, optional): its floating-point dtype. Default: ``None`` (the default
            float dtype).

    Shape:
        - Output: :math:`(H, L, S)`, which broadcasts against scores :math:`(N, H, L, S)`

    Returns:
        Tensor: the additive bias, computed in float64 and cast to ``dtype``.

    Examples::

        >>> alibi_bias(2, 3)  # slopes 1/16 and 1/256
        tensor([[[ 0.0000, -0.0625, -0.1250],
                 [-0.0625,  0.0000, -0.0625],
                 [-0.1250, -0.0625,  0.0000]],
        <BLANKLINE>
                [[ 0.0000, -0.0039, -0.0078],
                 [-0.0039,  0.0000, -0.0039],
                 [-0.0078, -0.0039,  0.0000]]])
        >>> scores = torch.randn(1, 2, 3, 3) + alibi_bias(2, 3)  # (N, H, L, S)
    """
    S = L if S is None else S
    check_index(num_heads, "num_heads", minimum=1)
    check_index(L, "L")
    check_index(S, "S")
    check_factory(device, dtype)
    slopes = alibi_slopes(num_heads).to(device)  # (H,)
    query = torch.arange(S - L, S, device=device)  # positions of the queries  (L,)
    key = torch.arange(S, device=device)  # (S,)
    bias = alibi_penalty(slopes[:, None, None], query[:, None], key)  # (H, L, S)
    return bias.to(torch.get_default_dtype() if dtype is None else dtype)
