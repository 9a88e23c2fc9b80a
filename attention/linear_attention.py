r"""Linear attention (Katharopoulos et al. :cite:p:`katharopoulos2020`): a kernel in place of the
softmax, so that the past is a fixed-size sum.

- :class:`LinearAttention`: causal attention whose weights are
  :math:`\phi(q_i)^\top \phi(k_j)` normalised by their sum, with the feature map
  :math:`\phi(x) = \text{elu}(x) + 1`; computed in parallel over the positions of a call, and
  recurrently across calls.
- :class:`RecurrentState`: its decoding state, the sums :math:`S = \sum_j \phi(k_j) v_j^\top`
  and :math:`z = \sum_j \phi(k_j)` of every head and layer, whose size does not grow with the
  sequence.
"""

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ._checks import (
    check_bool,
    check_device_dtype,
    check_embed,
    check_factory,
    check_features,
    check_int,
    check_tensor,
)
from .config import DecoderConfig, register_attention
from .state import DecodingState

__all__ = ["LinearAttention", "RecurrentState", "elu_feature_map"]


def elu_feature_map(x: Tensor) -> Tensor:
    r"""The feature map of linear attention, :math:`\phi(x) = \text{elu}(x) + 1`: positive, so
    every weight :math:`\phi(q)^\top \phi(k)` is positive and so is their sum.

    Args:
        x (Tensor): any shape.

    Shape:
        - x: :math:`(*)`, any shape
        - Output: :math:`(*)`, the same

    Returns:
        Tensor: :math:`\phi(x)`, of ``x``'s shape, every entry above 0 (unless
        :math:`e^x` underflows: :math:`x` below about -745 in float64, -104 in float32).

    Examples::

        >>> elu_feature_map(torch.tensor([-1.0, 0.0, 2.0]))
        tensor([0.3679, 1.0000, 3.0000])
    """
    check_tensor(x, "x")
    return F.elu(x) + 1


class RecurrentState(DecodingState):
    r"""The decoding state of :class:`LinearAttention`: two sums per head and layer, whatever
    the length.

    After :math:`t` tokens a layer's head holds :math:`S_t = \sum_{j \le t} \phi(k_j)
    v_j^\top` (:math:`D \times D_v`) and :math:`z_t = \sum_{j \le t} \phi(k_j)` (:math:`D`),
    so the memory,

    .. math::
        (D D_v + D) \times H \times \text{layers} \times N \times \text{bytes per element},

    does not depend on the number of tokens. A sum cannot forget a token: there is no rolling
    window, and :meth:`crop` only empties the state or keeps it whole. ``max_len`` is taken
    for the contract and bounds nothing.

    Args:
        num_layers (int): number of attention layers.
        batch_size (int): number of sequences :math:`N`.
        num_heads (int): heads per layer :math:`H`.
        head_dim (int): size :math:`D` of each head's keys.
        value_dim (int, optional): size :math:`D_v` of each head's values. Default: ``None``
            (``head_dim``).
        max_len (int, optional): unused by the sums. Default: ``None``.
        device (torch.device, optional): where to allocate. Default: ``None`` (CPU).
        dtype (torch.dtype, optional): element type. Default: ``None`` (the default dtype).

    Shape:
        - ``kv_sums`` of one layer: :math:`(N, H, D, D_v)`; ``k_sums``: :math:`(N, H, D)`

    Examples::

        >>> state = RecurrentState(2, batch_size=1, num_heads=4, head_dim=8)
        >>> state.nbytes  # (8 x 8 + 8) x 4 heads x 2 layers x 4 bytes, at any length
        2304
    """

    positional = False

    def __init__(
        self,
        num_layers: int,
        *,
        batch_size: int,
        num_heads: int,
        head_dim: int,
        value_dim: int | None = None,
        max_len: int | None = None,
        device=None,
        dtype=None,
    ):
        super().__init__(num_layers, batch_size=batch_size, max_len=max_len)
        value_dim = head_dim if value_dim is None else value_dim
        for name, value in (("num_heads", num_heads), ("head_dim", head_dim),
                            ("value_dim", value_dim)):  # fmt: skip
            check_int(value, name)
        self.num_heads, self.head_dim, self.value_dim = num_heads, head_dim, value_dim
        shape = (num_layers, batch_size, num_heads, head_dim)
        self.kv_sums = self._allocate((*shape, value_dim), device=device, dtype=dtype)
        self.k_sums = self._allocate(shape, device=device, dtype=dtype)

    def stores(self) -> tuple[Tensor, Tensor]:
        r"""The sums :math:`S` :math:`(\text{layers}, N, H, D, D_v)` and :math:`z`
        :math:`(\text{layers}, N, H, D)`."""
        return self.kv_sums, self.k_sums

    def update(self, layer: int, key: Tensor, value: Tensor) -> tuple[Tensor, Tensor]:
        r"""Add ``layer``'s new (feature-mapped) keys and values to its sums; return the sums
        as they were before.

        Args:
            layer (int): the layer index.
            key (Tensor): the new keys, already through the feature map: :math:`\phi(k)`.
            value (Tensor): the new values.

        Shape:
            - key: :math:`(N, H, L, D)`; value: :math:`(N, H, L, D_v)`
            - Output: :math:`S` :math:`(N, H, D, D_v)` and :math:`z` :math:`(N, H, D)`

        Returns:
            tuple[Tensor, Tensor]: copies of the sums over the earlier positions.

        Examples::

            >>> state = RecurrentState(1, batch_size=1, num_heads=1, head_dim=2)
            >>> S, z = state.update(0, torch.ones(1, 1, 3, 2), torch.ones(1, 1, 3, 2))
            >>> z.tolist(), state.k_sums[0].tolist(), state.length
            ([[[0.0, 0.0]]], [[[3.0, 3.0]]], 3)
        """
        H, D, D_v = self.num_heads, self.head_dim, self.value_dim
        for name, x, size in (("key", key, D), ("value", value, D_v)):
            check_tensor(x, name, ndim=4)
            if tuple(x.shape) != (self.batch_size, H, key.shape[2], size):
                raise ValueError(
                    f"{name} must have shape (N={self.batch_size}, H={H}, L, {size}) with the "
                    f"same L as key; got {tuple(x.shape)}"
                )
            check_device_dtype(x, name, self.device, self.dtype, "the state")
            if x.requires_grad and torch.is_grad_enabled():
                raise ValueError(
                    f"{name} requires grad: RecurrentState is for inference and does not keep "
                    "the graph; call the model under torch.no_grad()"
                )
        L = key.shape[2]
        self._begin_write(layer, self.batch_size, L, dtype=key.dtype, device=key.device)
        before = self.kv_sums[layer].clone(), self.k_sums[layer].clone()
        self.kv_sums[layer] += key.mT @ value  # (N, H, D, L) @ (N, H, L, D_v) -> (N, H, D, D_v)
        self.k_sums[layer] += key.sum(dim=2)  # (N, H, L, D) -> (N, H, D)
        self._end_write(layer, L)
        return before


