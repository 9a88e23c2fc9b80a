"""The sizes and choices of a decoder, and the attention variants it may be built with.

- :class:`DecoderConfig`: the sizes and choices of a :class:`attention.DecoderLM`, checked once.
- :func:`register_attention`: makes an attention variant available by name. A variant is a
  module with ``embed_dim`` and ``positions`` attributes (``positions``: which of
  ``"rotary"``, ``"alibi"`` or ``"none"`` it applies itself; the model applies learned and
  sinusoidal positions, and refuses a layer that would drop the config's);
  ``forward(x, *, cache=None, layer=0, need_weights=False) -> (out, weights)``, which appends
  this call's positions to ``cache`` (its own :class:`attention.state.DecodingState`) at
  ``layer``; ``new_state(num_layers, *, batch_size, max_len, window, sinks)``, the empty state
  of a model of such layers; and ``from_config(config)``, reading its own settings from
  ``config.attention_options``. It is registered once, and chosen by
  ``DecoderLM(..., attention="name", attention_options={...})``.
"""

import dataclasses
from collections.abc import Callable, Mapping

from torch import nn

from ._checks import check_bool, check_dropout, check_embed, check_int

__all__ = ["DecoderConfig", "register_attention"]

POSITIONS = ("learned", "sinusoidal", "rotary", "alibi", "none")

#: The attention variants a :class:`DecoderConfig` may name, each built by a function of the
#: config (see :func:`register_attention`).
ATTENTIONS: dict[str, Callable[["DecoderConfig"], nn.Module]] = {}


def register_attention(name: str, build: Callable[["DecoderConfig"], nn.Module]) -> None:
    """Make an attention variant available to :class:`attention.DecoderLM` by ``name``.

    Args:
        name (str): the name a config gives, ``DecoderLM(..., attention=name)``.
        build (callable): makes one layer's attention from the :class:`DecoderConfig`
            (usually the variant's ``from_config``).

    Returns:
        None: raises ``ValueError`` if another function already holds ``name``.

    Examples::

        >>> sorted(ATTENTIONS)[:1]
        ['causal']
    """
    if not isinstance(name, str) or not name:
        raise TypeError(f"name must be a non-empty str; got {name!r}")
    if not callable(build):
        raise TypeError(f"build must be callable; got {type(build).__name__}")
    if name in ATTENTIONS and ATTENTIONS[name] != build:  # bound methods: equal, not one
        raise ValueError(f"an attention named {name!r} is already registered")
    ATTENTIONS[name] = build


@dataclasses.dataclass(frozen=True)
class DecoderConfig:
    """The sizes and choices of a :class:`attention.DecoderLM`, checked when made.

    The fields are :class:`attention.DecoderLM`'s arguments of the same names; ``num_kv_heads=None``
    becomes ``num_heads`` and ``ffn_dim=None`` becomes ``4 * embed_dim``.

    Args:
        vocab_size (int): number of token ids :math:`V`.
        embed_dim (int): model dimension :math:`E`.
        num_heads (int): query heads per layer :math:`H`.
        num_layers (int): number of blocks.
        max_len (int): longest sequence.
        num_kv_heads (int, optional): key/value heads per layer. Default: ``None``.
        ffn_dim (int, optional): hidden size of the feed-forward networks. Default: ``None``.
        dropout (float): dropout everywhere, in training mode only. Default: ``0.0``.
        positions (str): ``"learned"``, ``"sinusoidal"``, ``"rotary"``, ``"alibi"`` or
            ``"none"``. Default: ``"learned"``.
        window (int, optional): sliding-window attention in every layer. Default: ``None``.
        bias (bool): biases in the attention's projections. Default: ``False``.
        attention (str or callable): the attention of every layer: a name given to
            :func:`register_attention` (``"causal"``, :class:`CausalSelfAttention`), or a function
            of the config that builds one layer's attention. Default: ``"causal"``.
        attention_options (Mapping, optional): the variant's own settings, which its
            ``from_config`` reads. Default: ``None`` (none).

    Examples::

        >>> config = DecoderConfig(10, embed_dim=16, num_heads=4, num_layers=2, max_len=8)
        >>> config.ffn_dim, config.num_kv_heads
        (64, 4)
    """

    vocab_size: int
    _: dataclasses.KW_ONLY
    embed_dim: int
    num_heads: int
    num_layers: int
    max_len: int
    num_kv_heads: int | None = None
    ffn_dim: int | None = None
    dropout: float = 0.0
    positions: str = "learned"
    window: int | None = None
    bias: bool = False
    attention: str | Callable = "causal"
    attention_options: Mapping | None = None

    def __post_init__(self):
        check_embed(self.embed_dim, self.num_heads)
        for name in ("vocab_size", "num_layers", "max_len"):
            check_int(getattr(self, name), name, minimum=1)
        if self.num_kv_heads is None:
            object.__setattr__(self, "num_kv_heads", self.num_heads)
        check_int(self.num_kv_heads, "num_kv_heads", minimum=1)
        if self.num_heads % self.num_kv_heads != 0:
            raise ValueError(
                f"num_kv_heads must divide num_heads; got num_heads={self.num_heads}, "
                f"num_kv_heads={self.num_kv_heads}"
            )
        if self.ffn_dim is None:
            object.__setattr__(self, "ffn_dim", 4 * self.embed_dim)
        check_int(self.ffn_dim, "ffn_dim", minimum=1)
        check_dropout(self.dropout)
        if not isinstance(self.positions, str) or self.positions not in POSITIONS:
            raise ValueError(f"positions must be one of {POSITIONS}; got {self.positions!r}")
        if self.window is not None:
            check_int(self.window, "window", minimum=1)
        check_bool(self.bias, "bias")
        if isinstance(self.attention, str):
            if self.attention not in ATTENTIONS:
                raise ValueError(
                    f"attention must be one of {sorted(ATTENTIONS)} or a function of the config; "
                    f"got {self.attention!r}"
                )
        elif not callable(self.attention):
            kind = type(self.attention).__name__
            raise TypeError(f"attention must be a registered name or callable; got {kind}")
        options = {} if self.attention_options is None else self.attention_options
        if not isinstance(options, Mapping) or not all(isinstance(k, str) for k in options):
            raise TypeError(f"attention_options must be a mapping of names; got {options!r}")
        object.__setattr__(self, "attention_options", dict(options))

    def build_attention(self) -> nn.Module:
        """One layer's attention, as ``attention`` says, with the positions it applies checked
        against ``positions``: a variant cannot silently drop them."""
        build = ATTENTIONS[self.attention] if isinstance(self.attention, str) else self.attention
        module = build(self)
        if not isinstance(module, nn.Module):
            raise TypeError(f"attention must build an nn.Module; got {type(module).__name__}")
        inside = self.positions if self.positions in ("rotary", "alibi") else "none"
        applied = getattr(module, "positions", None)
        if applied != inside:
            raise ValueError(
                f"positions={self.positions!r} needs each layer's attention to apply "
                f"{inside!r} itself; {type(module).__name__} applies {applied!r} (its "
                "positions attribute)"
            )
        return module
