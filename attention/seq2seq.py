"""The encoder-decoder Transformer: one sequence read, another written through cross-attention.

:class:`Seq2SeqTransformer`: embeddings, an encoder of :class:`attention.TransformerBlock` s, a
decoder of :class:`attention.TransformerDecoderBlock` s and an output head :cite:p:`vaswani2017`;
:meth:`Seq2SeqTransformer.generate` writes the target of a source, greedily or by beam search
(:mod:`attention.search`).
"""

import math
from typing import NamedTuple

import torch
from torch import Tensor, nn

from ._checks import (
    check_batch_lengths,
    check_bool,
    check_embed,
    check_factory,
    check_float,
    check_int,
    check_memory,
    check_named_mask,
    check_token_id,
    check_tokens,
)
from .block import TransformerBlock, TransformerDecoderBlock
from .cache import KVCache
from .masks import causal_mask, padding_mask
from .positions import PositionalEncoding
from .search import beam_search, greedy_search

__all__ = ["Seq2SeqTransformer", "Seq2SeqWeights"]


class Seq2SeqWeights(NamedTuple):
    """The attention weights of a :class:`Seq2SeqTransformer`, one tensor per layer and kind.

    ``encoder[i]`` :math:`(N, H, S, S)` is the source's self-attention in encoder layer ``i``;
    ``decoder[i]`` :math:`(N, H, T, T)` the target's causal self-attention and ``cross[i]``
    :math:`(N, H, T, S)` the target's attention over the source, in decoder layer ``i``.
    ``encoder`` is ``None`` where the encoder did not run (:meth:`Seq2SeqTransformer.decode`).

    Examples::

        >>> Seq2SeqWeights(encoder=None, decoder=[], cross=[]).cross
        []
    """

    encoder: list[Tensor] | None
    decoder: list[Tensor]
    cross: list[Tensor]


