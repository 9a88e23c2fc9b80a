"""A small GPT-style language model, and how it picks the next token.

- :class:`DecoderLM`: token and position embeddings, :class:`attention.decoder.DecoderBlock` s and
  an output head that predicts the next token; :meth:`DecoderLM.generate` continues a prompt,
  with or without a :class:`attention.KVCache`.
- :func:`sampling_distribution`: the probabilities a token is drawn from, after temperature,
  top-k and top-p (nucleus) sampling.
"""

from collections.abc import Callable, Mapping

import torch
from torch import Tensor, nn

from ._checks import check_bool, check_int, check_positive, check_tokens
from .config import DecoderConfig
from .decoder import DecoderBlock
from .positions import PositionalEncoding
from .state import DecodingState

__all__ = ["DecoderLM", "sampling_distribution"]


class DecoderLM(nn.Module):
    r"""A small GPT-style language model: it predicts each next token from the ones before.

    Token embeddings plus position information, ``num_layers`` pre-LN :class:`DecoderBlock` s,
    a final LayerNorm, and an output head to one logit per vocabulary entry
    :cite:p:`radford2019`. The head is **not tied** to the token embedding: a separate
    ``nn.Linear(E, V, bias=False)``, which costs :math:`V E` parameters (little for the small
    vocabularies of these pages) and lets the model read and write tokens differently.

    Positions (``positions``): ``"learned"`` adds an ``nn.Embedding`` of ``max_len``
    positions; ``"sinusoidal"`` adds :class:`attention.PositionalEncoding`; ``"rotary"``
    rotates every layer's queries and keys (:class:`attention.RotaryEmbedding`); ``"alibi"``
    biases every layer's scores (:func:`attention.alibi_bias`); ``"none"`` adds nothing (the
    causal mask alone lets a position count the ones before it). With a
    :class:`attention.KVCache`, the new tokens take the positions after the cached ones.

    Args:
        vocab_size (int): number of token ids :math:`V`.
        embed_dim (int): model dimension :math:`E`.
        num_heads (int): query heads per layer :math:`H`.
        num_layers (int): number of blocks.
        max_len (int): longest sequence (prompt plus generated tokens).
        num_kv_heads (int, optional): key/value heads per layer. Default: ``None``
            (``num_heads``).
        ffn_dim (int, optional): hidden size of the feed-forward networks. Default: ``None``
            (``4 * embed_dim``).
        dropout (float): dropout everywhere, in training mode only. Default: ``0.0``.
        positions (str): how positions enter the model: ``"learned"``, ``"sinusoidal"``,
            ``"rotary"``, ``"alibi"`` or ``"none"``. Default: ``"learned"``.
        window (int, optional): sliding-window attention in every layer. Default: ``None``.
        attention (str or callable): every layer's attention: a name registered with
            :func:`attention.config.register_attention` (``"causal"``:
            :class:`attention.CausalSelfAttention`), or a function of the
            :class:`DecoderConfig` that builds one layer's. Default: ``"causal"``.
        attention_options (Mapping, optional): the variant's own settings. Default: ``None``.

    Shape:
        - tokens: :math:`(N, L)` integer ids
        - Output: logits :math:`(N, L, V)` and a list of ``num_layers`` weights
          :math:`(N, H, L, S)`, or ``None``

    Examples::

        >>> model = DecoderLM(10, embed_dim=16, num_heads=4, num_layers=2, max_len=8)
        >>> logits, weights = model(torch.tensor([[1, 2, 3]]), need_weights=True)
        >>> logits.shape, len(weights), weights[0].shape
        (torch.Size([1, 3, 10]), 2, torch.Size([1, 4, 3, 3]))
    """

    def __init__(
        self,
        vocab_size: int,
        *,
        embed_dim: int,
        num_heads: int,
        num_layers: int,
        max_len: int,
        num_kv_heads: int | None = None,
        ffn_dim: int | None = None,
        dropout: float = 0.0,
        positions: str = "learned",
        window: int | None = None,
        attention: str | Callable[[DecoderConfig], nn.Module] = "causal",
        attention_options: Mapping | None = None,
    ):
        super().__init__()
        self.config = config = DecoderConfig(
            vocab_size, embed_dim=embed_dim, num_heads=num_heads, num_layers=num_layers,
            max_len=max_len, num_kv_heads=num_kv_heads, ffn_dim=ffn_dim, dropout=dropout,
            positions=positions, window=window, attention=attention,
            attention_options=attention_options,
        )  # fmt: skip
        self.vocab_size, self.max_len, self.positions = vocab_size, config.max_len, config.positions
        self.embedding = nn.Embedding(vocab_size, config.embed_dim)
        if config.positions == "learned":
            self.position_embedding = nn.Embedding(config.max_len, config.embed_dim)
        elif config.positions == "sinusoidal":
            self.position_embedding = PositionalEncoding(config.embed_dim, config.max_len)
        self.dropout = nn.Dropout(config.dropout)
        self.blocks = nn.ModuleList(
            DecoderBlock(config.build_attention(), config.ffn_dim, dropout=config.dropout)
            for _ in range(config.num_layers)
        )
        self.norm = nn.LayerNorm(config.embed_dim)
        self.head = nn.Linear(config.embed_dim, vocab_size, bias=False)
        # Small embeddings, as in GPT-2 (std 0.02): the default N(0, 1) would swamp the
        # residual stream the blocks add to.
        for embedding in (self.embedding, getattr(self, "position_embedding", None)):
            if isinstance(embedding, nn.Embedding):
                nn.init.normal_(embedding.weight, std=0.02)

    def new_cache(
        self, batch_size: int, *, max_len: int | None = None, window=None, sinks: int = 0
    ) -> DecodingState:
        """An empty decoding state for this model, made by its attention (a
        :class:`attention.KVCache` for :class:`attention.CausalSelfAttention`): every layer, its
        dtype and device.

        A rolling state (``window``) keeps the first ``sinks`` positions and the most recent
        ``window`` ones, and the model reads them at the slots they hold: only positions the
        attention applies itself (``"rotary"``, ``"alibi"`` or ``"none"``) stay exact there,
        so a model with learned or sinusoidal positions refuses it, as it refuses
        ``sinks + window`` beyond its ``max_len``.

        Args:
            batch_size (int): number of sequences :math:`N`.
            max_len (int, optional): positions to allocate, at most the model's. Default:
                ``None`` (the model's ``max_len``, or ``sinks + window`` for a rolling state).
            window (int, optional): a rolling state of the ``window`` most recent positions.
                Default: ``None``.
            sinks (int): with ``window``, the first positions always kept. Default: ``0``.

        Returns:
            DecodingState: the empty state.

        Examples::

            >>> model = DecoderLM(10, embed_dim=16, num_heads=4, num_layers=2, max_len=8,
            ...                   num_kv_heads=1)
            >>> model.new_cache(3).nbytes  # 2 x 2 layers x 3 x 1 x 8 x 4 x 4 bytes
            1536
        """
        if max_len is not None:
            check_int(max_len, "max_len", minimum=1)
            if max_len > self.max_len:
                raise ValueError(
                    f"max_len must be at most the model's {self.max_len}; got {max_len}"
                )
        if window is not None:
            check_int(window, "window", minimum=1)
            check_int(sinks, "sinks", minimum=0)
            if self.positions in ("learned", "sinusoidal"):
                raise ValueError(
                    f"a rolling state reads the kept positions at their slots, which "
                    f"positions={self.positions!r} (added to the embeddings) cannot do exactly; "
                    "use rotary, alibi or no positions for a rolling state"
                )
            if sinks + window > self.max_len:
                raise ValueError(
                    f"sinks + window = {sinks + window} exceeds the model's max_len="
                    f"{self.max_len}: the rolling state's slots are its positions"
                )
        elif max_len is None:
            max_len = self.max_len
        attn = self.blocks[0].self_attn
        new_state = getattr(attn, "new_state", None)
        if not callable(new_state):
            raise TypeError(
                f"{type(attn).__name__} has no new_state(): it cannot continue a sequence, "
                "so generate with use_cache=False"
            )
        state = new_state(
            len(self.blocks), batch_size=batch_size, max_len=max_len, window=window, sinks=sinks
        )
        if not isinstance(state, DecodingState):
            raise TypeError(
                f"{type(attn).__name__}.new_state() must return a DecodingState; got "
                f"{type(state).__name__}"
            )
        return state

    def forward(self, tokens: Tensor, *, cache: DecodingState | None = None, need_weights=False):
        """Predict, at every position of ``tokens``, the next token.

        Args:
            tokens (Tensor): :math:`(N, L)` integer ids; with ``cache``, the new tokens only.
            cache (DecodingState, optional): what the layers keep of the earlier tokens
                (:meth:`new_cache`); every layer appends the new ones, or the call fails.
                Default: ``None``.
            need_weights (bool): also return every layer's attention weights.
                Default: ``False``.

        Returns:
            tuple[Tensor, list[Tensor] | None]: logits :math:`(N, L, V)` and, per layer, the
            weights :math:`(N, H, L, S)` (or ``None``).
        """
        check_tokens(tokens, self.vocab_size, self.max_len, device=self.head.weight.device)
        check_bool(need_weights, "need_weights")
        N, L = tokens.shape
        if cache is None:
            return self._forward(tokens, 0, None, need_weights)
        if not isinstance(cache, DecodingState):
            raise TypeError(f"cache must be a DecodingState or None; got {type(cache).__name__}")
        if cache.num_layers != len(self.blocks):
            raise ValueError(
                f"the cache has {cache.num_layers} layers; this model has {len(self.blocks)}"
            )
        offset = cache.offset(L)  # where the new tokens land
        if cache.window is None and offset + L > self.max_len:
            raise ValueError(
                f"the cache holds {offset} positions; {L} more would exceed max_len={self.max_len}"
            )
        weight = self.head.weight
        with cache.step(N, L, dtype=weight.dtype, device=weight.device):  # checked first
            where = cache.positions(L)  # (N, L) when each row has its own length, else None
            if where is not None and where.numel() and int(where.max()) >= self.max_len:
                raise ValueError(f"a row of the cache would reach past max_len={self.max_len}")
            return self._forward(tokens, offset, cache, need_weights, where)

    def _forward(self, tokens: Tensor, offset: int, cache, need_weights: bool, where=None):
        L = tokens.shape[1]
        x = self.embedding(tokens)  # (N, L) -> (N, L, E)
        if where is None:  # every row's tokens at offset .. offset + L - 1
            where = torch.arange(offset, offset + L, device=tokens.device)  # (L,)
        if self.positions == "learned":
            x = x + self.position_embedding(where)  # (N, L, E) + (L | N L, E) -> (N, L, E)
        elif self.positions == "sinusoidal":
            x = x + self.position_embedding.pe[where].to(x.dtype)  # (N, L, E)
        x = self.dropout(x)
        all_weights = []
        for layer, block in enumerate(self.blocks):
            x, weights = block(x, cache=cache, layer=layer, need_weights=need_weights)
            all_weights.append(weights)
        logits = self.head(self.norm(x))  # (N, L, E) -> (N, L, V)
        return logits, (all_weights if need_weights else None)

    @torch.no_grad()
    def generate(
        self,
        prompt: Tensor,
        max_new_tokens: int,
        *,
        use_cache: bool = True,
        temperature: float = 0.0,
        top_k: int | None = None,
        top_p: float | None = None,
        generator: torch.Generator | None = None,
    ) -> Tensor:
        r"""Continue ``prompt`` by ``max_new_tokens`` tokens, one at a time, in eval mode.

        With ``use_cache=True`` the prompt is encoded once into the model's decoding state
        (:meth:`new_cache`, a :class:`attention.KVCache` for the default attention), and
        each new token is one query against the cached keys and values; without, every step
        re-encodes the whole sequence so far. Both give the same tokens. Each token is the most
        likely one (``temperature=0``) or drawn from :func:`sampling_distribution`.

        Args:
            prompt (Tensor): the first tokens.
            max_new_tokens (int): how many tokens to add.
            use_cache (bool): keep the keys and values between steps. Default: ``True``.
            temperature (float): divides the logits before sampling; ``0`` picks the most
                likely token (greedy). Default: ``0.0``.
            top_k (int, optional): sample among the ``top_k`` most likely tokens only.
                Default: ``None`` (all).
            top_p (float, optional): sample among the most likely tokens whose probabilities
                add up to ``top_p`` (nucleus sampling, :cite:t:`holtzman2020`). Default:
                ``None`` (all).
            generator (torch.Generator, optional): the random numbers of sampling, for
                reproducible samples. Default: ``None``.

        Shape:
            - prompt: :math:`(N, L_0)` integer ids
            - Output: :math:`(N, L_0 + T)`, ``T = max_new_tokens``

        Returns:
            Tensor: the prompt followed by the generated tokens. The training mode is restored,
            also when generation fails.

        Examples::

            >>> model = DecoderLM(10, embed_dim=16, num_heads=4, num_layers=2, max_len=8)
            >>> out = model.generate(torch.tensor([[1, 2]]), 4)
            >>> out.shape, torch.equal(out, model.generate(torch.tensor([[1, 2]]), 4,
            ...                                            use_cache=False))
            (torch.Size([1, 6]), True)
        """
        check_tokens(
            prompt, self.vocab_size, self.max_len, name="prompt", device=self.head.weight.device
        )
        check_int(max_new_tokens, "max_new_tokens", minimum=0)
        check_bool(use_cache, "use_cache")
        _check_sampling(temperature, top_k, top_p)
        if generator is not None and not isinstance(generator, torch.Generator):
            raise TypeError(f"generator must be a torch.Generator; got {type(generator).__name__}")
        N, L0 = prompt.shape
        if L0 == 0:
            raise ValueError("prompt must hold at least one token per sequence; got L0 = 0")
        if L0 + max_new_tokens > self.max_len:
            raise ValueError(
                f"prompt length {L0} + max_new_tokens {max_new_tokens} exceeds "
                f"max_len={self.max_len}"
            )
        if N == 0:  # no sequence to continue
            return prompt.new_empty((0, L0 + max_new_tokens))
        was_training = self.training
        self.eval()
        try:
            tokens = prompt
            cache = self.new_cache(N, max_len=L0 + max_new_tokens) if use_cache else None
            step_input = prompt
            for _ in range(max_new_tokens):
                if cache is None:
                    step_input = tokens  # re-encode the whole sequence so far
                logits, _ = self(step_input, cache=cache)  # (N, L, V)
                last = logits[:, -1]  # (N, V)
                if temperature == 0:
                    next_token = last.argmax(dim=-1, keepdim=True)  # (N, 1)
                else:
                    probabilities = sampling_distribution(
                        last, temperature=temperature, top_k=top_k, top_p=top_p
                    )  # (N, V)
                    next_token = torch.multinomial(probabilities, 1, generator=generator)
                tokens = torch.cat([tokens, next_token], dim=1)  # (N, L + 1)
                step_input = next_token  # with a cache, only the new token goes in
        finally:
            self.train(was_training)
        return tokens