class LinearAttention(nn.Module):
    r"""Causal linear attention (Katharopoulos et al. :cite:p:`katharopoulos2020`).

    The softmax's :math:`\exp(q_i^\top k_j)` is replaced by a product of features,
    :math:`\phi(q_i)^\top \phi(k_j)` with :math:`\phi(x) = \text{elu}(x) + 1`
    (:func:`elu_feature_map`), so that the sum over the past factors out of the query:

    .. math::
        o_i = \frac{\sum_{j \le i} \phi(q_i)^\top \phi(k_j)\, v_j}
                   {\sum_{j \le i} \phi(q_i)^\top \phi(k_j)}
            = \frac{\phi(q_i)^\top S_i}{\phi(q_i)^\top z_i}, \qquad
        S_i = \sum_{j \le i} \phi(k_j) v_j^\top, \quad z_i = \sum_{j \le i} \phi(k_j).

    The *parallel* form (left) computes the masked :math:`L \times L` products, as softmax
    attention does, for training; the *recurrent* form (right) carries :math:`S` and
    :math:`z` from one token to the next (:class:`RecurrentState`), so a decoding step costs
    the same at any length. :meth:`forward` does both: the positions of one call in parallel,
    plus the sums of the earlier calls held by the state. There is no scale and no softmax;
    what is lost is the softmax's sharpness (a weight grows with :math:`\phi(q)^\top
    \phi(k)`, not exponentially) and every key: the sum keeps no token apart from the others.

    Args:
        embed_dim (int): model dimension :math:`E`.
        num_heads (int): heads :math:`H`; must divide ``embed_dim``.
        bias (bool): add a bias to the four projections. Default: ``False``.
        device (torch.device, optional): where to create the parameters. Default: ``None``.
        dtype (torch.dtype, optional): dtype of the parameters. Default: ``None``.

    Shape:
        - x: :math:`(N, L, E)`
        - Output: :math:`(N, L, E)` and weights :math:`(N, H, L, L)` (or ``None``)

    Examples::

        >>> attn = LinearAttention(32, 4)
        >>> x = torch.randn(2, 6, 32)
        >>> out, weights = attn(x, need_weights=True)
        >>> out.shape, weights.sum(-1).allclose(torch.ones(2, 4, 6))
        (torch.Size([2, 6, 32]), True)
    """

    positions = "none"

    def __init__(
        self, embed_dim: int, num_heads: int, *, bias: bool = False, device=None, dtype=None
    ):
        super().__init__()
        check_embed(embed_dim, num_heads)
        check_bool(bias, "bias")
        check_factory(device, dtype)
        self.embed_dim, self.num_heads = embed_dim, num_heads
        self.head_dim = embed_dim // num_heads
        factory = {"device": device, "dtype": dtype}
        self.q_proj = nn.Linear(embed_dim, embed_dim, bias=bias, **factory)
        self.k_proj = nn.Linear(embed_dim, embed_dim, bias=bias, **factory)
        self.v_proj = nn.Linear(embed_dim, embed_dim, bias=bias, **factory)
        self.out_proj = nn.Linear(embed_dim, embed_dim, bias=bias, **factory)

    def new_state(
        self, num_layers: int, *, batch_size: int, max_len=None, window=None, sinks=0
    ) -> RecurrentState:
        """An empty :class:`RecurrentState` for ``num_layers`` layers like this one (the
        decoding-state contract, :class:`attention.state.DecodingState`); a sum has no window."""
        if window is not None or sinks:
            raise ValueError(
                "LinearAttention keeps a sum over every token and cannot drop old ones: no "
                f"rolling state (window=None, sinks=0); got window={window}, sinks={sinks}"
            )
        weight = self.q_proj.weight
        return RecurrentState(
            num_layers, batch_size=batch_size, num_heads=self.num_heads,
            head_dim=self.head_dim, max_len=max_len, device=weight.device, dtype=weight.dtype,
        )  # fmt: skip

    @classmethod
    def from_config(cls, config: DecoderConfig) -> "LinearAttention":
        """One layer of a :class:`attention.DecoderLM` with ``config``: no options, no shared
        key/value heads and no window; positions, if any, enter at the embeddings."""
        if config.attention_options:
            raise ValueError(
                f"LinearAttention takes no attention_options; got {config.attention_options}"
            )
        if config.num_kv_heads != config.num_heads:
            raise ValueError(
                "LinearAttention does not share key/value heads: leave num_kv_heads unset; "
                f"got num_kv_heads={config.num_kv_heads}"
            )
        if config.window is not None:
            raise ValueError(
                f"LinearAttention sums every earlier token: window must be None; got "
                f"{config.window}"
            )
        return cls(config.embed_dim, config.num_heads, bias=config.bias)

    def _check_call(self, x: Tensor, cache, layer: int, need_weights: bool) -> None:
        """The checks of :meth:`forward`'s arguments, before any arithmetic."""
        check_features(x, "x", self.embed_dim, like=self.q_proj.weight)
        check_bool(need_weights, "need_weights")
        check_int(layer, "layer", minimum=0)
        H, D = self.num_heads, self.head_dim
        if cache is not None:
            if not isinstance(cache, RecurrentState):
                raise TypeError(
                    f"cache must be a RecurrentState or None; got {type(cache).__name__}"
                )
            if (cache.num_heads, cache.head_dim, cache.value_dim) != (H, D, D):
                raise ValueError(
                    f"the state holds {cache.num_heads} heads of D={cache.head_dim} (D_v="
                    f"{cache.value_dim}); expected {H} heads of D={D}"
                )
            cache.check_append(layer, *x.shape[:2], dtype=x.dtype, device=x.device)
            if need_weights and cache.length:
                raise ValueError(
                    "need_weights=True needs every key, which a RecurrentState of "
                    f"{cache.length} positions no longer holds; ask for the weights without "
                    "a state, or of its first call"
                )

    def forward(
        self,
        x: Tensor,
        *,
        cache: RecurrentState | None = None,
        layer: int = 0,
        need_weights: bool = False,
    ) -> tuple[Tensor, Tensor | None]:
        """Attend from every position of ``x`` to itself and the earlier positions.

        Args:
            x (Tensor): :math:`(N, L, E)`, the new positions.
            cache (RecurrentState, optional): the sums over the earlier positions; this call
                adds its own at ``layer``. Default: ``None``.
            layer (int): this layer's slot in ``cache``. Default: ``0``.
            need_weights (bool): return the weights :math:`(N, H, L, L)` among the positions
                of this call; only without earlier positions (the sums keep no keys).
                Default: ``False``.

        Returns:
            tuple[Tensor, Tensor | None]: output :math:`(N, L, E)` and weights or ``None``.
        """
        self._check_call(x, cache, layer, need_weights)
        N, L, E = x.shape
        H, D = self.num_heads, self.head_dim

        q = elu_feature_map(self.q_proj(x)).view(N, L, H, D).transpose(1, 2)  # (N, H, L, D)
        k = elu_feature_map(self.k_proj(x)).view(N, L, H, D).transpose(1, 2)  # (N, H, L, D)
        v = self.v_proj(x).view(N, L, H, D).transpose(1, 2)  # (N, H, L, D)
        # In parallel over this call: the masked products phi(q_i).phi(k_j), j <= i.
        scores = (q @ k.mT).tril()  # (N, H, L, D) @ (N, H, D, L) -> (N, H, L, L)
        numerator = scores @ v  # (N, H, L, L) @ (N, H, L, D) -> (N, H, L, D)
        denominator = scores.sum(dim=-1)  # (N, H, L)
        if cache is not None:  # recurrently across calls: the sums over the earlier positions
            S, z = cache.update(layer, k, v)  # (N, H, D, D), (N, H, D)
            numerator = numerator + q @ S  # (N, H, L, D) @ (N, H, D, D) -> (N, H, L, D)
            denominator = denominator + (q @ z[..., None]).squeeze(-1)  # (N, H, L)
        out = numerator / denominator[..., None]  # (N, H, L, D)
        weights = scores / denominator[..., None] if need_weights else None  # (N, H, L, L)
        out = out.transpose(1, 2).reshape(N, L, E)  # (N, H, L, D) -> (N, L, E)
        return self.out_proj(out), weights


register_attention("linear", LinearAttention.from_config)