class Seq2SeqTransformer(nn.Module):
    r"""The encoder-decoder Transformer: it reads a source sequence and writes a target one.

    The source tokens are embedded, given sinusoidal positions and encoded by
    ``num_encoder_layers`` :class:`attention.TransformerBlock` s and a LayerNorm into the
    *memory*. The target tokens, embedded the same way, go through ``num_decoder_layers``
    :class:`TransformerDecoderBlock` s (causal self-attention, cross-attention over the memory)
    and a LayerNorm, and a linear head gives the logits of each next target token. The two
    stacks, final LayerNorms included, are those of :class:`torch.nn.Transformer`.

    Embeddings, as in :cite:t:`vaswani2017` and fairseq, are initialised
    :math:`\mathcal{N}(0, 1/E)` and multiplied by :math:`\sqrt{E}`: each entry has variance 1,
    the scale of the positions (in [-1, 1]) it is added to; dropout follows the sum. The source
    padding (from ``src_lengths``, else the ``pad_id`` tokens) is never attended to, by the
    encoder nor by the cross-attention. The target needs no padding mask: it is causal and its
    padding follows its EOS, so that no real token sees it.

    Args:
        src_vocab_size (int): number of source token ids.
        tgt_vocab_size (int): number of target token ids :math:`V`.
        embed_dim (int): model dimension :math:`E`.
        num_heads (int): heads per attention :math:`H`.
        num_encoder_layers (int): encoder blocks.
        num_decoder_layers (int): decoder blocks.
        ffn_dim (int): hidden size of the feed-forward networks.
        max_len (int): longest source, and longest target (BOS included).
        dropout (float): dropout everywhere, in training mode only. Default: ``0.1``.
        pad_id (int): the padding id, in both vocabularies. Default: ``0``.
        norm_first (bool): pre-LN blocks instead of post-LN. Default: ``False``.
        layer_norm_eps (float): the LayerNorms' epsilon. Default: ``1e-5``.
        bias (bool): biases in the blocks' linear layers and LayerNorms. Default: ``True``.
        device (torch.device, optional): where to create the parameters. Default: ``None``.
        dtype (torch.dtype, optional): dtype of the parameters. Default: ``None``.

    Shape:
        - src: :math:`(N, S)` and tgt: :math:`(N, T)` integer ids; src_lengths: :math:`(N)`
        - Output: logits :math:`(N, T, V)` and a :class:`Seq2SeqWeights`, or ``None``

    Examples::

        >>> model = Seq2SeqTransformer(12, 10, embed_dim=16, num_heads=2, num_encoder_layers=2,
        ...                            num_decoder_layers=2, ffn_dim=32, max_len=10).eval()
        >>> src = torch.tensor([[3, 4, 5, 6], [7, 8, 0, 0]])  # 0 = pad_id
        >>> tgt = torch.tensor([[1, 4, 5], [1, 6, 2]])
        >>> logits, weights = model(src, tgt, need_weights=True)
        >>> logits.shape, len(weights.cross), weights.cross[0].shape  # (N, H, T, S) per layer
        (torch.Size([2, 3, 10]), 2, torch.Size([2, 2, 3, 4]))
        >>> weights.cross[1][1, :, :, 2:].abs().max().item()  # no attention to the padding
        0.0
    """

    def __init__(
        self,
        src_vocab_size: int,
        tgt_vocab_size: int,
        *,
        embed_dim: int,
        num_heads: int,
        num_encoder_layers: int,
        num_decoder_layers: int,
        ffn_dim: int,
        max_len: int,
        dropout: float = 0.1,
        pad_id: int = 0,
        norm_first: bool = False,
        layer_norm_eps: float = 1e-5,
        bias: bool = True,
        device=None,
        dtype=None,
    ):
        super().__init__()
        for name, value in (("src_vocab_size", src_vocab_size), ("tgt_vocab_size", tgt_vocab_size),
                            ("num_encoder_layers", num_encoder_layers), ("max_len", max_len),
                            ("num_decoder_layers", num_decoder_layers),
                            ("ffn_dim", ffn_dim)):  # fmt: skip
            check_int(value, name)
        check_embed(embed_dim, num_heads)  # before a block draws its first weights
        check_token_id(pad_id, "pad_id", min(src_vocab_size, tgt_vocab_size))
        check_factory(device, dtype)
        factory = {"device": device, "dtype": dtype}
        block = {"ffn_dim": ffn_dim, "dropout": dropout, "norm_first": norm_first,
                 "layer_norm_eps": layer_norm_eps, "bias": bias, **factory}  # fmt: skip
        self.src_vocab_size, self.tgt_vocab_size = src_vocab_size, tgt_vocab_size
        self.max_len, self.pad_id, self.embed_scale = max_len, pad_id, math.sqrt(embed_dim)
        self.encoder = nn.ModuleList(
            TransformerBlock(embed_dim, num_heads, **block) for _ in range(num_encoder_layers)
        )
        self.decoder = nn.ModuleList(
            TransformerDecoderBlock(embed_dim, num_heads, **block)
            for _ in range(num_decoder_layers)
        )
        self.encoder_norm, self.decoder_norm = (
            nn.LayerNorm(embed_dim, eps=layer_norm_eps, bias=bias, **factory) for _ in range(2)
        )
        self.src_embedding = nn.Embedding(src_vocab_size, embed_dim, pad_id, **factory)
        self.tgt_embedding = nn.Embedding(tgt_vocab_size, embed_dim, pad_id, **factory)
        for embedding in (self.src_embedding, self.tgt_embedding):
            nn.init.normal_(embedding.weight, std=embed_dim**-0.5)
            embedding._fill_padding_idx_with_zero()
        self.positions = PositionalEncoding(embed_dim, max_len).to(device)
        self.dropout = nn.Dropout(dropout)
        self.head = nn.Linear(embed_dim, tgt_vocab_size, **factory)

    def _embed(self, tokens: Tensor, embedding: nn.Embedding, offset: int = 0) -> Tensor:
        """Scaled token embeddings plus the positions from ``offset`` on, then dropout."""
        x = embedding(tokens) * self.embed_scale  # (N, L) -> (N, L, E)
        positions = self.positions.pe[offset : offset + tokens.shape[1]]  # (L, E)
        return self.dropout(x + positions.to(x.dtype))  # (N, L, E) + (L, E) -> (N, L, E)

    def _check_tokens(self, src, src_lengths, tgt=None) -> None:
        device = self.head.weight.device
        check_tokens(src, self.src_vocab_size, self.max_len, name="src", device=device)
        if src_lengths is not None:
            check_batch_lengths(src_lengths, "src_lengths", len(src), src.shape[1], device)
        if tgt is not None:
            check_tokens(tgt, self.tgt_vocab_size, self.max_len, name="tgt", device=device)
            if len(tgt) != len(src):
                raise ValueError(f"tgt must have src's batch size ({len(src)}); got {len(tgt)}")

    def _encode(self, src: Tensor, src_lengths, need_weights: bool):
        if src_lengths is None:
            memory_mask = (src != self.pad_id)[:, None, None, :]  # (N, S) -> (N, 1, 1, S)
        else:
            lengths = torch.as_tensor(src_lengths, device=src.device)  # (N,)
            memory_mask = padding_mask(lengths, src.shape[1])  # (N, 1, 1, S)
        x = self._embed(src, self.src_embedding)  # (N, S, E)
        all_weights = []
        for block in self.encoder:
            x, weights = block(x, memory_mask, need_weights=need_weights)  # (N, S, E)
            all_weights.append(weights)
        return self.encoder_norm(x), memory_mask, all_weights

    def encode(self, src: Tensor, *, src_lengths=None) -> tuple[Tensor, Tensor]:
        """Encode the source into the memory that the decoder attends to.

        Args:
            src (Tensor): :math:`(N, S)` integer ids.
            src_lengths (Tensor or list of int, optional): the real tokens of each source.
                Default: ``None`` (the tokens other than ``pad_id``).

        Returns:
            tuple[Tensor, Tensor]: the memory :math:`(N, S, E)` and its mask
            :math:`(N, 1, 1, S)`, ``True`` for the real tokens.
        """
        self._check_tokens(src, src_lengths)
        memory, memory_mask, _ = self._encode(src, src_lengths, False)
        return memory, memory_mask

    def cross_kv(self, memory: Tensor) -> list[tuple[Tensor, Tensor]]:
        """Every decoder layer's cross-attention keys and values of the ``memory``
        :math:`(N, S, E)`, each :math:`(N, H, S, D)`, for :meth:`decode`."""
        return [block.cross_kv(memory) for block in self.decoder]

    def new_cache(self, batch_size: int, max_len: int | None = None) -> KVCache:
        """An empty :class:`attention.KVCache` for the decoder's self-attention, of ``max_len``
        positions (Default: ``None``, the model's), for :meth:`decode`."""
        if max_len is not None:
            check_int(max_len, "max_len", minimum=1)
        attn, weight = self.decoder[0].self_attn, self.head.weight
        return KVCache(len(self.decoder), batch_size=batch_size, num_kv_heads=attn.num_heads,
                       head_dim=attn.head_dim, max_len=self.max_len if max_len is None else max_len,
                       device=weight.device, dtype=weight.dtype)  # fmt: skip

    def _decode(self, tgt: Tensor, memory, memory_mask, cache: KVCache | None, need_weights):
        if cache is None:
            return self._decode_layers(tgt, memory, memory_mask, None, need_weights)
        weight = self.head.weight
        with cache.step(tgt.shape[0], tgt.shape[1], dtype=weight.dtype, device=weight.device):
            return self._decode_layers(tgt, memory, memory_mask, cache, need_weights)

    def _decode_layers(self, tgt: Tensor, memory, memory_mask, cache, need_weights):
        offset = 0 if cache is None else cache.length  # the new tokens' first position
        T = tgt.shape[1]
        x = self._embed(tgt, self.tgt_embedding, offset)  # (N, T, E)
        mask = causal_mask(T, offset + T, device=tgt.device)  # (T, offset + T)
        weights = Seq2SeqWeights(None, [], [])
        for layer, block in enumerate(self.decoder):
            layer_memory = memory if isinstance(memory, Tensor) else memory[layer]
            x, both = block(x, layer_memory, mask=mask, memory_mask=memory_mask,
                            need_weights=need_weights, cache=cache, layer=layer)  # fmt: skip
            self_weights, cross_weights = both if need_weights else (None, None)
            weights.decoder.append(self_weights)
            weights.cross.append(cross_weights)
        return self.head(self.decoder_norm(x)), weights  # (N, T, E) -> (N, T, V)

    def decode(self, tgt, memory, memory_mask, *, cache=None, need_weights=False):
        """Predict each next target token from the target so far and the encoded source.

        Args:
            tgt (Tensor): :math:`(N, T)` integer ids; with ``cache``, the new tokens only.
            memory (Tensor or list): the memory :math:`(N, S, E)` from :meth:`encode`, or the
                keys and values of :meth:`cross_kv` (computed once per source).
            memory_mask (Tensor): :math:`(N, 1, 1, S)`, bool, from :meth:`encode`.
            cache (KVCache, optional): the earlier target tokens' self-attention keys and
                values, from :meth:`new_cache`; the new ones are appended. Default: ``None``.
            need_weights (bool): also return the decoder's attention weights. Default: ``False``.

        Returns:
            tuple[Tensor, Seq2SeqWeights | None]: logits :math:`(N, T, V)` and the weights
            (``encoder`` ``None``), or ``None``.
        """
        device = self.head.weight.device
        check_tokens(tgt, self.tgt_vocab_size, self.max_len, name="tgt", device=device)
        check_bool(need_weights, "need_weights")
        (N, T), E, H = tgt.shape, self.head.in_features, self.decoder[0].num_heads
        layers = [memory] * len(self.decoder) if isinstance(memory, Tensor) else memory
        if not isinstance(layers, (list, tuple)) or len(layers) != len(self.decoder):
            size = f" of {len(memory)}" if isinstance(memory, (list, tuple)) else ""
            raise TypeError(
                f"memory must be a tensor (N, S, E) or the {len(self.decoder)} "
                f"(keys, values) of cross_kv(); got {type(memory).__name__}{size}"
            )
        S = [check_memory(layer_memory, N, E, H, self.head.weight) for layer_memory in layers]
        check_named_mask(memory_mask, "memory_mask", (N, H, T, S[0]), device)
        KVCache.check(cache, H, E // H, num_layers=len(self.decoder), rolling=False)
        if cache is not None:  # room for T more positions of N rows, of the model's dtype
            cache.check_append(0, N, T, dtype=self.head.weight.dtype, device=device)
            if cache.length + T > self.max_len:
                raise ValueError(f"the cache holds {cache.length} positions; {T} more would "
                                 f"exceed max_len={self.max_len}")  # fmt: skip
        logits, weights = self._decode(tgt, memory, memory_mask, cache, need_weights)
        return logits, (weights if need_weights else None)

    def forward(self, src: Tensor, tgt: Tensor, *, src_lengths=None, need_weights=False):
        """Predict every next token of ``tgt`` from ``src`` (teacher forcing).

        Args:
            src (Tensor): :math:`(N, S)` integer ids, padded at the end.
            tgt (Tensor): :math:`(N, T)` integer ids, BOS first.
            src_lengths (Tensor or list of int, optional): the real tokens of each source.
                Default: ``None`` (the tokens other than ``pad_id``).
            need_weights (bool): also return every attention's weights. Default: ``False``.

        Returns:
            tuple[Tensor, Seq2SeqWeights | None]: logits :math:`(N, T, V)`, where ``[:, t]``
            scores the token after ``tgt[:, : t + 1]``, and the weights, or ``None``.
        """
        self._check_tokens(src, src_lengths, tgt)
        check_bool(need_weights, "need_weights")
        memory, memory_mask, encoder_weights = self._encode(src, src_lengths, need_weights)
        logits, weights = self._decode(tgt, memory, memory_mask, None, need_weights)
        return logits, (weights._replace(encoder=encoder_weights) if need_weights else None)

    def _next_log_probs(self, tokens, memory, memory_mask, cache, eos_id: int) -> Tensor:
        """The log-probabilities of the token after each row of ``tokens`` :math:`(N, t)`."""
        step = tokens if cache is None else tokens[:, -1:]  # with a cache, the newest token only
        logits, _ = self._decode(step, memory, memory_mask, cache, False)  # (N, L, V)
        log_probs = logits[:, -1].log_softmax(dim=-1)  # (N, V)
        if self.pad_id != eos_id:
            log_probs[:, self.pad_id] = -math.inf  # padding is never generated (as in fairseq)
        return log_probs

    @torch.no_grad()
    def generate(
        self,
        src: Tensor,
        max_new_tokens: int,
        *,
        bos_id: int,
        eos_id: int,
        src_lengths=None,
        beam_size: int = 1,
        length_penalty: float = 1.0,
        use_cache: bool = True,
        return_scores: bool = False,
    ):
        r"""Write the target of each source, greedily (``beam_size=1``) or by beam search.

        The encoder runs once and each decoder layer's cross-attention keys and values are
        computed once per source (:meth:`cross_kv`); with ``use_cache``, each step feeds only
        the newest token, and the self-attention's keys and values stay in a
        :class:`attention.KVCache` (whose rows beam search reorders with its hypotheses). The
        ``pad_id`` is never generated (unless it is ``eos_id``). An output :math:`y` of
        :math:`|y|` generated tokens (EOS included, BOS not) scores, as in fairseq,

        .. math::
            \text{score}(y) = \frac{1}{|y|^{\alpha}} \sum_{t=1}^{|y|} \log p(y_t \mid y_{<t}, x)

        with :math:`\alpha` = ``length_penalty`` (0: the sum, which favours short outputs; 1:
        the mean; one so large in magnitude that a score leaves the model's dtype is a
        ``ValueError``, as in :mod:`attention.search`). Greedy decoding takes the most likely
        token at each step. Beam search extends the ``beam_size`` hypotheses of highest summed
        log-probability; as in fairseq, an EOS among the ``beam_size`` best candidates ends a
        hypothesis, a source stops when ``beam_size`` have ended, and its output is the ended
        hypothesis of best score. With ``beam_size=1`` it is greedy decoding. A wider beam is
        not guaranteed to score better; a beam that keeps every hypothesis finds the best
        output.

        Args:
            src (Tensor): :math:`(N, S)` integer ids.
            max_new_tokens (int): most tokens to generate after BOS.
            bos_id (int): the first token of every output.
            eos_id (int): the token that ends an output.
            src_lengths (Tensor or list of int, optional): the real tokens of each source.
                Default: ``None`` (the tokens other than ``pad_id``).
            beam_size (int): hypotheses kept per source; 1 is greedy. Default: ``1``.
            length_penalty (float): :math:`\alpha`. Default: ``1.0``.
            use_cache (bool): keep the self-attention's keys and values. Default: ``True``.
            return_scores (bool): also return the outputs' scores. Default: ``False``.

        Returns:
            Tensor or tuple[Tensor, Tensor]: the outputs :math:`(N, T)`, BOS, the generated
            tokens and ``pad_id`` after EOS (:math:`T \le 1 +` ``max_new_tokens``), and with
            ``return_scores`` their scores :math:`(N)`. The training mode is restored, also
            when generation fails.

        Examples::

            >>> model = Seq2SeqTransformer(12, 10, embed_dim=16, num_heads=2,
            ...     num_encoder_layers=1, num_decoder_layers=1, ffn_dim=32, max_len=10)
            >>> src = torch.tensor([[3, 4, 5, 6], [7, 8, 0, 0]])
            >>> greedy = model.generate(src, 6, bos_id=1, eos_id=2)
            >>> uncached = model.generate(src, 6, bos_id=1, eos_id=2, use_cache=False)
            >>> greedy[:, 0].tolist(), torch.equal(greedy, uncached), model.training
            ([1, 1], True, True)
            >>> beam, scores = model.generate(src, 6, bos_id=1, eos_id=2, beam_size=4,
            ...                               return_scores=True)
            >>> beam.shape[1] <= 7, scores.shape
            (True, torch.Size([2]))
        """
        self._check_tokens(src, src_lengths)
        check_int(max_new_tokens, "max_new_tokens")
        if 1 + max_new_tokens > self.max_len:
            raise ValueError(f"max_new_tokens must be at most max_len - 1 = {self.max_len - 1} "
                             f"(BOS comes first); got {max_new_tokens}")  # fmt: skip
        check_token_id(bos_id, "bos_id", self.tgt_vocab_size)
        check_token_id(eos_id, "eos_id", self.tgt_vocab_size)
        check_int(beam_size, "beam_size")
        check_float(length_penalty, "length_penalty")
        check_bool(use_cache, "use_cache")
        check_bool(return_scores, "return_scores")
        tokens = torch.full((0, 1), bos_id, device=src.device)  # no source: no output
        scores = self.head.weight.new_zeros(0)
        was_training = self.training
        self.eval()
        try:
            if len(src):
                tokens, scores = self._search(
                    src, src_lengths, max_new_tokens, bos_id, eos_id, beam_size,
                    length_penalty, use_cache,
                )  # fmt: skip
        finally:
            self.train(was_training)
        return (tokens, scores) if return_scores else tokens

    def _search(self, src, src_lengths, max_new_tokens, bos_id, eos_id, beam_size,
                length_penalty, use_cache):  # fmt: skip
        """Encode once, then let :mod:`attention.search` pick the tokens."""
        memory, memory_mask, _ = self._encode(src, src_lengths, False)  # once
        memory = self.cross_kv(memory)  # every layer's keys and values, once
        N, B = len(src), beam_size
        if B > 1:  # every beam of a source reads the same keys and values, copied
            memory = [(k.repeat_interleave(B, 0), v.repeat_interleave(B, 0)) for k, v in memory]
            memory_mask = memory_mask.repeat_interleave(B, dim=0)  # (N * B, 1, 1, S)
        cache = self.new_cache(N * B, 1 + max_new_tokens) if use_cache else None

        def next_log_probs(tokens: Tensor) -> Tensor:  # (N * B, t) -> (N * B, V)
            return self._next_log_probs(tokens, memory, memory_mask, cache, eos_id)

        options = {"max_new_tokens": max_new_tokens, "bos_id": bos_id, "eos_id": eos_id,
                   "pad_id": self.pad_id, "length_penalty": length_penalty,
                   "device": src.device}  # fmt: skip
        if B == 1:
            return greedy_search(next_log_probs, N, **options)
        reorder = None if cache is None else cache.reorder
        return beam_search(next_log_probs, N, B, reorder=reorder, **options)