def _check_sampling(temperature, top_k, top_p, logits=None) -> None:
    """The checks of the sampling options; with ``logits``, of :func:`sampling_distribution`'s
    arguments, where temperature 0 (greedy decoding) has no distribution to sample."""
    if logits is not None:
        if not isinstance(logits, Tensor) or not logits.is_floating_point() or logits.dim() < 1:
            raise TypeError("logits must be a floating-point tensor of shape (*, V)")
        if logits.shape[-1] == 0:
            raise ValueError(f"logits must score at least one token (V >= 1); got {logits.shape}")
        if temperature == 0:
            raise ValueError("temperature must be above 0 to sample; temperature 0 is greedy")
    if isinstance(temperature, bool) or not isinstance(temperature, (int, float)):
        raise TypeError(f"temperature must be a float; got {type(temperature).__name__}")
    if temperature != 0:
        check_positive(temperature, "temperature")
    if top_k is not None:
        check_int(top_k, "top_k", minimum=1)
    if top_p is not None:
        if isinstance(top_p, bool) or not isinstance(top_p, (int, float)):
            raise TypeError(f"top_p must be a float in (0, 1]; got {type(top_p).__name__}")
        if not 0 < top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1]; got {top_p}")


def sampling_distribution(
    logits: Tensor,
    *,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
) -> Tensor:
    r"""The distribution the next token is drawn from: temperature, then top-k, then top-p.

    .. math::
        p_i \propto e^{(z_i - \max_j z_j) / T}

    over the kept tokens: the ``top_k`` most likely ones, then, among those, the smallest set of
    most likely tokens whose probabilities add up to at least ``top_p`` (nucleus sampling,
    :cite:t:`holtzman2020`); the others get probability 0, and the kept ones are renormalised
    to sum to 1. It is computed in float64 after subtracting the largest logit, so that even a
    tiny temperature gives the greedy choice rather than NaN.

    Args:
        logits (Tensor): the scores of each next token.
        temperature (float): above 0; below 1 sharpens, above 1 flattens. Default: ``1.0``.
        top_k (int, optional): keep the ``top_k`` most likely tokens. Default: ``None`` (all).
        top_p (float, optional): keep the most likely tokens up to this much probability, in
            (0, 1]. Default: ``None`` (all).

    Shape:
        - logits: :math:`(*, V)`
        - Output: :math:`(*, V)`, each row summing to 1

    Returns:
        Tensor: the probabilities.

    Examples::

        >>> logits = torch.tensor([2.0, 1.0, 0.0, -1.0])
        >>> sampling_distribution(logits, top_p=0.8)  # the two most likely hold 0.88
        tensor([0.7311, 0.2689, 0.0000, 0.0000])
    """
    _check_sampling(temperature, top_k, top_p, logits)
    # In float64, and from the largest logit down: a temperature as small as 1e-300 then gives
    # 0 for the most likely token and -inf for the others, never 0 / 0.
    shifted = logits.double() - logits.double().amax(dim=-1, keepdim=True)  # (*, V)
    probabilities = (shifted / temperature).softmax(dim=-1)  # (*, V)
    keep = torch.ones_like(probabilities, dtype=torch.bool)  # (*, V)
    if top_k is not None and top_k < logits.shape[-1]:
        kth = probabilities.topk(top_k, dim=-1).values[..., -1:]  # (*, 1)
        keep &= probabilities >= kth
    if top_p is not None and top_p < 1:
        kept = probabilities * keep  # (*, V)
        ordered, order = kept.sort(dim=-1, descending=True)  # (*, V)
        before = ordered.cumsum(dim=-1) - ordered  # probability of the more likely tokens
        total = kept.sum(dim=-1, keepdim=True)  # (*, 1)
        nucleus = before < top_p * total  # the first token is always kept  (*, V)
        keep &= torch.zeros_like(keep).scatter(-1, order, nucleus)
    probabilities = probabilities * keep  # (*, V)
    return (probabilities / probabilities.sum(dim=-1, keepdim=True)).to(logits.dtype)  # (*, V)
